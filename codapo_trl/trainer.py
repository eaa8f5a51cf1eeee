"""`CoDaPOTrainer`: TRL's `GRPOTrainer` with CoDaWeighting, CoDaSampling and CoDaLearning.

The method lives in `coda.py`, the B/S protocol's state in `protocol.py`; this module only connects them to TRL.
[`DynamicsMixin`] (shared with plain GRPO) overrides TRL's generation, loss and checkpoint hooks and hands each
generated batch over with its per-group confidence and difficulty ([`GroupStats`]); `CoDaPOTrainer` builds on the
mixin's hooks and overrides no TRL hook itself:

- `_phases_per_batch` (the mixin's) makes the training sampler (the mixin's `_get_train_sampler`) hand every
  generation batch to the Trainer loop twice, so that the loop itself takes S's updates: gradient accumulation,
  DeepSpeed boundaries, the LR schedule, `global_step`, logging and checkpoints all count them. A phase (B's, then
  S's) is one generation batch, consumed by `codapo_steps_per_phase` optimizer steps (`steps_per_generation /
  gradient_accumulation_steps` chunks, `num_iterations` passes); the phase is derived from TRL's micro-step counter,
  which a resume restores;
- `_training_batch` (the mixin's) is where, after TRL generated and scored a batch, the values are computed, folded
  into the advantages, and (in phase B) the top-K questions are selected and, for `before_update`, S is generated at
  once from the same behaviour policy;
- `_loss_inputs` (the mixin's): GPG's loss form; `_update_metrics` (the mixin's): the phase, once per update;
- `_save_method_state` / `_load_method_state` (the mixin's) keep what a B/S pair needs across a resume, including
  the rollouts of a phase interrupted between two of its steps.
"""

from __future__ import annotations

import copy
import logging
import math
import textwrap
from typing import Any

import torch
from accelerate.utils import gather_object
from datasets import IterableDataset
from trl import GRPOTrainer

from . import _trl_compat as compat
from . import coda
from .config import CODAPO_LOSS_TYPES, CoDaPOConfig
from .dynamics.groups import LOSS_VALUE_KEY, GroupStats
from .dynamics.mixin import DynamicsMixin, DynamicsOptions
from .dynamics.streaks import BatchStreak, weightless_message
from .protocol import PHASE_B, PHASE_S, BSProtocol, PendingBatch
from .vllm_cpu import CPUVLLMMixin


logger = logging.getLogger(__name__)

STATE_FILE = "codapo_state-rank{rank}.pt"
VALUE_KEY = "codapo_value"
"""Output key of each rollout's question value v (NaN where undefined), next to `dynamics.groups.LOSS_VALUE_KEY`
(the v used in the loss: 1 without CoDaWeighting, 0 where undefined)."""

_PendingBatch = PendingBatch  # the name under which checkpoints written before `protocol.py` pickled S's rollouts


def _to_device(output: dict[str, Any], device: torch.device) -> dict[str, Any]:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in output.items()}


