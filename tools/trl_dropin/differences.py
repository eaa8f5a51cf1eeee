"""Why a TRL GRPO test may end differently with CoDaPO on than with stock TRL, keyed by test, exception and message.

Each entry is a consequence of the method, explained in `docs/dropin.md`, with the test of ours that asserts the
CoDaPO behaviour instead. It explains a difference only for the tests it names (`Class::test`, every parametrisation),
when the on run's failure is the exception it names and its message starts with CoDaPO's own words (a regular
expression matched at the start of the message, not searched anywhere in it). Anything else is undocumented and
fails the check: a new TRL release's tests that differ are read, not classified by a phrase.

The test ids are those of TRL's `main` at 1.10.0.dev0 (commit f2cd57710), the test file `make dropin` was run on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .records import base_test


@dataclass(frozen=True)
class Difference:
    """One documented reason for a CoDaPO-on difference.

    Attributes:
        reason (`str`): why the method makes this test end differently.
        our_test (`str`): the test of ours (`path::name`) that asserts CoDaPO's behaviour instead.
        tests (`tuple[str, ...]`): the TRL test ids (`Class::test`, without parameters) it explains.
        exception (`str`): the exception type the on run fails with (its name, without the module).
        message (`str`): a regular expression matched at the start of the exception's message (`re.DOTALL`).
    """

    reason: str
    our_test: str
    tests: tuple[str, ...]
    exception: str
    message: str


STREAMING = "codapo_sampling needs a map-style training dataset"

ON_DIFFERENCES = (
    Difference(
        reason="S hands each update batch to the training loop twice (B, then the resampled S), which a streaming "
        "IterableDataset cannot do; CoDaPO refuses it at construction",
        our_test="tests/integration/test_config.py::test_trainer_rejects_iterable_dataset_with_sampling",
        tests=(
            "TestGRPOTrainer::test_train_with_iterable_dataset",
            "TestGRPOTrainer::test_iterable_dataset_forces_num_workers_zero",
        ),
        exception="ValueError",
        message=re.escape(STREAMING),
    ),
    Difference(
        reason="the same refusal of a streaming dataset, raised before the check the test expects (TRL's "
        "`dispatch_batches` one), so the test's `pytest.raises(match=...)` sees CoDaPO's message",
        our_test="tests/integration/test_config.py::test_trainer_rejects_iterable_dataset_with_sampling",
        tests=("TestGRPOTrainer::test_iterable_dataset_requires_dispatch_batches_false",),
        exception="AssertionError",
        message=r"Regex pattern did not match\..*(Actual message|Input): '" + re.escape(STREAMING),
    ),
    Difference(
        reason="with S, B's and S's rollouts must never share an optimizer step, so steps_per_generation must be a "
        "multiple of gradient_accumulation_steps; the config refuses the test's 4 and 3",
        our_test="tests/integration/test_config.py::test_config_errors_say_what_to_change",
        tests=("TestGRPOTrainer::test_prepare_input_called_with_correct_data",),
        exception="ValueError",
        message=r"With codapo_sampling, B's and S's rollouts must never share an optimizer step",
    ),
    Difference(
        reason="a reward of None for every rollout leaves correctness undefined, so every question's value is 0 and "
        "CoDaPO trains on nothing; after 5 such batches in a row it stops with an error instead of training on, "
        "and the test's expected warning is not the outcome",
        our_test="tests/integration/test_trainer.py::test_correctness_undefined_for_whole_batches_warns_then_stops",
        tests=("TestGRPOTrainer::test_warning_raised_all_rewards_none",),
        exception="RuntimeError",
        message=r"The correctness reward\(s\) \[[^\]]*\] returned None for every rollout of \d+ batches in a row",
    ),
    Difference(
        reason="S trains K distinct questions (a quarter of B's, at least 1), each repeated to fill its batch: with "
        "the test's 2 questions S is one question 4 times, [counter x 4] (equal values, the earlier group first). "
        "The test's fake `generate` writes a `shout` call in row 2 of every batch, assuming [counter, counter, echo, "
        "echo], so in S that call reaches the counter environment, which has no `shout`, and 1 tool call in 4 fails "
        "(read off the question log of a re-run: S's groups are B's first question twice)",
        our_test="tests/integration/test_generation.py::test_environment_with_codapo",
        tests=("TestGRPOTrainer::test_train_with_multiple_environments",),
        exception="AssertionError",
        message=r"assert 0\.25 == 0\.0 ± 1\.0e-12\b",
    ),
)


def parse_failure(message: str) -> tuple[str, str]:
    """`(exception type name, message)` from a junit failure message `"pkg.module.Type: text"`.

    Example:
    ```python
    >>> parse_failure("ValueError: codapo_sampling needs a map-style training dataset")
    ('ValueError', 'codapo_sampling needs a map-style training dataset')
    >>> parse_failure("assert 0.25 == 0.0")  # a failed `assert` statement: pytest writes no type
    ('AssertionError', 'assert 0.25 == 0.0')
    ```
    """
    if (message or "").startswith("assert "):
        return "AssertionError", message
    head, separator, text = (message or "").partition(": ")
    if not separator or not re.fullmatch(r"[\w.]+", head):
        return "", message or ""
    return head.rsplit(".", 1)[-1], text


def explain(test: str, message: str) -> Difference | None:
    """The documented difference that explains `test` (a junit id `Class::test[params]`) failing with `message`
    under CoDaPO on, or `None`: the test must be one it names, the exception its type, the text its message."""
    base = base_test(test)
    exception, text = parse_failure(message)
    for difference in ON_DIFFERENCES:
        keyed = base in difference.tests and exception == difference.exception
        if keyed and re.match(difference.message, text, re.DOTALL):
            return difference
    return None
