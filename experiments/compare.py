"""Side by side at equal budget: CoDaPO against GRPO (and other arms) from the same model, data and seeds.

Every arm trains with `recipes/codapo_math.py` from the same recipe (default: the embedded SmolLM2-135M demo on the
leveled arithmetic data) for the same number of optimizer updates (CoDaPO's S updates count, as in the paper), with
the same seeds (so the same question order). Checkpoints every `--eval-every` updates and the final model are
evaluated on the held-out arithmetic split with the evaluation API (`codapo_trl.evaluation`); the base model once.
The report (markdown, JSON and figures) goes to `--output-dir`:

- held-out accuracy per level and overall, per arm: mean and range over seeds;
- accuracy against optimizer updates and against generated tokens;
- wall time per update and its ratio to GRPO;
- where the training compute went: share of trained rollouts, and of absolute token-update weight, per difficulty
  bin (from the `dynamics/` metrics, logged for every arm).

    python experiments/compare.py --output-dir experiments/results/compare_smollm2
    python experiments/compare.py --arms grpo codapo --seeds 0 --updates 8 --eval-every 4   # a quick look

Finished runs (their final evaluation exists) are skipped, so an interrupted comparison can be resumed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

from codapo_trl.command_line import configure_logging
from codapo_trl.dynamics import BIN_LABELS
from codapo_trl.evaluation import evaluate_model
from codapo_trl.models import resolve_model_name_or_path


ROOT = Path(__file__).resolve().parents[1]


logger = logging.getLogger("compare")
DEFAULT_RECIPE = ROOT / "recipes" / "SmolLM2-135M-Instruct" / "codapo" / "config_demo.yaml"

# Overrides of the recipe per arm: the algorithm and what the paper's baseline changes.
ARMS: dict[str, list[str]] = {
    "grpo": ["--algorithm", "grpo", "--loss_type", "grpo"],
    "codapo": ["--algorithm", "codapo", "--loss_type", "codapo"],
    "codapo_weighting": ["--algorithm", "codapo", "--loss_type", "codapo", "--codapo_sampling", "false"],
    # the uniform-resampling control: S holds K questions of B drawn at random, constant weights
    "codapo_uniform": [
        "--algorithm",
        "codapo",
        "--loss_type",
        "codapo",
        "--codapo_selection",
        "uniform",
        "--codapo_weighting",
        "false",
    ],
    # round 2's loss-only arm: GRPO's advantages (v = 1, no S) under CoDaPO's per-question token-averaged loss
    "grpo_token_loss": [
        "--algorithm",
        "codapo",
        "--loss_type",
        "codapo",
        "--codapo_weighting",
        "false",
        "--codapo_sampling",
        "false",
    ],
    "dapo": [
        "--algorithm",
        "dapo",
        "--loss_type",
        "dapo",
        "--epsilon_high",
        "0.28",
        "--mask_truncated_completions",
        "true",
    ],
    "dr_grpo": ["--algorithm", "dr_grpo", "--loss_type", "dr_grpo", "--scale_rewards", "none"],
    "gpg": ["--algorithm", "gpg"],
}
GPU_PLAN = """## The GPU plan: the paper's Qwen2.5-Math-1.5B comparison

The paper's main comparison (Qwen2.5-Math-1.5B on MATH, 16 questions x G = 8 per update, lr 1e-6, temperature 1.0,
K = 4, seed 42, vLLM colocated) on 4 GPUs, one run per algorithm, then the paper's evaluation protocol
(avg@32 at temperature 0.6 on the seven maths benchmarks) and the side-by-side table:

    for algo in codapo grpo dapo dr_grpo gpg; do
      accelerate launch --config_file accelerate_configs/zero3.yaml --num_processes 4 recipes/codapo_math.py \\
          --config recipes/Qwen2.5-Math-1.5B/$algo/config_math.yaml --output_dir outputs/Qwen2.5-Math-1.5B-$algo
      codapo-eval outputs/Qwen2.5-Math-1.5B-$algo -b paper-math --output-dir outputs/eval/$algo
    done
    codapo-eval --compare outputs/eval/{grpo,dapo,dr_grpo,gpg,codapo}/summary.json

