"""Why a TRL GRPO test may end differently with CoDaPO on (its defaults: weighting and sampling on) than with stock TRL.

Each entry is a consequence of the method, explained in `docs/dropin.md`, with the test of ours that asserts the
CoDaPO behaviour instead. A difference is matched by the failure message of the CoDaPO-on run (so that the next TRL
release's new tests are classified too) or, for a test that fails on an assertion about GRPO's own schedule, by its
test id (`Class::test`, all parametrisations).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Difference:
    """One documented reason for a CoDaPO-on difference."""

    reason: str
    our_test: str
    message: str | None = None  # a regular expression searched in the failure message
    tests: tuple[str, ...] = ()  # or test ids (without parameters)


ON_DIFFERENCES = (
    Difference(
        reason="the first reward function is CoDaPO's correctness (difficulty d = 1 - mean correctness), which must "
        "be a 0/1 score or a pass rate; TRL's tests reward with a random reward model or a completion length, "
        "outside [0, 1], and CoDaPO stops at the first such batch with an error naming the reward",
        our_test="tests/integration/test_correctness_scripts.py::"
        "test_a_continuous_score_is_refused_on_the_first_batch_then_trains_with_a_threshold",
        message=r"which is not 0 or 1",
    ),
    Difference(
        reason="a reward of None for every rollout leaves correctness undefined, so every question's value is 0 and "
        "CoDaPO trains on nothing; after a few such batches in a row it stops with an error instead of training on, "
        "and the test's expected warning is not the outcome",
        our_test="tests/integration/test_trainer.py::test_correctness_undefined_for_whole_batches_warns_then_stops",
        message="returned None for every rollout",
    ),
    Difference(
        reason="S hands each update batch to the training loop twice (B, then the resampled S), which a streaming "
        "IterableDataset cannot do; CoDaPO refuses it at construction",
        our_test="tests/integration/test_config.py::test_trainer_rejects_iterable_dataset_with_sampling",
        message="map-style training dataset",
    ),
    Difference(
        reason="with S, B's and S's rollouts must never share an optimizer step, so steps_per_generation must be a "
        "multiple of gradient_accumulation_steps; the config refuses e.g. 4 and 3",
        our_test="tests/integration/test_config.py::test_config_errors_say_what_to_change",
        message="must be a multiple of gradient_accumulation_steps",
    ),
)


def explain(test: str, message: str) -> Difference | None:
    """The documented difference that explains `test` ending with failure `message` under CoDaPO on, or None."""
    base = test.split("[", 1)[0]
    for difference in ON_DIFFERENCES:
        if difference.message is not None and re.search(difference.message, message or ""):
            return difference
        if base in difference.tests:
            return difference
    return None
