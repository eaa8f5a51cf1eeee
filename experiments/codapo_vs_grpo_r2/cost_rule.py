"""Round 2's cost rule (PREREGISTRATION.md, amendment 2; issue 35), blind to outcomes: the cap on seeds from wall
times alone, committed before any result of seed 1 is opened.

    python experiments/codapo_vs_grpo_r2/cost_rule.py --seed-0 experiments/codapo_vs_grpo_r2/results/runs \\
        --spent experiments/codapo_vs_grpo_r2/results/pilot_grpo_level7/runs \\
                experiments/codapo_vs_grpo_r2/results/pilot_grpo_level7_32/runs --extra-hours H

cap = min(14, seeds done + floor((40 h - hours spent) / hours per seed)), where hours per seed is seed 0's three runs
(training and read-outs, wall seconds as `run.py` recorded them), seeds done is 1 (seed 0), and hours spent counts
seed 0, the campaign's own warm-start read-outs (`warm_start/` beside seed 0's runs), every run folder under
`--spent` (the pilots; training and read-outs, their warm-start read-outs included) and `--extra-hours` (work with no
run folder, e.g. the stopped level-6 pilot; say what it is in the commit).

Only the wall seconds are read: `train_seconds.json` and the `seconds` field of each read-out's `summary.json`
(nothing else of a summary is looked at or printed). A read-out that was finished by a later sitting has no
`seconds` (`run.py` sets it to null) and is an error: give its time by hand with `--extra-hours`, or re-time it.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterable
from pathlib import Path


BUDGET_HOURS = 40.0
MAX_SEEDS = 14
SEED_0_ARMS = ("grpo", "codapo", "grpo_token_loss")


def run_seconds(run_dir: Path) -> float:
    """Wall seconds of one run folder: training (`train_seconds.json`, absent for the warm start's read-outs) plus
    every read-out's `seconds`."""
    total = 0.0
    if (run_dir / "train_seconds.json").exists():
        total += json.loads((run_dir / "train_seconds.json").read_text())["seconds"]
    for summary in sorted(run_dir.glob("**/summary.json")):
        seconds = json.loads(summary.read_text()).get("seconds")
        if seconds is None:
            raise ValueError(f"{summary} has no wall seconds (finished by a later sitting): time it by hand.")
        total += seconds
    return total


def spent_seconds(folders: Iterable[Path]) -> float:
    """Wall seconds of every run folder (`*-seed*` and `warm_start`) under `folders`."""
    return sum(
        run_seconds(run_dir)
        for folder in folders
        for run_dir in sorted(folder.iterdir())
        if run_dir.is_dir() and ("-seed" in run_dir.name or run_dir.name == "warm_start")
    )


def seed_cap(hours_per_seed: float, hours_spent: float, seeds_done: int = 1) -> int:
    """The registered cap: `min(14, seeds_done + floor((40 - hours_spent) / hours_per_seed))`.

    Example:
        >>> seed_cap(2.6, 2.6 + 3.0), seed_cap(2.0, 4.0)  # 1 + floor(34.4 / 2.6) = 14; 1 + 18 capped at 14
        (14, 14)
        >>> seed_cap(3.2, 3.2 + 4.0)  # 1 + floor(32.8 / 3.2) = 11
        11
    """
    if hours_per_seed <= 0:
        raise ValueError(f"hours per seed must be positive, got {hours_per_seed}.")
    return min(MAX_SEEDS, seeds_done + math.floor((BUDGET_HOURS - hours_spent) / hours_per_seed))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed-0", type=Path, required=True, help="the campaign's runs folder (seed 0's runs)")
    parser.add_argument("--spent", nargs="*", type=Path, default=[], help="runs folders of the pilots")
    parser.add_argument("--extra-hours", type=float, default=0.0, help="spent hours with no run folder")
    parser.add_argument("--output", type=Path, default=None, help="write the rule's numbers here (JSON)")
    options = parser.parse_args(argv)
    missing = [a for a in SEED_0_ARMS if not (options.seed_0 / f"{a}-seed0" / "done.json").exists()]
    if missing:
        parser.error(f"seed 0 has not finished {missing}")
    seed_0 = {arm: run_seconds(options.seed_0 / f"{arm}-seed0") for arm in SEED_0_ARMS}
    per_seed = sum(seed_0.values()) / 3600
    warm = run_seconds(options.seed_0 / "warm_start") if (options.seed_0 / "warm_start").is_dir() else 0.0
    spent = per_seed + (warm + spent_seconds(options.spent)) / 3600 + options.extra_hours
    outcome = {
        "seed_0_seconds": seed_0,
        "hours_per_seed": per_seed,
        "hours_spent": spent,
        "budget_hours": BUDGET_HOURS,
        "cap": seed_cap(per_seed, spent),
    }
    if options.output:
        options.output.write_text(json.dumps(outcome, indent=1) + "\n")
    print(json.dumps(outcome, indent=1))
    return outcome


if __name__ == "__main__":
    main()