(The weighting-only ablation is the CoDaPO recipe with `--codapo_sampling false`; K is `--codapo_top_k`.) Per-update time on GPU:
`python benchmarks/step_overhead.py --device cuda --model PATH` times GRPO and CoDaPO with transformers generation
on one GPU."""

LABELS = {
    "grpo": "GRPO",
    "codapo": "CoDaPO",
    "codapo_weighting": "CoDaPO, weighting only",
    "codapo_uniform": "uniform control",
    "grpo_token_loss": "GRPO, CoDaPO's loss",
    "dapo": "DAPO",
    "dr_grpo": "Dr. GRPO",
    "gpg": "GPG",
}


def arm_recipe(arm: str, recipe: dict, path: Path) -> Path:
    """The shared recipe for one arm: TRL's GRPOTrainer baselines get no CoDaPO keys."""
    keys = dict(recipe)
    if arm in ("grpo", "dapo", "dr_grpo"):
        keys = {k: v for k, v in keys.items() if not k.startswith("codapo_")}
    path.write_text(yaml.safe_dump(keys, sort_keys=False))
    return path


def train(arm: str, seed: int, options: argparse.Namespace, recipe: dict, run_dir: Path) -> None:
    command = [
        sys.executable,
        str(ROOT / "recipes" / "codapo_math.py"),
        "--config", str(arm_recipe(arm, recipe, run_dir / "recipe.yaml")),
        *ARMS[arm],
        "--seed", str(seed),
        "--max_steps", str(options.updates),
        "--output_dir", str(run_dir),
        "--save_strategy", "steps",
        "--save_steps", str(options.eval_every),
        "--save_only_model", "true",
        "--baseline_dynamics", "true",
        "--logging_steps", "1",
        "--report_to", "none",
        *options.train_args,
    ]  # fmt: skip
    logger.info("Training %s seed %d: %s", arm, seed, " ".join(command))
    with open(run_dir.parent / f"{run_dir.name}.log", "w") as log:
        subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)


def evaluate(model: str, options: argparse.Namespace, recipe: dict, output_dir: Path) -> dict:
    summary_path = output_dir / "summary.json"
    if summary_path.exists():
        return json.loads(summary_path.read_text())
    result = evaluate_model(
        model,
        ["arithmetic"],
        num_samples=options.eval_samples,
        temperature=0.6,
        max_new_tokens=recipe.get("max_completion_length", 48),
        system_prompt=recipe.get("system_prompt"),
        seed=options.eval_seed,
        batch_size=128,
        output_dir=output_dir,
        progress=False,
    )
    return result.to_summary()


def accuracy_by_level(summary: dict, metric: str = "avg@n") -> dict[str, float]:
    """One metric of an arithmetic read-out's summary (`avg@n`, or e.g. `pass@8` of a read-out with 8 samples), per
    level (keys `"1"`, `"2"`, ...) and over all its questions (`"all"`), as a fraction."""
    bench = summary["benchmarks"]["arithmetic"]
    levels = {str(k): v["metrics"][metric] for k, v in bench["levels"].items()}
    levels["all"] = bench["metrics"][metric]
    return levels


def compute_by_bin(updates: list[dict]) -> dict[str, dict[str, float]]:
    """Trained rollouts and absolute token-update weight (rollouts x mean `|w|`) per difficulty bin, summed over the
    logged updates of a run (`trainer_state.json`'s log history, `dynamics/` metrics)."""
    bins = {label: {"count": 0.0, "weight": 0.0} for label in BIN_LABELS}
    for h in updates:
        for label in BIN_LABELS:
            count = h.get(f"dynamics/{label}/count") or 0.0
            weight = h.get(f"dynamics/{label}/token_weight")
            bins[label]["count"] += count
            bins[label]["weight"] += count * weight if weight is not None and weight == weight else 0.0
    return bins


