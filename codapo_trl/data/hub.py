"""Adapters for hub datasets whose rows do not map field to field onto the common columns: questions built from
several fields (MMLU and GPQA choices, OlympiadBench context) and answers that need parsing (OlympiadBench lists,
Minerva solutions, GPQA's option order). Used by the built-in specs in `codapo_trl.data.registry`."""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import Any

from codapo_trl.answers import plain_answer, solution_last_boxed
from codapo_trl.data.arithmetic import question_hash


def mmlu_question(row: dict) -> str:
    letters = "ABCDEFGHIJ"
    choices = "\n".join(f"{letters[i]}. {choice}" for i, choice in enumerate(row["choices"]))
    return f"{row['question']}\n\n{choices}"


def mmlu_answer(row: dict) -> str | None:
    answer = row.get("answer")
    if isinstance(answer, int) and not isinstance(answer, bool):
        return "ABCDEFGHIJ"[answer]
    return plain_answer(answer)


def _required(row: Mapping[str, Any], name: str, *fields: str) -> Any:
    """The first of `fields` present (and not `None`) in `row`; a clear error naming the columns otherwise."""
    for column in fields:
        if row.get(column) is not None:
            return row[column]
    raise ValueError(f"{name}: none of the columns {list(fields)} found in a row with columns {sorted(row)}.")


def _strip_dollars(text: str) -> str:
    """`$\\frac{1}{2}$` -> `\\frac{1}{2}`: unescaped `$` math delimiters removed."""
    return re.sub(r"(?<!\\)\$", "", text).strip()


def olympiad_answer(value: Any) -> str | None:
    """OlympiadBench's `final_answer`: a list of strings in `$...$` (several for multi-answer questions), joined
    with `", "`."""
    values = value if isinstance(value, (list, tuple)) else [value]
    parts = [_strip_dollars(str(v)) for v in values if v is not None and str(v).strip()]
    return ", ".join(p for p in parts if p) or None


def olympiad_question(row: dict) -> str:
    question = str(_required(row, "olympiadbench", "question"))
    context = row.get("context")
    return f"{context.strip()}\n\n{question}" if isinstance(context, str) and context.strip() else question


def minerva_question(row: dict) -> str:
    return str(_required(row, "minerva", "question", "problem"))


def minerva_answer(row: dict) -> str | None:
    if row.get("answer") is not None:
        return plain_answer(row["answer"])
    return solution_last_boxed(str(_required(row, "minerva", "answer", "solution")))


_GPQA_FIELDS = ("Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


def _gpqa_choices(row: dict) -> tuple[list[str], int]:
    """GPQA's four options in a fixed order (a permutation seeded by the question text, so the gold letter is the
    same on every run and machine) and the index of the correct one."""
    values = [_required(row, "gpqa", column) for column in _GPQA_FIELDS]
    options = [str(v).strip() for v in values[1:]]
    order = list(range(4))
    random.Random(question_hash(f"gpqa|{values[0]}")).shuffle(order)
    return [options[i] for i in order], order.index(0)


def gpqa_question(row: dict) -> str:
    options, _ = _gpqa_choices(row)
    choices = "\n".join(f"{letter}. {option}" for letter, option in zip("ABCD", options))
    return f"{str(row['Question']).strip()}\n\n{choices}"


def gpqa_answer(row: dict) -> str | None:
    _, correct = _gpqa_choices(row)
    return "ABCD"[correct]
