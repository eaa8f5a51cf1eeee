"""Helpers shared by the training tests (test_trainer, test_dynamics, test_generation) and the multi-process runs.

Plain functions, imported as `from helpers_training import ...` (tests/ is on the path, as for `fakes`).
"""

from __future__ import annotations

import os
from unittest.mock import patch

import torch
from fakes import deterministic_rollout, hash_reward
from transformers import TrainerCallback
from trl import GRPOTrainer

from codapo_trl import CoDaPOConfig, CoDaPOTrainer


# What the hardware would otherwise decide, pinned: float32 without autocast (TRL turns bf16 on by default, and bf16
# kernels round differently on different CPUs), the model loaded in float32 with PyTorch's SDPA attention.
PINNED_PRECISION = dict(bf16=False, fp16=False, model_init_kwargs={"dtype": "float32", "attn_implementation": "sdpa"})


# TRL's configs turn `bf16` on unless told otherwise, and what bf16 autocast computes depends on the CPU (its kernels
# round differently on different processors), so a test that inherits the default passes on one machine and fails on
# another. In the test process every TRL config must therefore say `bf16` (or `fp16`) itself: an unpinned one raises
# at construction. `CODAPO_TEST_UNPINNED_BF16=on` / `off` lets unpinned configs through with bf16 on / off instead
# (to find the tests that inherit it: run the suite both ways and compare).
UNPINNED_BF16 = os.environ.get("CODAPO_TEST_UNPINNED_BF16", "error")
if UNPINNED_BF16 not in ("error", "on", "off"):
    raise ValueError(f"CODAPO_TEST_UNPINNED_BF16 must be 'error', 'on' or 'off', not {UNPINNED_BF16!r}")


class PrecisionNotPinnedError(ValueError):
    """A test built a TRL config without saying `bf16`/`fp16`: its numbers would depend on the machine's CPU."""


def pin_precision(config) -> None:
    """conftest's guard on every TRL config built in the test process (see above)."""
    if config.bf16 is not None or config.fp16:
        return
    if UNPINNED_BF16 == "error":
        raise PrecisionNotPinnedError(
            f"{type(config).__name__} built without `bf16`: TRL turns it on by default and bf16 autocast rounds "
            "differently on different CPUs; pass bf16=False (or True, with bounds that hold on any CPU)"
        )
    config.bf16 = UNPINNED_BF16 == "on"


def make_args(tmp_path, config_class=CoDaPOConfig, **overrides) -> CoDaPOConfig:
    """A small training config for the tiny model; precision and attention pinned (`PINNED_PRECISION`) unless a test
    overrides them itself."""
    settings = dict(
        **PINNED_PRECISION,
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=8,
        gradient_accumulation_steps=1,
        num_generations=4,
        max_completion_length=8,
        max_steps=2,
        logging_steps=1,
        learning_rate=0.1,
        lr_scheduler_type="constant",
        max_grad_norm=0.0,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        seed=42,
        disable_tqdm=True,
    )
    settings.update(overrides)
    return config_class(**settings)


class StopAfter(TrainerCallback):
    """Save and stop after optimizer step `step`, as an interrupted run would (for the resume tests)."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            control.should_save = True
            control.should_training_stop = True


def phases(trainer) -> list[float]:
    return [h["codapo/phase"] for h in trainer.state.log_history if "codapo/phase" in h]


def record_parent_generations(trainer):
    """Wrap TRL's own `_generate_and_score_completions` (the parent's), recording each call's input rows."""
    calls = []
    original = GRPOTrainer._generate_and_score_completions

    def spy(self, inputs):
        calls.append([row["prompt"][-1]["content"] for row in inputs])
        return original(self, inputs)

    return calls, patch.object(GRPOTrainer, "_generate_and_score_completions", spy)


def record_outputs(trainer):
    """Wrap the trainer's `_generate_and_score_completions`: one unshuffled generation output per update."""
    outputs = []
    original = trainer._generate_and_score_completions

    def spy(inputs):
        out = original(inputs)
        outputs.append({k: (v.detach().clone() if isinstance(v, torch.Tensor) else v) for k, v in out.items()})
        return out

    trainer._generate_and_score_completions = spy
    return outputs


def train_recording_generations(model_dir, args, dataset, callbacks=(), resume=None):
    """Train with deterministic rollouts (optionally resuming); returns the trainer and its parent generations."""
    trainer = CoDaPOTrainer(
        model_dir,
        hash_reward,
        args=args,
        train_dataset=dataset,
        rollout_func=deterministic_rollout,
        callbacks=list(callbacks),
    )
    calls, parent_patch = record_parent_generations(trainer)
    with parent_patch:
        trainer.train(resume_from_checkpoint=resume)
    return trainer, calls