def run_record(arm: str, seed: int, options: argparse.Namespace, recipe: dict, base: dict) -> dict:
    run_dir = options.output_dir / "runs" / f"{arm}-seed{seed}"
    if not (run_dir / "eval" / "final" / "summary.json").exists():
        run_dir.mkdir(parents=True, exist_ok=True)
        if not (run_dir / "trainer_state.json").exists():
            train(arm, seed, options, recipe, run_dir)
    state = json.loads((run_dir / "trainer_state.json").read_text())
    updates = [h for h in state["log_history"] if "reward" in h]
    curve = [{"step": 0, "tokens": 0, **accuracy_by_level(base)}]
    for step in range(options.eval_every, options.updates, options.eval_every):
        checkpoint = run_dir / f"checkpoint-{step}"
        summary = evaluate(str(checkpoint), options, recipe, run_dir / "eval" / f"step{step}")
        tokens = next(h["budget/generated_tokens"] for h in updates if h["step"] == step)
        curve.append({"step": step, "tokens": tokens, **accuracy_by_level(summary)})
    final = evaluate(str(run_dir), options, recipe, run_dir / "eval" / "final")
    curve.append(
        {"step": options.updates, "tokens": updates[-1]["budget/generated_tokens"], **accuracy_by_level(final)}
    )
    bins = compute_by_bin(updates)
    return {
        "arm": arm,
        "seed": seed,
        "curve": curve,
        "final": accuracy_by_level(final),
        "step_seconds": [h["step_time"] for h in updates if "step_time" in h][1:],  # first update warms up
        "reward": [h["reward"] for h in updates],
        "phase": [h.get("codapo/phase", 0.0) for h in updates],
        "bins": bins,
    }


def spread(values: list[float]) -> str:
    mean = statistics.mean(values)
    if len(values) == 1:
        return f"{100 * mean:.1f}"
    return f"{100 * mean:.1f} ({100 * min(values):.1f}-{100 * max(values):.1f})"


def pilot_label(seeds: list[int]) -> list[str]:
    """The report's warning when too few seeds were run to rank the arms (fewer than three): a pilot, not a result."""
    if len(seeds) >= 3:
        return []
    return [
        f"**A {len(seeds)}-seed pilot, not a result**: with {len(seeds)} seed(s) per arm the seed-to-seed range can "
        "exceed the gaps between arms; read the ranges in parentheses before any mean.",
        "",
    ]


