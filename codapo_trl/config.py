"""`CoDaPOConfig`: TRL's `GRPOConfig` plus the CoDaPO fields, with their validation."""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass, field
from typing import Literal

from trl import GRPOConfig

from .coda import VALUE_FUNCTIONS
from .correctness import CORRECTNESS_KINDS


logger = logging.getLogger(__name__)


TRL_LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo")
CODAPO_LOSS_TYPES = ("codapo", "gpg")
RESAMPLE_TIMINGS = ("before_update", "after_update")
SELECTIONS = ("value", "uniform")
EPOCH_BUDGETS = ("passes", "grpo_steps")

ValueFunctionName = Literal["linear", "reverse", "edges", "center", "constant"]


def has_activation_checkpointing(config_class: type = GRPOConfig) -> bool:
    """Whether the installed transformers names the training config's checkpointing switch `activation_checkpointing`
    (transformers >= 5.23) rather than only `gradient_checkpointing` (older releases; the old name still works there
    after, with a `FutureWarning`, until v6)."""
    return "activation_checkpointing" in {f.name for f in dataclasses.fields(config_class)}


def checkpointing_argument(enabled: bool, config_class: type = GRPOConfig) -> dict[str, bool]:
    """The keyword argument of a training config that turns activation checkpointing on or off, under the name the
    installed transformers knows (see [`has_activation_checkpointing`]): `{"activation_checkpointing": enabled}`, or
    `{"gradient_checkpointing": enabled}` before transformers 5.23.

    Example:
        ```python
        >>> args = CoDaPOConfig(output_dir="out", **checkpointing_argument(False))
        >>> args.gradient_checkpointing
        False

        ```
    """
    name = "activation_checkpointing" if has_activation_checkpointing(config_class) else "gradient_checkpointing"
    return {name: enabled}


_TRL_DEFAULTS = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
_TRL_GRADIENT_CHECKPOINTING_DEFAULT = _TRL_DEFAULTS["gradient_checkpointing"]  # True in TRL 1.16


