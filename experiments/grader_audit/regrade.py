"""Re-grade the issue-32 corpus of real model completions with this checkout's maths grader, against the reference
verdicts that `grade.py` wrote (`verdicts.jsonl`: the two graders' common verdict where they agree, a hand label where
they disagree).

Prints how many right answers the grader refuses and how many wrong, unfinished or unanchored answers it pays, and
lists each of them with its gold, what the grader read and why, so that every difference from the reference can be
read. An item whose grading misses its deadline (a loaded machine) is graded again, up to `--retries` times, as
`grade.py` does. The corpus itself (`normalised.jsonl`, public MATH-500 outputs) is kept outside the repository.

    PYTHONPATH=. python experiments/grader_audit/regrade.py --corpus outputs/grader_audit/normalised.jsonl \
        --verdicts outputs/grader_audit/verdicts.jsonl
"""

from __future__ import annotations

import argparse
import json
import logging
from collections import Counter
from pathlib import Path

from codapo_trl.rewards import GOLD_TIMED_OUT, TIMED_OUT, configure_grader, grade_answers, grading


logger = logging.getLogger("regrade")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpus", type=Path, default=Path("outputs/grader_audit/normalised.jsonl"), help="Completions."
    )
    parser.add_argument(
        "--verdicts", type=Path, default=Path("outputs/grader_audit/verdicts.jsonl"), help="grade.py's output."
    )
    parser.add_argument("--workers", type=int, default=2, help="Grader worker processes.")
    parser.add_argument("--retries", type=int, default=3, help="Times an item that timed out is graded again.")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    configure_grader(num_workers=args.workers, timeout=2.0)
    rows = {row["id"]: row for row in map(json.loads, args.corpus.open(encoding="utf-8"))}
    truth = {row["id"]: row["truth"] for row in map(json.loads, args.verdicts.open(encoding="utf-8"))}
    ids = [item for item in rows if item in truth]
    results = grade_answers([rows[i]["completion"] for i in ids], [rows[i]["gold"] for i in ids])
    for _ in range(args.retries):  # a deadline missed on a loaded machine is not a verdict: ask again, like grade.py
        again = [n for n, result in enumerate(results) if result.reason in (TIMED_OUT, GOLD_TIMED_OUT)]
        if not again:
            break
        logger.info("asking again about %d items that timed out", len(again))
        grading._gold_cache.clear()
        retried = grade_answers([rows[ids[n]]["completion"] for n in again], [rows[ids[n]]["gold"] for n in again])
        for n, result in zip(again, retried):
            results[n] = result
    counts, reasons = Counter(truth[i] for i in ids), Counter()
    refused, paid = [], []
    for item, result in zip(ids, results):
        if truth[item] == "right" and result.reward != 1.0:
            refused.append((item, result))
            reasons[result.reason] += 1
        elif truth[item] != "right" and result.reward == 1.0:
            paid.append((item, result))
    wrong = len(ids) - counts["right"]
    logger.info(
        "right answers refused: %d / %d (%.2f %%)", len(refused), counts["right"], 100 * len(refused) / counts["right"]
    )
    logger.info("wrong, unfinished or unanchored answers paid: %d / %d", len(paid), wrong)
    logger.info("reasons of the refusals: %s", dict(reasons))
    for label, items in (("REFUSED", refused), ("PAID", paid)):
        for item, result in items:
            logger.info(
                "%s %s | gold %s | read %r | %s", label, item, rows[item]["gold"], result.predicted, result.reason
            )


if __name__ == "__main__":
    main()
