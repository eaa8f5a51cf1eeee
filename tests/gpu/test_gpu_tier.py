"""The GPU tier: CoDaPO and GRPO end to end with transformers generation, the recorder's trust decision and S's
importance ratio against a training forward, and a checkpoint's save and resume.

Every test takes the `device` parameter (tests/gpu/conftest.py): on CPU in float32 it runs in the default suite; on
CUDA in bf16 it carries the marker `gpu` (`make test-gpu`) and skips where no CUDA device is seen.
"""

import math

import pytest
import torch
from fakes import parity_reward, question_dataset
from gpu_devices import GPU_MARKS
from helpers_training import StopAfter, phases, record_outputs, record_parent_generations, train_recording_generations
from trl import GRPOConfig, GRPOTrainer

from codapo_trl import CoDaPOTrainer
from codapo_trl.config import RESAMPLE_TIMINGS


# How far a recorded log-prob may be from the training forward's (per token, nats). float32: the same kernels up to
# summation order. bf16: 8 significant bits, 8 units of roundoff: 2^-5, the bound of docs/method.md and of
# tests/integration/test_trainer.py's BF16_RECORDING_BOUND (on CPU; on an H100 the CUDA case passed within it).
RECORDING_BOUND = {"cpu": 1e-4, "cuda": 2**-5}


def expected_dtype(device):
    return torch.float32 if device == "cpu" else torch.bfloat16


def assert_trained(trainer, before, device):
    """Every parameter on the test's device, in its dtype, finite, and changed by training."""
    for name, param in trainer.model.named_parameters():
        assert param.device.type == device and param.dtype == expected_dtype(device), name
        assert torch.isfinite(param).all(), f"{name} is not finite"
        assert not torch.equal(param.detach().cpu(), before[name]), f"{name} did not change"
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert losses and all(math.isfinite(loss) for loss in losses)


def snapshot(model):
    return {n: p.detach().cpu().clone() for n, p in model.named_parameters()}


# Two optimizer steps per phase: one generation batch of 8 rows (4 questions x G = 2) in two chunks of 4.
TWO_STEPS = dict(per_device_train_batch_size=4, steps_per_generation=2, num_generations=2, max_steps=4)


# Both timings on CUDA; on CPU only the paper's (tests/integration/test_trainer.py runs both there), to keep this
# file's CPU share of the default suite short.
TIMINGS = [
    pytest.param("cpu", "before_update", id="cpu-fp32-before_update"),
    *(pytest.param("cuda", timing, id=f"cuda-bf16-{timing}", marks=GPU_MARKS) for timing in RESAMPLE_TIMINGS),
]


@pytest.mark.parametrize(("device", "timing"), TIMINGS, indirect=["device"])
def test_codapo_end_to_end_with_transformers_generation(device, device_args, tiny_model_dir, tmp_path, timing):
    args = device_args(tmp_path, codapo_resample_timing=timing, codapo_top_k=2, codapo_weight_offset=0.05, **TWO_STEPS)
    assert args.codapo_steps_per_phase == 2
    trainer = CoDaPOTrainer(tiny_model_dir, parity_reward, args=args, train_dataset=question_dataset())
    assert trainer.records_generation_logps  # TRL's own model.generate: nothing stands in for generation
    before = snapshot(trainer.model)
    calls, parent_patch = record_parent_generations(trainer)
    with parent_patch:
        trainer.train()
    assert phases(trainer) == [0.0, 0.0, 1.0, 1.0]
    assert len(calls) == 2 and set(calls[1]) <= set(calls[0])  # B, then S from B's questions
    assert_trained(trainer, before, device)
    confidences = [h["codapo/confidence_mean"] for h in trainer.state.log_history if "codapo/confidence_mean" in h]
    assert len(confidences) == 2 and all(0.0 < c < 1.0 for c in confidences)  # from the recorded log-probs


def test_grpo_end_to_end_with_transformers_generation(device, device_args, tiny_model_dir, tmp_path):
    args = device_args(tmp_path, config_class=GRPOConfig, **TWO_STEPS)
    trainer = GRPOTrainer(tiny_model_dir, parity_reward, args=args, train_dataset=question_dataset())
    before = snapshot(trainer.model)
    trainer.train()
    assert trainer.state.global_step == 4
    assert_trained(trainer, before, device)


