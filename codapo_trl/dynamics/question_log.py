"""The per-question JSONL log: one row per question per update (`codapo_question_log`, `question_log=`).

[`question_id`] names a dataset row; [`question_log_lines`] turns one batch's [`GroupStats`] into the log's lines;
[`append_lines`] writes them (the trainer's main process calls it once per batch); [`open_question_log`] reads them
back as text.

A path ending in `.gz` (`questions.jsonl.gz`) is written compressed: each batch is appended as its own gzip member,
so the file is a valid gzip stream after every batch, and truncating it to the size it had at a checkpoint (what a
resumed run does) leaves whole members only. Members are written with `mtime=0`, so the same rows give the same bytes.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
from typing import IO, Any

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


def is_compressed(path: str | os.PathLike) -> bool:
    """Whether a question log at `path` is gzip-compressed (its name ends in `.gz`)."""
    return os.fspath(path).endswith(".gz")


def append_lines(path: str, text: str) -> None:
    """Append `text` to the file at `path` in one write, flushed to disk (a reader never sees half a batch). A `.gz`
    path gets `text` as one more gzip member (`mtime=0`: the same text gives the same bytes)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    data = text.encode("utf-8")
    if is_compressed(path):
        data = gzip.compress(data, mtime=0)
    with open(path, "ab") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def open_question_log(path: str | os.PathLike) -> IO[str]:
    """The log at `path` opened for reading as text, decompressed when its name ends in `.gz` (all its members).

    Example:
    ```python
    >>> import tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "questions.jsonl.gz")
    >>> append_lines(path, '{"step": 1}\\n'); append_lines(path, '{"step": 2}\\n')
    >>> with open_question_log(path) as f:
    ...     [json.loads(line)["step"] for line in f]
    [1, 2]
    ```
    """
    if is_compressed(path):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")
