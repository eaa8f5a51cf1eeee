"""Runs of consecutive batches on which nothing trains, and what to say about them.

Two conditions make a GRPO-style run train on nothing without failing: the correctness reward scores no rollout of
a batch (every difficulty, hence every value, is undefined), and every value CoDaPO computes is 0 (each group all
solved or all unsolved under the paper's `V_d`, which is 0 at `d = 0` and `d = 1`). A single such batch is ordinary;
[`STALL_BATCHES`] of them in a row are reported. [`BatchStreak`] counts the run of one condition, and
[`weightless_message`] explains the second one with the options that make the values non-zero again.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..coda import VALUE_FUNCTIONS


__all__ = ["STALL_BATCHES", "BatchStreak", "weightless_message"]

STALL_BATCHES = 5
"""Consecutive batches after which a batch that trains nothing is reported: for undefined correctness, CoDaPO stops
with an error (its correctness reward scores nothing it is given); for values that are all 0, it warns once."""


@dataclass
class BatchStreak:
    """The number of consecutive batches on which a condition held, and whether it has been reported.

    Example:
    ```python
    >>> streak = BatchStreak()
    >>> [streak.update(held) for held in (True, True, False, True)]
    [1, 2, 0, 1]
    >>> streak.update(True), streak.due()
    (2, False)

    ```
    """

    length: int = 0
    reported: bool = False

    def update(self, held: bool) -> int:
        """Count one more batch: the run grows when `held`, and restarts from 0 otherwise. Returns its length."""
        self.length = self.length + 1 if held else 0
        return self.length

    def due(self, after: int = STALL_BATCHES) -> bool:
        """Whether the run reached `after` batches and was not reported yet (then it counts as reported)."""
        if self.reported or self.length < after:
            return False
        self.reported = True
        return True


def weightless_message(
    difficulty: torch.Tensor,
    num_batches: int,
    correctness: str,
    threshold: float | None,
    score_range: tuple[float, float] | None,
    other_rewards: list[str],
    difficulty_fn: str,
    prefix: str = "codapo_",
) -> str:
    """The warning for `num_batches` batches in a row whose values are all 0: why, and what to change.

    Args:
        difficulty (`torch.Tensor` of shape `(num_groups,)`): the last batch's group difficulties (NaN: undefined).
        num_batches (`int`): the length of the run.
        correctness (`str`): the correctness reward(s), as `CorrectnessSpec.describe` writes them.
        threshold (`float` or `None`): the correctness threshold, when correctness is a thresholded score.
        score_range (`tuple[float, float]` or `None`): the lowest and highest score of the correctness reward(s) in
            the last batch.
        other_rewards (`list[str]`): the rewards with a non-zero weight that are not correctness (their advantages
            are multiplied by the values too).
        difficulty_fn (`str`): the name of `V_d`.
        prefix (`str`): prefix of the option names quoted.

    Example:
    ```python
    >>> text = weightless_message(torch.ones(4), 5, "'acc' (binary)", None, (0.0, 0.0), ["fmt"], "center")
    >>> "no group has a correct rollout" in text and "codapo_weight_offset=0.1" in text
    True

    ```
    """
    defined = difficulty[~torch.isnan(difficulty)]
    solved, unsolved = bool((defined == 0).all()), bool((defined == 1).all())
    if solved:
        why = "every group is solved (all its rollouts correct: difficulty d = 0)"
    elif unsolved:
        why = "no group has a correct rollout (difficulty d = 1, as at a cold start)"
    elif bool(((defined == 0) | (defined == 1)).all()):
        why = "every group is either all correct or all wrong (d = 0 or 1)"
    else:
        why = "V_c(c) V_d(d) is 0 for every group"
    zero_vd = defined.numel() > 0 and bool((VALUE_FUNCTIONS[difficulty_fn](defined) == 0).all())
    shape = ""
    if zero_vd:
        design = " (the paper's V_d, 0 at d = 0 and d = 1 by design)" if difficulty_fn == "center" else ""
        shape = f", where V_d={difficulty_fn!r} is 0{design}"
    options = []
    if threshold is not None:
        seen = f" (this batch's scores: {score_range[0]:.4g} to {score_range[1]:.4g})" if score_range else ""
        options.append(
            f"put {prefix}correctness_threshold (now {threshold:g}) inside the range of the scores{seen}, so that some "
            "rollouts count as correct and others not"
        )
    options.append(
        f"set {prefix}weight_offset=0.1 (the authors' released code: every question keeps a weight of at least 0.1, "
        "so the other rewards' advantages train)"
        if other_rewards
        else f"set {prefix}weight_offset > 0 (the authors' released code uses 0.1: every question keeps some weight)"
    )
    if unsolved:
        options.append("start from a model that solves some questions (a short SFT, easier data)")
    others = (
        f" The advantages of {other_rewards} are multiplied by these values too, so they do not train either, where "
        "GRPO would learn from them."
        if other_rewards
        else ""
    )
    return (
        f"Every CoDaPO value was 0 for {num_batches} batches in a row, so nothing trains (gradient 0): by the "
        f"correctness reward {correctness}, {why}{shape}.{others} To change it: {'; or '.join(options)}. Watch "
        "codapo/value_mean, codapo/solved_frac and codapo/unsolved_frac."
    )
