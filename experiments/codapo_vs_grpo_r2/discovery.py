"""Hard-level discovery and pass rate from training question logs (round 2's pilot gate, issue 27).

A question log (`questions.jsonl`, one row per question per update: `step`, `phase`, `level`, `num_correct`,
`num_generations`) says, for every group a run generated, how many of its G completions were graded correct. From
the groups of fresh batches (phase 0; CoDaPO's S repeats are left out, `report.discovery_rate`):

- **pass rate** of a level at an update: correct completions / completions;
- **discovery** of a level over a window of updates: the share of its groups with at least one correct completion.

The pilot gate (PREREGISTRATION.md) is discovery of the hard level over updates 1-16, pooled over the pilot's GRPO
seeds, at or below 30 %. The same measure on round 1's GRPO runs (level 5):

    PYTHONPATH=experiments/codapo_vs_grpo python experiments/codapo_vs_grpo_r2/discovery.py --level 5 \\
        experiments/codapo_vs_grpo/results/runs/grpo-seed*/questions.jsonl

Prints per update (pooled over the logs) the groups, pass rate and discovery, then the windows 1-16, 9-16 and 1-1,
and writes the same as JSON with `--output`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path

from report import discovery_rate, pass_rate  # round 1's measures, one home (PYTHONPATH=experiments/codapo_vs_grpo)


def read_log(path: Path) -> list[dict]:
    """The rows of one question log (a partial log of an interrupted run reads the same way)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def window(rows: Iterable[dict], first: int, last: int) -> list[dict]:
    """The rows of updates `first`..`last` (inclusive)."""
    return [r for r in rows if first <= r["step"] <= last]


def summarize(logs: dict[str, list[dict]], level: int, windows: Iterable[tuple[int, int]]) -> dict:
    """Per update and per window, pooled over `logs` (name -> rows): groups, discovery and pass rate of `level`;
    per log as well for the windows."""
    rows = [r for log in logs.values() for r in log]
    last = max((r["step"] for r in rows), default=0)
    per_update = []
    for step in range(1, last + 1):
        hit, groups = discovery_rate(window(rows, step, step), level)
        correct, samples = pass_rate(window(rows, step, step), level)
        per_update.append({"step": step, "groups": groups, "discovered": hit, "correct": correct, "samples": samples})
    out = {"level": level, "logs": sorted(logs), "last_update": last, "per_update": per_update, "windows": []}
    for first, end in windows:
        entry = {"first": first, "last": end, "complete": last >= end}
        for name, log in [("pooled", rows), *sorted(logs.items())]:
            hit, groups = discovery_rate(window(log, first, end), level)
            correct, samples = pass_rate(window(log, first, end), level)
            entry[name] = {"discovered": hit, "groups": groups, "correct": correct, "samples": samples}
        out["windows"].append(entry)
    return out


def share(numerator: int, denominator: int) -> str:
    return f"{100 * numerator / denominator:.1f} % ({numerator}/{denominator})" if denominator else "-"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logs", nargs="+", type=Path, help="questions.jsonl files (one per run)")
    parser.add_argument("--level", type=int, required=True, help="the hard level")
    parser.add_argument("--output", type=Path, default=None, help="write the summary as JSON here")
    options = parser.parse_args(argv)
    logs = {str(path.parent.name): read_log(path) for path in options.logs}
    summary = summarize(logs, options.level, [(1, 16), (9, 16), (1, 1), (2, 2), (1, 8)])
    print(f"level {options.level}, logs: {', '.join(summary['logs'])}; last update seen: {summary['last_update']}")
    print("update | groups | discovery | pass rate")
    for u in summary["per_update"]:
        print(f"{u['step']:>6} | {u['groups']:>6} | {share(u['discovered'], u['groups'])} | "
              f"{share(u['correct'], u['samples'])}")  # fmt: skip
    for w in summary["windows"]:
        cells = [f"{name}: discovery {share(v['discovered'], v['groups'])}, pass {share(v['correct'], v['samples'])}"
                 for name, v in w.items() if isinstance(v, dict)]  # fmt: skip
        print(f"updates {w['first']}-{w['last']}{'' if w['complete'] else ' (incomplete)'}: " + "; ".join(cells))
    if options.output:
        options.output.parent.mkdir(parents=True, exist_ok=True)
        options.output.write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