def write_report(records: list[dict], base: dict, options: argparse.Namespace, command: str) -> str:
    arms = [a for a in options.arms if any(r["arm"] == a for r in records)]
    by_arm = {a: [r for r in records if r["arm"] == a] for a in arms}
    levels = sorted(k for k in records[0]["final"] if k != "all") + ["all"]
    lines = [
        "# CoDaPO against its baselines at equal budget (embedded default)",
        "",
        *pilot_label(options.seeds),
        f"Command: `{command}`",
        "",
        f"Recipe: `{Path(options.recipe).relative_to(ROOT)}` with per-arm overrides (see `experiments/compare.py`); "
        f"{options.updates} optimizer updates per run (CoDaPO's S updates count), seeds {options.seeds}; held-out: "
        f"the arithmetic test split, {options.eval_samples} samples per question at temperature 0.6 (avg@"
        f"{options.eval_samples}), evaluation seed {options.eval_seed}. Numbers are means over seeds with the range "
        "in parentheses, in %.",
        "",
        "## Held-out accuracy after training",
        "",
        "| Arm | " + " | ".join("Level " + lv if lv != "all" else "All" for lv in levels) + " |",
        "|---|" + "---|" * len(levels),
        "| Base model | " + " | ".join(f"{100 * accuracy_by_level(base)[lv]:.1f}" for lv in levels) + " |",
    ]
    for arm in arms:
        cells = [spread([r["final"][lv] for r in by_arm[arm]]) for lv in levels]
        lines.append(f"| {LABELS[arm]} | " + " | ".join(cells) + " |")
    steps = [point["step"] for point in records[0]["curve"]]
    lines += [
        "",
        "## Held-out accuracy during training (all levels)",
        "",
        "| Arm | " + " | ".join(f"update {step}" for step in steps) + " |",
        "|---|" + "---|" * len(steps),
    ]
    for arm in arms:
        cells = [spread([r["curve"][i]["all"] for r in by_arm[arm]]) for i in range(len(steps))]
        lines.append(f"| {LABELS[arm]} | " + " | ".join(cells) + " |")
    grpo_time = (
        statistics.mean(t for r in by_arm.get("grpo", []) for t in r["step_seconds"]) if "grpo" in by_arm else None
    )
    lines += [
        "",
        "## Cost",
        "",
        "| Arm | seconds per update | ratio to GRPO | generated tokens (final) |",
        "|---|---|---|---|",
    ]
    for arm in arms:
        seconds = statistics.mean(t for r in by_arm[arm] for t in r["step_seconds"])
        ratio = f"{seconds / grpo_time:.2f}" if grpo_time else "-"
        tokens = statistics.mean(r["curve"][-1]["tokens"] for r in by_arm[arm])
        lines.append(f"| {LABELS[arm]} | {seconds:.1f} | {ratio} | {tokens:.0f} |")
    lines += [
        "",
        "## Where the training compute went",
        "",
        "Share (%) of trained rollouts per difficulty bin of their question (d = error rate of its group), and share "
        "(%) of the absolute token-update weight, `|w| = |1_unclipped rho A v|` (rollouts x mean `|w|`), summed over "
        "all updates.",
        "",
        "| Arm | "
        + " | ".join(f"{b} rollouts" for b in BIN_LABELS)
        + " | "
        + " | ".join(f"{b} |w|" for b in BIN_LABELS)
        + " |",
        "|---|" + "---|" * (2 * len(BIN_LABELS)),
    ]
    for arm in arms:
        counts = [sum(r["bins"][b]["count"] for r in by_arm[arm]) for b in BIN_LABELS]
        weights = [sum(r["bins"][b]["weight"] for r in by_arm[arm]) for b in BIN_LABELS]
        share = [f"{100 * c / max(sum(counts), 1e-9):.0f}" for c in counts]
        wshare = [f"{100 * w / max(sum(weights), 1e-9):.0f}" for w in weights]
        lines.append(f"| {LABELS[arm]} | " + " | ".join(share + wshare) + " |")
    lines += [
        "",
        "Bins: bin1 d in [0, 0.2) (nearly solved) ... bin5 d in [0.8, 1] (nearly never solved).",
        "",
        "## Figures",
        "",
        "![accuracy against updates and tokens](accuracy.png)",
        "",
        "![training reward](reward.png)",
        "",
        "![compute per difficulty bin](bins.png)",
        "",
        GPU_PLAN,
    ]
    discussion = options.output_dir / "discussion.md"
    if discussion.exists():  # the hand-written reading of these numbers, kept across re-runs of the script
        lines += ["", discussion.read_text().strip()]
    return "\n".join(lines) + "\n"


