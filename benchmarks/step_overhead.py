"""Wall time per optimizer update: TRL's GRPOTrainer against CoDaPOTrainer, in one process, same everything.

Both trainers get the same model, data, seed, batch layout and generated-token budget (every completion is forced
to exactly `--max-completion-length` tokens, so both generate the same number of tokens per update). Runs alternate
between the trainers; the first two updates (one B/S pair) of each run are warm-up and not counted. The last line
printed contains the word `ratio`: mean seconds per update of CoDaPO divided by GRPO's.

With `--dynamics-off` two more arms run: CoDaPO without its `dynamics/` metrics, and `GRPODynamicsTrainer` (TRL's
GRPO plus the metrics). Besides the wall-time ratios, which carry the noise of separate runs, the cost of the
metrics is measured inside each run: the time spent in the methods that exist only for them, as a share of the run.

    python benchmarks/step_overhead.py --model tiny --updates 10 --repeats 3 --dynamics-off
    python benchmarks/step_overhead.py --model embedded/SmolLM2-135M-Instruct --updates 4 --repeats 2 \
        --max-completion-length 48 --dynamics-off

With `--use-vllm` both trainers generate with vLLM in colocate mode (on CPU: `make install-vllm`, then run it with
`.venv-vllm/bin/python`). vLLM allows one engine per process, so each run then goes to its own subprocess; the
engine's start-up is outside the timed updates.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from codapo_trl import CoDaPOConfig, CoDaPOTrainer, GRPODynamicsTrainer
from codapo_trl.config import checkpointing_argument
from codapo_trl.vllm_cpu import with_cpu_vllm_sync


# The methods that exist only for the `dynamics/` metrics: their time, measured inside the run, is the metrics' cost.
DYNAMICS_METHODS = ("_accumulate_bins", "_flush_update_metrics")


def instrument(trainer, names: tuple[str, ...]) -> dict[str, float]:
    """Wrap the trainer's methods `names` so that the seconds spent in each are summed into the returned dict."""
    spent: dict[str, float] = defaultdict(float)
    for name in names:
        original = getattr(trainer, name)

        def timed(*args, _original=original, _name=name, **kwargs):
            start = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                spent[_name] += time.perf_counter() - start

        setattr(trainer, name, timed)
    return spent


class UpdateTimer(TrainerCallback):
    """Seconds taken by each optimizer update (generation included), and CoDaPO's phase of each."""

    def __init__(self):
        self.seconds: list[float] = []
        self._start = 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.seconds.append(time.perf_counter() - self._start)


def resolve_model(name: str, workdir: Path) -> str:
    if name == "tiny":
        from codapo_trl.testing import build_tiny_model

        return str(build_tiny_model(workdir / "tiny", hidden_size=64))
    try:
        from codapo_trl.models import resolve_model_name_or_path
    except ImportError:
        return name
    return resolve_model_name_or_path(name)


def arithmetic_prompts(n: int, seed: int) -> Dataset:
    import random

    rng = random.Random(seed)
    pairs = [(rng.randint(0, 9), rng.randint(0, 9)) for _ in range(n)]
    return Dataset.from_dict(
        {
            "prompt": [
                [
                    {
                        "role": "system",
                        "content": "Please reason step by step, and put your final answer within \\boxed{}.",
                    },
                    {"role": "user", "content": f"What is {a} + {b}?"},
                ]
                for a, b in pairs
            ],
            "answer": [str(a + b) for a, b in pairs],
        }
    )


def contains_answer(completions, answer, **kwargs) -> list[float]:
    """A cheap stand-in reward (the same for both trainers): 1 if the gold number appears in the completion."""
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [float(gold in text) for text, gold in zip(texts, answer)]


def run(
    trainer_cls, config_cls, model: str, options: argparse.Namespace, workdir: Path, **extra
) -> tuple[list[float], float]:
    """Train for `options.updates` timed updates (after a warm-up pair); returns the seconds of each timed update
    and the share of all the run's time spent in the dynamics-only methods (0 for TRL's trainer)."""
    if options.use_vllm:  # vLLM names the minimum `min_tokens`; TRL's GRPOTrainer needs our sync on a CPU engine
        trainer_cls = with_cpu_vllm_sync(trainer_cls)
        forced = {"min_tokens": options.max_completion_length}
        extra = {"use_vllm": True, "vllm_mode": "colocate", "vllm_max_model_length": 1024, **extra}
    else:
        forced = {"min_new_tokens": options.max_completion_length}
    args = config_cls(
        output_dir=str(workdir / trainer_cls.__name__),
        per_device_train_batch_size=options.micro_batch,
        gradient_accumulation_steps=options.questions * options.num_generations // options.micro_batch,
        num_generations=options.num_generations,
        max_completion_length=options.max_completion_length,
        generation_kwargs=forced,
        max_steps=options.updates + 2,
        learning_rate=1e-6,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=options.device == "cpu",
        bf16=options.device != "cpu",
        **checkpointing_argument(False),
        seed=options.seed,
        disable_tqdm=True,
        **extra,
    )
    timer = UpdateTimer()
    trainer = trainer_cls(
        model=model,
        reward_funcs=contains_answer,
        args=args,
        train_dataset=arithmetic_prompts(16 * options.questions, options.seed),
        callbacks=[timer],
    )
    spent = instrument(trainer, DYNAMICS_METHODS) if hasattr(trainer, "_accumulate_bins") else {}
    trainer.train()
    share = sum(spent.values()) / sum(timer.seconds)
    return timer.seconds[2:], share  # the first B/S pair warms caches up; whole pairs are timed


