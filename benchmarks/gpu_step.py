"""Seconds per optimizer update of TRL's GRPOTrainer and CoDaPOTrainer on one device, each run in its own process.

Built for the first GPU lent to the project (docs/performance.md, "GPU tier"): by default a randomly initialised
model of the paper's shape (Qwen2.5-Math-1.5B's architecture, built locally from its configuration, no weights
downloaded) in bf16 with SDPA attention, generating with transformers. Both trainers get the same model, data, seed,
batch layout and generated-token budget (every completion is forced to `--max-completion-length` tokens). The first
B/S pair of updates of every run is warm-up and is not counted.

Each run is a fresh process (so that its peak memory is its own) and reports: seconds per timed update; generated
tokens per second of update wall time and per second of `model.generate`; peak memory (GPU:
`torch.cuda.max_memory_allocated`; CPU: the process's peak resident set size). The JSON written to `--output` holds
every run, the settings, the versions and the CoDaPO/GRPO ratio of mean seconds per update.

    python benchmarks/gpu_step.py --device cuda --model paper --output benchmarks/results/gpu_step_h100_paper.json
    python benchmarks/gpu_step.py --device cuda --gguf --output benchmarks/results/gpu_step_h100_smollm2.json
    python benchmarks/gpu_step.py --device cpu --model tiny --output benchmarks/results/gpu_step_cpu_tiny.json

`--model tiny` is a small random Qwen2 (for the CPU tier check); `--model smollm2` a randomly initialised model of the
embedded SmolLM2-135M-Instruct's shape (what a GPU machine can be sent without the 94 MB GGUF: completions are forced
to a fixed length, so the weights do not change the work); `--gguf` runs the embedded SmolLM2-135M-Instruct itself
(converted from its GGUF on first use, `codapo_trl.models`). The JSON at `--output` is rewritten after every run, so a
run stopped at a time limit keeps the runs that finished.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from step_overhead import UpdateTimer, arithmetic_prompts, contains_answer


logger = logging.getLogger("gpu_step")

# Qwen2.5-Math-1.5B's architecture (its config.json): the model the paper trains (Section 5.1).
PAPER_SHAPE = dict(
    hidden_size=1536,
    intermediate_size=8960,
    num_hidden_layers=28,
    num_attention_heads=12,
    num_key_value_heads=2,
    vocab_size=151936,
    max_position_embeddings=4096,
    rope_theta=10000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
    hidden_act="silu",
    attention_dropout=0.0,
)

# SmolLM2-135M-Instruct's architecture (the config.json `codapo_trl.models` writes when it converts the embedded GGUF).
SMOLLM2_SHAPE = dict(
    hidden_size=576,
    intermediate_size=1536,
    num_hidden_layers=30,
    num_attention_heads=9,
    num_key_value_heads=3,
    head_dim=64,
    vocab_size=49152,
    max_position_embeddings=8192,
    rope_theta=100000.0,
    rms_norm_eps=1e-5,
    tie_word_embeddings=True,
    hidden_act="silu",
    attention_dropout=0.0,
)

# Per-model defaults: (questions |B|, rollouts G, micro-batch, completion tokens, timed updates)
DEFAULTS = {
    "paper": (8, 8, 8, 256, 4),
    "smollm2": (8, 4, 16, 64, 4),
    "tiny": (4, 4, 16, 16, 4),
    "gguf": (8, 4, 16, 64, 4),
}

RESULT_TAG = "GPU_STEP_RESULT "
ARMS = ("GRPO", "CoDaPO")


def build_random_model(path: Path, seed: int, shape: str = "paper") -> Path:
    """A randomly initialised causal LM of the paper's shape (Qwen2) or SmolLM2-135M's (Llama), saved in bfloat16 with
    the tiny test tokenizer (its 320 ids are a prefix of the model's vocabulary; sampled ids beyond them decode to
    nothing)."""
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    from codapo_trl.testing import build_tiny_tokenizer

    config_cls, model_cls, dims = {
        "paper": (Qwen2Config, Qwen2ForCausalLM, PAPER_SHAPE),
        "smollm2": (LlamaConfig, LlamaForCausalLM, SMOLLM2_SHAPE),
    }[shape]
    tokenizer = build_tiny_tokenizer()
    ids = dict(pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None)
    config = config_cls(**dims, **ids)
    torch.manual_seed(seed)
    model = model_cls(config).to(torch.bfloat16)
    model.generation_config = GenerationConfig(**ids)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def prepare_model(options: argparse.Namespace, workdir: Path) -> str:
    """The model directory the runs load (built once, in the parent process)."""
    if options.gguf:
        from codapo_trl.models import DEFAULT_EMBEDDED_MODEL, resolve_model_name_or_path

        return resolve_model_name_or_path(DEFAULT_EMBEDDED_MODEL)
    if options.model in ("paper", "smollm2"):
        return str(build_random_model(workdir / options.model, options.seed, options.model))
    from codapo_trl.testing import build_tiny_model

    return str(build_tiny_model(workdir / "tiny", hidden_size=64))


def peak_memory(device: str) -> dict[str, float | str]:
    if device == "cuda":
        return {
            "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
            "memory": "torch.cuda.max_memory_allocated",
        }
    # Linux reports ru_maxrss in KiB
    return {"peak_memory_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, "memory": "peak RSS"}


def time_generate(model) -> list[float]:
    """Wrap `model.generate` (what TRL calls on the unwrapped model) to record the seconds of each call."""
    seconds: list[float] = []
    original = model.generate

    def timed(*args, **kwargs):
        synchronize = torch.cuda.synchronize if next(model.parameters()).is_cuda else (lambda: None)
        synchronize()
        start = time.perf_counter()
        out = original(*args, **kwargs)
        synchronize()
        seconds.append(time.perf_counter() - start)
        return out

    model.generate = timed
    return seconds


class SynchronizedTimer(UpdateTimer):
    """`UpdateTimer` that waits for the GPU's queued work at both ends of an update."""

    def on_step_begin(self, args, state, control, **kwargs):
        if torch.cuda.is_available() and not args.use_cpu:
            torch.cuda.synchronize()
        super().on_step_begin(args, state, control, **kwargs)

    def on_step_end(self, args, state, control, **kwargs):
        if torch.cuda.is_available() and not args.use_cpu:
            torch.cuda.synchronize()
        super().on_step_end(args, state, control, **kwargs)


