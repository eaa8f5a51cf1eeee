"""Every private part of TRL that codapo-trl depends on, named in one place and checked at import.

TRL's `GRPOTrainer` has no public extension points for what CoDaPO needs (the rewards it gathered, the generation
output before training, the loss's forward pass, its micro-step counter and rollout buffer), so the core overrides
private hooks and reads private attributes. Those can change in any TRL release. This module:

- names them: [`GRPO_HOOKS`] (methods of `GRPOTrainer` and `transformers.Trainer` that the core overrides or calls,
  with the parameters it relies on), [`VLLM_HOOKS`] (the same for TRL's `VLLMGeneration`), [`GRPO_ATTRIBUTES`]
  (instance attributes set by `GRPOTrainer.__init__` that the core reads or writes), [`GRPO_CLASS_ATTRIBUTES`] and
  [`VLLM_ATTRIBUTES`];
- checks at import that the installed TRL is the tested range [`SUPPORTED_TRL`] (a warning otherwise) and that every
  hook exists with those parameters (an `ImportError` naming the supported range otherwise), and, for each trainer,
  that the attributes exist ([`check_trainer_attributes`]);
- is the only way the core touches them: private helpers and module globals of TRL are re-exported from here, and
  private attributes are read and written through the small accessors below. `grep _trl_compat` finds every use;
- holds [`EpochRepeatSampler`], TRL's `RepeatSampler` made resumable across epochs (it relies on how TRL's sampler
  draws an epoch's order).

Hooks are overridden by defining a method of the same name in the core (that is how a subclass hooks in); each such
method names its hook in [`GRPO_HOOKS`].
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import warnings
from collections import defaultdict, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import trl
from packaging.version import Version
from trl import GRPOTrainer
from trl.generation import vllm_generation as _trl_vllm_generation
from trl.generation.vllm_generation import VLLMGeneration
from trl.models.utils import disable_gradient_checkpointing
from trl.trainer import grpo_trainer as _trl_grpo_trainer
from trl.trainer.utils import RepeatSampler


__all__ = [
    "GRPO_ATTRIBUTES",
    "GRPO_CLASS_ATTRIBUTES",
    "GRPO_HOOKS",
    "SUPPORTED_TRL",
    "TESTED_TRL",
    "VLLM_ATTRIBUTES",
    "VLLM_HOOKS",
    "CapturedLogs",
    "EpochRepeatSampler",
    "RepeatSampler",
    "VLLMGeneration",
    "buffered_inputs",
    "check_trainer_attributes",
    "disable_gradient_checkpointing",
    "extend_logs",
    "micro_step",
    "plain_logs",
    "post_to_vllm_server",
    "separate_logs",
    "set_buffered_inputs",
    "set_micro_step",
    "set_weights_awake",
    "train_metrics",
    "vllm_client_class",
    "vllm_generation_class",
]

SUPPORTED_TRL = (Version("1.16.0"), Version("1.17.0"))
"""TRL versions the core supports: `>= SUPPORTED_TRL[0]` and `< SUPPORTED_TRL[1]`."""
TESTED_TRL = "1.16.0"
_RANGE = f">={SUPPORTED_TRL[0]},<{SUPPORTED_TRL[1]}"

GRPO_HOOKS: dict[str, tuple[str, ...]] = {
    # hook: the parameters the core passes or receives by name. Overridden in `dynamics/mixin.py` unless noted.
    "_generate_and_score_completions": ("inputs",),  # TRL's batch: generated, scored, advantages
    "_calculate_rewards": ("inputs", "prompts", "completions", "completion_ids_list"),  # the gathered rewards
    "_generate": ("prompts",),  # generated-token budget
    "_generate_single_turn": ("prompt_ids", "images", "multimodal_fields", "num_generations", "has_tool_images"),
    "_get_per_token_logps_and_entropies": ("model", "input_ids", "attention_mask", "logits_to_keep", "batch_size"),
    "_compute_loss": ("model", "inputs"),  # the loss's forward (per-bin metrics)
    "_get_train_sampler": ("dataset",),  # an EpochRepeatSampler (CoDaPO: every B batch delivered twice)
    "_save_checkpoint": ("model", "trial"),  # transformers.Trainer: our per-rank state files
    "_load_optimizer_and_scheduler": ("checkpoint",),  # transformers.Trainer: restore them
    "_get_output_dir": ("trial",),  # transformers.Trainer: where a checkpoint is written (called)
}
"""Methods of `GRPOTrainer` (or `transformers.Trainer`) that the core overrides or calls."""

VLLM_HOOKS: dict[str, tuple[str, ...]] = {
    "_init_vllm": (),  # vllm_cpu.py: server mode without NCCL
    "_iter_named_params": (),  # vllm_cpu.py: the policy's weights, gathered (called)
    "sync_weights": (),  # vllm_cpu.py: the CPU weight sync
}
"""Methods of TRL's `VLLMGeneration` that `vllm_cpu.CPUVLLMGeneration` overrides or calls."""

