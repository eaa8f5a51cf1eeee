"""The B/S protocol of CoDaSampling (paper Algorithm 1): its state and transitions, in one object.

Training alternates phases of one generation batch each: B (an update batch, whose values select the top-K
questions) and S (those questions, repeated to |B|, with fresh rollouts). A phase is consumed by
`steps_per_phase` optimizer steps, i.e. `micro_steps_per_phase` TRL micro-steps, so the phase is a function of
TRL's micro-step counter (which a resume restores). [`BSProtocol`] holds what lives across the two phases of a pair
and across a checkpoint: the selection B made, the optimizer step at which it was made, and S's rollouts when they
were generated before B's update (`codapo_resample_timing="before_update"`). It knows nothing of TRL: the trainer
passes it the micro-step and the batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


PHASE_B, PHASE_S = 0, 1


@dataclass
class PendingBatch:
    """S's generation output made before B's update (`before_update`), with the logs it produced, held until S.

    Attributes:
        output (`dict`): TRL's generation output for this process's rows of S.
        metrics (`dict[str, list[float]]`): the training metrics its generation logged.
        logs (`dict`): TRL's completion logs of its generation, as plain dicts and lists.
    """

    output: dict[str, Any]
    metrics: dict[str, list[float]]
    logs: dict[str, Any]

    def to(self, device: torch.device | str) -> PendingBatch:
        """A copy whose output tensors are on `device`."""
        output = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in self.output.items()}
        return PendingBatch(output, self.metrics, self.logs)


class BSProtocol:
    """State and transitions of the B/S protocol.

    Args:
        sampling (`bool`): whether CoDaSampling is on; without it every phase is B.
        micro_steps_per_phase (`int`): TRL micro-steps per phase (`steps_per_generation * num_iterations`).
        steps_per_phase (`int`): optimizer steps per phase (`codapo_steps_per_phase`).

    Attributes:
        phase (`int`): the phase of the rollouts being trained on ([`PHASE_B`] or [`PHASE_S`]), set by [`enter`].
        selection (`list[dict]` or `None`): the dataset rows of S's questions, |B| entries (each selected question
            repeated), identical on every process.
        selection_step (`int`): the optimizer step (`global_step`) before the first update of the B phase that made
            the selection (`-1` before any).
        pending ([`PendingBatch`] or `None`): this process's share of S's rollouts when they were generated before
            B's update.

    Example:
    ```python
    >>> protocol = BSProtocol(sampling=True, micro_steps_per_phase=2, steps_per_phase=1)
    >>> [protocol.phase_at(m) for m in range(6)]
    [0, 0, 1, 1, 0, 0]
    >>> protocol.select([{"q": 1}] * 4, micro_step=0)
    >>> protocol.selection_for(micro_step=2) is protocol.selection, protocol.selection_for(micro_step=6)
    (True, None)
    ```
    """

    def __init__(self, sampling: bool, micro_steps_per_phase: int, steps_per_phase: int):
        if micro_steps_per_phase < 1 or steps_per_phase < 1:
            raise ValueError(
                f"A phase needs at least one micro-step and one optimizer step, got {micro_steps_per_phase} and "
                f"{steps_per_phase}."
            )
        self.sampling = sampling
        self.micro_steps_per_phase = micro_steps_per_phase
        self.steps_per_phase = steps_per_phase
        self.phase = PHASE_B
        self.selection: list[dict] | None = None
        self.selection_step = -1
        self.pending: PendingBatch | None = None

    # ------------------------------------------------------------------ where a micro-step is
    def phase_at(self, micro_step: int) -> int:
        """The phase of the micro-step `micro_step` (always B without CoDaSampling)."""
        if not self.sampling:
            return PHASE_B
        return (micro_step // self.micro_steps_per_phase) % 2

    def phase_start_step(self, micro_step: int) -> int:
        """The optimizer step (`global_step`) before the first update of the phase of `micro_step`."""
        return (micro_step // self.micro_steps_per_phase) * self.steps_per_phase

    def is_mid_phase(self, micro_step: int) -> bool:
        """Whether `micro_step` falls between two steps of a phase (not at its start)."""
        return micro_step % self.micro_steps_per_phase != 0

    # ------------------------------------------------------------------ transitions
    def enter(self, micro_step: int) -> int:
        """Start generating for the phase of `micro_step`: it becomes [`phase`]; returns it."""
        self.phase = self.phase_at(micro_step)
        return self.phase

    def select(self, rows: list[dict], micro_step: int) -> None:
        """Record S's questions, chosen by the B phase of `micro_step`."""
        self.selection = rows
        self.selection_step = self.phase_start_step(micro_step)

    def selection_for(self, micro_step: int) -> list[dict] | None:
        """The selection for the S phase of `micro_step`: the one made by the B phase just before it, else `None`
        (no selection held, or one from another pair, e.g. after resuming from a checkpoint without it)."""
        if self.selection is None:
            return None
        if self.selection_step != self.phase_start_step(micro_step) - self.steps_per_phase:
            return None
        return self.selection

    def hold(self, pending: PendingBatch) -> None:
        """Keep S's rollouts, generated before B's update, until S."""
        self.pending = pending

    def take_pending(self) -> PendingBatch | None:
        """S's held rollouts (then no longer held), or `None`."""
        pending, self.pending = self.pending, None
        return pending

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps: `selection`, `selection_step` and `pending` (its tensors on CPU)."""
        pending = None if self.pending is None else self.pending.to("cpu")
        return {"selection": self.selection, "selection_step": self.selection_step, "pending": pending}

    def load_state_dict(self, state: dict[str, Any], micro_step: int, keep_pending: bool = True) -> None:
        """Restore a [`state_dict`] at the restored micro-step `micro_step`; `keep_pending=False` drops held rollouts
        (e.g. saved by another number of processes, whose shares differ)."""
        self.selection = state["selection"]
        self.selection_step = state["selection_step"]
        self.pending = state["pending"] if keep_pending else None
        self.enter(micro_step)
