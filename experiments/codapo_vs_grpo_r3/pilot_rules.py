"""Round 3's pilot rules (issue 63; the design note's section 3.6), registered in PREREGISTRATION.md before the pilot.

    PYTHONPATH=experiments/codapo_vs_grpo python experiments/codapo_vs_grpo_r3/pilot_rules.py \\
        --pilot experiments/codapo_vs_grpo_r3/results/pilot --attempt 1

Reads the pilot's run folders (`--pilot`/runs: `grpo-seed<a>`, `grpo-seed<b>` and `codapo_authors-seed<c>`, with the
campaign's read-outs, and `warm_start/greedy`) and writes `pilot_rules.json` beside them:

1. **learning**: GRPO's held-out macro (levels 4, 5, 7, greedy) after its last read-out (update 32), averaged over
   the two GRPO seeds, must exceed the warm start's macro by at least 5 points. Failing on the 64-question pool
   (attempt 1), the pool becomes 128 questions and the pilot repeats once with seeds 203 and 204 (attempt 2);
   failing again, there is no campaign;
2. **stability**, every pilot run: boxed rate (1 - `no_answer_frac`) >= 95 % at every read-out, no NaN loss, and
   entropy above 0.01 at every logged update;
3. **A3 moves**: A3's macro gain over the warm start after its last read-out must be at least half GRPO's pilot
   gain. Failing at lr 2.5e-6 (attempt 1), A3's lr is doubled once (5e-6) and A3 alone is re-piloted; failing
   again, A3 is dropped (its pilot reported);
4. **reported, not gated**: the share of GRPO's pool groups with zero advantage (0 or G of G right) over generation
   batches 17-32, and every run's wall seconds (they feed the cost rule).

The verdict names what happens next: `campaign` (all gates passed), `repeat_with_pool_128`, `repilot_a3_lr_5e-6`,
`drop_a3`, or `no_campaign` (with the failed gate). A stability failure is `no_campaign` at once.
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

import analysis  # this folder's module (run as a script)
from arms import ARMS, READ_OUT_BATCHES
from cost_rule import wall_seconds
from outcome import publish


HERE = Path(__file__).resolve().parent
LEARNING_POINTS = 5.0
BOXED_RATE = 0.95
MIN_ENTROPY = 0.01
A3_SHARE = 0.5
SEEDS = {1: {"grpo": (200, 201), "codapo_authors": (202,)}, 2: {"grpo": (203, 204), "codapo_authors": (202,)}}
SATURATION_BATCHES = (17, 32)


def last_macro(run: Mapping, arm: str) -> float:
    """The held-out greedy macro (points) after an arm's last read-out (generation batch 32)."""
    step = READ_OUT_BATCHES[-1] * ARMS[arm].steps_per_batch
    name = f"step{step}-greedy"
    if name not in run["evals"]:
        raise ValueError(f"{run['path']} has no {name} read-out.")
    return analysis.macro_points(run["evals"][name], analysis.LEVELS, where=f"{run['path']} {name}")


def stability(run: Mapping) -> dict:
    """Gate 2 on one run: the lowest boxed rate over its read-outs, NaN losses and the lowest logged entropy."""
    boxed = [1.0 - s["benchmarks"]["arithmetic"]["no_answer_frac"] for s in run["evals"].values()]
    losses = [h["loss"] for h in run["log"] if "loss" in h]
    entropies = [h["entropy"] for h in run["log"] if h.get("entropy") is not None]
    nan_losses = sum(1 for x in losses if isinstance(x, float) and math.isnan(x))
    out = {
        "min_boxed_rate": min(boxed) if boxed else None,
        "nan_losses": nan_losses,
        "min_entropy": min(entropies) if entropies else None,
    }
    out["passed"] = (
        bool(boxed)
        and min(boxed) >= BOXED_RATE
        and nan_losses == 0
        and bool(entropies)
        and min(entropies) > MIN_ENTROPY
    )
    return out


def zero_advantage_share(rows: Sequence[dict], first: int, last: int) -> list[int]:
    """[groups with zero advantage (0 or G of G right), groups] over generation batches `first`..`last` (every
    group: GRPO's batches are all fresh)."""
    groups = [r for number, batch in analysis.batches(rows) if first <= number <= last for r in batch]
    flat = sum(1 for r in groups if r["num_correct"] in (0, r["num_generations"]))
    return [flat, len(groups)]


def verdict(learning: bool, stable: bool, a3_moves: bool | None, attempt: int, a3_attempt: int) -> str:
    """What the pilot's gates decide.

    Example:
        >>> verdict(True, True, True, 1, 1), verdict(False, True, True, 1, 1), verdict(False, True, True, 2, 1)
        ('campaign', 'repeat_with_pool_128', 'no_campaign: gate 1 (learning) failed twice')
        >>> verdict(True, True, False, 1, 1), verdict(True, True, False, 1, 2), verdict(True, False, True, 1, 1)
        ('repilot_a3_lr_5e-6', 'drop_a3', 'no_campaign: gate 2 (stability) failed')
    """
    if not stable:
        return "no_campaign: gate 2 (stability) failed"
    if not learning:
        return "repeat_with_pool_128" if attempt == 1 else "no_campaign: gate 1 (learning) failed twice"
    if a3_moves is False:
        return "repilot_a3_lr_5e-6" if a3_attempt == 1 else "drop_a3"
    return "campaign"


