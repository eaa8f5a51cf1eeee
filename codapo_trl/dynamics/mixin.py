"""`DynamicsMixin`: live training-dynamics metrics for any TRL `GRPOTrainer` (and what CoDaPO builds on).

Mixed in before `GRPOTrainer`, it adds, with no extra forward pass:

- the sampled tokens' log-probs, recorded while `transformers` generates (vLLM and `rollout_func` return them);
- per-group statistics of every generated batch, on tensors gathered from all processes: confidence (geometric-mean
  token probability), difficulty (error rate), loss tokens (`GroupStats`);
- per-difficulty-bin metrics under `dynamics/` (the paper's Section 3), accumulated over an update's micro-batches
  from the forward pass TRL does for the loss;
- budget counters `budget/generated_tokens` and `budget/unique_prompts`;
- optionally a JSONL log with one row per question per update, written by the main process only.

`GRPODynamicsTrainer` is TRL's `GRPOTrainer` with the mixin. [`CoDaPOTrainer`] builds on the mixin through the
mixin's own hooks (listed in the class docstring) and overrides none of the TRL hooks the mixin overrides, so every
`super()` call below lands in TRL.

Length: about 635 lines, one class: its TRL hooks share per-batch state (the capture, the streaks, the recorder's
trust decision), and splitting them would spread one batch's bookkeeping over several modules.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from accelerate.utils import gather, gather_object, is_peft_model
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer

from .. import _trl_compat as compat
from .. import coda
from .._trl_compat import disable_gradient_checkpointing
from ..console import use_progress_line
from ..correctness import CorrectnessSpec, declared_kind, read_correctness, resolve_correctness
from ..logprob_recorder import record_sampled_logprobs
from ..rewards import check_reward_columns
from ..user_warnings import warnings_at_user_line
from ..vllm_cpu import CPUVLLMMixin
from .bins import bin_sums, summarize_bins, token_update_weights
from .groups import (
    ADVANTAGES_KEY,
    CORRECTNESS_KEY,
    DIFFICULTY_KEY,
    IS_MASK_MODES,
    LOG_CONFIDENCE_KEY,
    LOSS_VALUE_KEY,
    GroupStats,
    group_stats,
    placeholder_logps_reason,
    trained_token_mask,
)
from .question_log import append_lines, prompt_digest, question_id, question_log_lines
from .streaks import STALL_BATCHES, BatchStreak


logger = logging.getLogger(__name__)

STATE_FILE = "dynamics_state-rank{rank}.pt"
REWARDS_PER_FUNC_KEY = "dynamics_rewards_per_func"
"""Output key of the batch's rewards as TRL computed them (all processes' rollouts x reward functions), from
[`DynamicsMixin._scored_batch`] to [`DynamicsMixin._annotate_groups`], which takes it out."""
MAX_UNDEFINED_BATCHES = STALL_BATCHES
"""Consecutive batches with no defined correctness after which CoDaPO stops with an error (its correctness reward
scores nothing it is given: a missing column, or a task it does not grade; it would train on nothing)."""

# Keys of TRL's generation output that the policy forward pass needs besides the token ids (multimodal models).
_FORWARD_KEYS = (
    "pixel_values",
    "image_grid_thw",
    "num_images",
    "pixel_attention_mask",
    "spatial_shapes",
    "num_tiles",
    "image_sizes",
    "token_type_ids",
    "mm_token_type_ids",
    "image_position_ids",
)


@dataclass
class BudgetState:
    generated_tokens: int = 0
    seen_prompts: set[str] = field(default_factory=set)


@dataclass
class DynamicsOptions:
    """Defaults of [`DynamicsMixin`]'s constructor arguments, provided by the trainer (see `_dynamics_options_default`).

    Attributes:
        log_dynamics (`bool`): log the per-difficulty-bin metrics.
        question_log (`str` or `None`): path of the per-question JSONL log (relative to `output_dir`), or none.
        correctness_reward (`str`, `list[str]` or `None`): the reward function(s) that score correctness (`None`: the
            only reward function, or the only known verifier; see `codapo_trl.correctness`).
        correctness_kind (`str` or `None`): `"binary"` or `"pass_rate"` for every correctness reward (`None`: each
            one's own declaration, else binary).
        correctness_threshold (`float` or `None`): a score `>= threshold` counts as correct.
        option_prefix (`str`): prefix of the option names (`correctness_reward`, ...) quoted in error messages.
    """

    log_dynamics: bool = True
    question_log: str | None = None
    correctness_reward: str | list[str] | None = None
    correctness_kind: str | None = None
    correctness_threshold: float | None = None
    option_prefix: str = ""


@dataclass
class _Capture:
    """What TRL computes inside one call and does not return, kept by the TRL hooks overridden below while a
    [`DynamicsMixin._capturing`] block runs (and read in that block only)."""

    rewards_per_func: torch.Tensor | None = None  # `_calculate_rewards`: all processes' rollouts x reward functions
    untrusted_recording: str | None = None  # `_generate_single_turn`: why recorded log-probs cannot be used
    training_logps: torch.Tensor | None = None  # `_get_per_token_logps_and_entropies` under grad: the loss's forward


class DynamicsMixin:
    """Training-dynamics bookkeeping for a `GRPOTrainer` subclass (mix it in before `GRPOTrainer`).

    Args:
        log_dynamics (`bool`, *optional*):
            Log the per-difficulty-bin metrics under `dynamics/`. Default: `DynamicsOptions.log_dynamics` of
            `_dynamics_options_default()` (`True`; CoDaPOTrainer: the config's `codapo_dynamics`).
        question_log (`str`, *optional*):
            Path of a JSONL file with one row per question per update (relative paths are under `output_dir`).
            Default: no file (CoDaPOTrainer: the config's `codapo_question_log`).
        correctness_reward (`str` or `list[str]`, *optional*):
            Name of the reward function that scores correctness, or one name per task for multi-task data. Default:
            the only reward function, or the only known verifier (CoDaPOTrainer: the config's
            `codapo_correctness_reward`). When correctness only feeds the logged metrics and several rewards leave
            it in doubt, the first reward function is read, with a warning.
        correctness_kind (`str`, *optional*), correctness_threshold (`float`, *optional*):
            The correctness rewards' kind (`"binary"`, `"pass_rate"`) or threshold; default: each reward's own
            declaration, else binary (CoDaPOTrainer: `codapo_correctness_kind`, `codapo_correctness_threshold`).

    TRL hooks overridden here (each calls `super()`, which is TRL's `GRPOTrainer`; named in `_trl_compat`):

    - `_generate_and_score_completions`: in training, [`_training_batch`] (below), else TRL's batch as it is;
    - `_calculate_rewards`, `_generate_single_turn`, `_get_per_token_logps_and_entropies`: keep what TRL computes and
      does not return, in the active [`_Capture`] only; `_generate`: counts generated tokens;
    - `_compute_loss`: TRL's loss on [`_loss_inputs`]`(inputs)`, then the per-bin metrics from its forward pass;
    - `_save_checkpoint`, `_load_optimizer_and_scheduler`: TRL's, then this mixin's per-rank state, then the
      subclass's ([`_save_method_state`], [`_load_method_state`]);
    - `_get_train_sampler`: TRL's sampler as an `EpochRepeatSampler` (`_trl_compat`), which the Trainer loop sets to
      each epoch, so that a run resumed in a later epoch draws that epoch's order; each generation batch is handed
      to the loop [`_phases_per_batch`] times.

    Hooks a subclass overrides instead (the defaults are plain GRPO's): [`_training_batch`] (the batch trained on),
    [`_loss_inputs`], [`_update_metrics`] (metrics logged once per update), [`_phases_per_batch`],
    [`_save_method_state`] / [`_load_method_state`], [`_dynamics_options_default`], [`_correctness_drives_training`].
    The data of a batch travels explicitly: [`_scored_batch`] returns TRL's output with its [`GroupStats`], and the
    per-rollout columns the loss needs are in the output under the keys of `dynamics.groups` (`*_KEY`).
    """

    def __init__(
        self,
        *args,
        log_dynamics: bool | None = None,
        question_log: str | None = None,
        correctness_reward: str | list[str] | None = None,
        correctness_kind: str | None = None,
        correctness_threshold: float | None = None,
        **kwargs,
    ):
        with warnings_at_user_line():  # TRL's warnings would point at this line
            super().__init__(*args, **kwargs)
        use_progress_line(self)
        compat.check_trainer_attributes(self)
        check_reward_columns(self.reward_funcs, self.train_dataset, self.eval_dataset)
        options = self._dynamics_options_default()
        if log_dynamics is not None:
            options.log_dynamics = log_dynamics
        if question_log is not None:
            options.question_log = question_log
        if correctness_reward is not None:
            options.correctness_reward = correctness_reward
        if correctness_kind is not None:
            options.correctness_kind = correctness_kind
        if correctness_threshold is not None:
            options.correctness_threshold = correctness_threshold
        self._dynamics_options = options
        self.log_dynamics = options.log_dynamics
        self.question_log_path = None
        if options.question_log:
            self.question_log_path = os.path.join(self.args.output_dir, options.question_log)
        self.correctness_spec = self._resolve_correctness(options)
        self._budget = BudgetState()
        self._capture: _Capture | None = None
        self._bin_sums: torch.Tensor | None = None
        self._warned_untrusted_recording = False
        self._warned_placeholder_logps = False
        self._warned_correctness_kind = False
        self._undefined_streak = BatchStreak()  # consecutive batches whose correctness is undefined for every rollout
        self._score_range: tuple[float, float] | None = None  # the correctness rewards' scores in the last batch

    # ------------------------------------------------------------------ hooks for subclasses
    def _dynamics_options_default(self) -> DynamicsOptions:
        """The defaults of the constructor's `log_dynamics`, `question_log` and `correctness_reward` (called once
        `self.args` is set; a subclass reads them from its own config)."""
        return DynamicsOptions()

    def _training_batch(self, inputs: list[dict]) -> dict[str, Any]:
        """The batch to train on for this generation step (plain GRPO: TRL's, with the dynamics columns).

        Overridden by CoDaPOTrainer (values, selection, the resampled batch S), which builds its batches from
        [`_scored_batch`].
        """
        output, stats = self._scored_batch(inputs)
        self._log_questions(inputs, stats, phase=0, step=self.state.global_step + 1)
        return output

    def _loss_inputs(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """The micro-batch TRL's loss (and the per-bin metrics) are computed on: `inputs` as they are."""
        return inputs

    def _update_metrics(self) -> dict[str, float]:
        """Metrics logged once per optimizer update, before the dynamics' own (none here)."""
        return {}

    @property
    def _phases_per_batch(self) -> int:
        """How many times the sampler hands each generation batch to the Trainer loop, one phase of
        `steps_per_generation x num_iterations` micro-steps each (plain GRPO: 1; CoDaPO: B's phase, then S's)."""
        return 1

    def _save_method_state(self, trial) -> None:
        """Save the subclass's per-rank state into the checkpoint being written (with [`_save_rank_state`])."""

    def _load_method_state(self, checkpoint: str) -> None:
        """Restore the subclass's per-rank state from `checkpoint` (with [`_load_rank_state`])."""

    @property
    def _correctness_drives_training(self) -> bool:
        """Whether correctness changes the update (CoDaPO's values and selection), not only the logged metrics."""
        return False

    @property
    def correctness_reward_name(self) -> str:
        """The name(s) of the reward function(s) that score correctness (difficulty, the bins' correct/incorrect),
        comma-separated when there are several (multi-task data)."""
        return ", ".join(self.correctness_spec.names)

    def _resolve_correctness(self, options: DynamicsOptions) -> CorrectnessSpec:
        """`codapo_trl.correctness.resolve_correctness` on this trainer's rewards. Where correctness only feeds the
        logged metrics, a doubt about which reward it is is not an error: the first reward function is read, with a
        warning (a plain GRPO run is never stopped for its metrics)."""
        try:
            return resolve_correctness(
                self.reward_funcs,
                self.reward_func_names,
                options.correctness_reward,
                options.correctness_kind,
                options.correctness_threshold,
                prefix=options.option_prefix,
            )
        except ValueError as error:
            if self._correctness_drives_training or options.correctness_reward is not None:
                raise
            if not self.reward_func_names:
                raise
            declared = declared_kind(self.reward_funcs[0]) or ("pass_rate", None)
            logger.warning("%s The dynamics metrics read the first reward function meanwhile.", error)
            return CorrectnessSpec((0,), (self.reward_func_names[0],), (declared[0],), (declared[1],))

    # ------------------------------------------------------------------ what TRL computes and does not return
    @contextlib.contextmanager
    def _capturing(self) -> Iterator[_Capture]:
        """A fresh [`_Capture`] that the TRL hooks below fill while the block runs."""
        outer, self._capture = self._capture, _Capture()
        try:
            yield self._capture
        finally:
            self._capture = outer

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if self._capture is not None:
            self._capture.rewards_per_func = rewards_per_func
        return rewards_per_func

    _budget: BudgetState | None = None  # set in `__init__`; a trainer built without it (TRL's tests do) counts nothing

    def _generate(self, prompts: list):
        result = super()._generate(prompts)
        if self.model.training and self._budget is not None:
            local = torch.tensor([sum(len(ids) for ids in result[1])], device=self.accelerator.device)
            self._budget.generated_tokens += int(gather(local).sum().item())
        return result

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        args = (prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
        if not (self.records_generation_logps and self.model.training):
            return super()._generate_single_turn(*args)
        # TRL's `model.generate` path returns no log-probs: record them while it generates, as vLLM returns them.
        # They reach the batch as `sampling_per_token_logps`. A recording that cannot be trusted (see
        # `logprob_recorder.py`) is returned as NaN, so that a tool loop can still concatenate the turns, and the whole
        # batch then falls back to a forward pass (`_drop_untrusted_recording`).
        model = self.accelerator.unwrap_model(self.model_wrapped)
        if is_peft_model(model):
            model = model.get_base_model()
        with record_sampled_logprobs(model, self.temperature) as recorder:
            completion_ids, logprobs = super()._generate_single_turn(*args)
        if logprobs is None:
            logprobs = recorder.per_row(completion_ids)
            if logprobs is None:
                if self._capture is not None:
                    self._capture.untrusted_recording = recorder.reason
                logprobs = [[float("nan")] * len(ids) for ids in completion_ids]
        return completion_ids, logprobs

    def _drop_untrusted_recording(self, output: dict[str, Any], reason: str | None) -> None:
        """Remove recorded log-probs from `output` when any process's recording of this batch cannot be trusted
        (`reason` is this process's; the decision is identical on every process, since the fallback forward pass is
        collective under ZeRO-3)."""
        if not (self.records_generation_logps and self.model.training):
            return
        flag = torch.tensor([0.0 if reason is None else 1.0], device=self.accelerator.device)
        untrusted = bool(gather(flag).sum().item() > 0)
        compat.train_metrics(self)["generation/recorded_logps_fallback"].append(float(untrusted))
        if not untrusted:
            return
        output.pop("sampling_per_token_logps", None)
        if not self._warned_untrusted_recording:
            self._warned_untrusted_recording = True
            logger.warning(
                "The sampled tokens' log-probs could not be recorded while generating (%s): confidence and S's "
                "behaviour log-probs are computed by a forward pass of the policy instead (one extra forward per "
                "batch). Logged as generation/recorded_logps_fallback.",
                reason or "on another process",
            )

    def _drop_placeholder_logps(self, output: dict[str, Any]) -> None:
        """Remove a generator's log-probs (a `rollout_func`'s, vLLM's) from `output` when any process's cannot be
        the sampled tokens' ([`placeholder_logps_reason`]): confidence, hence the values and the selection, is then
        computed by a forward pass instead, decided alike on every process."""
        logps = output.get("sampling_per_token_logps")
        if self.records_generation_logps or not self.model.training or logps is None:
            return
        reason = placeholder_logps_reason(logps, self._policy_token_mask(output))
        flags = gather(torch.tensor([0.0 if reason is None else 1.0], device=self.accelerator.device))
        if not bool(flags.sum().item() > 0):
            return
        output.pop("sampling_per_token_logps")
        if not self._warned_placeholder_logps:
            self._warned_placeholder_logps = True
            source = "vLLM"
            if self.rollout_func is not None:
                source = f"The rollout_func {getattr(self.rollout_func, '__name__', repr(self.rollout_func))!r}"
            logger.warning(
                "%s returned per-token log-probs that cannot be the sampled tokens' (%s): placeholders would make "
                "every confidence c meaningless (1 for all-zero log-probs), and with it the values and S's selection. "
                "Confidence is computed by a forward pass of the policy instead, for this batch and every such batch "
                "(one extra forward each); return the generator's real log-probs in 'logprobs' to avoid it.",
                source,
                reason or "on another process",
            )

    def _policy_token_mask(self, output: dict[str, Any]) -> torch.Tensor:
        """The policy's own completion tokens: `completion_mask` without tool or environment output."""
        mask = output["completion_mask"]
        return mask if output.get("tool_mask") is None else mask * output["tool_mask"]

    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        result = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        if torch.is_grad_enabled() and self._capture is not None:  # the loss's forward, not a no-grad one
            self._capture.training_logps = result[0].detach()
        return result

    # ------------------------------------------------------------------ per-group statistics of a batch
    def _policy_logps(self, output: dict[str, Any]) -> torch.Tensor:
        """One no-grad forward pass of the current policy over the batch's completions (TRL's own call)."""
        input_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        attention_mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        extra = {key: output[key] for key in _FORWARD_KEYS if output.get(key) is not None}
        with torch.no_grad(), disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
            logps, _, _ = self._get_per_token_logps_and_entropies(
                self.model,
                input_ids,
                attention_mask,
                output["completion_ids"].size(1),
                batch_size=self.args.per_device_train_batch_size,
                **extra,
            )
        return logps

    @property
    def records_generation_logps(self) -> bool:
        """Whether training rollouts come from TRL's `model.generate` in this process, whose sampled-token log-probs
        are recorded (so they are this policy's own log-probs, same weights and dtype as the loss's forward)."""
        return not (self.use_vllm or self.use_transformers_continuous_batching or self.rollout_func is not None)

    @property
    def recording_matches_training(self) -> bool:
        """Whether recorded log-probs equal the loss's forward to float32 precision: the same model, in float32
        without autocast. In bf16/fp16 the incremental decoding kernels round differently from the training forward,
        by an amount that depends on the processor (on the tiny test model 4.8e-7 on one CPU, 5.2e-3 on another; the
        tested bound is 2^-5 per token), so a ratio must not divide by recorded numbers."""
        if not self.records_generation_logps or self.args.bf16 or self.args.fp16:
            return False
        return all(p.dtype == torch.float32 for p in self.model.parameters() if p.is_floating_point())

    def _behaviour_logps(self, output: dict[str, Any]) -> torch.Tensor:
        """Behaviour-policy log-probs: the generator's (recorded, vLLM, rollout_func), else TRL's old ones, else
        a forward pass (only with transformers' continuous batching, which returns none)."""
        for key in ("sampling_per_token_logps", "old_per_token_logps"):
            if output.get(key) is not None:
                return output[key]
        return self._policy_logps(output)

    def _get_train_sampler(self, dataset=None):
        return compat.EpochRepeatSampler.from_sampler(super()._get_train_sampler(dataset), self._phases_per_batch)

    def _generate_and_score_completions(self, inputs):
        if not self.model.training:
            return super()._generate_and_score_completions(inputs)
        return self._training_batch(inputs)

    def _scored_batch(self, inputs: list[dict]) -> tuple[dict[str, Any], GroupStats]:
        """TRL's generated and scored batch for `inputs`, with the dynamics columns (`*_KEY`), and its statistics."""
        with self._capturing() as captured:
            output = super()._generate_and_score_completions(inputs)
        self._drop_untrusted_recording(output, captured.untrusted_recording)
        self._drop_placeholder_logps(output)
        output[REWARDS_PER_FUNC_KEY] = captured.rewards_per_func
        stats = self._annotate_groups(output)
        digests = gather_object([prompt_digest(row.get("prompt")) for row in inputs])
        self._budget.seen_prompts.update(digests)
        return output, stats

    def _annotate_groups(self, output: dict[str, Any]) -> GroupStats:
        """Compute the batch's `GroupStats` from `output` and the rewards TRL computed for it (which it takes out of
        `output[REWARDS_PER_FUNC_KEY]`), and add the per-rollout columns (this process's rows) to `output`:
        `LOG_CONFIDENCE_KEY`, `CORRECTNESS_KEY`, `DIFFICULTY_KEY`, `ADVANTAGES_KEY` (as TRL computed them, before
        any weighting)."""
        rewards_per_func = output.pop(REWARDS_PER_FUNC_KEY)
        num_generations = self.num_generations
        mask = self._policy_token_mask(output)
        log_confidence = gather(coda.trajectory_log_confidence(self._behaviour_logps(output), mask))
        masks_rollouts = self.use_vllm and self.vllm_importance_sampling_correction
        masks_rollouts = masks_rollouts and self.vllm_importance_sampling_mode in IS_MASK_MODES
        trained = trained_token_mask(mask, output.get("importance_sampling_ratio") if masks_rollouts else None)
        trained_tokens = gather(trained.sum(-1).float())
        correctness = self._check_correctness(rewards_per_func)
        stats = group_stats(log_confidence, correctness, trained_tokens, num_generations)
        local = self._process_slice(output)
        output[LOG_CONFIDENCE_KEY] = log_confidence[local]
        output[CORRECTNESS_KEY] = correctness[local]
        output[DIFFICULTY_KEY] = stats.difficulty.repeat_interleave(num_generations)[local]
        output[ADVANTAGES_KEY] = output["advantages"].clone()
        return stats

    def _check_correctness(self, rewards_per_func: torch.Tensor) -> torch.Tensor:
        """The correctness of a batch's rollouts (all processes), read by `codapo_trl.correctness.read_correctness`.

        A value that breaks its reward's declared kind (or a row scored by two correctness rewards) stops the run when
        correctness drives training; for the logged dynamics alone it is warned about once and read clamped to
        [0, 1]. When the correctness reward was picked (the only known verifier among several) and leaves rows
        unscored that another reward scored, the pick was in doubt after all: the run stops with the fix. A batch
        whose correctness is undefined for every rollout is counted (`rewards/correctness_undefined_frac`) and warned
        about; after `MAX_UNDEFINED_BATCHES` such batches in a row, training that depends on correctness stops.
        """
        spec, prefix = self.correctness_spec, self._dynamics_options.option_prefix
        reading = read_correctness(rewards_per_func, spec, prefix=prefix)
        correctness = reading.correctness
        if reading.problem is not None:
            if self._correctness_drives_training:
                raise ValueError(reading.problem)
            if not self._warned_correctness_kind:
                self._warned_correctness_kind = True
                logger.warning("%s The dynamics metrics read it clamped to [0, 1].", reading.problem)
        if spec.picked and reading.unowned and self._correctness_drives_training:
            others = [n for n in self.reward_func_names if n not in spec.names]
            raise ValueError(
                f"The correctness reward {spec.names[0]!r} (picked as the only known verifier) returned None for "
                f"{reading.unowned} rollout(s) that {others} scored: set {prefix}correctness_reward to "
                f"{spec.names[0]!r} (those rows then carry no value), or to a list with each task's correctness "
                "reward for multi-task data."
            )
        self._score_range = reading.score_range
        defined = ~torch.isnan(correctness)
        undefined = 1.0 - defined.float().mean().item()
        compat.train_metrics(self)["rewards/correctness_undefined_frac"].append(undefined)
        if not self._undefined_streak.update(not bool(defined.any())):
            return correctness
        names = list(spec.names)
        others = [n for n in self.reward_func_names if n not in names]
        scored = others and not torch.isnan(rewards_per_func).all().item()
        logger.warning(
            "The correctness reward(s) %s returned None for every rollout of this batch (%d batch(es) in a row)%s: "
            "every question's difficulty, hence its value, is undefined and it carries no weight.",
            names,
            self._undefined_streak.length,
            f", while {others} scored it" if scored else "",
        )
        if self._correctness_drives_training and self._undefined_streak.length >= MAX_UNDEFINED_BATCHES:
            raise RuntimeError(
                f"The correctness reward(s) {names} returned None for every rollout of {self._undefined_streak.length} "
                "batches in a row, so CoDaPO has trained on nothing since. Check that the dataset has the "
                f"columns they need (e.g. the reference answer), or set {prefix}correctness_reward to the reward "
                "function(s) that score correctness."
            )
        return correctness

    def _process_slice(self, output: dict[str, Any]) -> slice:
        num_local = output["advantages"].size(0)
        start = self.accelerator.process_index * num_local
        return slice(start, start + num_local)

    # ------------------------------------------------------------------ per-bin metrics, from the loss's forward
    def _compute_loss(self, model, inputs):
        inputs = self._loss_inputs(inputs)
        with self._capturing() as captured:
            loss = super()._compute_loss(model, inputs)
        if self.model.training:
            if self.log_dynamics and DIFFICULTY_KEY in inputs and captured.training_logps is not None:
                self._accumulate_bins(inputs, captured.training_logps)
            if self.accelerator.sync_gradients:  # the last micro-batch of this update
                self._flush_update_metrics()
        return loss

    def _accumulate_bins(self, inputs: dict[str, Any], logps: torch.Tensor) -> None:
        old = inputs.get("old_per_token_logps")
        mask = self._policy_token_mask(inputs)
        weights, clipped = token_update_weights(
            logps,
            logps if old is None else old,
            inputs[ADVANTAGES_KEY],
            inputs.get(LOSS_VALUE_KEY),
            self.epsilon_low,
            self.epsilon_high,
        )
        sums = bin_sums(
            inputs[DIFFICULTY_KEY],
            inputs[CORRECTNESS_KEY],
            torch.exp(inputs[LOG_CONFIDENCE_KEY]),
            inputs[ADVANTAGES_KEY],
            weights,
            clipped,
            mask,
        )
        self._bin_sums = sums if self._bin_sums is None else self._bin_sums + sums

    def _flush_update_metrics(self) -> None:
        metrics = compat.train_metrics(self)
        for key, value in self._update_metrics().items():
            metrics[key].append(value)
        if self._bin_sums is not None:
            totals = self.accelerator.reduce(self._bin_sums, reduction="sum")
            self._bin_sums = None
            for key, value in summarize_bins(totals.cpu()).items():
                metrics[f"dynamics/{key}"].append(value)
        metrics["budget/generated_tokens"].append(float(self._budget.generated_tokens))
        metrics["budget/unique_prompts"].append(float(len(self._budget.seen_prompts)))

    # ------------------------------------------------------------------ per-question log
    def _log_questions(
        self,
        inputs: list[dict],
        stats: GroupStats,
        phase: int,
        step: int,
        values: torch.Tensor | None = None,
        selected: set[int] | None = None,
    ) -> None:
        """Append one JSON line per question of this batch to the question log (main process writes)."""
        if self.question_log_path is None:
            return
        num_generations = self.num_generations
        keys = gather_object([(question_id(row), row.get("level")) for row in inputs])[::num_generations]
        if not self.accelerator.is_main_process:
            return
        text = question_log_lines(keys, stats, num_generations, phase, step, values, selected)
        append_lines(self.question_log_path, text)

    # ------------------------------------------------------------------ checkpoints
    def _save_rank_state(self, trial, name: str, payload: dict) -> None:
        """Write this process's `payload` into the checkpoint being saved, as `name` formatted with its rank."""
        directory = os.path.join(
            self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        )
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, name.format(rank=self.accelerator.process_index))
        torch.save(payload, path + ".tmp")
        os.replace(path + ".tmp", path)  # a crash mid-write never leaves a truncated state file

    def _load_rank_state(self, checkpoint: str, name: str) -> dict | None:
        """This process's payload saved by [`_save_rank_state`] in `checkpoint`, or `None` when there is none."""
        path = os.path.join(checkpoint, name.format(rank=self.accelerator.process_index))
        if not os.path.exists(path):
            return None
        return torch.load(path, weights_only=False, map_location="cpu")

    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        log = self.question_log_path
        payload = {
            "generated_tokens": self._budget.generated_tokens,
            "seen_prompts": sorted(self._budget.seen_prompts),
            "question_log_bytes": os.path.getsize(log) if log and os.path.exists(log) else 0,
        }
        self._save_rank_state(trial, STATE_FILE, payload)
        self._save_method_state(trial)

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is None:
            return
        self._load_dynamics_state(checkpoint)
        self._load_method_state(checkpoint)

    def _load_dynamics_state(self, checkpoint: str) -> None:
        payload = self._load_rank_state(checkpoint, STATE_FILE)
        if payload is None:
            logger.warning("No training-dynamics state in %s: budget counters restart from zero.", checkpoint)
            return
        self._budget = BudgetState(payload["generated_tokens"], set(payload["seen_prompts"]))
        log = self.question_log_path
        if log and self.accelerator.is_main_process and os.path.exists(log):
            # rows written after this checkpoint belong to updates that will be redone
            with open(log, "r+b") as f:
                f.truncate(min(payload["question_log_bytes"], os.path.getsize(log)))


class GRPODynamicsTrainer(CPUVLLMMixin, DynamicsMixin, GRPOTrainer):
    """TRL's [`~trl.GRPOTrainer`] plus the training-dynamics metrics (`dynamics/`, `budget/`) and the optional
    per-question log of [`DynamicsMixin`]; takes `GRPOTrainer`'s arguments plus `log_dynamics`, `question_log`
    and `correctness_reward`."""