def plot(records: list[dict], options: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "codapo-trl"  # the same figures give the same SVG files (clean diffs)
    import matplotlib.pyplot as plt

    arms = [a for a in options.arms if any(r["arm"] == a for r in records)]
    out = options.output_dir
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for arm in arms:
        runs = [r for r in records if r["arm"] == arm]
        steps = [p["step"] for p in runs[0]["curve"]]
        acc = [[100 * r["curve"][i]["all"] for r in runs] for i in range(len(steps))]
        mean = [statistics.mean(a) for a in acc]
        tokens = [statistics.mean(r["curve"][i]["tokens"] for r in runs) for i in range(len(steps))]
        for ax, x in ((axes[0], steps), (axes[1], tokens)):
            ax.plot(x, mean, marker="o", label=LABELS[arm])
            ax.fill_between(x, [min(a) for a in acc], [max(a) for a in acc], alpha=0.15)
    axes[0].set_xlabel("optimizer updates")
    axes[1].set_xlabel("generated completion tokens")
    for ax in axes:
        ax.set_ylabel("held-out accuracy, all levels (%)")
        ax.grid(alpha=0.3)
        ax.legend()
    axes[0].set_title("Accuracy against updates (mean, range over seeds)")
    axes[1].set_title("Accuracy against generated tokens")
    fig.tight_layout()
    fig.savefig(out / "accuracy.png", dpi=120)
    fig.savefig(out / "accuracy.svg", metadata={"Date": None})
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    for arm in arms:
        runs = [r for r in records if r["arm"] == arm]
        n = min(len(r["reward"]) for r in runs)
        ax.plot(range(1, n + 1), [statistics.mean(r["reward"][i] for r in runs) for i in range(n)], label=LABELS[arm])
    ax.set_xlabel("optimizer update")
    ax.set_ylabel("training reward (mean over seeds)")
    ax.set_title("Training reward per update (CoDaPO: B and S updates alternate)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "reward.png", dpi=120)
    fig.savefig(out / "reward.svg", metadata={"Date": None})
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    width = 0.8 / max(len(arms), 1)
    for i, arm in enumerate(arms):
        runs = [r for r in records if r["arm"] == arm]
        for ax, key in ((axes[0], "count"), (axes[1], "weight")):
            values = [sum(r["bins"][b][key] for r in runs) for b in BIN_LABELS]
            total = max(sum(values), 1e-9)
            ax.bar(
                [j + i * width for j in range(len(BIN_LABELS))],
                [100 * v / total for v in values],
                width,
                label=LABELS[arm],
            )
    for ax, title in ((axes[0], "Share of trained rollouts"), (axes[1], "Share of |token-update weight|")):
        ax.set_xticks([j + width * (len(arms) - 1) / 2 for j in range(len(BIN_LABELS))])
        ax.set_xticklabels(["[0,.2)", "[.2,.4)", "[.4,.6)", "[.6,.8)", "[.8,1]"])
        ax.set_xlabel("question difficulty d (group error rate)")
        ax.set_ylabel("%")
        ax.set_title(title)
        ax.grid(alpha=0.3, axis="y")
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "bins.png", dpi=120)
    fig.savefig(out / "bins.svg", metadata={"Date": None})
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", type=Path, default=ROOT / "experiments" / "results" / "compare_smollm2")
    parser.add_argument("--recipe", type=Path, default=DEFAULT_RECIPE)
    parser.add_argument(
        "--arms", nargs="+", default=["grpo", "codapo", "codapo_weighting", "dapo"], choices=sorted(ARMS)
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--updates", type=int, default=20, help="optimizer updates per run (even)")
    parser.add_argument("--eval-every", type=int, default=10, help="evaluate a checkpoint every this many updates")
    parser.add_argument("--eval-samples", type=int, default=4)
    parser.add_argument("--eval-seed", type=int, default=0)
    parser.add_argument("--train-args", nargs=argparse.REMAINDER, default=[], help="extra recipe overrides, last")
    options = parser.parse_args(argv)
    configure_logging()
    if options.updates % 2 or options.eval_every % 2:
        parser.error("--updates and --eval-every must be even (whole B/S pairs)")
    options.output_dir.mkdir(parents=True, exist_ok=True)
    command = "python experiments/compare.py " + " ".join(argv if argv is not None else sys.argv[1:])

    recipe = yaml.safe_load(Path(options.recipe).read_text())
    start = time.perf_counter()
    base = evaluate(
        resolve_model_name_or_path(recipe["model_name_or_path"]), options, recipe, options.output_dir / "base"
    )
    records = []
    for seed in options.seeds:
        for arm in options.arms:
            records.append(run_record(arm, seed, options, recipe, base))
            (options.output_dir / "results.json").write_text(json.dumps(records, indent=1))
    plot(records, options)
    report = write_report(records, base, options, command)
    (options.output_dir / "report.md").write_text(report)
    logger.info("Done in %.0f s: %s", time.perf_counter() - start, options.output_dir / "report.md")
    sys.stdout.write(report)
    os.sync()


if __name__ == "__main__":
    main()
