"""Round 3's cost rule (issue 63; the design note's section 3.7), blind to outcomes: N_P and the ladder from wall
times alone, applied after seed 0's runs and committed before any result of seed 1 is opened.

    PYTHONPATH=experiments/codapo_vs_grpo python experiments/codapo_vs_grpo_r3/cost_rule.py \\
        --seed-0 experiments/codapo_vs_grpo_r3/results/runs --ladder grpo codapo_weighting codapo codapo_authors \\
        --spent experiments/codapo_vs_grpo_r3/results/pilot*/runs --output .../cost_rule.json

Hours per run per arm are seed 0's (training and read-outs, wall seconds as the runner recorded them; A3 measured
separately like every arm). Hours spent count seed 0's runs, the campaign's warm-start read-outs, every run folder
under `--spent` (the pilots) and `--extra-hours` (work with no run folder; say what it is in the commit). With a cap
of 40 h:

1. take the largest N_P in (14, 12, 10) for which seeds 1-7 of every ladder arm (A0-A3) plus seeds 8..N_P-1 of A0
   and A2 fit in what is left;
2. if none fits with A3, drop A3 (its seed-0 run is reported descriptively) and retry with A0-A2;
3. if N_P = 10 does not fit with A0-A2, the campaign does not start.

Only wall seconds are read (`train_seconds.json` and each read-out's `seconds`). A read-out whose seconds were lost
(finished from its scratch copy by a later sitting, `seconds: null`) counts as the longest read-out of its kind among
the folders the rule reads, so that the rule never underestimates what was spent.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from arms import CONTROL, LADDER, PRIMARY
from outcome import publish


BUDGET_HOURS = 40.0
CHOICES = (14, 12, 10)
INTERIM_SEEDS = 8
DROPPABLE = "codapo_authors"


def read_out_kind(summary: Path) -> str:
    """The kind of the read-out whose summary this is.

    Example:
        >>> read_out_kind(Path("eval/step32-avg4/summary.json")), read_out_kind(Path("warm_start/greedy/summary.json"))
        ('avg4', 'greedy')
    """
    return summary.parent.name.rsplit("-", 1)[-1]


def wall_seconds(run_dirs: Sequence[Path]) -> dict[Path, float]:
    """Wall seconds of each run folder (training plus every read-out below it), a lost read-out's seconds taken as
    the longest of its kind among `run_dirs`."""
    summaries = {d: sorted(d.glob("**/summary.json")) for d in run_dirs}
    recorded = {path: json.loads(path.read_text()).get("seconds") for paths in summaries.values() for path in paths}
    longest: dict[str, float] = {}
    for path, seconds in recorded.items():
        if seconds is not None:
            longest[read_out_kind(path)] = max(longest.get(read_out_kind(path), 0.0), seconds)
    out = {}
    for run_dir in run_dirs:
        train = run_dir / "train_seconds.json"
        total = json.loads(train.read_text())["seconds"] if train.exists() else 0.0
        for path in summaries[run_dir]:
            seconds = recorded[path] if recorded[path] is not None else longest.get(read_out_kind(path))
            if seconds is None:
                raise ValueError(f"{path} has no wall seconds and no read-out of its kind has: time it by hand.")
            total += seconds
        out[run_dir] = total
    return out


def run_folders(runs_dir: Path) -> list[Path]:
    """The run folders (`<arm>-seed<k>` and `warm_start`) of a runs folder."""
    return [d for d in sorted(runs_dir.iterdir()) if d.is_dir() and ("-seed" in d.name or d.name == "warm_start")]


def remaining_hours(hours: Mapping[str, float], ladder: Sequence[str], final_seeds: int) -> float:
    """Hours still to run after seed 0: seeds 1..7 of every `ladder` arm, seeds 8..final_seeds-1 of the pair.

    Example:
        >>> remaining_hours({"grpo": 1.0, "codapo": 1.0, "codapo_weighting": 1.0}, ("grpo", "codapo",
        ...                 "codapo_weighting"), 10)  # 7 x 3 + 2 x 2
        25.0
    """
    ladder_hours = (INTERIM_SEEDS - 1) * sum(hours[a] for a in ladder)
    return ladder_hours + (final_seeds - INTERIM_SEEDS) * (hours[CONTROL] + hours[PRIMARY])


def decide(hours: Mapping[str, float], spent: float, ladder: Sequence[str] = LADDER) -> dict:
    """The rule: the largest fitting N_P with `ladder`, else without A3, else no campaign.

    Example:
        >>> h = {"grpo": 0.65, "codapo_weighting": 0.65, "codapo": 0.65, "codapo_authors": 0.8}
        >>> decide(h, 6.0)["final_seeds"], decide(h, 6.0)["ladder"][-1]  # 6 + 7 x 2.75 + 6 x 1.3 = 33.05
        (14, 'codapo_authors')
        >>> h = {"grpo": 1.1, "codapo_weighting": 1.1, "codapo": 1.1, "codapo_authors": 1.3}
        >>> out = decide(h, 5.0); out["final_seeds"], out["ladder"]  # A3 in: 41.6 h at 10; out: 36.9 h at 12
        (12, ['grpo', 'codapo_weighting', 'codapo'])
    """
    for arms in (tuple(ladder), tuple(a for a in ladder if a != DROPPABLE)):
        for n in CHOICES:
            total = spent + remaining_hours(hours, arms, n)
            if total <= BUDGET_HOURS:
                return {"start": True, "final_seeds": n, "ladder": list(arms), "projected_hours": total}
        if DROPPABLE not in arms:
            break
    return {"start": False, "final_seeds": None, "ladder": None, "projected_hours": None}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed-0", type=Path, required=True, help="the campaign's runs folder (seed 0's runs)")
    parser.add_argument("--spent", nargs="*", type=Path, default=[], help="runs folders of the pilots")
    parser.add_argument("--extra-hours", type=float, default=0.0, help="spent hours with no run folder")
    parser.add_argument("--ladder", nargs="+", default=list(LADDER), help="the arms of seeds 0-7 (A3 may be dropped)")
    parser.add_argument("--output", type=Path, default=None, help="write the rule's numbers here (JSON)")
    options = parser.parse_args(argv)
    missing = [a for a in options.ladder if not (options.seed_0 / f"{a}-seed0" / "done.json").exists()]
    if missing:
        parser.error(f"seed 0 has not finished {missing}")
    seed_0 = {arm: options.seed_0 / f"{arm}-seed0" for arm in options.ladder}
    warm = [options.seed_0 / "warm_start"] if (options.seed_0 / "warm_start").is_dir() else []
    pilots = [d for runs_dir in options.spent for d in run_folders(runs_dir)]
    timed = wall_seconds([*seed_0.values(), *warm, *pilots])
    seconds = {arm: timed[run_dir] for arm, run_dir in seed_0.items()}
    hours = {arm: s / 3600 for arm, s in seconds.items()}
    spent = sum(timed.values()) / 3600 + options.extra_hours
    outcome = {
        "seed_0_seconds": seconds,
        "hours_per_run": hours,
        "hours_spent": spent,
        "budget_hours": BUDGET_HOURS,
        **decide(hours, spent, options.ladder),
    }
    return publish(outcome, options.output)


if __name__ == "__main__":
    main()