def test_recorder_trust_and_s_ratio_match_the_training_forward(device, device_args, tiny_model_dir, tmp_path):
    """The recorder is trusted for S's ratio only in float32; in bf16 S's ratio divides by a training forward of the
    behaviour policy. Either way the recorded log-probs of B and S are within `RECORDING_BOUND` of that forward."""
    args = device_args(tmp_path, max_steps=2, codapo_resample_timing="before_update", temperature=0.7)
    trainer = CoDaPOTrainer(tiny_model_dir, parity_reward, args=args, train_dataset=question_dataset())
    trusted = device == "cpu"
    assert trainer.recording_matches_training is trusted
    outputs = record_outputs(trainer)
    forward = trainer._policy_logps
    gaps, trainer_forwards = [], []

    def weigh_and_check(output, stats, _weigh=trainer._codapo_weigh):
        # B and S are both weighed before B's update (before_update): the policy is still the one that generated
        mask = output["completion_mask"].bool()
        gaps.append((output["sampling_per_token_logps"] - forward(output))[mask].abs().max().item())
        return _weigh(output, stats)

    def counted_forward(output):
        trainer_forwards.append(forward(output))
        return trainer_forwards[-1]

    trainer._codapo_weigh = weigh_and_check
    trainer._policy_logps = counted_forward
    trainer.train()

    assert len(gaps) == 2 and max(gaps) <= RECORDING_BOUND[device], gaps
    assert outputs[0].get("old_per_token_logps") is None  # B is on-policy: its ratio is exactly 1
    s_out = outputs[1]
    mask = s_out["completion_mask"].bool()
    assert mask.any() and (s_out["sampling_per_token_logps"][mask] < 0).all()
    if trusted:
        assert trainer_forwards == []  # confidence and S's ratio both use the recording
        assert torch.equal(s_out["old_per_token_logps"], s_out["sampling_per_token_logps"])
    else:
        assert len(trainer_forwards) == 1  # S's behaviour log-probs, before B's update
        assert torch.equal(s_out["old_per_token_logps"], trainer_forwards[0])
        gap = (s_out["sampling_per_token_logps"] - s_out["old_per_token_logps"])[mask].abs().max().item()
        assert gap <= RECORDING_BOUND[device]


# Straight and resumed runs take the same steps on the same rollouts; in bf16 the weights keep 8 significant bits, so
# they are compared to 2 units of bf16 roundoff (float32: to float noise).
RESUME_TOLERANCE = {"cpu": dict(rtol=1e-5, atol=1e-6), "cuda": dict(rtol=2**-7, atol=1e-3)}


def test_checkpoint_save_and_resume_between_b_and_s(device, device_args, tiny_model_dir, tmp_path):
    common = dict(max_steps=4, save_strategy="steps", save_steps=100, codapo_resample_timing="before_update")
    dataset = question_dataset()

    def run(args, callbacks=(), resume=None):
        return train_recording_generations(tiny_model_dir, args, dataset, callbacks, resume)

    straight, straight_calls = run(device_args(tmp_path / "straight", **common))
    interrupted = device_args(tmp_path / "interrupted", **common)
    first, first_calls = run(interrupted, callbacks=[StopAfter(1)])
    checkpoint = tmp_path / "interrupted" / "out" / "checkpoint-1"
    assert first.state.global_step == 1 and (checkpoint / "codapo_state-rank0.pt").exists()
    assert (checkpoint / "model.safetensors").exists() and (checkpoint / "optimizer.pt").exists()

    resumed, resumed_calls = run(interrupted, resume=str(checkpoint))
    assert phases(resumed)[-3:] == [1.0, 0.0, 1.0]  # the first update after resuming is S, from the saved state
    assert first_calls + resumed_calls == straight_calls  # nothing generated twice, the same S questions
    resumed_params = dict(resumed.model.named_parameters())
    for name, param in straight.model.named_parameters():
        assert resumed_params[name].device.type == device and resumed_params[name].dtype == expected_dtype(device)
        torch.testing.assert_close(resumed_params[name], param, **RESUME_TOLERANCE[device])
