"""Round 2's blind re-estimate of the seeds (PREREGISTRATION.md, "Seeds and power"): after 8 complete seeds, the SD
of the per-seed CoDaPO - GRPO differences of the primary endpoint, and the number of seeds it asks for. It prints
the SD and the seeds, nothing else: no mean, no sign, no interval, no test.

    PYTHONPATH=experiments/codapo_vs_grpo python experiments/codapo_vs_grpo_r2/blind_sd.py --cap 16

Primary endpoint of a run: the mean of its hard-level (6) greedy accuracies, in points, after updates 8, 16, 24 and
32 (`results/runs/<arm>-seed<seed>/eval/step<N>-greedy/summary.json`, written by `experiments/codapo_vs_grpo/run.py`).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

import stats  # round 1's modules, by name (PYTHONPATH=experiments/codapo_vs_grpo)
from report import accuracy


HERE = Path(__file__).resolve().parent


HARD_LEVEL = "6"
READ_OUTS = (8, 16, 24, 32)
SMALLEST_EFFECT = 5.0
MIN_SEEDS = 10


def primary_endpoint(accuracies: Mapping[int, Mapping[str, float]], level: str = HARD_LEVEL) -> float:
    """Mean of the hard level's greedy accuracy (points) over the read-outs `READ_OUTS` (`accuracies`: update ->
    per-level points); every read-out must be there.

    Example:
        >>> primary_endpoint({8: {"6": 2.0}, 16: {"6": 4.0}, 24: {"6": 6.0}, 32: {"6": 8.0}})
        5.0
    """
    missing = [step for step in READ_OUTS if step not in accuracies]
    if missing:
        raise ValueError(f"The primary endpoint needs the read-outs after updates {READ_OUTS}; missing {missing}.")
    return statistics.fmean(accuracies[step][level] for step in READ_OUTS)


def blind_reestimate(
    differences: Sequence[float], cap: int, smallest_effect: float = SMALLEST_EFFECT
) -> tuple[float, int]:
    """The SD of the per-seed differences and the seeds it asks for: `required_seeds(smallest_effect, SD)` (80 %
    power, two-sided 5 %), at least `MIN_SEEDS` and at most `cap`.

    Example:
        >>> sd, seeds = blind_reestimate([1.0, 8.0, -6.0, 3.0, 10.0, -4.0, 2.0, 7.0], cap=30)
        >>> round(sd, 2), seeds
        (5.66, 13)
    """
    if len(differences) < 2:
        raise ValueError("The SD needs at least two complete seeds.")
    sd = statistics.stdev(differences)
    if sd == 0:
        return sd, MIN_SEEDS
    return sd, max(MIN_SEEDS, min(cap, stats.required_seeds(smallest_effect, sd)))


def read_endpoint(run_dir: Path) -> float:
    return primary_endpoint(
        {
            step: accuracy(json.loads((run_dir / "eval" / f"step{step}-greedy" / "summary.json").read_text()))
            for step in READ_OUTS
        }
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, default=HERE / "results" / "runs")
    parser.add_argument("--cap", type=int, required=True, help="the registered cap on seeds")
    options = parser.parse_args(argv)
    seeds = sorted(
        int(p.name.removeprefix("grpo-seed"))
        for p in options.runs.glob("grpo-seed*")
        if (p / "done.json").exists()
        and (options.runs / f"codapo-seed{p.name.removeprefix('grpo-seed')}" / "done.json").exists()
    )
    differences = [
        read_endpoint(options.runs / f"codapo-seed{s}") - read_endpoint(options.runs / f"grpo-seed{s}") for s in seeds
    ]
    sd, needed = blind_reestimate(differences, options.cap)
    print(f"complete seeds: {len(seeds)}; SD of the per-seed differences: {sd:.2f} points; seeds: {needed}")


if __name__ == "__main__":
    main()