def run_arm(arm: str, model: str, options: argparse.Namespace, workdir: Path) -> dict:
    """One run of one trainer in this process: warm-up pair, then `options.updates` timed updates."""
    from trl import GRPOConfig, GRPOTrainer

    from codapo_trl import CoDaPOConfig, CoDaPOTrainer
    from codapo_trl.config import checkpointing_argument

    cuda = options.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch.cuda.is_available() is False on this machine")
    trainer_cls, config_cls = (CoDaPOTrainer, CoDaPOConfig) if arm == "CoDaPO" else (GRPOTrainer, GRPOConfig)
    extra = {"codapo_resample_timing": options.timing} if arm == "CoDaPO" else {}
    rollouts = options.questions * options.num_generations
    args = config_cls(
        output_dir=str(workdir / arm),
        per_device_train_batch_size=options.micro_batch,
        gradient_accumulation_steps=rollouts // options.micro_batch,
        num_generations=options.num_generations,
        max_completion_length=options.max_completion_length,
        generation_kwargs={"min_new_tokens": options.max_completion_length},
        max_steps=options.updates + 2,
        learning_rate=1e-6,
        beta=0.0,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=not cuda,
        bf16=cuda,  # the paper's precision on the GPU; float32 on CPU, whose bf16 kernels depend on the processor
        model_init_kwargs={"dtype": "bfloat16" if cuda else "float32", "attn_implementation": "sdpa"},
        **checkpointing_argument(options.gradient_checkpointing),
        seed=options.seed,
        disable_tqdm=True,
        **extra,
    )
    timer = SynchronizedTimer()
    trainer = trainer_cls(
        model=model,
        reward_funcs=contains_answer,
        args=args,
        train_dataset=arithmetic_prompts(16 * options.questions, options.seed),
        callbacks=[timer],
    )
    generate_seconds = time_generate(trainer.model)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    trainer.train()
    lengths = [h["completions/mean_length"] for h in trainer.state.log_history if "completions/mean_length" in h]
    if any(abs(length - options.max_completion_length) > 1e-6 for length in lengths):
        raise SystemExit(f"completions not forced to {options.max_completion_length} tokens: mean lengths {lengths}")
    timed = timer.seconds[2:]
    if len(generate_seconds) != options.updates + 2:
        raise SystemExit(
            f"expected one model.generate call per update, got {len(generate_seconds)} in {options.updates + 2}"
        )
    # generate calls of the timed updates: GRPO generates once per update; CoDaPO's B and S each once per pair
    generated = generate_seconds[len(generate_seconds) - options.updates :]
    tokens = rollouts * options.max_completion_length
    return {
        "seconds_per_update": timed,
        "generate_seconds": generated,
        "generated_tokens_per_update": tokens,
        "tokens_per_s": tokens * len(timed) / sum(timed),
        "generate_tokens_per_s": tokens * len(generated) / sum(generated),
        "parameters": sum(p.numel() for p in trainer.model.parameters()),
        "dtype": str(next(trainer.model.parameters()).dtype),
        **peak_memory(options.device),
    }


