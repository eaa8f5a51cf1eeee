"""The maths reward for TRL: binary accuracy of a completion's anchored final answer (`math_accuracy_reward`).

The paper's reward is binary accuracy (the paper judges it with math-verify), with no format reward. The grading
itself (anchored extraction, exact and typed equality, restatements judged against the prompt, answer types,
bounded time) is `codapo_trl.rewards.grading.grade_answers`, shared with evaluation and analysis; this module turns
TRL's batch (prompts, completions, dataset columns) into its inputs.
"""

from __future__ import annotations

import logging
from typing import Any

from codapo_trl.answers import completion_text, prompt_text
from codapo_trl.rewards.grading import CRASHED, FORM_REASONS, NO_ANSWER, TIMED_OUT, grade_answers


__all__ = ["math_accuracy_reward", "report_unreadable_golds"]

logger = logging.getLogger(__name__)
_SHOWN_GOLDS = 10


def math_accuracy_reward(completions: list[Any], answer: list[str | None], **kwargs: Any) -> list[float | None]:
    """Binary accuracy reward: 1.0 if the completion's anchored final answer equals the gold answer, else 0.0.

    A TRL reward function (pass it in `reward_funcs`, or by name `"math_accuracy"` via `get_reward_funcs`). Grading
    follows `grade_answers`: the answer must be boxed or follow a final-answer phrase (one value is read: text after
    the box is not, unless it continues the box's value, `\\boxed{2}^{10}`), the optional `answer_type` column
    selects `"math"`, `"number"` or `"choice"` grading, equality is exact and typed and restatements are judged
    against the prompt (see `codapo_trl.rewards.judging`), and each answer is graded within about 2 s (timeouts
    score 0.0). A gold answer that cannot be parsed gives `None`, which TRL leaves out of the mean.

    Args:
        completions (`list[str]` or `list[list[dict]]`):
            Completions, as strings or conversational messages (the assistant message's content is graded).
        answer (`list[str]`):
            The dataset's gold-answer column; a full solution is reduced to its last `\\boxed{}`.
        **kwargs:
            Other columns from TRL. Used: `prompts` (TRL passes the prompts; an answer that hands back an expression
            the question states is refused, and a decimal stands for an exact gold only where the question asks
            for one), `answer_type` (`list[str]`, default `"math"` for all), `log_extra` (logs
            `gold_parsed` and `answer_parsed` columns to the completions table) and `log_metric` (logs
            `math_accuracy/no_answer_frac`, `math_accuracy/not_final_frac` and `math_accuracy/ungraded_frac`).

    Returns:
        `list[float | None]`: One reward per completion.

    Example:
        ```python
        >>> completions = [[{"role": "assistant", "content": r"2 + 5 = 7, so \\boxed{7}"}], [{"role": "assistant",
        ...                 "content": "5 + 2 ="}]]
        >>> math_accuracy_reward(completions, answer=["7", "7"])
        [1.0, 0.0]
        ```
    """
    if len(answer) != len(completions):
        raise ValueError(f"Got {len(completions)} completions but {len(answer)} gold answers")
    texts = [completion_text(completion) for completion in completions]
    answer_types = kwargs.get("answer_type")
    prompts = kwargs.get("prompts")
    questions = [prompt_text(p) for p in prompts] if prompts is not None and len(prompts) == len(texts) else None
    results = grade_answers(texts, answer, answer_types, questions=questions)

    log_extra = kwargs.get("log_extra")
    if callable(log_extra):
        log_extra("gold_parsed", [r.gold_parsed or r.gold or "" for r in results])
        log_extra("answer_parsed", [r.predicted_parsed or r.predicted or "" for r in results])
    log_metric = kwargs.get("log_metric")
    if callable(log_metric) and results:
        log_metric("math_accuracy/no_answer_frac", sum(r.reason == NO_ANSWER for r in results) / len(results))
        log_metric("math_accuracy/not_final_frac", sum(r.reason in FORM_REASONS for r in results) / len(results))
        log_metric(
            "math_accuracy/ungraded_frac",
            sum(r.correct is None or r.reason in (TIMED_OUT, CRASHED) for r in results) / len(results),
        )
    return [r.reward for r in results]


math_accuracy_reward.required_columns = ("answer",)  # type: ignore[attr-defined]
math_accuracy_reward.correctness_kind = "binary"  # type: ignore[attr-defined]  # read by codapo_trl.correctness


def report_unreadable_golds(dataset: Any, label: str = "train_dataset") -> dict[str, str]:
    """Name, when a dataset loads, every gold answer the maths grader cannot read: its questions would be skipped
    (reward `None`) in every batch, silently. Logs one warning with the count and the first golds and reasons.

    Each distinct gold (with its `answer_type`) is read once, through the grader's bounded workers (the verdicts are
    cached for training). A dataset without an `answer` column, or one that cannot be read whole (streaming), is not
    checked.

    Args:
        dataset: a `datasets.Dataset` (or anything with `column_names` and column access), or `None`.
        label (`str`): how the warning names the dataset.

    Returns:
        `dict[str, str]`: the unreadable golds, each with the grader's reason.

    Example:
        ```python
        >>> from datasets import Dataset
        >>> report_unreadable_golds(Dataset.from_dict({"answer": ["7", "\\\\frac{}{"]}))
        {'\\\\frac{}{': 'gold not parseable'}

        ```
    """
    columns = getattr(dataset, "column_names", None)
    if dataset is None or not columns or "answer" not in columns:
        return {}
    try:
        golds = list(dataset["answer"])
        types = list(dataset["answer_type"]) if "answer_type" in columns else [None] * len(golds)
    except (TypeError, KeyError, NotImplementedError):
        return {}
    pairs = sorted({(g, t) for g, t in zip(golds, types) if isinstance(g, str)}, key=str)
    results = grade_answers([None] * len(pairs), [g for g, _ in pairs], [t for _, t in pairs])
    unreadable = {gold: r.reason or "unreadable" for (gold, _), r in zip(pairs, results) if r.correct is None}
    if unreadable:
        shown = "; ".join(f"{gold!r} ({reason})" for gold, reason in list(unreadable.items())[:_SHOWN_GOLDS])
        logger.warning(
            "%d of the %d distinct gold answers of %s cannot be read by the maths grader, so their questions are "
            "skipped (reward None) in every batch: %s%s. Rewrite those golds (a LaTeX value), or drop their rows.",
            len(unreadable),
            len(pairs),
            label,
            shown,
            "; ..." if len(unreadable) > _SHOWN_GOLDS else "",
        )
    return unreadable