def apply_rules(runs_dir: Path, grpo_seeds: Sequence[int], a3_seeds: Sequence[int], attempt: int,
                a3_attempt: int, a3_runs_dir: Path | None = None) -> dict:  # fmt: skip
    """The rules' outcome from the pilot's run folders (`load_runs`' layout); A3's runs are read from `a3_runs_dir`
    where given (its lr-5e-6 re-pilot, in a folder of its own so that its run does not meet the first one's)."""
    warm, runs = analysis.load_runs(runs_dir)
    if a3_runs_dir is not None:
        runs = {key: run for key, run in runs.items() if key[0] != "codapo_authors"}
        runs |= {key: run for key, run in analysis.load_runs(a3_runs_dir)[1].items() if key[0] == "codapo_authors"}
    if "greedy" not in warm:
        raise ValueError(f"{runs_dir} has no warm_start/greedy read-out (the learning gate's reference).")
    wanted = [("grpo", s) for s in grpo_seeds] + [("codapo_authors", s) for s in a3_seeds]
    missing = [f"{a}-seed{s}" for a, s in wanted if (a, s) not in runs]
    if missing:
        raise ValueError(f"The pilot has not finished {missing} under {runs_dir}.")
    warm_macro = analysis.macro_points(warm["greedy"], analysis.LEVELS, where="the warm start")
    grpo = {s: last_macro(runs["grpo", s], "grpo") for s in grpo_seeds}
    grpo_gain = statistics.fmean(grpo.values()) - warm_macro
    a3 = {s: last_macro(runs["codapo_authors", s], "codapo_authors") for s in a3_seeds}
    a3_gain = statistics.fmean(a3.values()) - warm_macro if a3 else None
    stable = {f"{a}-seed{s}": stability(runs[a, s]) for a, s in wanted}
    learning = grpo_gain >= LEARNING_POINTS
    a3_moves = None if a3_gain is None else a3_gain >= A3_SHARE * grpo_gain
    timed = wall_seconds([runs[a, s]["path"] for a, s in wanted])
    flat = [zero_advantage_share(runs["grpo", s]["questions"], *SATURATION_BATCHES) for s in grpo_seeds]
    return {
        "attempt": attempt,
        "a3_attempt": a3_attempt,
        "warm_start_macro": warm_macro,
        "grpo_macro_at_32": {f"grpo-seed{s}": v for s, v in grpo.items()},
        "grpo_gain": grpo_gain,
        "gate_1_learning": {"threshold_points": LEARNING_POINTS, "passed": learning},
        "gate_2_stability": {"runs": stable, "passed": all(v["passed"] for v in stable.values())},
        "a3_macro_at_last": {f"codapo_authors-seed{s}": v for s, v in a3.items()},
        "a3_gain": a3_gain,
        "gate_3_a3_moves": {"share_of_grpo_gain": A3_SHARE, "passed": a3_moves},
        "reported_zero_advantage_17_32": {
            "pooled": [sum(x) for x in zip(*flat)],
            **{f"grpo-seed{s}": f for s, f in zip(grpo_seeds, flat)},
        },
        "wall_seconds": {f"{a}-seed{s}": timed[runs[a, s]["path"]] for a, s in wanted},
        "verdict": verdict(learning, all(v["passed"] for v in stable.values()), a3_moves, attempt, a3_attempt),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pilot", type=Path, default=HERE / "results" / "pilot")
    parser.add_argument("--attempt", type=int, choices=(1, 2), default=1, help="2: the 128-question repeat")
    parser.add_argument("--a3-attempt", type=int, choices=(1, 2), default=1, help="2: A3 at lr 5e-6")
    parser.add_argument("--grpo-seeds", nargs="+", type=int, default=None, help="default: the attempt's seeds")
    parser.add_argument("--a3-seeds", nargs="*", type=int, default=None, help="default: 202")
    parser.add_argument("--a3-pilot", type=Path, default=None, help="A3's re-pilot folder (default: --pilot)")
    parser.add_argument("--output", type=Path, default=None, help="default: --pilot/pilot_rules.json")
    options = parser.parse_args(argv)
    seeds = SEEDS[options.attempt]
    outcome = apply_rules(
        options.pilot / "runs",
        options.grpo_seeds or seeds["grpo"],
        seeds["codapo_authors"] if options.a3_seeds is None else options.a3_seeds,
        options.attempt,
        options.a3_attempt,
        None if options.a3_pilot is None else options.a3_pilot / "runs",
    )
    return publish(outcome, options.output or options.pilot / "pilot_rules.json")


if __name__ == "__main__":
    main()