RESULT_TAG = "STEP_OVERHEAD_RESULT "


def run_in_subprocess(argv: list[str], arm: str) -> tuple[list[float], float]:
    """One run of one arm in a fresh process (vLLM: one engine per process)."""
    result = subprocess.run(
        [sys.executable, __file__, *argv, "--arm", arm], capture_output=True, text=True, check=False
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith(RESULT_TAG)]
    if result.returncode != 0 or not lines:
        raise SystemExit(f"run of {arm} failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}")
    payload = json.loads(lines[-1].removeprefix(RESULT_TAG))
    return payload["seconds"], payload["share"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny", help="'tiny' (built offline), a path, or an alias")
    parser.add_argument("--questions", type=int, default=8, help="questions per update (|B|)")
    parser.add_argument("--num-generations", type=int, default=4, help="rollouts per question (G)")
    parser.add_argument("--micro-batch", type=int, default=8, help="per_device_train_batch_size")
    parser.add_argument("--max-completion-length", type=int, default=32)
    parser.add_argument("--updates", type=int, default=4, help="timed updates per run (even: whole B/S pairs)")
    parser.add_argument("--repeats", type=int, default=2, help="alternating runs per trainer")
    parser.add_argument("--timing", default="before_update", choices=["before_update", "after_update"])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--dynamics-off",
        action="store_true",
        help="also time CoDaPO with codapo_dynamics=False, to measure the cost of the dynamics/ metrics",
    )
    parser.add_argument(
        "--use-vllm", action="store_true", help="generate with vLLM (colocate), each run in a subprocess"
    )
    parser.add_argument("--arm", default=None, help=argparse.SUPPRESS)  # internal: one run of one arm, JSON out
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    argv = sys.argv[1:] if argv is None else list(argv)

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        model = resolve_model(options.model, workdir)
        arms = {
            "GRPO": (GRPOTrainer, GRPOConfig, {}),
            "CoDaPO": (CoDaPOTrainer, CoDaPOConfig, {"codapo_resample_timing": options.timing}),
        }
        if options.dynamics_off:
            arms["CoDaPO-nodyn"] = (
                CoDaPOTrainer,
                CoDaPOConfig,
                {"codapo_resample_timing": options.timing, "codapo_dynamics": False},
            )
            arms["GRPO+dyn"] = (GRPODynamicsTrainer, GRPOConfig, {})
        if options.arm is not None:
            trainer_cls, config_cls, extra = arms[options.arm]
            seconds, share = run(trainer_cls, config_cls, model, options, workdir, **extra)
            print(RESULT_TAG + json.dumps({"seconds": seconds, "share": share}))
            return
        times: dict[str, list[float]] = {name: [] for name in arms}
        shares: dict[str, list[float]] = {name: [] for name in arms}
        for _ in range(options.repeats):
            for name, (trainer_cls, config_cls, extra) in arms.items():
                if options.use_vllm:
                    seconds, share = run_in_subprocess(argv, name)
                else:
                    seconds, share = run(trainer_cls, config_cls, model, options, workdir, **extra)
                times[name] += seconds
                shares[name].append(share)
    tokens = options.questions * options.num_generations * options.max_completion_length
    print(f"model={options.model} |B|={options.questions} G={options.num_generations} "
          f"tokens/update={tokens} micro_batch={options.micro_batch} timing={options.timing} "
          f"generation={'vllm colocate' if options.use_vllm else 'transformers'}")  # fmt: skip
    for name, seconds in times.items():
        print(
            f"{name:12s} {statistics.mean(seconds):8.3f} s/update  (median {statistics.median(seconds):.3f}, "
            f"n={len(seconds)}, {tokens / statistics.mean(seconds):.0f} generated tokens/s)"
        )
    # Timed updates start at the third one (a B update): even positions are B updates, odd ones S updates.
    if options.updates % 2:
        raise SystemExit("--updates must be even (whole B/S pairs)")
    codapo = times["CoDaPO"]
    b_updates = codapo[0::2]
    s_updates = codapo[1::2]
    if b_updates and s_updates:
        print(
            f"CoDaPO by phase: B {statistics.mean(b_updates):.3f} s (includes generating S when before_update), "
            f"S {statistics.mean(s_updates):.3f} s"
        )
    if options.dynamics_off:
        dyn = statistics.mean(times["CoDaPO"]) / statistics.mean(times["CoDaPO-nodyn"])
        print(f"dynamics overhead, wall time (CoDaPO with / without dynamics metrics): {dyn:.3f}")
        for name in ("CoDaPO", "GRPO+dyn"):
            print(f"dynamics overhead, measured inside {name}'s runs: {100 * statistics.mean(shares[name]):.2f} % of "
                  "the run's time in the dynamics-only methods")  # fmt: skip
        grpo_dyn = statistics.mean(times["GRPO+dyn"]) / statistics.mean(times["GRPO"])
        print(f"GRPODynamicsTrainer / GRPOTrainer (s per update; includes recording log-probs at generation): "
              f"{grpo_dyn:.3f}")  # fmt: skip
    ratio = statistics.mean(times["CoDaPO"]) / statistics.mean(times["GRPO"])
    print(f"ratio CoDaPO/GRPO (s per update): {ratio:.3f}")


if __name__ == "__main__":
    main()
