"""Log-probabilities of the sampled tokens, recorded while `transformers` generates.

vLLM returns the log-probability of every token it samples; `model.generate` computes the same numbers and drops
them. [`SampledTokenLogprobs`] keeps them, through a forward hook on the policy that is attached only for the
duration of one `generate` call: at each decoding step the hook sees the token sampled at the previous step (the
step's `input_ids`) and the next-token logits, so it stores `log_softmax(logits / temperature)[token]`, TRL's own
definition of per-token log-probs, without keeping any vocabulary-sized tensor beyond one step.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn


class SampledTokenLogprobs:
    """Records, for every row of one `generate` call, the log-probability of each generated token.

    Args:
        temperature (`float`): the sampling temperature (logits are divided by it, as in TRL's loss).
    """

    def __init__(self, temperature: float):
        self.temperature = temperature
        self._steps: list[torch.Tensor] = []  # (batch,) log-probs of the tokens generated at steps 0 .. n-2
        self._last: torch.Tensor | None = None  # (batch, vocab) log-probs of the latest step's distribution

    def hook(self, module: nn.Module, args: tuple, kwargs: dict, output) -> None:
        logits = output.logits if hasattr(output, "logits") else output[0]
        input_ids = kwargs.get("input_ids", args[0] if args else None)
        if self._last is not None and input_ids is not None:
            token = input_ids[:, -1:].to(self._last.device)
            self._steps.append(self._last.gather(1, token).squeeze(1))
        self._last = torch.log_softmax(logits[:, -1, :].detach().float() / self.temperature, dim=-1)

    def per_row(self, completion_ids: Sequence[Sequence[int]]) -> list[list[float]]:
        """Log-probs of each row's completion (its tokens up to the first EOS, as TRL keeps them)."""
        if self._last is None:
            raise RuntimeError("No generation step was recorded.")
        num_steps = len(self._steps) + 1
        steps = torch.stack(self._steps, dim=1).tolist() if self._steps else [[] for _ in completion_ids]
        rows = []
        for row, ids in enumerate(completion_ids):
            length = len(ids)
            if length > num_steps:
                raise RuntimeError(f"Row {row} has {length} completion tokens but generation took {num_steps} steps.")
            values = steps[row][: min(length, num_steps - 1)]
            if length == num_steps:  # the last token was sampled at the final step
                values.append(self._last[row, ids[-1]].item())
            rows.append(values)
        return rows


@contextmanager
def record_sampled_logprobs(model: nn.Module, temperature: float) -> Iterator[SampledTokenLogprobs]:
    """Attach a [`SampledTokenLogprobs`] recorder to `model` (the module whose forward returns the logits) while the
    `with` block runs one `generate` call."""
    recorder = SampledTokenLogprobs(temperature)
    handle = model.register_forward_hook(recorder.hook, with_kwargs=True)
    try:
        yield recorder
    finally:
        handle.remove()