class CoDaPOTrainer(CPUVLLMMixin, DynamicsMixin, GRPOTrainer):
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
    _logs_questions_at_generation = False  # written here, with the values and the selection
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
        self._set_epoch_budget()
        self._codapo = self._new_protocol()
        self._weightless_streak = BatchStreak()  # consecutive batches whose values are all 0
        weighted = self._weighted_reward_names()
        if args.codapo_enabled and len(weighted) > 1:
            logger.warning(
                "CoDaPO objective with %d weighted reward functions %s: the advantages use their weighted combination "
                "(TRL's reward_weights, multi_objective_aggregation), while difficulty, hence the values and the "
                "selection, uses the correctness reward %s alone.",
                len(weighted),
                weighted,
                self.correctness_spec.describe(),
            )

    def _set_epoch_budget(self) -> None:
        """With `num_train_epochs` and no `max_steps`, say what an epoch is for CoDaPO and how many optimizer steps the
        run takes; for `codapo_epoch_budget="grpo_steps"`, set `max_steps` (on this trainer's copy of the config) to
        GRPO's number of steps for the same epochs."""
        args = self.args
        if not args.codapo_sampling or args.max_steps > 0 or self.train_dataset is None:
            return
        # the Trainer's count: one dataloader batch per generation batch and micro-step, B and S alike
        micro_batches = len(self._get_train_sampler()) // args.generation_batch_size
        per_epoch = max(math.ceil(micro_batches / args.gradient_accumulation_steps), 1)
        grpo_per_epoch = max(math.ceil(micro_batches / 2 / args.gradient_accumulation_steps), 1)
        codapo_steps = math.ceil(args.num_train_epochs * per_epoch)
        grpo_steps = math.ceil(args.num_train_epochs * grpo_per_epoch)
        pair = 2 * args.codapo_steps_per_phase
        if args.codapo_epoch_budget == "grpo_steps":
            self.args = copy.copy(args)  # the user's config object is left as it was
            self.args.max_steps = grpo_steps
            logger.warning(
                "codapo_epoch_budget='grpo_steps': num_train_epochs=%g is GRPO's budget of %d optimizer steps (and its "
                "number of generation batches), B's and S's steps counted together, so CoDaPO passes %g times over the "
                "training set's update batches%s.",
                args.num_train_epochs,
                grpo_steps,
                args.num_train_epochs / 2,
                "" if grpo_steps % pair == 0 else " (it ends after a B, whose S is not taken)",
            )
            return
        logger.warning(
            "num_train_epochs=%g with CoDaSampling: one CoDaPO epoch is one pass over the training set's update "
            "batches B, each followed by its resampled batch S, so the run takes %d optimizer steps, twice GRPO's %d "
            "for the same epochs (and twice its generation batches), and the learning-rate schedule spans all %d. For "
            "GRPO's budget, set codapo_epoch_budget='grpo_steps' (or max_steps=%d).",
            args.num_train_epochs,
            codapo_steps,
            grpo_steps,
            codapo_steps,
            grpo_steps,
        )

    def _weighted_reward_names(self) -> list[str]:
        """The reward functions whose TRL weight is not 0 (a weight-0 reward only feeds the logs and, when named,
        correctness)."""
        weights = self.reward_weights.tolist()
        return [name for name, weight in zip(self.reward_func_names, weights, strict=True) if weight != 0]

    # ------------------------------------------------------------------ the mixin's hooks
    @property
    def _phases_per_batch(self) -> int:
        # every B batch is delivered twice: one phase of steps_per_generation x num_iterations micro-steps for B,
        # then one for S (whose rollouts replace B's)
        return 2 if self.args.codapo_sampling else 1

    def _dynamics_options_default(self) -> DynamicsOptions:
        args = self.args
        return DynamicsOptions(
            log_dynamics=args.codapo_dynamics,
            question_log=args.codapo_question_log,
            correctness_reward=args.codapo_correctness_reward,
            correctness_kind=args.codapo_correctness_kind,
            correctness_threshold=args.codapo_correctness_threshold,
            option_prefix="codapo_",
        )

    @property
    def _correctness_drives_training(self) -> bool:
        return self.args.codapo_weighting or self.args.codapo_sampling

    # ------------------------------------------------------------------ the B/S protocol
    def _new_protocol(self) -> BSProtocol:
        return BSProtocol(
            sampling=self.args.codapo_sampling,
            micro_steps_per_phase=self.args.steps_per_generation * self.num_iterations,
            steps_per_phase=self.args.codapo_steps_per_phase,
        )

    @property
    def codapo_phase(self) -> int:
        """`0` while the current update is on B, `1` while it is on S (always `0` without CoDaSampling). Phases
        alternate every generation batch, counted by TRL's micro-step counter (restored on resume)."""
        return self._codapo.phase_at(compat.micro_step(self))

    def _phase_start_step(self) -> int:
        """`global_step` before the first update of the current phase."""
        return self._codapo.phase_start_step(compat.micro_step(self))

    # ------------------------------------------------------------------ generation: B, then S
    def _training_batch(self, inputs: list[dict]) -> dict[str, Any]:
        if not self.args.codapo_enabled:
            output, _ = self._scored_batch(inputs)  # plain GRPO with the dynamics; no question log here
            return output
        if self._codapo.enter(compat.micro_step(self)) == PHASE_S:
            return self._resampled_batch(inputs)
        return self._update_batch(inputs, select=self.args.codapo_sampling)

    def _select(self, values: torch.Tensor, stats: GroupStats, num_questions: int) -> list[int]:
        """S's questions (indices into the gathered batch): the top-K by value, or (`codapo_selection="uniform"`) a
        draw seeded by `args.seed` and the update, identical on every process."""
        if self.args.codapo_selection == "uniform":
            seed = self.args.seed * 1_000_003 + compat.micro_step(self)
            return coda.select_uniform(num_questions, self.args.codapo_top_k, num_questions, seed)
        return coda.select_top_k(values, self.args.codapo_top_k, num_questions, stats.difficulty)

    def _update_batch(self, inputs: list[dict], select: bool) -> dict[str, Any]:
        """Phase B: TRL generates and scores B; weigh it; select S (and generate it now for `before_update`)."""
        rows = copy.deepcopy(inputs) if select else None  # TRL may write into the rows it is given
        output, stats = self._scored_batch(inputs)
        values = self._codapo_weigh(output, stats)
        metrics = self._codapo_metrics(stats, values)
        selected = None
        if select:
            global_rows = gather_object(rows)
            num_questions = len(global_rows) // self.num_generations
            selection = self._select(values, stats, num_questions)
            self._codapo.select([global_rows[j * self.num_generations] for j in selection], compat.micro_step(self))
            selected = set(selection)
            chosen = torch.tensor(sorted(selected), device=values.device)
            metrics["codapo/selected_value_mean"] = torch.nanmean(values[chosen]).item()
            metrics["codapo/selected_difficulty_mean"] = torch.nanmean(stats.difficulty[chosen]).item()
        self._log_questions(inputs, stats, PHASE_B, self._phase_start_step() + 1, values, selected)
        if select and self.args.codapo_resample_timing == "before_update":
            self._codapo.hold(self._generate_pending(len(inputs)))
        self._append_metrics(metrics)
        return output

    def _resampled_batch(self, inputs: list[dict]) -> dict[str, Any]:
        """Phase S: the batch generated before B's update, or fresh rollouts of the selected questions."""
        protocol = self._codapo
        if protocol.selection_for(compat.micro_step(self)) is None:
            logger.warning(
                "No CoDaPO selection is held for update %d (a checkpoint without CoDaPO state?): this phase is "
                "taken on the update batch again instead of the resampled one.",
                self.state.global_step + 1,
            )
            return self._update_batch(inputs, select=False)
        pending = protocol.take_pending()
        if pending is not None:
            self._append_metrics(pending.metrics, extend=True)
            compat.extend_logs(self, pending.logs)
            return _to_device(pending.output, self.accelerator.device)
        if self.args.codapo_resample_timing == "before_update":
            logger.warning(
                "S's rollouts from before update %d are not available (resumed with another number of processes?): "
                "generating them from the current policy instead.",
                self.state.global_step,
            )
        rows, output, stats = self._generate_from_selection(len(inputs))
        values = self._codapo_weigh(output, stats)
        self._log_questions(rows, stats, PHASE_S, self._phase_start_step() + 1, values)
        self._append_metrics(self._codapo_metrics(stats, values))
        return output

    def _generate_from_selection(self, num_local_rows: int) -> tuple[list[dict], dict[str, Any], GroupStats]:
        """TRL's generation and scoring of S: each selected question G times, this process's contiguous share."""
        rows = [copy.deepcopy(row) for row in self._codapo.selection for _ in range(self.num_generations)]
        start = self.accelerator.process_index * num_local_rows
        rows = rows[start : start + num_local_rows]
        output, stats = self._scored_batch(copy.deepcopy(rows))
        return rows, output, stats

    def _generate_pending(self, num_local_rows: int) -> PendingBatch:
        """`before_update`: generate S now, from B's behaviour policy, and hold it with its logs until S's update."""
        with compat.separate_logs(self) as captured:
            rows, output, stats = self._generate_from_selection(num_local_rows)
            if output.get("old_per_token_logps") is None:
                # S is trained after B's update: its importance ratio needs the behaviour policy's log-probs, in
                # the training engine's numbers, taken now. Recorded in float32 while this model generated, they are
                # those (to ~1e-6); in bf16/fp16, from another engine (vLLM without TRL's importance-sampling
                # correction, a rollout_func) or when the recording was not usable, the policy recomputes them.
                if self.recording_matches_training and output.get("sampling_per_token_logps") is not None:
                    output["old_per_token_logps"] = output["sampling_per_token_logps"]
                else:
                    output["old_per_token_logps"] = self._policy_logps(output)
            values = self._codapo_weigh(output, stats)
            step = self._phase_start_step() + self.args.codapo_steps_per_phase + 1
            self._log_questions(rows, stats, PHASE_S, step, values)
            self._append_metrics(self._codapo_metrics(stats, values))
        return PendingBatch(output=output, metrics=dict(captured.metrics), logs=compat.plain_logs(captured.logs))

    # ------------------------------------------------------------------ CoDaWeighting
    def _codapo_weigh(self, output: dict[str, Any], stats: GroupStats) -> torch.Tensor:
        """Values v of the batch's groups (all processes), folded into this process's advantages.

        For the `codapo`/`gpg` losses each rollout's advantage is multiplied by `v_j / (|B| T_j)` times TRL's
        normaliser `num_items_in_batch`: TRL's token-sum aggregation ("dapo") divides by that normaliser, which
        leaves exactly `sum_j v_j / (|B| T_j) sum_{i,t} l_it`. For TRL's own loss types the factor is `v_j`. Adds
        the per-rollout columns `VALUE_KEY` (v) and `LOSS_VALUE_KEY` (the v used in the loss).
        """
        args, num_generations = self.args, self.num_generations
        values = coda.coda_values(
            stats.confidence,
            stats.difficulty,
            args.codapo_confidence_fn,
            args.codapo_difficulty_fn,
            args.codapo_weight_offset,
        )
        loss_values = values if args.codapo_weighting else torch.ones_like(values)
        if args.loss_type in CODAPO_LOSS_TYPES:
            weights = coda.codapo_sample_weights(loss_values, stats.token_counts, num_generations)
            weights = weights * output["num_items_in_batch"].float()
        else:
            weights = torch.nan_to_num(loss_values, nan=0.0).repeat_interleave(num_generations)
        local = self._process_slice(output)
        output["advantages"] = output["advantages"] * weights[local].to(output["advantages"].dtype)
        output[VALUE_KEY] = values.repeat_interleave(num_generations)[local]
        output[LOSS_VALUE_KEY] = torch.nan_to_num(loss_values, nan=0.0).repeat_interleave(num_generations)[local]
        if args.codapo_weighting:
            self._watch_values(values, stats)
        return values

    def _watch_values(self, values: torch.Tensor, stats: GroupStats) -> None:
        """Count the batches in a row whose values are all 0 (some defined: an undefined batch is the mixin's own
        case), and warn once when they reach `STALL_BATCHES`: nothing trains, and the user must change something."""
        defined = values[~torch.isnan(values)]
        self._weightless_streak.update(defined.numel() > 0 and not bool((defined > 0).any()))
        if not self._weightless_streak.due():
            return
        spec = self.correctness_spec
        threshold = next((t for t in spec.thresholds if t is not None), None)
        others = [name for name in self._weighted_reward_names() if name not in spec.names]
        logger.warning(
            weightless_message(
                stats.difficulty,
                self._weightless_streak.length,
                spec.describe(),
                threshold,
                self._score_range,
                others,
                self.args.codapo_difficulty_fn,
            )
        )

    # ------------------------------------------------------------------ CoDaLearning
    def _loss_inputs(self, inputs: dict[str, Any]) -> dict[str, Any]:
        if self.args.loss_type == "gpg":
            # GPG's -A log p: with the ratio's denominator set to the current log-probs (ratio 1 in value, gradient
            # d log p), TRL's clipped surrogate has exactly the gradient -A d log p, also for off-policy rollouts.
            return {**inputs, "old_per_token_logps": None}
        return inputs

    # ------------------------------------------------------------------ metrics
    def _update_metrics(self) -> dict[str, float]:
        return {"codapo/phase": float(self._codapo.phase)} if self.args.codapo_enabled else {}

    def _codapo_metrics(self, stats: GroupStats, values: torch.Tensor) -> dict[str, float]:
        difficulty = stats.difficulty
        defined = ~torch.isnan(difficulty)
        num_defined = max(int(defined.sum()), 1)
        return {
            "codapo/value_mean": torch.nanmean(values).item(),
            "codapo/value_min": _nan_reduce(values, torch.min),
            "codapo/value_max": _nan_reduce(values, torch.max),
            "codapo/confidence_mean": torch.nanmean(stats.confidence).item(),
            "codapo/difficulty_mean": torch.nanmean(difficulty).item(),
            "codapo/solved_frac": (defined & (difficulty == 0)).sum().item() / num_defined,
            "codapo/unsolved_frac": (defined & (difficulty == 1)).sum().item() / num_defined,
            "codapo/discovery_rate": (defined & (difficulty < 1)).sum().item() / num_defined,
        }

    def _append_metrics(self, metrics: dict[str, Any], extend: bool = False) -> None:
        for key, value in metrics.items():
            if extend:
                compat.train_metrics(self)[key].extend(value)
            else:
                compat.train_metrics(self)[key].append(value)

    # ------------------------------------------------------------------ checkpoints
    def _save_method_state(self, trial) -> None:
        micro_step = compat.micro_step(self)
        payload = {
            **self._codapo.state_dict(),
            "num_processes": self.accelerator.num_processes,
            "micro_step": micro_step,
            "buffered_inputs": None,
        }
        buffered = compat.buffered_inputs(self)
        if self._codapo.is_mid_phase(micro_step) and buffered is not None:  # saved mid-phase
            payload["buffered_inputs"] = [_to_device(chunk, torch.device("cpu")) for chunk in buffered]
        self._save_rank_state(trial, STATE_FILE, payload)

    def _load_method_state(self, checkpoint: str) -> None:
        payload = self._load_rank_state(checkpoint, STATE_FILE)
        if payload is None:
            logger.warning("No CoDaPO state in %s: an S update due next is taken on B again.", checkpoint)
            return
        same_layout = payload.get("num_processes") == self.accelerator.num_processes
        # TRL counts micro-steps from 0 after a resume and regenerates its buffer; CoDaPO's phase is derived from
        # that counter, so it is restored, and so is the buffer of a phase interrupted between two of its steps:
        # the remaining steps then train on the very rollouts (and chunks) they would have without the stop.
        compat.set_micro_step(self, payload.get("micro_step", 0))
        self._codapo = self._new_protocol()
        self._codapo.load_state_dict(payload, compat.micro_step(self), keep_pending=same_layout)
        buffered = payload.get("buffered_inputs")
        if buffered is not None and same_layout:
            compat.set_buffered_inputs(self, [_to_device(chunk, self.accelerator.device) for chunk in buffered])
        elif self._codapo.is_mid_phase(compat.micro_step(self)):
            logger.warning(
                "Resumed between two steps of a CoDaPO phase without its rollouts (another number of processes?): "
                "the phase's batch is generated again for its remaining steps."
            )


def _nan_reduce(values: torch.Tensor, reduce) -> float:
    finite = values[~torch.isnan(values)]
    return reduce(finite).item() if finite.numel() else float("nan")
