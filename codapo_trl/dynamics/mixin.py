"""`DynamicsMixin`: live training-dynamics metrics for any TRL `GRPOTrainer` (and what CoDaPO builds on).

Mixed in before `GRPOTrainer`, it adds, with no extra forward pass:

- the sampled tokens' log-probs, recorded while `transformers` generates (vLLM and `rollout_func` return them);
- per-group statistics of every generated batch, on tensors gathered from all processes: confidence (geometric-mean
  token probability), difficulty (error rate), loss tokens (`GroupStats`);
- per-difficulty-bin metrics under `dynamics/` (the paper's Section 3), accumulated over an update's micro-batches
  from the forward pass TRL does for the loss;
- budget counters `budget/generated_tokens` and `budget/unique_prompts`;
- optionally a JSONL log with one row per question per update, written by the main process only.

`GRPODynamicsTrainer` is TRL's `GRPOTrainer` with the mixin; [`CoDaPOTrainer`] uses it too.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

import torch
from accelerate.utils import gather, gather_object, is_peft_model
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer

from .. import _trl_compat as compat
from .. import coda
from .._trl_compat import disable_gradient_checkpointing
from ..logprob_recorder import record_sampled_logprobs
from ..rewards import check_reward_columns
from ..vllm_cpu import CPUVLLMMixin
from .bins import bin_sums, summarize_bins, token_update_weights
from .groups import IS_MASK_MODES, GroupStats, group_stats, trained_token_mask
from .question_log import append_lines, prompt_digest, question_id, question_log_lines


logger = logging.getLogger(__name__)

STATE_FILE = "dynamics_state-rank{rank}.pt"
MAX_UNDEFINED_BATCHES = 5
"""Consecutive batches with no defined correctness after which CoDaPO stops with an error."""

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


class DynamicsMixin:
    """Training-dynamics bookkeeping for a `GRPOTrainer` subclass (mix it in before `GRPOTrainer`).

    Args:
        log_dynamics (`bool`, *optional*):
            Log the per-difficulty-bin metrics under `dynamics/`. Default: the config's `codapo_dynamics` if it has
            one, else `True`.
        question_log (`str`, *optional*):
            Path of a JSONL file with one row per question per update (relative paths are under `output_dir`).
            Default: the config's `codapo_question_log` if it has one, else no file.
        correctness_reward (`str`, *optional*):
            Name of the reward function whose reward, in [0, 1], is correctness. Default: the config's
            `codapo_correctness_reward` if it has one, else the first reward function.
    """

    # CoDaPOTrainer writes the question log itself, once it knows the values and the selection.
    _logs_questions_at_generation = True

    def __init__(
        self,
        *args,
        log_dynamics: bool | None = None,
        question_log: str | None = None,
        correctness_reward: str | None = None,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        compat.check_trainer_attributes(self)
        check_reward_columns(self.reward_funcs, self.train_dataset, self.eval_dataset)
        config = self.args
        self.log_dynamics = getattr(config, "codapo_dynamics", True) if log_dynamics is None else log_dynamics
        question_log = getattr(config, "codapo_question_log", None) if question_log is None else question_log
        self.question_log_path = None
        if question_log:
            self.question_log_path = os.path.join(config.output_dir, question_log)
        name = getattr(config, "codapo_correctness_reward", None) if correctness_reward is None else correctness_reward
        self._correctness_index = self._resolve_correctness_reward(name)
        self._budget = BudgetState()
        self._group_stats: GroupStats | None = None
        self._last_rewards_per_func: torch.Tensor | None = None
        self._training_logps: torch.Tensor | None = None
        self._bin_sums: torch.Tensor | None = None
        self._untrusted_recording: str | None = None  # why this batch's recorded log-probs are not usable
        self._warned_untrusted_recording = False
        self._warned_correctness_range = False
        self._undefined_batches = 0  # consecutive batches whose correctness is undefined for every rollout

    def _resolve_correctness_reward(self, name: str | None) -> int:
        if name is None:
            return 0
        if name not in self.reward_func_names:
            raise ValueError(
                f"The correctness reward {name!r} is not one of the trainer's reward functions "
                f"{self.reward_func_names}. Set codapo_correctness_reward to the name of the reward that measures "
                "correctness."
            )
        return self.reward_func_names.index(name)

    # ------------------------------------------------------------------ what TRL computes, kept
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._last_rewards_per_func = rewards_per_func  # all processes' rollouts x reward functions
        return rewards_per_func

    def _generate(self, prompts: list):
        result = super()._generate(prompts)
        if self.model.training:
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
                self._untrusted_recording = recorder.reason
                logprobs = [[float("nan")] * len(ids) for ids in completion_ids]
        return completion_ids, logprobs

    def _drop_untrusted_recording(self, output: dict[str, Any]) -> None:
        """Remove recorded log-probs from `output` when any process's recording of this batch cannot be trusted
        (identical decision on every process, since the fallback forward pass is collective under ZeRO-3)."""
        reason, self._untrusted_recording = self._untrusted_recording, None
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

    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        result = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        if torch.is_grad_enabled():  # the loss's forward pass, not a no-grad one at generation
            self._training_logps = result[0].detach()
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
        without autocast. In bf16/fp16 the incremental decoding kernels round differently from the training forward
        (up to 4e-3 per token measured on the tiny test model), so a ratio must not divide by recorded numbers."""
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

    def _generate_and_score_completions(self, inputs):
        self._untrusted_recording = None
        output = super()._generate_and_score_completions(inputs)
        if not self.model.training:
            return output
        self._drop_untrusted_recording(output)
        self._group_stats = self._annotate_groups(output)
        digests = gather_object([prompt_digest(row.get("prompt")) for row in inputs])
        self._budget.seen_prompts.update(digests)
        if self._logs_questions_at_generation:
            self._log_questions(inputs, self._group_stats, phase=0, step=self.state.global_step + 1)
        return output

    def _annotate_groups(self, output: dict[str, Any]) -> GroupStats:
        """Compute the batch's `GroupStats` and add per-rollout columns (this process's rows) to `output`:
        `dynamics_log_confidence`, `dynamics_correctness`, `dynamics_difficulty`, `dynamics_advantages` (as TRL
        computed them, before any weighting)."""
        num_generations = self.num_generations
        mask = output["completion_mask"]
        if output.get("tool_mask") is not None:
            mask = mask * output["tool_mask"]
        log_confidence = gather(coda.trajectory_log_confidence(self._behaviour_logps(output), mask))
        masks_rollouts = self.use_vllm and self.vllm_importance_sampling_correction
        masks_rollouts = masks_rollouts and self.vllm_importance_sampling_mode in IS_MASK_MODES
        trained = trained_token_mask(mask, output.get("importance_sampling_ratio") if masks_rollouts else None)
        trained_tokens = gather(trained.sum(-1).float())
        correctness = self._check_correctness(self._last_rewards_per_func)
        stats = group_stats(log_confidence, correctness, trained_tokens, num_generations)
        local = self._process_slice(output)
        output["dynamics_log_confidence"] = log_confidence[local]
        output["dynamics_correctness"] = correctness[local]
        output["dynamics_difficulty"] = stats.difficulty.repeat_interleave(num_generations)[local]
        output["dynamics_advantages"] = output["advantages"].clone()
        return stats

    @property
    def _correctness_drives_training(self) -> bool:
        """Whether correctness changes the update (CoDaPO's values and selection), not only the logged metrics."""
        return False

    def _check_correctness(self, rewards_per_func: torch.Tensor) -> torch.Tensor:
        """The correctness column of a batch's rewards (all processes), checked.

        A value outside [0, 1] is a configuration error when correctness drives training (a {0, 2} reward would read
        as "all correct" once clamped), so it stops the run; for the logged dynamics alone it is clamped, with a
        warning. A batch whose correctness is undefined for every rollout is counted (`dynamics/correctness_
        undefined_frac`) and warned about; after `MAX_UNDEFINED_BATCHES` such batches in a row, training that
        depends on correctness stops (it would be training on nothing).
        """
        name = self.reward_func_names[self._correctness_index]
        correctness = rewards_per_func[:, self._correctness_index].float()
        defined = ~torch.isnan(correctness)
        outside = defined & ((correctness < 0) | (correctness > 1))
        if outside.any():
            bad = sorted({float(v) for v in correctness[outside].tolist()})[:5]
            message = (
                f"The correctness reward {name!r} returned {bad}, outside [0, 1]. Correctness must be a 0/1 score or "
                "a pass rate: rescale the reward, or name another reward function as codapo_correctness_reward."
            )
            if self._correctness_drives_training:
                raise ValueError(message)
            if not self._warned_correctness_range:
                self._warned_correctness_range = True
                logger.warning("%s The dynamics metrics clamp it to [0, 1].", message)
        undefined = 1.0 - defined.float().mean().item()
        compat.train_metrics(self)["rewards/correctness_undefined_frac"].append(undefined)
        if defined.any():
            self._undefined_batches = 0
        else:
            self._undefined_batches += 1
            others = [n for i, n in enumerate(self.reward_func_names) if i != self._correctness_index]
            scored = others and not torch.isnan(rewards_per_func).all().item()
            logger.warning(
                "The correctness reward %r returned None for every rollout of this batch (%d batch(es) in a row)%s: "
                "every question's difficulty, hence its value, is undefined and it carries no weight.",
                name,
                self._undefined_batches,
                f", while {others} scored it" if scored else "",
            )
            if self._correctness_drives_training and self._undefined_batches >= MAX_UNDEFINED_BATCHES:
                raise RuntimeError(
                    f"The correctness reward {name!r} returned None for every rollout of {self._undefined_batches} "
                    "batches in a row, so CoDaPO has trained on nothing since. Check that the dataset has the "
                    "columns this reward needs (e.g. the reference answer), or set codapo_correctness_reward to the "
                    "reward function that scores correctness."
                )
        return correctness.clamp(0.0, 1.0)

    def _process_slice(self, output: dict[str, Any]) -> slice:
        num_local = output["advantages"].size(0)
        start = self.accelerator.process_index * num_local
        return slice(start, start + num_local)

    # ------------------------------------------------------------------ per-bin metrics, from the loss's forward
    def _compute_loss(self, model, inputs):
        loss = super()._compute_loss(model, inputs)
        if self.model.training:
            if self.log_dynamics and "dynamics_difficulty" in inputs and self._training_logps is not None:
                self._accumulate_bins(inputs)
            if self.accelerator.sync_gradients:  # the last micro-batch of this update
                self._flush_update_metrics()
        return loss

    def _accumulate_bins(self, inputs: dict[str, Any]) -> None:
        logps, self._training_logps = self._training_logps, None
        old = inputs.get("old_per_token_logps")
        mask = inputs["completion_mask"]
        if inputs.get("tool_mask") is not None:
            mask = mask * inputs["tool_mask"]
        weights, clipped = token_update_weights(
            logps,
            logps if old is None else old,
            inputs["dynamics_advantages"],
            inputs.get("dynamics_value"),
            self.epsilon_low,
            self.epsilon_high,
        )
        sums = bin_sums(
            inputs["dynamics_difficulty"],
            inputs["dynamics_correctness"],
            torch.exp(inputs["dynamics_log_confidence"]),
            inputs["dynamics_advantages"],
            weights,
            clipped,
            mask,
        )
        self._bin_sums = sums if self._bin_sums is None else self._bin_sums + sums

    def _flush_update_metrics(self) -> None:
        metrics = compat.train_metrics(self)
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

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is None:
            return
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
