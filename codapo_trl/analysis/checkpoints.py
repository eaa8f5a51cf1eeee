"""Which checkpoints to analyse: the `checkpoint-<step>` folders of a run, a final model, the base model (step 0)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from codapo_trl.models import resolve_model_name_or_path


logger = logging.getLogger(__name__)

__all__ = ["CHECKPOINT_RE", "TRAINER_STATE_FILE", "Checkpoint", "find_checkpoints"]

TRAINER_STATE_FILE = "trainer_state.json"
CHECKPOINT_RE = re.compile(r"checkpoint-(\d+)")
"""The name of a `Trainer` checkpoint folder; group 1 is its step."""
_MODEL_FILES = ("config.json", "adapter_config.json")


@dataclass(frozen=True)
class Checkpoint:
    """A model to analyse: its training step, where it is loaded from and a label for tables and figures."""

    step: int
    path: str
    label: str


def _is_model_dir(path: Path) -> bool:
    return any((path / name).is_file() for name in _MODEL_FILES)


def _step_of(path: Path) -> int | None:
    match = CHECKPOINT_RE.fullmatch(path.name)
    if match:
        return int(match.group(1))
    state = path / TRAINER_STATE_FILE
    if state.is_file():
        with contextlib.suppress(ValueError, OSError, KeyError, TypeError):
            return int(json.loads(state.read_text())["global_step"])
    return None


def find_checkpoints(
    paths: Sequence[str | os.PathLike],
    *,
    base: str | None = None,
    steps: Iterable[int] | None = None,
) -> list[Checkpoint]:
    """The checkpoints to analyse, in step order.

    Args:
        paths (`Sequence[str | os.PathLike]`): run directories (every `checkpoint-<step>` folder in them is taken, and
            the final model in the run's root when its `trainer_state.json` step is past the last checkpoint) or model
            folders (`checkpoint-<step>`, or any folder with a `trainer_state.json` that gives its step).
        base (`str`, *optional*): the model training started from (alias, path or hub id), analysed as step 0.
        steps (`Iterable[int]`, *optional*): keep only these steps (e.g. the paper's 0, 60 and 240).

    Returns:
        `list[Checkpoint]` sorted by step.

    Raises:
        `FileNotFoundError`: a path that does not exist.
        `ValueError`: no checkpoint found, a model folder whose step cannot be told, two checkpoints with the same
            step, or a requested step that is not there.
    """
    found: list[Checkpoint] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.exists():
            raise FileNotFoundError(f"No such checkpoint or run directory: {path}")
        if not path.is_dir():
            raise ValueError(f"{path} is not a directory: give a run directory or a checkpoint folder.")
        subdirs = sorted(
            (d for d in path.iterdir() if d.is_dir() and CHECKPOINT_RE.fullmatch(d.name)),
            key=lambda d: int(CHECKPOINT_RE.fullmatch(d.name).group(1)),
        )
        if subdirs:
            for sub in subdirs:
                if not _is_model_dir(sub):
                    logger.warning("Skipping %s: no config.json or adapter_config.json in it.", sub)
                    continue
                step = int(CHECKPOINT_RE.fullmatch(sub.name).group(1))
                found.append(Checkpoint(step, str(sub), f"step {step}"))
            # the final model saved in the run's root, when it is newer than its last checkpoint
            final = _step_of(path) if _is_model_dir(path) else None
            if final is not None and all(final > c.step for c in found if Path(c.path).parent == path):
                found.append(Checkpoint(final, str(path), f"step {final} (final)"))
        elif _is_model_dir(path):
            step = _step_of(path)
            if step is None:
                raise ValueError(
                    f"Cannot tell the training step of {path}: name it checkpoint-<step>, keep its trainer_state.json, "
                    "or pass the model as --base (step 0)."
                )
            found.append(Checkpoint(step, str(path), f"step {step}"))
        else:
            raise ValueError(
                f"No checkpoints found in {path}: expected checkpoint-<step> folders (a training run's output_dir) "
                "or a model folder with a config.json."
            )
    if base is not None:
        found.append(Checkpoint(0, resolve_model_name_or_path(base), "step 0 (base)"))
    if not found:
        raise ValueError("No checkpoints found: give a run directory, checkpoint folders or --base.")
    by_step: dict[int, Checkpoint] = {}
    for checkpoint in found:
        if checkpoint.step in by_step:
            raise ValueError(
                f"Two checkpoints with step {checkpoint.step}: {by_step[checkpoint.step].path} and {checkpoint.path}."
            )
        by_step[checkpoint.step] = checkpoint
    if steps is not None:
        wanted = sorted(set(steps))
        missing = [s for s in wanted if s not in by_step]
        if missing:
            raise ValueError(f"No checkpoint for step(s) {missing}; available steps: {sorted(by_step)}.")
        by_step = {s: by_step[s] for s in wanted}
    return [by_step[s] for s in sorted(by_step)]
