"""What every job does around its work: set up logging, pick the checkpoint to resume from, leave a run cleanly."""

from __future__ import annotations

import logging
import os
import sys

from transformers import TrainingArguments
from transformers.trainer_utils import get_last_checkpoint

from codapo_trl.command_line import LOG_FORMAT, configure_logging


__all__ = ["LOG_FORMAT", "configure_logging", "exit_cleanly", "resume_checkpoint"]


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
