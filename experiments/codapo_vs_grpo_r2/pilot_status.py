"""Snapshot of a pilot that is still running or was stopped (round 2, issue 27): per run, the question log so far,
the wall seconds of each finished update (TRL's `step_time`, read from the training log) and the process CPU
samples, copied into the committed results; then the hard level's discovery summary (`--level`) over what exists.

    python experiments/codapo_vs_grpo_r2/pilot_status.py          # after stopping or while running

A finished pilot run (`run.py --train-only`) copies its own logs; this is for the partial ones.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

import discovery  # this folder's module (run as a script)


HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def step_times(train_log: str) -> list[float]:
    """TRL's per-update `step_time` values, in order, from a training log's printed metrics.

    Example:
        >>> step_times("{'loss': '0.1', 'step_time': '953.6'} ... {'step_time': '824.1', 'epoch': '0.2'}")
        [953.6, 824.1]
    """
    return [float(v) for v in re.findall(r"'step_time': '([0-9.]+)'", train_log)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", type=Path, default=ROOT / "outputs" / "codapo_vs_grpo_r2" / "pilot_grpo")
    parser.add_argument("--results-dir", type=Path, default=HERE / "results" / "pilot_grpo")
    parser.add_argument("--cpu-log", type=Path, default=None, help="process CPU samples to keep beside the logs")
    parser.add_argument("--level", type=int, default=6, help="the hard level (the first pilot: 6)")
    options = parser.parse_args(argv)
    logs = {}
    for work in sorted(options.work_dir.glob("grpo-seed*")):
        out = options.results_dir / "runs" / work.name
        out.mkdir(parents=True, exist_ok=True)
        if (work / "questions.jsonl").exists():
            shutil.copy(work / "questions.jsonl", out / "questions.jsonl")
            logs[work.name] = discovery.read_log(out / "questions.jsonl")
        times = step_times((work / "train.log").read_text()) if (work / "train.log").exists() else []
        (out / "step_times.json").write_text(json.dumps({"finished_updates": len(times), "step_time_s": times}) + "\n")
    if options.cpu_log and options.cpu_log.exists():
        shutil.copy(options.cpu_log, options.results_dir / "process_cpu.log")
    summary = discovery.summarize(logs, options.level, [(1, 16), (1, 8), (1, 1), (2, 2)])
    (options.results_dir / f"discovery_level{options.level}.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary["windows"][0], indent=1))


if __name__ == "__main__":
    main()
