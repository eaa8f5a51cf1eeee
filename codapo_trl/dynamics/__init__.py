"""Training dynamics of GRPO-style training: what the paper's Section 3 measures, and CoDaPO's per-group inputs.

- `bins`: pure per-difficulty-bin statistics (bin edges, token update weights, sums and their summary) and the
  paper's closed forms (two-point advantages, discovery probability), plus `describe` for its Appendix B tables;
- `groups`: `GroupStats`, the per-group confidence, difficulty and token counts of a generated batch (CoDaPO's
  inputs), and the pure function that computes them;
- `question_log`: question ids and the per-question JSONL log's rows;
- `mixin`: `DynamicsMixin`, the trainer mixin that computes and logs all of this during training, and
  `GRPODynamicsTrainer` (TRL's `GRPOTrainer` with it).

The pure modules need only torch; `DynamicsMixin` and `GRPODynamicsTrainer` (which import TRL) are loaded on first
use, so `from codapo_trl.dynamics import NUM_BINS` stays light.
"""

from importlib import import_module
from typing import TYPE_CHECKING

from .bins import (
    BIN_EDGES,
    BIN_LABELS,
    NUM_BINS,
    SUM_COLUMNS,
    bin_sums,
    binary_advantages,
    describe,
    difficulty_bins,
    discovery_probability,
    summarize_bins,
    token_update_weights,
)
from .groups import GroupStats, group_stats, trained_token_mask


_LAZY = {"DynamicsMixin": ".mixin", "GRPODynamicsTrainer": ".mixin"}

__all__ = [
    "BIN_EDGES",
    "BIN_LABELS",
    "NUM_BINS",
    "SUM_COLUMNS",
    "DynamicsMixin",
    "GRPODynamicsTrainer",
    "GroupStats",
    "bin_sums",
    "binary_advantages",
    "describe",
    "difficulty_bins",
    "discovery_probability",
    "group_stats",
    "summarize_bins",
    "token_update_weights",
    "trained_token_mask",
]

if TYPE_CHECKING:  # pragma: no cover
    from .mixin import DynamicsMixin, GRPODynamicsTrainer


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