GRPO_ATTRIBUTES = (
    "_step",  # micro-step counter: CoDaPO's phase is derived from it, and it is restored on resume
    "_buffered_inputs",  # the rollouts of the current generation batch, saved mid-phase
    "_metrics",  # {"train": defaultdict(list), "eval": ...}: what the next log averages
    "_logs",  # completions, rewards, advantages shown in TRL's completion tables
    # public but undocumented attributes the core reads
    "num_generations",
    "num_iterations",
    "reward_func_names",
    "reward_weights",
    "shuffle_dataset",
    "loss_type",
    "temperature",
    "epsilon_low",
    "epsilon_high",
    "use_vllm",
    "use_transformers_continuous_batching",
    "rollout_func",
    "vllm_importance_sampling_correction",
    "vllm_importance_sampling_mode",
)
"""Attributes of a constructed `GRPOTrainer` that the core reads or writes."""

GRPO_CLASS_ATTRIBUTES = ("_tag_names", "_name", "_paper")
"""Class attributes of `GRPOTrainer` that a subclass sets for TRL's model card (tags, method name, citation)."""

VLLM_ATTRIBUTES = ("_llm_weights_sleeping", "mode", "enable_sleep_mode", "llm", "vllm_client")
"""Attributes of TRL's `VLLMGeneration` that `vllm_cpu.CPUVLLMGeneration` reads or writes (the client's private
`_post` too)."""


def _hook_problems(cls: type, hooks: dict[str, tuple[str, ...]]) -> list[str]:
    problems = []
    for name, params in hooks.items():
        method = getattr(cls, name, None)
        if method is None:
            problems.append(f"{cls.__name__}.{name} is missing")
            continue
        missing = [p for p in params if p not in inspect.signature(method).parameters]
        if missing:
            problems.append(f"{cls.__name__}.{name} has no parameter(s) {missing}")
    return problems


def _check_trl() -> None:
    installed = Version(trl.__version__)
    problems = _hook_problems(GRPOTrainer, GRPO_HOOKS) + _hook_problems(VLLMGeneration, VLLM_HOOKS)
    if problems:
        raise ImportError(
            f"codapo-trl supports TRL {_RANGE} (tested with {TESTED_TRL}); the installed TRL {installed} changed the "
            f"private hooks it builds on: {'; '.join(problems)}. Install a supported version, e.g. "
            f"`pip install 'trl{_RANGE}'`."
        )
    if not SUPPORTED_TRL[0] <= Version(installed.base_version) < SUPPORTED_TRL[1]:
        warnings.warn(
            f"codapo-trl supports TRL {_RANGE} (tested with {TESTED_TRL}), found {installed}: its private hooks are "
            "present, but their behaviour may differ. Install a supported version, e.g. "
            f"`pip install 'trl{_RANGE}'`.",
            stacklevel=2,
        )


_check_trl()


def check_trainer_attributes(trainer: GRPOTrainer) -> None:
    """Raise a clear error when a constructed trainer lacks an attribute of [`GRPO_ATTRIBUTES`] or
    [`GRPO_CLASS_ATTRIBUTES`]."""
    missing = [name for name in GRPO_ATTRIBUTES + GRPO_CLASS_ATTRIBUTES if not hasattr(trainer, name)]
    if missing:
        raise RuntimeError(
            f"{type(trainer).__name__} needs the GRPOTrainer attributes {missing}, which this TRL "
            f"({trl.__version__}) does not set. codapo-trl supports TRL {_RANGE} (tested with {TESTED_TRL})."
        )


# ---------------------------------------------------------------------------------------- GRPOTrainer's attributes
def micro_step(trainer: GRPOTrainer) -> int:
    """TRL's micro-step counter (it counts `training_step` calls; TRL restarts it at 0 on resume)."""
    return trainer._step


def set_micro_step(trainer: GRPOTrainer, step: int) -> None:
    trainer._step = step


def buffered_inputs(trainer: GRPOTrainer) -> list[dict[str, Any]] | None:
    """TRL's buffer: the current generation batch's chunks, one per step of `steps_per_generation`."""
    return trainer._buffered_inputs


def set_buffered_inputs(trainer: GRPOTrainer, chunks: list[dict[str, Any]] | None) -> None:
    trainer._buffered_inputs = chunks


def train_metrics(trainer: GRPOTrainer) -> defaultdict[str, list]:
    """The training metrics TRL averages into the next log: `{name: [value, ...]}`."""
    return trainer._metrics["train"]


@dataclass
class CapturedLogs:
    """The training metrics and completion logs written while [`separate_logs`] was active."""

    metrics: defaultdict[str, list] = field(default_factory=lambda: defaultdict(list))
    logs: dict[str, Any] = field(default_factory=dict)


def _empty_like(logs: dict[str, Any]) -> dict[str, Any]:
    """An empty copy of TRL's `_logs` structure (dicts of bounded deques), keeping each deque's `maxlen`."""
    empty = {}
    for key, value in logs.items():
        if isinstance(value, defaultdict):
            empty[key] = defaultdict(value.default_factory)
        elif isinstance(value, deque):
            empty[key] = deque(maxlen=value.maxlen)
        else:
            empty[key] = copy.copy(value)
    return empty


