"""`CoDaPOTrainer`: TRL's `GRPOTrainer` with CoDaWeighting, CoDaSampling and CoDaLearning.

The method lives in `coda.py`; this module only connects it to TRL's hooks:

- `_calculate_rewards` keeps the rewards TRL gathered over all processes (they define correctness);
- `_generate_and_score_completions` is where, after TRL generated and scored a batch, the values are computed on
  global tensors, folded into the advantages, and (in phase B) the top-K questions are selected and, for
  `before_update`, S is generated at once from the same behaviour policy;
- `_get_train_sampler` hands every update batch to the Trainer loop twice, so that the loop itself takes the second
  (S) update: gradient accumulation, DeepSpeed boundaries, the LR schedule, `global_step`, logging and checkpoints
  all count both updates. The phase of an update is `global_step % 2`;
- `_save_checkpoint` / `_load_optimizer_and_scheduler` keep what a B/S pair needs across a resume.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import textwrap
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

import torch
from accelerate.utils import gather, gather_object, is_peft_model
from datasets import IterableDataset
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer
from trl.models.utils import disable_gradient_checkpointing
from trl.trainer.utils import RepeatSampler

from . import coda
from .config import CODAPO_LOSS_TYPES, CoDaPOConfig
from .generation import record_sampled_logprobs


logger = logging.getLogger(__name__)

PHASE_B, PHASE_S = 0, 1
STATE_FILE = "codapo_state-rank{rank}.pt"

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
class _PendingBatch:
    """S's generation output made before B's update (`before_update`), with the logs it produced, held until S."""

    output: dict[str, Any]
    metrics: dict[str, list[float]]
    logs: dict[str, Any]


@dataclass
class CoDaPOState:
    """What lives across the two updates of a CoDaPO step, and across a checkpoint.

    Attributes:
        selection (`list[dict]` or `None`): the dataset rows of S's questions, |B| entries (each selected question
            repeated), identical on every process.
        selection_step (`int`): `global_step` of the B update that made the selection.
        pending (`_PendingBatch` or `None`): this process's share of S's rollouts when they were generated before B's
            update.
        generated_tokens (`int`): completion tokens generated for training so far, over all processes.
        seen_prompts (`set[str]`): digests of the distinct prompts drawn so far.
    """

    selection: list[dict] | None = None
    selection_step: int = -1
    pending: _PendingBatch | None = None
    generated_tokens: int = 0
    seen_prompts: set[str] = field(default_factory=set)


def _prompt_digest(prompt: Any) -> str:
    text = json.dumps(prompt, sort_keys=True, default=str)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


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


def _plain_logs(logs: dict[str, Any]) -> dict[str, Any]:
    """TRL's `_logs` as plain dicts and lists (picklable into a checkpoint)."""
    return {k: {c: list(e) for c, e in v.items()} if isinstance(v, dict) else list(v) for k, v in logs.items()}


def _extend_logs(target: dict[str, Any], source: dict[str, Any]) -> None:
    for key, value in source.items():
        if isinstance(value, dict):
            for column, entries in value.items():
                target[key][column].extend(entries)
        else:
            target[key].extend(value)


def _to_device(output: dict[str, Any], device: torch.device) -> dict[str, Any]:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in output.items()}


