"""Calibration for the CoDaPO-vs-GRPO experiment: pass rate per arithmetic level of a model, at the training
temperature (1.0) and the evaluation temperature (0.6), with the paper's prompt and the training reward's grader.

Sampling and grading are `codapo_trl.evaluation.evaluate_model` (the same grader as the training reward,
`codapo_trl.rewards.grade_answers`: an anchored answer that is the number, restatements of the question score 0).
The questions come from the `train` split (the pool the RL runs draw from; the held-out `test` split is not looked
at). Per level and temperature it reports:

- `pass_rate`: avg@n, the share of correct samples;
- `boxed_rate`: the share of samples with a `\\boxed{}` (is format discovery gone?), `no_answer_rate` (no anchored
  answer at all), `truncated_rate`, `mean_tokens`;
- `mixed_group_rate`: the expected share of groups of G fresh samples (G = `--group-size`, 8 as in the runs) that
  are neither all correct nor all wrong, i.e. groups with a non-zero advantage (unbiased from n >= G samples per
  question, see [`mixed_group_rate`]); `discovery_rate`: the share with at least one correct sample (pass@G);
- a few completions per level, to read what the model does (computing, restating, guessing).

    OMP_NUM_THREADS=2 nice -n 10 python experiments/codapo_vs_grpo/calibrate.py --model embedded/SmolLM2-135M-Instruct \\
        --label base --results-dir experiments/codapo_vs_grpo/results/calibration

Writes `<results-dir>/<label>.json` (small: metrics and examples, committed) and the full samples under
`--samples-dir` (default `outputs/calibration/<label>/T<temperature>/`, not committed).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from codapo_trl.data import SYSTEM_PROMPT, arithmetic_pool_sizes, last_boxed
from codapo_trl.evaluation import evaluate_model, load_benchmark, pass_at_k


logger = logging.getLogger("calibrate")

TARGET_BAND = {3: (0.30, 1.0), 4: (0.05, 0.25), 5: (0.005, 0.05)}
"""Issue 14's target pass rates at the training temperature (1.0): a learnable band and a hard level where discovery
is rare but not impossible."""


def mixed_group_rate(num_samples: int, num_correct: Sequence[int], group_size: int) -> float:
    """Expected share of questions whose group of `group_size` fresh samples is mixed (some right, some wrong).

    For a question with `c` correct of `n` samples, the unbiased estimates of "all `G` correct" and "all `G` wrong"
    are `C(c, G) / C(n, G)` and `C(n - c, G) / C(n, G)` (sampling without replacement, as in pass@k); the mixed share
    is one minus both, averaged over questions.

    Example:
        >>> mixed_group_rate(8, [0, 8, 4], 8)  # never, always, and a question solved half the time
        0.3333333333333333
        >>> round(mixed_group_rate(8, [1], 4), 3)  # 1 of 8 correct: a group of 4 holds it with probability 1/2
        0.5
    """
    if group_size > num_samples:
        raise ValueError(f"group_size ({group_size}) must be <= samples per question ({num_samples}).")
    if not num_correct:
        raise ValueError("No question to average over.")
    total = 0.0
    for c in num_correct:
        all_wrong = 1.0 - pass_at_k(num_samples, c, group_size)
        all_right = 1.0 - pass_at_k(num_samples, num_samples - c, group_size)
        total += 1.0 - all_wrong - all_right
    return total / len(num_correct)


def level_report(questions: Sequence[Any], group_size: int, num_examples: int) -> dict[str, Any]:
    """Metrics and example completions of one level from its `QuestionRecord`s (see the module docstring)."""
    samples = [s for q in questions for s in q.samples]
    n = len(questions[0].samples)
    count = len(samples)
    examples = []
    step = max(1, len(questions) // max(num_examples, 1))
    for q in questions[::step][:num_examples]:
        s = q.samples[0]
        examples.append(
            {"question": q.question, "gold": q.gold, "completion": s.completion, "extracted": s.extracted,
             "correct": s.correct, "reason": s.reason}
        )  # fmt: skip
    reasons: dict[str, int] = {}
    for s in samples:
        if not s.correct:
            key = s.reason or "wrong answer"
            reasons[key] = reasons.get(key, 0) + 1
    return {
        "num_questions": len(questions),
        "samples_per_question": n,
        "pass_rate": sum(bool(s.correct) for s in samples) / count,
        "boxed_rate": sum(last_boxed(s.completion) is not None for s in samples) / count,
        "no_answer_rate": sum(s.extracted is None for s in samples) / count,
        "truncated_rate": sum(s.finish_reason == "length" for s in samples) / count,
        "mean_tokens": sum(s.num_tokens for s in samples) / count,
        "discovery_rate": sum(pass_at_k(n, q.num_correct, min(group_size, n)) for q in questions) / len(questions),
        "mixed_group_rate": mixed_group_rate(n, [q.num_correct for q in questions], min(group_size, n)),
        "failure_reasons": dict(sorted(reasons.items(), key=lambda item: -item[1])),
        "examples": examples,
    }


def target_bands(hard_level: int = 5) -> dict[int, tuple[float, float]]:
    """The bands a calibration is held to: round 1's [`TARGET_BAND`], or, for another hard level (round 2's
    candidates), the hard band (0.5-5 % at T = 1) on that level alone."""
    return dict(TARGET_BAND) if hard_level == 5 else {hard_level: TARGET_BAND[5]}


def in_band(pass_rates: dict[int, float], bands: dict[int, tuple[float, float]] = TARGET_BAND) -> dict[int, bool]:
    """Whether each level's pass rate at the training temperature lies in its band (default [`TARGET_BAND`])."""
    return {lvl: lo <= pass_rates[lvl] <= hi for lvl, (lo, hi) in bands.items() if lvl in pass_rates}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="alias, hub id or local checkpoint")
    parser.add_argument("--label", required=True, help="name of this calibration attempt (file name)")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument(
        "--num-questions",
        type=int,
        nargs="+",
        default=[48],
        help="questions per level (capped by the pool): one number, or one per level of --levels",
    )
    parser.add_argument("--samples", type=int, default=8, help="samples per question (>= --group-size)")
    parser.add_argument(
        "--hard-level",
        type=int,
        default=5,
        help="the level held to the hard band, 0.5-5 %% at T = 1 (round 2: 6 or 7)",
    )
    parser.add_argument("--group-size", type=int, default=8, help="G of the RL runs, for the group rates")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[1.0, 0.6])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--question-seed", type=int, default=1, help="which train questions (not a run's seed)")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--examples", type=int, default=4, help="completions kept per level and temperature")
    parser.add_argument("--results-dir", type=Path, default=Path("experiments/codapo_vs_grpo/results/calibration"))
    parser.add_argument("--samples-dir", type=Path, default=None, help="full samples (default outputs/calibration)")
    parser.add_argument("--note", default="", help="what this attempt changes, recorded in the JSON")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    bands = target_bands(args.hard_level)
    pools = arithmetic_pool_sizes("train")
    if len(args.num_questions) not in (1, len(args.levels)):
        raise SystemExit(f"--num-questions takes one number or one per level ({len(args.levels)}).")
    wanted = args.num_questions * len(args.levels) if len(args.num_questions) == 1 else args.num_questions
    counts = {lvl: min(n, pools.get(lvl, n)) for lvl, n in zip(args.levels, wanted)}  # a sampled level has no cap
    benchmark = load_benchmark(
        "arithmetic", split="train", num_per_level=counts, seed=args.question_seed, system_prompt=SYSTEM_PROMPT
    )
    samples_dir = args.samples_dir or Path("outputs") / "calibration" / args.label
    record: dict[str, Any] = {
        "label": args.label,
        "model": args.model,
        "note": args.note,
        "args": {k: str(v) for k, v in vars(args).items()},
        "split": "train",
        "questions_per_level": counts,
        "system_prompt": SYSTEM_PROMPT,
        "target_band_T1": {str(k): v for k, v in bands.items()},
        "temperatures": {},
    }
    for temperature in args.temperatures:
        result = evaluate_model(
            args.model,
            [benchmark],
            num_samples=args.samples,
            temperature=temperature,
            max_new_tokens=args.max_new_tokens,
            seed=args.seed,
            batch_size=args.batch_size,
            system_prompt=SYSTEM_PROMPT,
            backend="transformers",
            dtype="float32",
            output_dir=samples_dir / f"T{temperature}",
            progress=False,
        )
        questions = result.benchmarks[benchmark.name].questions
        levels = {
            str(lvl): level_report([q for q in questions if q.level == lvl], args.group_size, args.examples)
            for lvl in args.levels
        }
        record["temperatures"][str(temperature)] = {
            "levels": levels,
            "backend": result.backend,
            "seconds": result.timing["total_s"],
            "generated_tokens": result.timing["generated_tokens"],
        }
        logger.info(
            "T=%.1f: %s",
            temperature,
            ", ".join(
                f"L{lvl} pass {v['pass_rate']:.3f} boxed {v['boxed_rate']:.2f} mixed {v['mixed_group_rate']:.2f}"
                for lvl, v in levels.items()
            ),
        )
    training = record["temperatures"].get("1.0")
    if training:
        record["in_band_T1"] = {
            str(k): v
            for k, v in in_band({int(k): v["pass_rate"] for k, v in training["levels"].items()}, bands).items()
        }
    record["seconds"] = round(time.perf_counter() - start, 1)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    (args.results_dir / f"{args.label}.json").write_text(json.dumps(record, indent=1) + "\n")
    logger.info("Calibration %s done in %.0f s", args.label, record["seconds"])
    return record


if __name__ == "__main__":
    main()
