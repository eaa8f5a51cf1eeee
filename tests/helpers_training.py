"""Helpers shared by the training tests (test_trainer, test_dynamics, test_generation) and the multi-process runs.

Plain functions, imported as `from helpers_training import ...` (tests/ is on the path, as for `fakes`).
"""

from __future__ import annotations

from unittest.mock import patch

import torch
from transformers import TrainerCallback
from trl import GRPOTrainer

from codapo_trl import CoDaPOConfig


# What the hardware would otherwise decide, pinned: float32 without autocast (TRL turns bf16 on by default, and bf16
# kernels round differently on different CPUs), the model loaded in float32 with PyTorch's SDPA attention.
PINNED_PRECISION = dict(bf16=False, fp16=False, model_init_kwargs={"dtype": "float32", "attn_implementation": "sdpa"})


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
