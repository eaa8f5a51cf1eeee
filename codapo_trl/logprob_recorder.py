"""Log-probabilities of the sampled tokens, recorded while `transformers` generates.

vLLM returns the log-probability of every token it samples; `model.generate` computes the same numbers and drops
them. [`SampledTokenLogprobs`] keeps them, through a forward hook on the policy that is attached only for the
duration of one `generate` call: at each decoding step the hook sees the token sampled at the previous step (the
step's `input_ids`) and the next-token logits, so it stores `log_softmax(logits / temperature)[token]`, TRL's own
definition of per-token log-probs, without keeping any vocabulary-sized tensor beyond one step.

This is only right when `generate` runs the policy's forward exactly once per generated token, each call ending on
the token sampled by the previous one. Chunked prefill (`prefill_chunk_size`), assisted or prompt-lookup decoding
(several candidate tokens per forward), a `generate` replaced by a tool or environment loop, or any other decoding
that breaks this pattern is detected by [`SampledTokenLogprobs.per_row`], which then returns `None`: the caller
falls back to a forward pass instead of using numbers that cannot be trusted.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn


logger = logging.getLogger(__name__)


class SampledTokenLogprobs:
    """Records, for every row of one `generate` call, the log-probability of each generated token.

    Args:
        temperature (`float`): the sampling temperature (logits are divided by it, as in TRL's loss).
    """

    def __init__(self, temperature: float):
        self.temperature = temperature
        self._steps: list[torch.Tensor] = []  # (batch,) log-probs of the tokens generated at steps 0 .. n-2
        self._tokens: list[torch.Tensor] = []  # (batch,) the token each of those log-probs belongs to
        self._lengths: list[int] = []  # input length of every forward call
        self._batch_sizes: set[int] = set()
        self._last: torch.Tensor | None = None  # (batch, vocab) log-probs of the latest step's distribution
        self.reason: str | None = None  # why the last `per_row` returned None

    def hook(self, module: nn.Module, args: tuple, kwargs: dict, output) -> None:
        logits = output.logits if hasattr(output, "logits") else output[0]
        input_ids = kwargs.get("input_ids", args[0] if args else None)
        if input_ids is None or logits is None:  # inputs_embeds only: nothing to check the tokens against
            self._lengths.append(-1)
            return
        self._lengths.append(int(input_ids.size(1)))
        self._batch_sizes.add(int(input_ids.size(0)))
        if self._last is not None and self._last.size(0) == input_ids.size(0):
            token = input_ids[:, -1:].to(self._last.device)
            self._steps.append(self._last.gather(1, token).squeeze(1))
            self._tokens.append(token.squeeze(1))
        self._last = torch.log_softmax(logits[:, -1, :].detach().float() / self.temperature, dim=-1)

    def _pattern_problem(self) -> str | None:
        """Why the forward calls are not one per generated token (or `None` when they are)."""
        if self._last is None:
            return "the policy's forward never ran inside generate (a replaced or external generate)"
        lengths = self._lengths
        if -1 in lengths:
            return "a forward call without input_ids"
        if len(self._batch_sizes) != 1:
            return "forward calls with different batch sizes (assisted decoding or beam search?)"
        later = lengths[1:]
        cached = all(length == 1 for length in later)
        uncached = all(b == a + 1 for a, b in zip(lengths, later, strict=False))
        if not (cached or uncached):
            return (
                f"forward calls of input lengths {lengths[:6]}{'...' if len(lengths) > 6 else ''}, not one token per "
                "step (chunked prefill, assisted or prompt-lookup decoding?)"
            )
        return None

    def per_row(self, completion_ids: Sequence[Sequence[int]]) -> list[list[float]] | None:
        """Log-probs of each row's completion (its tokens up to the first EOS, as TRL keeps them), or `None` when the
        recording cannot be trusted (the reason is kept in `self.reason`)."""
        self.reason = self._pattern_problem()
        if self.reason is not None:
            return None
        num_steps = len(self._steps) + 1
        if self._last.size(0) != len(completion_ids):
            self.reason = f"{self._last.size(0)} rows were recorded for {len(completion_ids)} completions"
            return None
        longest = max((len(ids) for ids in completion_ids), default=0)
        if longest != num_steps:
            # generate stops when every row has finished or at max_new_tokens: the longest row took every step
            self.reason = f"{num_steps} forward steps were recorded for at most {longest} generated tokens"
            return None
        steps = torch.stack(self._steps, dim=1).tolist() if self._steps else [[] for _ in completion_ids]
        tokens = torch.stack(self._tokens, dim=1).tolist() if self._tokens else [[] for _ in completion_ids]
        rows = []
        for row, ids in enumerate(completion_ids):
            ids = list(ids)
            length = len(ids)
            checked = min(length, num_steps - 1)  # tokens whose log-prob was taken at a later step
            if tokens[row][:checked] != ids[:checked]:
                self.reason = f"row {row}: the tokens fed to the forward steps are not the generated ones"
                return None
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
