"""The 32-update GRPO pilot's registered rules (PREREGISTRATION.md, amendment 2; issue 35), written before it ran.

    PYTHONPATH=experiments/codapo_vs_grpo python experiments/codapo_vs_grpo_r2/pilot_rules.py

Reads the pilot's runs (`--pilot`: `runs/grpo-seed102` and `runs/grpo-seed103` with their question logs and read-
outs) and the committed 16-update pilot (`--committed`), and writes `pilot_rules.json` beside the runs:

- **reproduction**: per seed, whether the question-log rows of updates 1-16 (update, phase, question, level,
  correct and generated completions) equal the committed 16-update pilot's, and the first difference if not;
- **regime descriptor**: level-7 discovery (fresh groups with a success) over updates 17-32, per seed and pooled;
  and per read-out (8, 16, 24, 32) the pooled discovery over the 8 updates up to it, labelled outside the rare
  regime above 30 %;
- **floor rule**: GRPO's level-7 greedy accuracy averaged over the read-outs 8, 16, 24 and 32 and over the pilot's
  seeds; below 6.5 points the campaign's primary endpoint is level-7 pass@8 at T = 1.0 (mean of updates 16 and
  32, `pass8`), else the level-7 greedy mean (`greedy`);
- the pilot's own level-7 pass@8 and avg@8 at 16 and 32, and its discovery over updates 1-16 per seed (the gate's
  measure, at most 30 % each), reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from pathlib import Path

import analysis  # this folder's module (run as a script)
from discovery import read_log


HERE = Path(__file__).resolve().parent
SEEDS = (102, 103)
FLOOR_POINTS = 6.5  # GRPO's mean level-7 greedy accuracy below which the primary becomes pass@8
GATE_DISCOVERY = 0.30
ROW_KEYS = ("step", "phase", "question_id", "level", "num_correct", "num_generations")


def first_difference(committed: Sequence[dict], rerun: Sequence[dict], last: int = 16) -> str | None:
    """Where the rerun's rows of updates 1..`last` first differ from the committed ones (`ROW_KEYS`); `None`
    when they are the same rows in the same order.

    Example:
        >>> a = [{"step": 1, "phase": 0, "question_id": "q", "level": 7, "num_correct": 0, "num_generations": 8}]
        >>> first_difference(a, a), first_difference(a, [{**a[0], "num_correct": 1}])
        (None, 'row 1 (update 1): num_correct 0 -> 1')
    """
    old = [r for r in committed if r["step"] <= last]
    new = [r for r in rerun if r["step"] <= last]
    for number, (a, b) in enumerate(zip(old, new), 1):
        for key in ROW_KEYS:
            if a.get(key) != b.get(key):
                return f"row {number} (update {a['step']}): {key} {a.get(key)} -> {b.get(key)}"
    if len(old) != len(new):
        return f"{len(old)} committed rows of updates 1-{last}, {len(new)} in the rerun"
    return None


def floor_rule(greedy_means: Sequence[float], floor: float = FLOOR_POINTS) -> str:
    """The campaign's primary endpoint from GRPO's per-seed level-7 greedy means (points) over read-outs 8-32.

    Example:
        >>> floor_rule([4.5, 8.0]), floor_rule([6.0, 7.0])
        ('pass8', 'greedy')
    """
    return "pass8" if statistics.fmean(greedy_means) < floor else "greedy"


def apply_rules(pilot_runs: Path, committed_runs: Path, seeds: Sequence[int] = SEEDS) -> dict:
    """The rules' outcome from the pilot's run folders (`run.py`'s layout) and the committed pilot's."""
    _, runs = analysis.load_runs(pilot_runs)
    names = [f"grpo-seed{s}" for s in seeds]
    missing = [n for n, s in zip(names, seeds) if ("grpo", s) not in runs]
    if missing:
        raise ValueError(f"The pilot has not finished {missing} under {pilot_runs}.")
    logs = {s: runs["grpo", s]["questions"] for s in seeds}
    reproduction = {}
    for name, seed in zip(names, seeds):
        committed = committed_runs / name / "questions.jsonl"
        difference = first_difference(read_log(committed), logs[seed]) if committed.exists() else "no committed log"
        reproduction[name] = {"reproduced": difference is None, "first_difference": difference}
    greedy = {s: analysis.endpoint_value(runs["grpo", s]["evals"], analysis.ENDPOINTS["greedy"], f"grpo-seed{s}")
              for s in seeds}  # fmt: skip
    outcome = {
        "seeds": list(seeds),
        "reproduction": reproduction,
        "gate_1_16": {
            f"grpo-seed{s}": analysis.discovery_between([logs[s]], 1, 16) for s in seeds
        },  # the gate's measure on this pilot
        "regime_17_32": {
            "pooled": analysis.discovery_between(list(logs.values()), 17, analysis.UPDATES),
            **{f"grpo-seed{s}": analysis.discovery_between([logs[s]], 17, analysis.UPDATES) for s in seeds},
        },
        "read_outs": analysis.regime_labels(list(logs.values()), analysis.ENDPOINTS["greedy"].steps),
        "greedy_level7_mean_8_32": {f"grpo-seed{s}": v for s, v in greedy.items()},
        "greedy_level7_mean_8_32_pooled": statistics.fmean(greedy.values()),
        "floor_points": FLOOR_POINTS,
        "primary": floor_rule(list(greedy.values())),
    }
    outcome["gate_passed_on_1_16"] = all(
        hit <= GATE_DISCOVERY * groups for hit, groups in outcome["gate_1_16"].values()
    )
    for name in ("pass8_16", "pass8_32", "avg8_16", "avg8_32"):
        endpoint = analysis.ENDPOINTS[name]
        outcome[name] = {
            f"grpo-seed{s}": analysis.endpoint_value(runs["grpo", s]["evals"], endpoint, f"grpo-seed{s}")
            for s in seeds
        }
    return outcome


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pilot", type=Path, default=HERE / "results" / "pilot_grpo_level7_32")
    parser.add_argument("--committed", type=Path, default=HERE / "results" / "pilot_grpo_level7" / "runs")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    options = parser.parse_args(argv)
    outcome = apply_rules(options.pilot / "runs", options.committed, options.seeds)
    (options.pilot / "pilot_rules.json").write_text(json.dumps(outcome, indent=1) + "\n")
    print(json.dumps(outcome, indent=1))
    return outcome


if __name__ == "__main__":
    main()
