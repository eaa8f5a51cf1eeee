"""The per-question JSONL log: one row per question per update (`codapo_question_log`, `question_log=`).

[`question_id`] names a dataset row; [`question_log_lines`] turns one batch's [`GroupStats`] into the log's lines;
[`append_lines`] writes them (the trainer's main process calls it once per batch).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import torch

from ..answers import row_question_id
from .groups import GroupStats


def prompt_digest(prompt: Any) -> str:
    """A stable digest of a prompt (a string or a list of chat messages)."""
    text = json.dumps(prompt, sort_keys=True, default=str)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def question_id(row: dict) -> str:
    """A question's id: its dataset id column when it has one, else a digest of its prompt.

    Example:
    ```python
    >>> question_id({"unique_id": 7, "prompt": "1+1?"}), question_id({"prompt": "1+1?"})
    ('7', 'e4c310268ff2dd8e')
    ```
    """
    found = row_question_id(row)
    return found if found is not None else prompt_digest(row.get("prompt"))[:16]


def _finite_or_none(value: torch.Tensor) -> float | None:
    value = float(value)
    return value if value == value else None  # NaN -> None (JSON has no NaN)


def question_log_lines(
    keys: list[tuple[str, Any]],
    stats: GroupStats,
    num_generations: int,
    phase: int,
    step: int,
    values: torch.Tensor | None = None,
    selected: set[int] | None = None,
) -> str:
    """The log's lines for one batch: one JSON object per question, in the batch's order.

    Args:
        keys (`list[tuple[str, Any]]`): each question's `(question_id, level)`.
        stats ([`GroupStats`]): the batch's statistics (all processes).
        num_generations (`int`): group size G.
        phase (`int`): `0` for an update batch B, `1` for a resampled batch S.
        step (`int`): the update (`global_step` after it) that trains on the batch.
        values (`torch.Tensor` of shape `(Q,)`, *optional*): CoDaPO's values (`null` without them).
        selected (`set[int]`, *optional*): indices of the questions selected for S (`null` when no selection).
    """
    correct = (stats.correctness >= 0.5).view(-1, num_generations).sum(1).tolist()
    lines = []
    for j, (qid, level) in enumerate(keys):
        record = {
            "step": step,
            "phase": phase,
            "question_id": qid,
            "level": level,
            "confidence": _finite_or_none(stats.confidence[j]),
            "difficulty": _finite_or_none(stats.difficulty[j]),
            "value": None if values is None else _finite_or_none(values[j]),
            "selected": None if selected is None else j in selected,
            "num_correct": int(correct[j]),
            "num_generations": num_generations,
        }
        lines.append(json.dumps(record) + "\n")
    return "".join(lines)


def append_lines(path: str, text: str) -> None:
    """Append `text` to the file at `path` in one write, flushed to disk (a reader never sees half a batch)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