@contextlib.contextmanager
def separate_logs(trainer: GRPOTrainer) -> Iterator[CapturedLogs]:
    """Route the trainer's training metrics and completion logs into a fresh [`CapturedLogs`] while the block runs
    (e.g. a batch generated now and trained on later), then restore the trainer's own."""
    saved_metrics, saved_logs = trainer._metrics["train"], trainer._logs
    captured = CapturedLogs(logs=_empty_like(saved_logs))
    trainer._metrics["train"], trainer._logs = captured.metrics, captured.logs
    try:
        yield captured
    finally:
        trainer._metrics["train"], trainer._logs = saved_metrics, saved_logs


def plain_logs(logs: dict[str, Any]) -> dict[str, Any]:
    """TRL's `_logs` structure as plain dicts and lists (picklable into a checkpoint)."""
    return {k: {c: list(e) for c, e in v.items()} if isinstance(v, dict) else list(v) for k, v in logs.items()}


def extend_logs(trainer: GRPOTrainer, logs: dict[str, Any]) -> None:
    """Append captured [`plain_logs`] to the trainer's completion logs."""
    target = trainer._logs
    for key, value in logs.items():
        if isinstance(value, dict):
            for column, entries in value.items():
                target[key][column].extend(entries)
        else:
            target[key].extend(value)


# ---------------------------------------------------------------------------------------- the training sampler
class EpochRepeatSampler(RepeatSampler):
    """TRL's `RepeatSampler` with `set_epoch`, so that a run resumed in a later epoch draws that epoch's order.

    TRL's sampler draws each epoch's order from one generator, seeded once at construction, when its iteration
    starts; it has no `set_epoch`, so a resumed process (a fresh sampler) draws the first epoch's order again for
    whatever epoch it resumes in. This subclass draws the same orders in the same sequence when iterated epoch after
    epoch (an uninterrupted run is unchanged, bit for bit), and when the epoch set by `set_epoch` (the Trainer loop
    sets it before every epoch, resumed or not) is not the next one its generator holds, it re-seeds the generator
    and draws the orders of the epochs before it first: epoch `e`'s order is a function of `seed` and `e` alone.
    Every process builds it with the same seed, so all agree. Without `shuffle` or without a seed it is TRL's sampler.

    It takes `RepeatSampler`'s arguments; [`from_sampler`] builds one from a TRL sampler.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.epoch = 0  # the epoch the next iteration draws
        self._drawn = 0  # epochs' orders drawn from the generator since it was seeded

    @classmethod
    def from_sampler(cls, sampler: RepeatSampler, repeat_factor: int = 1) -> EpochRepeatSampler:
        """The same sampler as TRL's `sampler` (its dataset, repeats, batch size, shuffle and seed), with each
        generation batch's `repeat_count` multiplied by `repeat_factor`."""
        if type(sampler) is not RepeatSampler:
            raise TypeError(
                f"Expected TRL's RepeatSampler from GRPOTrainer._get_train_sampler, got {type(sampler).__name__}: "
                f"this TRL ({trl.__version__}) builds its sampler differently. codapo-trl supports TRL {_RANGE}."
            )
        return cls(
            data_source=sampler.data_source,
            mini_repeat_count=sampler.mini_repeat_count,
            batch_size=sampler.batch_size,
            repeat_count=sampler.repeat_count * repeat_factor,
            shuffle=sampler.shuffle,
            seed=sampler.seed,
        )

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration draw epoch `epoch`'s order (counted from 0)."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        if self.shuffle and self.seed is not None and self._drawn != self.epoch:
            self.generator.manual_seed(self.seed)
            for _ in range(self.epoch):
                # TRL's iteration draws its epoch's whole order before yielding the first index
                next(super().__iter__(), None)
            self._drawn = self.epoch
        self.epoch += 1
        self._drawn += 1
        yield from super().__iter__()


# ---------------------------------------------------------------------------------------- vLLM
@contextlib.contextmanager
def vllm_generation_class(cls: type[VLLMGeneration]) -> Iterator[None]:
    """Make `GRPOTrainer.__init__` build its vLLM backend from `cls` while the block runs (TRL's module global)."""
    original = _trl_grpo_trainer.VLLMGeneration
    _trl_grpo_trainer.VLLMGeneration = cls
    try:
        yield
    finally:
        _trl_grpo_trainer.VLLMGeneration = original


def vllm_client_class() -> type:
    """TRL's `VLLMClient`, as `VLLMGeneration` builds it (looked up at call time, so a patched one is used)."""
    return _trl_vllm_generation.VLLMClient


def set_weights_awake(generation: VLLMGeneration) -> None:
    """Tell TRL's `VLLMGeneration` that the engine's weights were woken up (it wakes them before generating)."""
    generation._llm_weights_sleeping = False


def post_to_vllm_server(client: Any, url: str, json: dict[str, Any]) -> Any:
    """A POST through TRL's `VLLMClient` (its session, retries and error handling)."""
    return client._post(url, json=json)