def run_in_subprocess(argv: list[str], arm: str, model: str) -> dict:
    command = [sys.executable, __file__, *argv, "--arm", arm, "--model-dir", model]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith(RESULT_TAG)]
    if result.returncode != 0 or not lines:
        raise SystemExit(f"run of {arm} failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}")
    return json.loads(lines[-1].removeprefix(RESULT_TAG))


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in ("torch", "transformers", "trl", "accelerate", "codapo-trl"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def device_name(device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name(0)
    with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
        model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "CPU")
    return f"{model} ({torch.get_num_threads()} threads)"


def summarize(runs: dict[str, list[dict]]) -> dict[str, dict[str, float]]:
    summary = {}
    for arm, arm_runs in runs.items():
        seconds = [s for run in arm_runs for s in run["seconds_per_update"]]
        summary[arm] = {
            "mean_seconds_per_update": statistics.mean(seconds),
            "min": min(seconds),
            "median": statistics.median(seconds),
            "max": max(seconds),
            "n_updates": len(seconds),
            "tokens_per_s": statistics.mean(run["tokens_per_s"] for run in arm_runs),
            "generate_tokens_per_s": statistics.mean(run["generate_tokens_per_s"] for run in arm_runs),
            "peak_memory_gib": max(run["peak_memory_gib"] for run in arm_runs),
        }
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument(
        "--model",
        default="paper",
        choices=["paper", "smollm2", "tiny"],
        help="the paper's shape, SmolLM2-135M's shape (both random weights), or a tiny model",
    )
    parser.add_argument("--gguf", action="store_true", help="the embedded SmolLM2-135M-Instruct instead of --model")
    parser.add_argument("--questions", type=int, help="questions per update |B| (default: per model)")
    parser.add_argument("--num-generations", type=int, help="rollouts per question G (default: per model)")
    parser.add_argument("--micro-batch", type=int, help="per_device_train_batch_size (default: per model)")
    parser.add_argument("--max-completion-length", type=int, help="tokens per completion (default: per model)")
    parser.add_argument("--updates", type=int, help="timed updates per run, even (default: 4)")
    parser.add_argument("--repeats", type=int, default=1, help="runs per trainer, alternating")
    parser.add_argument("--timing", default="before_update", choices=["before_update", "after_update"])
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, help="where to write the JSON (default: print it only)")
    parser.add_argument("--arm", choices=ARMS, help=argparse.SUPPRESS)  # internal: one run in this process
    parser.add_argument("--model-dir", help=argparse.SUPPRESS)  # internal: the model the parent prepared
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    defaults = DEFAULTS["gguf" if options.gguf else options.model]
    for name, value in zip(
        ("questions", "num_generations", "micro_batch", "max_completion_length", "updates"), defaults
    ):
        if getattr(options, name) is None:
            setattr(options, name, value)
    if options.updates % 2:
        parser.error("--updates must be even (whole B/S pairs)")
    if (options.questions * options.num_generations) % options.micro_batch:
        parser.error("--micro-batch must divide --questions x --num-generations")
    argv = sys.argv[1:] if argv is None else list(argv)

    with tempfile.TemporaryDirectory() as tmp:
        if options.arm is not None:
            print(RESULT_TAG + json.dumps(run_arm(options.arm, options.model_dir, options, Path(tmp))))
            return
        model = prepare_model(options, Path(tmp))
        runs: dict[str, list[dict]] = {arm: [] for arm in ARMS}
        for repeat in range(options.repeats):
            for arm in ARMS:
                logger.info("run %d of %s ...", repeat + 1, arm)
                runs[arm].append(run_in_subprocess(argv, arm, model))
                result = build_result(options, argv, runs)
                if options.output:  # after every run: a run stopped at a time limit keeps what finished
                    options.output.parent.mkdir(parents=True, exist_ok=True)
                    options.output.write_text(json.dumps(result, indent=2) + "\n")
    for arm, row in result["summary"].items():
        logger.info(
            "%-7s %8.3f s/update (min %.3f, median %.3f, max %.3f, n=%d)  %.0f generated tokens/s  "
            "(%.0f in generate)  peak %.2f GiB",
            arm,
            row["mean_seconds_per_update"],
            row["min"],
            row["median"],
            row["max"],
            row["n_updates"],
            row["tokens_per_s"],
            row["generate_tokens_per_s"],
            row["peak_memory_gib"],
        )
    logger.info("ratio CoDaPO/GRPO (mean s per update): %.3f", result["ratio_codapo_grpo"])
    if options.output:
        logger.info("wrote %s", options.output)


def build_result(options: argparse.Namespace, argv: list[str], runs: dict[str, list[dict]]) -> dict:
    """The JSON record of the runs so far: settings, versions, per-arm summary, and the CoDaPO/GRPO ratio of mean
    seconds per update (None until both trainers have a run)."""
    summary = summarize({arm: arm_runs for arm, arm_runs in runs.items() if arm_runs})
    ratio = None
    if "CoDaPO" in summary and "GRPO" in summary:
        ratio = summary["CoDaPO"]["mean_seconds_per_update"] / summary["GRPO"]["mean_seconds_per_update"]
    return {
        "command": "python benchmarks/gpu_step.py " + shlex.join(argv),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "device": options.device,
        "device_name": device_name(options.device),
        "model": "embedded/SmolLM2-135M-Instruct" if options.gguf else options.model,
        "settings": {
            k: getattr(options, k)
            for k in ("questions", "num_generations", "micro_batch", "max_completion_length", "updates", "repeats")
        }
        | {"timing": options.timing, "precision": "bf16" if options.device == "cuda" else "float32"},
        "versions": versions(),
        "summary": summary,
        "ratio_codapo_grpo": ratio,
        "runs": runs,
    }


if __name__ == "__main__":
    main()
