"""What every job does around its work: set up logging, pick the checkpoint to resume from, leave a run cleanly."""

from __future__ import annotations

import logging
import os
import sys

from transformers import TrainerCallback, TrainingArguments
from transformers.trainer_utils import get_last_checkpoint

from codapo_trl.command_line import LOG_FORMAT, configure_logging


__all__ = [
    "LOG_FORMAT",
    "SaveAtSteps",
    "check_save_at_steps",
    "configure_logging",
    "exit_cleanly",
    "resume_checkpoint",
]


logger = logging.getLogger(__name__)


def resume_checkpoint(training_args: TrainingArguments) -> str | None:
    """The checkpoint to resume from: only when asked (`--resume_from_checkpoint last` or a path)."""
    asked = training_args.resume_from_checkpoint
    existing = get_last_checkpoint(training_args.output_dir) if os.path.isdir(training_args.output_dir) else None
    if asked is None or str(asked).lower() in ("", "false", "no", "none"):
        if existing is not None:
            logger.warning(
                "%s already holds %s; this run starts from scratch. Pass `--resume_from_checkpoint last` to continue "
                "it instead.",
                training_args.output_dir,
                existing,
            )
        return None
    if str(asked).lower() in ("last", "true", "yes", "latest"):
        if existing is None:
            logger.warning("No checkpoint in %s to resume from: starting from scratch.", training_args.output_dir)
        return existing
    if not os.path.isdir(asked):
        raise FileNotFoundError(f"resume_from_checkpoint={asked!r} is not a checkpoint directory.")
    return asked


class SaveAtSteps(TrainerCallback):
    """Save a checkpoint after each of the given optimizer updates, on top of `save_strategy`.

    `save_steps` expresses only a period; an evaluation protocol that reads the model after, say, updates 31 and 32
    (a CoDaPO B update and its S update) needs checkpoints at chosen steps. The checkpoints are the Trainer's own
    (`checkpoint-<step>`, with `save_only_model` and `save_total_limit` honoured), so `resume_from_checkpoint` works
    from them.

    Args:
        steps (`Iterable[int]`): the global steps (optimizer updates, counted from 1) after which to save.
    """

    def __init__(self, steps) -> None:
        self.steps = frozenset(int(step) for step in steps)

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step in self.steps:
            control.should_save = True
        return control


def check_save_at_steps(steps: list[int] | None, max_steps: int) -> None:
    """Refuse, before the model loads, steps that can never be reached or are not optimizer updates."""
    if not steps:
        return
    bad = [step for step in steps if step < 1 or (max_steps > 0 and step > max_steps)]
    if bad:
        limit = f"1 and max_steps={max_steps}" if max_steps > 0 else "1 and the run's last update"
        raise ValueError(f"save_at_steps={steps}: {bad} not between {limit}; no checkpoint would be written there.")


def exit_cleanly() -> None:
    """Leave a multi-process CPU (gloo) run without torch's teardown, which can abort after a finished run.

    With torch 2.13 and the gloo backend, about one run in ten aborts at interpreter exit ("terminate called without
    an active exception") after everything was saved; `destroy_process_group` does not prevent it. Everything is
    written and flushed by then, so such a run leaves with `os._exit(0)`. Other runs exit normally.
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_backend() == "gloo":
        dist.barrier()
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