@dataclass
class CoDaPOConfig(GRPOConfig):
    r"""
    Configuration class for the [`CoDaPOTrainer`].

    [`CoDaPOConfig`] inherits every parameter of TRL's [`~trl.GRPOConfig`] and adds the parameters of CoDaPO
    (Confidence and Difficulty-adaptive Policy Optimization). Every CoDaPO field is prefixed with `codapo_`. Swapping
    `GRPOConfig` for `CoDaPOConfig` (and `GRPOTrainer` for `CoDaPOTrainer`) in a TRL script gives CoDaPO with the
    paper's defaults.

    One CoDaPO step has two phases: one on the update batch B (the questions of one generation batch, each with
    `num_generations` rollouts), then one on the resampled batch S (the top-K questions of B by value, repeated so
    that |S| = |B|, with fresh rollouts). Each phase takes `codapo_steps_per_phase` optimizer steps
    (`steps_per_generation / gradient_accumulation_steps` chunks, `num_iterations` passes; 1 by default, as in the
    paper's Algorithm 1; 8 in the authors' released code). Every step counts in `global_step`, `max_steps`, the
    learning rate schedule, logging and checkpointing, as the paper counts S's updates in its budget.

    Parameters:
        > Parameters that control CoDaWeighting

        codapo_weighting (`bool`, *optional*, defaults to `True`):
            Whether each question's loss is weighted by its value `v = offset + V_c(c) * V_d(d)`. When `False`, the
            loss uses `v = 1` (the ablation of the paper's Table 4); the value is still computed, logged and used to
            rank questions for CoDaSampling.
        codapo_confidence_fn (`str`, *optional*, defaults to `"linear"`):
            Shape of `V_c`, applied to the confidence `c` (geometric-mean token probability of the question's
            rollouts under the behaviour policy): `"linear"` (x), `"reverse"` (1 - x), `"edges"` (4 (x - 1/2)^2),
            `"center"` (1 - 4 (x - 1/2)^2) or `"constant"` (1).
        codapo_difficulty_fn (`str`, *optional*, defaults to `"center"`):
            Shape of `V_d`, applied to the difficulty `d` (1 - mean correctness of the question's rollouts); same
            choices as `codapo_confidence_fn`. The default U-shape favours questions of intermediate difficulty.
        codapo_weight_offset (`float`, *optional*, defaults to `0.0`):
            Constant added to every value. The paper uses none; the authors' released code uses `0.1`. Must be
            non-negative.
        codapo_correctness_reward (`str`, `list[str]` or `None`, *optional*, defaults to `None`):
            Name of the reward function that scores correctness, which defines difficulty; for multi-task data a list
            of names, each row's correctness then coming from the one of them that scored it (the others return
            `None` for it). `None`: the only reward function, or the only known verifier among several (ours from
            `codapo_trl.rewards`, TRL's `accuracy_reward`); any other case is an error at construction. A question
            that no correctness reward scored gets `v = 0` and is never resampled.
        codapo_correctness_kind (`str` or `None`, *optional*, defaults to `None`):
            What the correctness reward returns: `"binary"` (0 or 1 per rollout) or `"pass_rate"` (a fraction in
            [0, 1], e.g. of tests passed). `None`: what the reward function declares itself (its `correctness_kind`
            attribute; ours do), else `"binary"`. A value that breaks the kind stops training with the reward's name
            and the value.
        codapo_correctness_threshold (`float` or `None`, *optional*, defaults to `None`):
            For a reward model or any continuous score: a rollout is correct when its score is `>= threshold`.
            Excludes `codapo_correctness_kind`. A reward model as correctness reward needs it.

        > Parameters that control CoDaSampling

        codapo_sampling (`bool`, *optional*, defaults to `True`):
            Whether to take the second, focused phase on the resampled batch S. When `False`, every phase is a B
            phase (the ablation of the paper's Table 4).
        codapo_top_k (`int` or `None`, *optional*, defaults to `None`):
            K, the number of distinct questions kept for S, an integer. `None` means a quarter of the questions of
            one phase (at least 1), the paper's 4 of 16. When fewer than K have a positive value, the others are
            taken by difficulty, unsolved before solved. Each kept question is repeated |B|/K times; when K does
            not divide |B|, the highest-valued questions get one extra copy.
        codapo_resample_timing (`str`, *optional*, defaults to `"before_update"`):
            When S's rollouts are generated. `"before_update"` (the paper's Algorithm 1): right after B's, from the
            same behaviour policy, so S's update is off-policy and clipping acts. `"after_update"` (the authors'
            released code): after B's update, from the updated policy.
        codapo_selection (`str`, *optional*, defaults to `"value"`):
            How S's K questions are chosen. `"value"`: CoDaSampling, the top-K by value (the paper). `"uniform"`: K
            distinct questions drawn at random, ignoring values (seeded by `seed` and the update, the same on every
            process): a control that separates "a second update on repeated questions" from value-guided selection.
            The control arm of a comparison also sets `codapo_weighting=False` (constant weights).

        > Parameters that control the training-dynamics logs

        codapo_epoch_budget (`str`, *optional*, defaults to `"passes"`):
            What `num_train_epochs` means when `max_steps` is not set and CoDaSampling is on. `"passes"`: an epoch is
            one pass over the training set's update batches B, each followed by its S, so it takes twice GRPO's
            optimizer steps and generations (and the learning-rate schedule stretches to match), as in the authors'
            code. `"grpo_steps"`: `max_steps` is set to the number of optimizer steps GRPO would take for those
            epochs, B's and S's steps counted together, so the run has GRPO's step and generation budget and covers
            half as many update batches. The trainer says at construction which it is and how many steps it takes.
        codapo_dynamics (`bool`, *optional*, defaults to `True`):
            Log per-difficulty-bin training dynamics under `dynamics/` (the paper's Section 3: confidence of correct
            and incorrect trajectories, positive and negative advantages, mean absolute token update weight, clipped
            fraction, per bin of question difficulty). Computed from the forward pass the loss already does.
        codapo_question_log (`str` or `None`, *optional*, defaults to `None`):
            Path (relative to `output_dir`) of a JSONL file with one row per question per update: step, phase,
            question id, level, confidence, difficulty, value, whether it was selected, number correct. Written by
            the main process only. A path ending in `.gz` (`questions.jsonl.gz`) is written gzip-compressed (read it
            with `codapo_trl.analysis.load_question_log`). `None`: no file.

        > Parameters that control CoDaLearning

        loss_type (`str`, *optional*, defaults to `"codapo"`):
            `"codapo"`: the paper's objective, `-(1/|B|) sum_j v_j / T_j sum_{i,t} min(rho A, clip(rho) A)` with
            `T_j` the loss tokens of question j's rollouts (per-question token micro-averaging). `"gpg"`: the same
            aggregation of `-A log p` (GPG). TRL's own types (`"grpo"`, `"bnpo"`, `"dr_grpo"`, `"dapo"`, `"cispo"`,
            `"sapo"`, `"luspo"`, `"vespo"`) keep TRL's aggregation, with each sample's loss multiplied by its
            question's value.
    """

    loss_type: Literal["codapo", "gpg", "grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo"] = field(
        default="codapo",
        metadata={
            "help": "Loss formulation. 'codapo' (default): the CoDaPO objective, value-weighted clipped surrogate "
            "token-averaged per question and averaged over questions. 'gpg': the same aggregation of -A*log p. "
            "TRL's types ('grpo', 'bnpo', 'dr_grpo', 'dapo', 'cispo', 'sapo', 'luspo', 'vespo') keep TRL's "
            "aggregation with each sample's loss multiplied by its question's value."
        },
    )
    codapo_weighting: bool = field(
        default=True,
        metadata={
            "help": "Weight each question's loss by its value v = offset + Vc(c) * Vd(d). False uses v = 1 in the "
            "loss (values are still computed, logged and used for resampling)."
        },
    )
    codapo_confidence_fn: ValueFunctionName = field(
        default="linear",
        metadata={
            "help": "Shape of Vc, applied to the group confidence c: linear (x), reverse (1-x), edges (4(x-1/2)^2), "
            "center (1-4(x-1/2)^2) or constant (1)."
        },
    )
    codapo_difficulty_fn: ValueFunctionName = field(
        default="center",
        metadata={
            "help": "Shape of Vd, applied to the group difficulty d = 1 - mean correctness: linear, reverse, edges, "
            "center (default, 1-4(d-1/2)^2) or constant."
        },
    )
    codapo_weight_offset: float = field(
        default=0.0,
        metadata={
            "help": "Constant added to every value (>= 0). The paper uses 0; the authors' released code uses 0.1."
        },
    )
    codapo_correctness_reward: list[str] | None = field(
        default=None,
        metadata={
            "help": "Name of the reward function that scores correctness (defining difficulty), or one name per task "
            "for multi-task data (each row's correctness from the one that scored it). Default: the only reward "
            "function, or the only known verifier; otherwise it must be set."
        },
    )
    codapo_correctness_kind: Literal["binary", "pass_rate"] | None = field(
        default=None,
        metadata={
            "help": "What the correctness reward returns: 'binary' (0/1) or 'pass_rate' (a fraction in [0, 1]). "
            "Default: the reward function's own declaration (its correctness_kind attribute), else 'binary'."
        },
    )
    codapo_correctness_threshold: float | None = field(
        default=None,
        metadata={
            "help": "For a reward model or a continuous score: a rollout is correct when its score is >= this "
            "threshold. Excludes codapo_correctness_kind."
        },
    )
    codapo_sampling: bool = field(
        default=True,
        metadata={
            "help": "Take a second, focused phase per step on the top-K questions of the update batch, resampled "
            "with fresh rollouts. False: B phases only."
        },
    )
    codapo_top_k: int | None = field(
        default=None,
        metadata={
            "help": "K, the number of distinct questions resampled per step. Default: a quarter of the questions "
            "of one phase (at least 1). Must be an integer."
        },
    )
    codapo_resample_timing: Literal["before_update", "after_update"] = field(
        default="before_update",
        metadata={
            "help": "When S is generated: 'before_update' (paper's Algorithm 1, same behaviour policy as B, S's "
            "update is off-policy) or 'after_update' (authors' code, after B's update)."
        },
    )

    codapo_selection: Literal["value", "uniform"] = field(
        default="value",
        metadata={
            "help": "How S's K questions are chosen: 'value' (top-K by value, the paper) or 'uniform' (K distinct "
            "questions at random, ignoring values: the uniform-resampling control)."
        },
    )

    codapo_epoch_budget: Literal["passes", "grpo_steps"] = field(
        default="passes",
        metadata={
            "help": "With num_train_epochs (max_steps unset) and codapo_sampling: 'passes' (default) makes an epoch "
            "one pass over the data's update batches B, each followed by its resampled batch S, so twice GRPO's "
            "optimizer steps and generations; 'grpo_steps' sets max_steps to GRPO's number of steps for the same "
            "epochs (B and S steps together), so CoDaPO sees half as many distinct questions."
        },
    )

    codapo_dynamics: bool = field(
        default=True,
        metadata={"help": "Log per-difficulty-bin training dynamics under dynamics/ (no extra forward pass)."},
    )
    codapo_question_log: str | None = field(
        default=None,
        metadata={
            "help": "JSONL file (relative to output_dir) with one row per question per update (step, phase, id, "
            "level, confidence, difficulty, value, selected, number correct); a path ending in .gz is written "
            "gzip-compressed. Default: none."
        },
    )

    @property
    def codapo_enabled(self) -> bool:
        """Whether anything CoDaPO-specific is on (otherwise the trainer behaves exactly like `GRPOTrainer`)."""
        return self.codapo_weighting or self.codapo_sampling or self.loss_type in CODAPO_LOSS_TYPES

    @property
    def codapo_num_questions(self) -> int:
        """|B|: the number of questions (groups) of one phase (one generation batch), over all processes."""
        return self.generation_batch_size // self.num_generations

    @property
    def codapo_steps_per_phase(self) -> int:
        """Optimizer steps taken on one phase's rollouts: `steps_per_generation / gradient_accumulation_steps`
        chunks, each seen `num_iterations` times (1 by default; 8 in the authors' released code)."""
        return max(1, self.steps_per_generation // self.gradient_accumulation_steps) * self.num_iterations

    def __post_init__(self):
        # TRL 1.16 declares its default (checkpointing on) under transformers' old name `gradient_checkpointing`, so
        # from transformers 5.23 every config that leaves it alone prints transformers' FutureWarning. A value nobody
        # set is passed on under the new name; one set under the old name still warns, as it should.
        if (
            has_activation_checkpointing(type(self))
            and self.activation_checkpointing is None
            and self.gradient_checkpointing is _TRL_GRADIENT_CHECKPOINTING_DEFAULT
        ):
            self.activation_checkpointing = self.gradient_checkpointing
        super().__post_init__()

        for name in ("codapo_confidence_fn", "codapo_difficulty_fn"):
            if getattr(self, name) not in VALUE_FUNCTIONS:
                raise ValueError(
                    f"{name}={getattr(self, name)!r} is not a known value function; set it to one of "
                    f"{sorted(VALUE_FUNCTIONS)}."
                )
        if self.codapo_resample_timing not in RESAMPLE_TIMINGS:
            raise ValueError(
                f"codapo_resample_timing={self.codapo_resample_timing!r} is not supported; set it to "
                "'before_update' (the paper's Algorithm 1) or 'after_update' (the authors' released code)."
            )
        if self.codapo_selection not in SELECTIONS:
            raise ValueError(
                f"codapo_selection={self.codapo_selection!r} is not supported; set it to 'value' (the paper's top-K "
                "by value) or 'uniform' (the random-resampling control)."
            )
        if self.codapo_epoch_budget not in EPOCH_BUDGETS:
            raise ValueError(
                f"codapo_epoch_budget={self.codapo_epoch_budget!r} is not supported; set it to 'passes' (an epoch is a "
                "pass over B, each followed by its S) or 'grpo_steps' (GRPO's number of optimizer steps)."
            )
        if self.loss_type not in TRL_LOSS_TYPES + CODAPO_LOSS_TYPES:
            raise ValueError(
                f"loss_type={self.loss_type!r} is not supported; set it to one of "
                f"{list(CODAPO_LOSS_TYPES + TRL_LOSS_TYPES)}."
            )
        if not (math.isfinite(self.codapo_weight_offset) and self.codapo_weight_offset >= 0):
            raise ValueError(
                f"codapo_weight_offset must be a finite number >= 0 (a negative value would flip the sign of "
                f"advantages), got {self.codapo_weight_offset}."
            )
        if isinstance(self.codapo_correctness_reward, str):
            self.codapo_correctness_reward = [self.codapo_correctness_reward]
        if self.codapo_correctness_reward is not None:
            names = list(self.codapo_correctness_reward)
            if not names or not all(isinstance(n, str) and n.strip() for n in names):
                raise ValueError(
                    f"codapo_correctness_reward must be a reward function name, a list of them or None, got {names!r}."
                )
            self.codapo_correctness_reward = names
        if self.codapo_correctness_kind is not None and self.codapo_correctness_kind not in CORRECTNESS_KINDS:
            raise ValueError(
                f"codapo_correctness_kind={self.codapo_correctness_kind!r} is not supported; set it to one of "
                f"{list(CORRECTNESS_KINDS)}, or set codapo_correctness_threshold for a score."
            )
        if self.codapo_correctness_threshold is not None:
            if self.codapo_correctness_kind is not None:
                raise ValueError(
                    "Set either codapo_correctness_kind or codapo_correctness_threshold, not both (a threshold is its "
                    "own kind: score >= threshold counts as correct)."
                )
            if not math.isfinite(self.codapo_correctness_threshold):
                raise ValueError(
                    f"codapo_correctness_threshold must be a finite number, got {self.codapo_correctness_threshold}."
                )

        if self.codapo_top_k is not None and (
            isinstance(self.codapo_top_k, bool) or not isinstance(self.codapo_top_k, int)
        ):
            raise ValueError(
                f"codapo_top_k must be a whole number of questions (or None for a quarter of |B|), got "
                f"{self.codapo_top_k!r} of type {type(self.codapo_top_k).__name__}."
            )

        if not self.codapo_enabled:
            return
        if self.codapo_sampling and self.steps_per_generation % self.gradient_accumulation_steps:
            raise ValueError(
                "With codapo_sampling, B's and S's rollouts must never share an optimizer step, so a generation batch "
                f"must be a whole number of optimizer steps: steps_per_generation ({self.steps_per_generation}) must "
                f"be a multiple of gradient_accumulation_steps ({self.gradient_accumulation_steps}). Set "
                "steps_per_generation (or generation_batch_size) accordingly, or codapo_sampling=False."
            )
        self._warn_about_objective_changes()

        if not self.codapo_sampling:
            return
        steps_per_pair = 2 * self.codapo_steps_per_phase
        if self.max_steps > 0 and self.max_steps % steps_per_pair:
            logger.warning(
                "max_steps=%d is not a multiple of one B+S pair (%d optimizer steps: 2 phases x %d): the run stops "
                "inside a pair, so the last B's selection (and, for before_update, S's rollouts) is generated for "
                "steps that never run. Use a multiple of %d.",
                self.max_steps,
                steps_per_pair,
                self.codapo_steps_per_phase,
                steps_per_pair,
            )
        num_questions = self.codapo_num_questions
        if self.codapo_top_k is None:
            self.codapo_top_k = max(1, num_questions // 4)
        elif not 1 <= self.codapo_top_k <= num_questions:
            raise ValueError(
                f"codapo_top_k={self.codapo_top_k} must be between 1 and the number of questions per update "
                f"|B| = generation_batch_size / num_generations = {self.generation_batch_size} / "
                f"{self.num_generations} = {num_questions}. Lower codapo_top_k or raise the batch size."
            )

    def _warn_about_objective_changes(self) -> None:
        """Warn once, at construction, about every TRL option that changes what the CoDaPO objective optimizes."""
        changes = []
        if self.beta != 0.0:
            changes.append(
                f"beta={self.beta}: TRL's KL term is a plain token mean over the batch, not weighted by the values "
                "v_j nor averaged per question"
            )
        if self.entropy_coef != 0.0 or self.use_adaptive_entropy:
            changes.append(
                "entropy_coef/use_adaptive_entropy: TRL adds its entropy bonus as a plain token mean over each micro-batch, "
                "not weighted by the question values"
            )
        if self.scale_rewards != "group":
            changes.append(
                f"scale_rewards={self.scale_rewards!r}: advantages are not the paper's group-normalised ones "
                "(A = (r - mean) / std over the question's rollouts)"
            )
        if self.importance_sampling_level != "token":
            changes.append(
                f"importance_sampling_level={self.importance_sampling_level!r}: the ratio is the sequence's geometric "
                "mean (GSPO), not the paper's per-token ratio"
            )
        if self.delta is not None:
            changes.append(f"delta={self.delta}: the ratio is also clipped from above at delta (two-sided clipping)")
        if self.top_entropy_quantile < 1.0:
            changes.append(
                f"top_entropy_quantile={self.top_entropy_quantile}: low-entropy tokens get no loss but still count "
                "in T_j, so each question's token average is over all its tokens"
            )
        if self.off_policy_mask_threshold is not None:
            changes.append(
                f"off_policy_mask_threshold={self.off_policy_mask_threshold}: masked rollouts get no loss but their "
                "tokens still count in T_j"
            )
        if self.use_vllm and self.vllm_importance_sampling_correction and self.loss_type not in CODAPO_LOSS_TYPES:
            changes.append(
                "vllm_importance_sampling_correction with a TRL loss type: rollouts or tokens masked by the "
                "correction still count in TRL's normaliser"
            )
        for change in changes:
            logger.warning("CoDaPO objective changed by a TRL option: %s.", change)