class CoDaPOTrainer(GRPOTrainer):
    """
    Trainer for CoDaPO (Confidence and Difficulty-adaptive Policy Optimization), a drop-in replacement of TRL's
    [`~trl.GRPOTrainer`].

    For every question of an update batch B, CoDaPO computes from its rollouts a confidence `c` (geometric-mean token
    probability under the behaviour policy) and a difficulty `d` (error rate), and a value `v = V_c(c) V_d(d)`
    (CoDaWeighting). It then takes an update on B with each question's loss weighted by `v` and averaged over the
    question's tokens (CoDaLearning), and a second update on S, the top-K questions of B by value repeated to |B|
    with fresh rollouts (CoDaSampling). See [`CoDaPOConfig`] for the knobs and `codapo_trl.coda` for the formulas.

    The constructor takes exactly the arguments of [`~trl.GRPOTrainer`]; `args` must be a [`CoDaPOConfig`].

    Example:
    ```python
    from datasets import load_dataset
    from codapo_trl import CoDaPOConfig, CoDaPOTrainer, math_accuracy_reward

    trainer = CoDaPOTrainer(
        model="Qwen/Qwen2.5-Math-1.5B",
        reward_funcs=math_accuracy_reward,
        args=CoDaPOConfig(output_dir="Qwen2.5-Math-1.5B-CoDaPO"),
        train_dataset=dataset,
    )
    trainer.train()
    ```
    """

    _tag_names = ["trl", "codapo"]
    _name = "CoDaPO"
    _paper = {
        "title": "The Easy, the Hard, and the Learnable: Confidence and Difficulty-Adaptive Policy Optimization for "
        "LLM Reasoning",
        "id": "codapo",
        # docstyle-ignore
        "citation": textwrap.dedent("""\
            @inproceedings{zhou2026codapo,
                title        = {{The Easy, the Hard, and the Learnable: Confidence and Difficulty-Adaptive Policy Optimization for LLM Reasoning}},
                author       = {Zhanke Zhou and Xiangyu Lu and others},
                booktitle    = {International Conference on Machine Learning},
                year         = 2026,
            }"""),
    }

    def __init__(self, model, reward_funcs=None, args: CoDaPOConfig | None = None, **kwargs):
        if args is None:
            model_name = model if isinstance(model, str) else model.config._name_or_path
            args = CoDaPOConfig(f"{str(model_name).split('/')[-1]}-CoDaPO")
        elif not isinstance(args, CoDaPOConfig):
            raise TypeError(
                f"CoDaPOTrainer needs a CoDaPOConfig, got {type(args).__name__}. Replace `GRPOConfig(...)` with "
                "`CoDaPOConfig(...)` (it accepts every GRPOConfig argument)."
            )
        if args.codapo_sampling and isinstance(kwargs.get("train_dataset"), IterableDataset):
            raise ValueError(
                "codapo_sampling needs a map-style training dataset (each update batch is handed to the training loop "
                "twice, which an IterableDataset cannot do). Pass a `datasets.Dataset` (e.g. without streaming) or "
                "set codapo_sampling=False."
            )
        super().__init__(model, reward_funcs, args=args, **kwargs)
        if args.loss_type in CODAPO_LOSS_TYPES:
            # The per-question normaliser v_j / (|B| T_j) is folded into the advantages (see `_codapo_weigh`), and
            # TRL's global token-sum aggregation ("dapo") then yields exactly the CoDaPO loss, with every TRL feature
            # (vLLM importance sampling, entropy masks, metrics) intact. `args.loss_type` keeps the user's choice.
            self.loss_type = "dapo"
        self._correctness_index = self._resolve_correctness_reward(args.codapo_correctness_reward)
        self._codapo = CoDaPOState()
        self._last_rewards_per_func: torch.Tensor | None = None

    def _resolve_correctness_reward(self, name: str | None) -> int:
        if name is None:
            return 0
        if name not in self.reward_func_names:
            raise ValueError(
                f"codapo_correctness_reward={name!r} is not one of the trainer's reward functions "
                f"{self.reward_func_names}. Set it to the name of the reward that measures correctness."
            )
        return self.reward_func_names.index(name)

    # ------------------------------------------------------------------ data: every B batch is delivered twice
    def _get_train_sampler(self, dataset=None):
        if not self.args.codapo_sampling:
            return super()._get_train_sampler(dataset)
        return RepeatSampler(
            data_source=self.train_dataset if dataset is None else dataset,
            mini_repeat_count=self.num_generations,
            batch_size=self.args.generation_batch_size // self.num_generations,
            # one round of steps_per_generation micro-steps for B, then one for S (num_iterations is 1)
            repeat_count=2 * self.args.steps_per_generation,
            shuffle=self.shuffle_dataset,
            seed=self.args.seed,
        )

    @property
    def codapo_phase(self) -> int:
        """`0` while the current update is on B, `1` while it is on S (always `0` without CoDaSampling)."""
        return self.state.global_step % 2 if self.args.codapo_sampling else PHASE_B

    # ------------------------------------------------------------------ hooks into TRL's generation
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._last_rewards_per_func = rewards_per_func  # (all processes' rollouts, reward functions)
        return rewards_per_func

    def _generate(self, prompts: list):
        result = super()._generate(prompts)
        if self.model.training:
            local = torch.tensor([sum(len(ids) for ids in result[1])], device=self.accelerator.device)
            self._codapo.generated_tokens += int(gather(local).sum().item())
        return result

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        args = (prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
        if self.use_vllm or self.use_transformers_continuous_batching or not self.model.training:
            return super()._generate_single_turn(*args)
        # TRL's `model.generate` path returns no log-probs: record them while it generates, as vLLM would return them,
        # so that CoDaWeighting needs no extra forward pass (they become `sampling_per_token_logps`).
        model = self.accelerator.unwrap_model(self.model_wrapped)
        if is_peft_model(model):
            model = model.get_base_model()
        with record_sampled_logprobs(model, self.temperature) as recorder:
            completion_ids, logprobs = super()._generate_single_turn(*args)
        if logprobs is None:
            logprobs = recorder.per_row(completion_ids)
        return completion_ids, logprobs

    def _generate_and_score_completions(self, inputs):
        if not self.model.training or not self.args.codapo_enabled:
            return super()._generate_and_score_completions(inputs)
        if self.codapo_phase == PHASE_S:
            return self._resampled_batch(inputs)
        return self._update_batch(inputs, select=self.args.codapo_sampling)

    def _update_batch(self, inputs: list[dict], select: bool) -> dict[str, Any]:
        """Phase B: TRL generates and scores B; weigh it; select S (and generate it now for `before_update`)."""
        rows = copy.deepcopy(inputs) if select else None  # TRL may write into the rows it is given
        output = super()._generate_and_score_completions(inputs)
        stats = self._codapo_weigh(output)
        digests = gather_object([_prompt_digest(row.get("prompt")) for row in inputs[:: self.num_generations]])
        self._codapo.seen_prompts.update(digests)
        metrics = self._codapo_metrics(stats, PHASE_B)
        if select:
            global_rows = gather_object(rows)
            num_questions = len(global_rows) // self.num_generations
            selection = coda.select_top_k(stats["values"], self.args.codapo_top_k, num_questions)
            self._codapo.selection = [global_rows[j * self.num_generations] for j in selection]
            self._codapo.selection_step = self.state.global_step
            chosen = torch.tensor(sorted(set(selection)), device=stats["values"].device)
            metrics["codapo/selected_value_mean"] = torch.nanmean(stats["values"][chosen]).item()
            metrics["codapo/selected_difficulty_mean"] = torch.nanmean(stats["difficulty"][chosen]).item()
            if self.args.codapo_resample_timing == "before_update":
                self._codapo.pending = self._generate_pending(len(inputs))
        self._append_metrics(metrics)
        return output

    def _resampled_batch(self, inputs: list[dict]) -> dict[str, Any]:
        """Phase S: the batch generated before B's update, or fresh rollouts of the selected questions."""
        state = self._codapo
        if state.selection is None or state.selection_step != self.state.global_step - 1:
            logger.warning(
                "No CoDaPO selection is held for update %d (a checkpoint without CoDaPO state?): this update is "
                "taken on the update batch again instead of the resampled one.",
                self.state.global_step,
            )
            return self._update_batch(inputs, select=False)
        if state.pending is not None:
            pending, state.pending = state.pending, None
            self._append_metrics({k: v for k, v in pending.metrics.items()}, extend=True)
            _extend_logs(self._logs, pending.logs)
            return _to_device(pending.output, self.accelerator.device)
        if self.args.codapo_resample_timing == "before_update":
            logger.warning(
                "S's rollouts from before update %d are not available (resumed with another number of processes?): "
                "generating them from the current policy instead.",
                self.state.global_step - 1,
            )
        output = self._generate_from_selection(len(inputs))
        self._append_metrics(self._codapo_metrics(self._codapo_weigh(output), PHASE_S))
        return output

    def _generate_from_selection(self, num_local_rows: int) -> dict[str, Any]:
        """TRL's generation and scoring of S: each selected question G times, this process's contiguous share."""
        rows = [copy.deepcopy(row) for row in self._codapo.selection for _ in range(self.num_generations)]
        start = self.accelerator.process_index * num_local_rows
        return super()._generate_and_score_completions(rows[start : start + num_local_rows])

    def _generate_pending(self, num_local_rows: int) -> _PendingBatch:
        """`before_update`: generate S now, from B's behaviour policy, and hold it with its logs until S's update."""
        saved_metrics, saved_logs = self._metrics["train"], self._logs
        self._metrics["train"], self._logs = defaultdict(list), _empty_like(saved_logs)
        try:
            output = self._generate_from_selection(num_local_rows)
            if output.get("old_per_token_logps") is None:
                # S is trained after B's update: its importance ratio needs the behaviour policy's log-probs now.
                output["old_per_token_logps"] = self._policy_logps(output)
            self._append_metrics(self._codapo_metrics(self._codapo_weigh(output), PHASE_S))
            captured_metrics, captured_logs = self._metrics["train"], self._logs
        finally:
            self._metrics["train"], self._logs = saved_metrics, saved_logs
        return _PendingBatch(output=output, metrics=dict(captured_metrics), logs=_plain_logs(captured_logs))

    # ------------------------------------------------------------------ CoDaWeighting on global tensors
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

    def _behaviour_logps(self, output: dict[str, Any]) -> torch.Tensor:
        """Behaviour-policy log-probs: the generator's (vLLM, rollout_func), else TRL's old ones, else a forward."""
        for key in ("sampling_per_token_logps", "old_per_token_logps"):
            if output.get(key) is not None:
                return output[key]
        return self._policy_logps(output)

    def _codapo_weigh(self, output: dict[str, Any]) -> dict[str, torch.Tensor]:
        """Compute c, d, v and T for every group of the batch (all processes), fold the weights into the advantages.

        Returns the global per-group statistics. Adds per-rollout columns to `output` (this process's rows):
        `codapo_value`, `codapo_difficulty`, `codapo_correctness`, `codapo_log_confidence` and the unweighted
        `codapo_advantages`.
        """
        args, num_generations = self.args, self.num_generations
        mask = output["completion_mask"]
        if output.get("tool_mask") is not None:
            mask = mask * output["tool_mask"]
        log_confidence = gather(coda.trajectory_log_confidence(self._behaviour_logps(output), mask))
        token_counts = coda.group_token_counts(gather(mask.sum(-1).float()), num_generations)
        correctness = self._last_rewards_per_func[:, self._correctness_index].clamp(0.0, 1.0)

        confidence = coda.group_confidence_from_trajectories(log_confidence, num_generations)
        difficulty = coda.group_difficulty(correctness, num_generations)
        values = coda.coda_values(
            confidence, difficulty, args.codapo_confidence_fn, args.codapo_difficulty_fn, args.codapo_weight_offset
        )
        loss_values = values if args.codapo_weighting else torch.ones_like(values)
        if args.loss_type in CODAPO_LOSS_TYPES:
            # TRL's "dapo" aggregation divides the token sum by num_items_in_batch (all loss tokens of the update);
            # multiplying by it cancels that, leaving sum_i v_j / (|B| T_j) sum_t l_it.
            weights = coda.codapo_sample_weights(loss_values, token_counts, num_generations)
            weights = weights * output["num_items_in_batch"].float()
        else:
            weights = torch.nan_to_num(loss_values, nan=0.0).repeat_interleave(num_generations)

        num_local = output["advantages"].size(0)
        local = slice(self.accelerator.process_index * num_local, (self.accelerator.process_index + 1) * num_local)
        output["codapo_advantages"] = output["advantages"].clone()
        output["advantages"] = output["advantages"] * weights[local].to(output["advantages"].dtype)
        output["codapo_value"] = values.repeat_interleave(num_generations)[local]
        output["codapo_difficulty"] = difficulty.repeat_interleave(num_generations)[local]
        output["codapo_correctness"] = correctness[local]
        output["codapo_log_confidence"] = log_confidence[local]
        return {"confidence": confidence, "difficulty": difficulty, "values": values, "token_counts": token_counts}

    # ------------------------------------------------------------------ CoDaLearning
    def _compute_loss(self, model, inputs):
        if self.args.loss_type == "gpg":
            # GPG's -A log p: with the ratio's denominator set to the current log-probs (ratio 1 in value, gradient
            # d log p), TRL's clipped surrogate has exactly the gradient -A d log p, also for off-policy rollouts.
            inputs = {**inputs, "old_per_token_logps": None}
        return super()._compute_loss(model, inputs)

    # ------------------------------------------------------------------ metrics
    def _codapo_metrics(self, stats: dict[str, torch.Tensor], phase: int) -> dict[str, float]:
        values, difficulty = stats["values"], stats["difficulty"]
        defined = ~torch.isnan(difficulty)
        num_defined = max(int(defined.sum()), 1)
        return {
            "codapo/phase": float(phase),
            "codapo/value_mean": torch.nanmean(values).item(),
            "codapo/value_min": _nan_reduce(values, torch.min),
            "codapo/value_max": _nan_reduce(values, torch.max),
            "codapo/confidence_mean": torch.nanmean(stats["confidence"]).item(),
            "codapo/difficulty_mean": torch.nanmean(difficulty).item(),
            "codapo/solved_frac": (defined & (difficulty == 0)).sum().item() / num_defined,
            "codapo/unsolved_frac": (defined & (difficulty == 1)).sum().item() / num_defined,
            "codapo/discovery_rate": (defined & (difficulty < 1)).sum().item() / num_defined,
            "codapo/generated_tokens": float(self._codapo.generated_tokens),
            "codapo/unique_prompts": float(len(self._codapo.seen_prompts)),
        }

    def _append_metrics(self, metrics: dict[str, Any], extend: bool = False) -> None:
        for key, value in metrics.items():
            if extend:
                self._metrics["train"][key].extend(value)
            else:
                self._metrics["train"][key].append(value)

    # ------------------------------------------------------------------ checkpoints
    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        output_dir = os.path.join(
            self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        )
        os.makedirs(output_dir, exist_ok=True)
        state = self._codapo
        pending = state.pending
        if pending is not None:
            pending = _PendingBatch(_to_device(pending.output, torch.device("cpu")), pending.metrics, pending.logs)
        payload = {
            "selection": state.selection,
            "selection_step": state.selection_step,
            "pending": pending,
            "generated_tokens": state.generated_tokens,
            "seen_prompts": sorted(state.seen_prompts),
            "num_processes": self.accelerator.num_processes,
        }
        path = os.path.join(output_dir, STATE_FILE.format(rank=self.accelerator.process_index))
        torch.save(payload, path + ".tmp")
        os.replace(path + ".tmp", path)

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is None:
            return
        path = os.path.join(checkpoint, STATE_FILE.format(rank=self.accelerator.process_index))
        if not os.path.exists(path):
            logger.warning("No CoDaPO state in %s: starting CoDaPO's bookkeeping afresh.", checkpoint)
            return
        payload = torch.load(path, weights_only=False, map_location="cpu")
        same_layout = payload.get("num_processes") == self.accelerator.num_processes
        self._codapo = CoDaPOState(
            selection=payload["selection"],
            selection_step=payload["selection_step"],
            pending=payload["pending"] if same_layout else None,
            generated_tokens=payload["generated_tokens"],
            seen_prompts=set(payload["seen_prompts"]),
        )


def _nan_reduce(values: torch.Tensor, reduce) -> float:
    finite = values[~torch.isnan(values)]
    return reduce(finite).item() if finite.numel() else float("nan")
