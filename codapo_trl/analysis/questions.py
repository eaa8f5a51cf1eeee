"""The analysed questions: a fixed, seeded set per difficulty level, the same for every checkpoint."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from codapo_trl.answers import row_question_id
from codapo_trl.data import parse_level
from codapo_trl.evaluation.metrics import level_sort_key


logger = logging.getLogger(__name__)

__all__ = ["Question", "select_questions"]


@dataclass(frozen=True)
class Question:
    """One analysed question: its row in the dataset, an id, its level and what grading needs."""

    index: int
    question_id: str
    level: int | str
    prompt: list[dict[str, str]]
    question: str
    answer: str
    answer_type: str


def _row_id(row: Mapping[str, Any], index: int) -> str:
    found = row_question_id(row)
    return found if found is not None else str(index)


def _normalise_level(value: Any) -> int | str | None:
    if value is None:
        return None
    parsed = parse_level(value)
    return parsed if parsed is not None else str(value)


def select_questions(
    dataset: Any,
    *,
    levels: Iterable[int | str] | None = None,
    questions_per_level: int = 100,
    seed: int = 0,
    require_levels: bool = True,
) -> list[Question]:
    """A fixed, seeded set of questions per level (the same for every checkpoint).

    Each level draws `questions_per_level` of its rows with its own random stream (seeded by `seed` and the level, so
    adding a level does not change the others); a level with fewer rows contributes all of them, with a warning.

    Args:
        dataset (`datasets.Dataset`): rows with `prompt`, `question`, `answer`, `level`, `answer_type` (as returned by
            [`codapo_trl.data.load_math_dataset`]).
        levels (`Iterable`, *optional*): levels to keep (default: every level of the dataset).
        questions_per_level (`int`, *optional*, defaults to 100): the paper's 100.
        seed (`int`, *optional*, defaults to 0): seed of the selection.
        require_levels (`bool`, *optional*, defaults to `True`): raise for a dataset without levels; when `False`,
            such a dataset is one level named `"all"`.

    Returns:
        `list[Question]`, level by level (in the order of `levels`, else sorted), rows in dataset order within a level.

    Raises:
        `ValueError`: a dataset without levels (when `require_levels`), an unknown level, `questions_per_level < 1`.
    """
    if questions_per_level < 1:
        raise ValueError(f"questions_per_level must be >= 1, got {questions_per_level}")
    missing_columns = [c for c in ("prompt", "answer", "level") if c not in dataset.column_names]
    if missing_columns and missing_columns != ["level"]:
        raise ValueError(f"The dataset lacks column(s) {missing_columns}; load it with load_math_dataset.")
    raw_levels = dataset["level"] if "level" in dataset.column_names else [None] * len(dataset)
    row_levels = [_normalise_level(v) for v in raw_levels]
    if all(level is None for level in row_levels):
        if require_levels:
            raise ValueError(
                "The dataset has no difficulty levels (no level/difficulty column, or every value empty): use a "
                "leveled dataset (math500, math, arithmetic, or a file with a `level` column), or group by the "
                "model's own difficulty (group_by='difficulty', --group-by difficulty)."
            )
        row_levels = ["all"] * len(row_levels)
    by_level: dict[int | str, list[int]] = {}
    for index, level in enumerate(row_levels):
        if level is not None:
            by_level.setdefault(level, []).append(index)
    present = sorted(by_level, key=level_sort_key)
    if levels is None:
        chosen = present
    else:
        chosen = list(dict.fromkeys(_normalise_level(level) for level in levels))
        unknown = [level for level in chosen if level not in by_level]
        if unknown:
            raise ValueError(f"Unknown level(s) {unknown}: the dataset has levels {present}.")
    questions = []
    for level in chosen:
        indices = by_level[level]
        if len(indices) <= questions_per_level:
            if len(indices) < questions_per_level:
                logger.warning(
                    "Level %s has only %d questions (asked for %d): using all of them.",
                    level,
                    len(indices),
                    questions_per_level,
                )
            picked = indices
        else:
            picked = sorted(random.Random(f"codapo-analysis-{seed}-{level}").sample(indices, questions_per_level))
        for index in picked:
            row = dataset[index]
            questions.append(
                Question(
                    index=index,
                    question_id=_row_id(row, index),
                    level=level,
                    prompt=list(row["prompt"]),
                    question=str(row.get("question", "")),
                    answer=row["answer"],
                    answer_type=row.get("answer_type") or "math",
                )
            )
    return questions
