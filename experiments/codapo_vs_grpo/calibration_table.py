"""Gather every calibration attempt (`results/calibration/*.json`, written by `calibrate.py`) into one markdown file.

python experiments/codapo_vs_grpo/calibration_table.py   # writes results/calibration/calibration.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


HERE = Path(__file__).resolve().parent


def attempt_markdown(record: dict) -> str:
    """One attempt: a table per temperature (pass, boxed, no answer, mixed groups at G, discovery) and examples."""
    lines = [f"## {record['label']}: `{record['model']}`", ""]
    if record.get("note"):
        lines += [record["note"], ""]
    questions = ", ".join(f"L{k}: {v}" for k, v in record["questions_per_level"].items())
    lines += [f"Train-split questions per level ({questions}), {record['args']['samples']} samples each, at most "
              f"{record['args']['max_new_tokens']} new tokens; {record['seconds']:.0f} s.", ""]  # fmt: skip
    for temperature, block in record["temperatures"].items():
        lines += [
            f"T = {temperature} ({block['backend']})",
            "",
            "| level | pass rate | boxed | no answer | truncated | mean tokens | mixed groups (G=8) | discovery (pass@8) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for level, row in block["levels"].items():
            lines.append(
                f"| {level} | {100 * row['pass_rate']:.1f} % | {100 * row['boxed_rate']:.0f} % | "
                f"{100 * row['no_answer_rate']:.0f} % | {100 * row['truncated_rate']:.0f} % | "
                f"{row['mean_tokens']:.1f} | {100 * row['mixed_group_rate']:.0f} % | "
                f"{100 * row['discovery_rate']:.0f} % |"
            )
        lines.append("")
    if "in_band_T1" in record:
        lines += [f"In the target band at T = 1.0: {record['in_band_T1']}", ""]
    lines += ["Examples (first sample of a few questions per level, T = first temperature):", ""]
    first = next(iter(record["temperatures"].values()))
    for level, row in first["levels"].items():
        for example in row["examples"][:3]:
            text = example["completion"].replace("\n", " ").strip()
            lines.append(
                f"- L{level} `{example['question']}` (gold {example['gold']}, correct {example['correct']}): {text!r}"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=HERE / "results" / "calibration")
    args = parser.parse_args(argv)
    records = [json.loads(p.read_text()) for p in sorted(args.dir.glob("*.json"))]
    parts = ["# Calibration attempts (experiments/codapo_vs_grpo/calibrate.py)", ""]
    parts += [attempt_markdown(r) for r in records]
    (args.dir / "calibration.md").write_text("\n".join(parts))


if __name__ == "__main__":
    main()
