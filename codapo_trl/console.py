"""The console's progress line: the few numbers a person watches, one line per logged step.

`transformers` prints every log as a Python dict: with the dynamics that is about 70 keys, most of them empty
difficulty bins (`None` or NaN). Trackers (wandb, tensorboard, trackio) and `trainer.state.log_history` keep every
key as before; only the console changes. [`progress_line`] formats one log, and [`use_progress_line`] puts the two
callbacks below in place of transformers' printers on a trainer:

    step 3/16 | phase S | reward 0.412 | value 0.0831 | solved 0.125 | unsolved 0.438 | loss 0.0012 | lr 1e-06

To print transformers' dict again: `trainer.remove_callback(ProgressLine)` (or `PrintedProgressLine` under
`disable_tqdm=True`) and `trainer.add_callback(transformers.ProgressCallback)` (or `PrinterCallback`).
"""

from __future__ import annotations

import math
from typing import Any

from transformers import PrinterCallback, ProgressCallback


__all__ = ["PrintedProgressLine", "ProgressLine", "progress_line", "use_progress_line"]

# (log key, label) of the numbers a training line shows, in order, when the log has them
WATCHED = (
    ("reward", "reward"),
    ("codapo/value_mean", "value"),
    ("codapo/solved_frac", "solved"),
    ("codapo/unsolved_frac", "unsolved"),
    ("loss", "loss"),
    ("learning_rate", "lr"),
)
_PHASES = {0.0: "B", 1.0: "S"}


def _shown(value: Any) -> bool:
    """Whether a logged value is worth a place on the console (not an empty bin: `None` or NaN)."""
    if value is None:
        return False
    return not (isinstance(value, float) and math.isnan(value))


def _number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def progress_line(logs: dict[str, Any], step: int, max_steps: int) -> str:
    """One log as a line: for a training step, its step, phase and `WATCHED` numbers; for any other log (evaluation,
    the end-of-training summary), its keys with a value, without empty ones.

    Args:
        logs (`dict`): what the Trainer logs (`on_log`'s `logs`).
        step (`int`): `state.global_step`.
        max_steps (`int`): `state.max_steps`.

    Example:
    ```python
    >>> progress_line({"loss": 0.5, "reward": 0.25, "codapo/phase": 1.0, "dynamics/bin1/count": None}, 3, 16)
    'step 3/16 | phase S | reward 0.25 | loss 0.5'
    >>> progress_line({"train_runtime": 12.5, "total_flos": 0.0, "train_loss": None}, 16, 16)
    'step 16/16 | train_runtime 12.5'

    ```
    """
    parts = [f"step {step}/{max_steps}"]
    if "reward" in logs or "loss" in logs:
        phase = logs.get("codapo/phase")
        if phase in _PHASES:
            parts.append(f"phase {_PHASES[phase]}")
        parts += [f"{label} {_number(logs[key])}" for key, label in WATCHED if _shown(logs.get(key))]
    else:
        parts += [f"{key} {_number(value)}" for key, value in logs.items() if key != "total_flos" and _shown(value)]
    return " | ".join(parts)


class ProgressLine(ProgressCallback):
    """transformers' progress bar, writing [`progress_line`] under it instead of the whole dict."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and self.training_bar is not None and logs:
            self.training_bar.write(progress_line(logs, state.global_step, state.max_steps))


class PrintedProgressLine(PrinterCallback):
    """transformers' printer (`disable_tqdm=True`), printing [`progress_line`] instead of the whole dict."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_local_process_zero and logs:
            # console output in place of transformers' own print of the dict, not a diagnostic
            print(progress_line(logs, state.global_step, state.max_steps))  # noqa: T201


def use_progress_line(trainer) -> None:
    """Replace transformers' console printer on `trainer` (its progress bar, or its printer under `disable_tqdm`) by
    the progress line; a notebook's progress display or a printer the user chose is left as it is."""
    replacements = {ProgressCallback: ProgressLine, PrinterCallback: PrintedProgressLine}
    for callback in list(trainer.callback_handler.callbacks):
        line = replacements.get(type(callback))
        if line is not None:
            trainer.remove_callback(callback)
            trainer.add_callback(line)
