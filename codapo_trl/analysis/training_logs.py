"""Training logs of a run: the `log_history` of `trainer_state.json` and the per-question JSONL log (plain or
gzip-compressed, `.jsonl.gz`), and where a run keeps them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from codapo_trl.analysis.checkpoints import CHECKPOINT_RE, TRAINER_STATE_FILE
from codapo_trl.command_line import read_json_file
from codapo_trl.dynamics.question_log import open_question_log


__all__ = ["find_training_logs", "load_question_log", "load_trainer_state"]


def load_trainer_state(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The `log_history` entries of a `trainer_state.json` that have a `step` (nulls kept as `None`)."""
    state = read_json_file(path, "trainer state")
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise ValueError(f"{path} has no log_history: is it a Trainer's trainer_state.json?")
    return [entry for entry in history if isinstance(entry, dict) and "step" in entry]


def load_question_log(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of a per-question JSONL log (`codapo_question_log`): step, phase, question_id, level, ...,
    num_correct, num_generations. A path ending in `.gz` is read decompressed."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No such question log: {path}")
    rows = []
    with open_question_log(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{number} is not JSON: {err}") from err
            if not {"step", "num_correct", "num_generations"} <= set(row):
                raise ValueError(f"{path}:{number} is not a question-log row (step, num_correct, num_generations).")
            rows.append(row)
    return rows


def _looks_like_question_log(path: Path) -> bool:
    try:
        with open_question_log(path) as f:
            first = json.loads(f.readline())
    except (OSError, ValueError, EOFError):
        return False
    return isinstance(first, dict) and {"step", "question_id", "num_correct", "num_generations"} <= set(first)


def find_training_logs(run_dir: str | os.PathLike) -> dict[str, str | None]:
    """The `trainer_state.json` (the run's own, else the latest checkpoint's) and the question log (`*.jsonl` or
    `*.jsonl.gz` with question-log rows; a plain one first) of a run directory; `None` for what is not there."""
    run = Path(run_dir)
    state: Path | None = run / TRAINER_STATE_FILE if (run / TRAINER_STATE_FILE).is_file() else None
    if state is None:
        checkpoints = sorted(
            (d for d in run.glob("checkpoint-*") if CHECKPOINT_RE.fullmatch(d.name)),
            key=lambda d: int(CHECKPOINT_RE.fullmatch(d.name).group(1)),
        )
        for checkpoint in reversed(checkpoints):
            if (checkpoint / TRAINER_STATE_FILE).is_file():
                state = checkpoint / TRAINER_STATE_FILE
                break
    candidates = [*sorted(run.glob("*.jsonl")), *sorted(run.glob("*.jsonl.gz"))]
    log = next((p for p in candidates if _looks_like_question_log(p)), None)
    return {"trainer_state": str(state) if state else None, "question_log": str(log) if log else None}
