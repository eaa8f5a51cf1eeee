"""Issue 60's audit on olympiad-level output: how often the maths reward refuses a right answer and pays a wrong one,
against plain math-verify, on real completions of three public repositories (`SOURCES.md`, round 4).

The corpus is `convert_r4.py`'s jsonl (problem, gold, completion and the source's own verdict per item). Each item is
graded by this project's grader (`grade_answers`, with the problem as the question, as TRL passes the prompt) and by
plain math-verify (`plain_verify.py`, in `grade.py`'s bounded pool). The truth, per item: a hand label where there
is one (`labels_r4.jsonl`: `right` for a right answer in its anchored place, `unanchored` for a right value in prose
only, `wrong`), else the source's verdict where plain math-verify agrees with it; an item with neither is unknown and
listed for labelling, never counted. Where a grader is one side of an item the labels cover (every disagreement of
the source, math-verify or this grader was read), its verdict is never the truth by itself.

    python experiments/grader_audit/convert_r4.py --raw RAW --out corpus_r4.jsonl
    PYTHONPATH=. python experiments/grader_audit/audit_r4.py --corpus corpus_r4.jsonl --out-dir OUT

Outputs in `--out-dir`: `table.md` (per source: items known, right answers refused and wrong answers paid by each
grader; the refusals where this grader ran out of its time per answer are counted apart, as they vary with the
machine's load), `verdicts.jsonl` (both verdicts, our reason, the truth and where it came from) and `to_label.jsonl` (the
items to read next: our grader disagrees with the truth's source and no label covers it).
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from pathlib import Path

from grade import grade_plain, read_jsonl, write_jsonl  # this folder's `grade.py`: run as a script, it is on the path

from codapo_trl.rewards import GOLD_TIMED_OUT, TIMED_OUT, configure_grader, grade_answers


HERE = Path(__file__).resolve().parent


def truth_of(record: dict, plain: bool, labels: dict[str, dict]) -> tuple[bool | None, str]:
    """`(truth, where it came from)`: the label's (`right` is right; `unanchored` and `wrong` are not), else the
    source's verdict where plain math-verify agrees, else `(None, "unknown")`."""
    if record["id"] in labels:
        return labels[record["id"]]["label"] == "right", "label"
    verdict = record.get("source_verdict")
    if verdict is not None and bool(verdict) == plain:
        return bool(verdict), "source and math-verify"
    return None, "unknown"


def table(rows: list[dict]) -> str:
    by_source: dict[str, Counter] = defaultdict(Counter)
    for row in rows:
        # a source of several parts (odyssey-math's competition, high-school and college sets) has a row for each
        counts = by_source[row["source"] + (f" ({row['part']})" if row.get("part") else "")]
        counts["items"] += 1
        if row["truth"] is None:
            counts["unknown"] += 1
            continue
        counts["right" if row["truth"] else "wrong"] += 1
        for grader in ("ours", "plain"):
            if row["truth"] and not row[grader]:
                counts[f"{grader} refused"] += 1
                if grader == "ours" and row.get("reason") in (TIMED_OUT, GOLD_TIMED_OUT):
                    counts["ours refused, timed out"] += 1
            if not row["truth"] and row[grader]:
                counts[f"{grader} paid"] += 1
    lines = [
        "| source | items | known | right answers refused: this grader | of which timed out | math-verify "
        "| wrong answers paid: this grader | math-verify | unknown |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for source, c in sorted(by_source.items()):
        known = c["right"] + c["wrong"]
        lines.append(
            f"| {source} | {c['items']} | {known} | {c['ours refused']} / {c['right']} | {c['ours refused, timed out']} "
            f"| {c['plain refused']} / "
            f"{c['right']} | {c['ours paid']} / {c['wrong']} | {c['plain paid']} / {c['wrong']} | {c['unknown']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help="convert_r4.py's jsonl.")
    parser.add_argument(
        "--labels", type=Path, default=HERE / "labels_r4.jsonl", help="Hand labels (id, label, reason)."
    )
    parser.add_argument("--out-dir", type=Path, required=True, help="Where table.md and the jsonl files go.")
    parser.add_argument("--timeout", type=float, default=30.0, help="Hard limit in seconds per math-verify item.")
    parser.add_argument("--workers", type=int, default=2, help="Worker processes of each grader.")
    parser.add_argument(
        "--ours-timeout",
        type=float,
        default=2.0,
        help="This grader's time per answer in seconds (the trainer's default).",
    )
    args = parser.parse_args(argv)
    records = read_jsonl(args.corpus)
    labels = {row["id"]: row for row in read_jsonl(args.labels)}
    configure_grader(num_workers=args.workers, timeout=args.ours_timeout)
    ours = grade_answers(
        [r["completion"] for r in records],
        [r["gold"] for r in records],
        [r.get("answer_type") for r in records],
        questions=[r["problem"] for r in records],
    )
    plain = grade_plain(records, args.timeout, args.workers)
    rows = []
    for record, result, theirs in zip(records, ours, plain):
        truth, origin = truth_of(record, bool(theirs["plain"]), labels)
        rows.append(
            {
                "id": record["id"],
                "source": record["source"],
                "part": record.get("dataset") if record["source"] == "protagolabs/odyssey-math" else None,
                "model": record["model"],
                "ours": bool(result.correct),
                "reason": result.reason,
                "read": result.predicted,
                "plain": bool(theirs["plain"]),
                "truth": truth,
                "truth_from": origin,
            }
        )
    args.out_dir.mkdir(parents=True, exist_ok=True)
    write_jsonl(args.out_dir / "verdicts.jsonl", rows)
    to_label = [
        row
        for row in rows
        if row["truth"] is not None and row["truth"] != row["ours"] and row["truth_from"] != "label"
    ]
    to_label += [row for row in rows if row["truth"] is None and row["ours"]]
    write_jsonl(args.out_dir / "to_label.jsonl", to_label)
    text = table(rows)
    (args.out_dir / "table.md").write_text(text, encoding="utf-8")
    print(text, end="")
    print(
        f"{len(to_label)} items to label (our verdict against an unlabelled truth, or paid where the truth is unknown)"
    )


if __name__ == "__main__":
    main()
