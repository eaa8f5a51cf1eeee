"""codapo-trl: CoDaPO (Confidence and Difficulty-adaptive Policy Optimization) for TRL.

The public names below are imported on first use, so that light modules (`codapo_trl.rewards`,
`codapo_trl.sandbox`, ...) can be imported without pulling in torch and TRL.
"""

from importlib import import_module
from typing import TYPE_CHECKING


__version__ = "0.1.0"

_EXPORTS = {
    "CoDaPOConfig": ".config",
    "CoDaPOTrainer": ".trainer",
    "DynamicsMixin": ".dynamics.mixin",
    "GRPODynamicsTrainer": ".dynamics.mixin",
    "math_accuracy_reward": ".rewards",
    "evaluate_model": ".evaluation",
    "analyze_checkpoints": ".analysis",
    "plot_training_dynamics": ".analysis",
    "pass_at_k": ".evaluation",
    "get_reward_funcs": ".rewards",
    "SYSTEM_PROMPT": ".data",
    "load_math_dataset": ".data",
    "make_arithmetic_dataset": ".data",
    "MODEL_ALIASES": ".models",
    "resolve_model_name_or_path": ".models",
}

__all__ = [
    "MODEL_ALIASES",
    "SYSTEM_PROMPT",
    "CoDaPOConfig",
    "CoDaPOTrainer",
    "DynamicsMixin",
    "analyze_checkpoints",
    "plot_training_dynamics",
    "evaluate_model",
    "pass_at_k",
    "GRPODynamicsTrainer",
    "get_reward_funcs",
    "load_math_dataset",
    "make_arithmetic_dataset",
    "math_accuracy_reward",
    "resolve_model_name_or_path",
]

if TYPE_CHECKING:  # pragma: no cover
    from .analysis import analyze_checkpoints, plot_training_dynamics
    from .config import CoDaPOConfig
    from .data import SYSTEM_PROMPT, load_math_dataset, make_arithmetic_dataset
    from .dynamics.mixin import DynamicsMixin, GRPODynamicsTrainer
    from .evaluation import evaluate_model, pass_at_k
    from .models import MODEL_ALIASES, resolve_model_name_or_path
    from .rewards import get_reward_funcs, math_accuracy_reward
    from .trainer import CoDaPOTrainer


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
