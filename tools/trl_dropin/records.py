"""Per-step records of the trainings in TRL's tests, and the check that the stock-loss run matches stock on them.

Every run of `make dropin` records, for each `training_step` of a GRPO trainer (one micro-batch), the loss it returns
and a fingerprint of the parameters' accumulated gradients after its backward pass (their L2 norm and their sum), one
JSON line per step: `{"test": id, "step": n, "loss": ..., "grad_norm": ..., "grad_sum": ...}`. The stock-loss run
(`stockloss`: CoDaPO's trainer with weighting and sampling off and TRL's own `loss_type`) is then compared with stock,
step by step, on the tests of [`STOCK_LOSS_TESTS`]: with CoDaPO off and the stock objective, CoDaPO's trainer must
compute the same losses and gradients as `GRPOTrainer`, not merely end each test the same way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path


STOCK_LOSS_TESTS = (
    "TestGRPOTrainer::test_train",
    "TestGRPOTrainer::test_train_loss_types",
    "TestGRPOTrainer::test_train_multiple_iterations",
    "TestGRPOTrainer::test_train_peft_config",
    "TestGRPOTrainer::test_train_beta_non_zero",
    "TestGRPOTrainer::test_train_multiple_reward_funcs_with_weights",
    "TestGRPOTrainer::test_train_with_adaptive_entropy_gradient_accumulation",
)
"""The TRL tests (`Class::test`, every parametrisation) the stock-loss run trains and compares with stock: the default
objective and each of TRL's loss types, several updates per generation, a LoRA adapter, a KL term with its reference
model, weighted rewards, and gradient accumulation with an adaptive entropy bonus."""

RTOL = 1e-5
"""Relative tolerance of the per-step comparison (float32 on CPU; the two runs do the same operations)."""
ATOL = 1e-7
"""Absolute tolerance of the per-step comparison (losses and gradient sums that are zero up to rounding)."""
FIELDS = ("loss", "grad_norm", "grad_sum")


def base_test(test: str) -> str:
    """A test id without its parameters (`Class::test[a]` -> `Class::test`)."""
    return test.split("[", 1)[0]


def read(path: Path) -> dict[str, list[dict]]:
    """`{test id: [step record, ...]}` from a record file, in the order the steps ran."""
    records: dict[str, list[dict]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            row = json.loads(line)
            records.setdefault(row["test"], []).append(row)
    return records


def _close(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= ATOL + RTOL * abs(b)


def mismatches(stock: dict[str, list[dict]], other: dict[str, list[dict]], tests: Iterable[str]) -> list[str]:
    """Why `other`'s per-step records differ from `stock`'s on `tests` (test ids without parameters), one line each;
    empty when every parametrisation of every test trained the same number of steps with the same losses and
    gradients (within [`RTOL`] and [`ATOL`]). A test that trained in neither run, or in one only, is a mismatch: the
    check never passes by having nothing to compare.

    Example:

    >>> step = {"loss": 0.5, "grad_norm": 2.0, "grad_sum": -0.25}
    >>> mismatches({"C::t[a]": [step]}, {"C::t[a]": [dict(step, loss=0.5000001)]}, ["C::t"])
    []
    >>> mismatches({"C::t[a]": [step]}, {"C::t[a]": [dict(step, grad_norm=2.1)]}, ["C::t"])
    ['C::t[a] step 0: grad_norm 2.0 (stock) != 2.1']
    >>> mismatches({"C::t[a]": [step]}, {}, ["C::t"])
    ['C::t[a]: 1 step(s) in stock, 0 in this run']
    >>> mismatches({}, {}, ["C::u"])
    ['C::u: no training step recorded in either run']
    """
    problems = []
    for test in tests:
        ids = sorted({t for t in stock.keys() | other.keys() if base_test(t) == test})
        if not ids:
            problems.append(f"{test}: no training step recorded in either run")
        for one in ids:
            ours, theirs = other.get(one, []), stock.get(one, [])
            if len(ours) != len(theirs):
                problems.append(f"{one}: {len(theirs)} step(s) in stock, {len(ours)} in this run")
                continue
            for n, (a, b) in enumerate(zip(ours, theirs, strict=True)):
                bad = [f"{k} {b[k]!r} (stock) != {a[k]!r}" for k in FIELDS if not _close(a[k], b[k])]
                if bad:
                    problems.append(f"{one} step {n}: " + "; ".join(bad))
                    break
    return problems
