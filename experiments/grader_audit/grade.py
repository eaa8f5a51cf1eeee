"""Grade a corpus of real model completions with the maths reward and with plain math-verify, against hand labels.

Issue 32: how often does each grader refuse a right, anchored answer, and how often does it pay a wrong or unfinished
one? The corpus is `convert.py`'s normalised jsonl (public MATH-500 outputs of four model runs, kept outside the
repository). Each completion is graded

- by our reward, `codapo_trl.rewards.math_accuracy_reward` (the TRL reward, with its default grader settings), and by
  `grade_answers` on the same inputs for the reason of each refusal (the two must agree item by item);
- by plain math-verify (`plain_verify.py`: `parse` of the gold and of the whole completion, `verify`, default
  settings), each item in a worker process killed after `--timeout` seconds.

Ground truth, per completion: where the two graders agree, their common verdict; where they disagree, the hand label
in `labels.jsonl` (`id`, `label` = `right` for a right answer in its anchored place (the last box, or after a final-answer
phrase), `unanchored` for a right value stated only in prose, `wrong` for a wrong, hedged, unevaluated or unfinished
one, and a one-line `reason`), written by reading every disagreement. The table counts `unanchored` with the wrong and
unfinished answers (the reward pays an anchored answer only, by design) and also shows it on its own. A disagreement without a label stops
the run and is listed, so the table is never made from a partial reading.

    python experiments/grader_audit/grade.py                                  # corpus and outputs under outputs/grader_audit (git-ignored)
    python experiments/grader_audit/grade.py --corpus FILE --out-dir DIR --labels FILE
    python experiments/grader_audit/grade.py --unlabelled-only               # list the disagreements still to read
    PYTHONPATH=/other/checkout python experiments/grader_audit/grade.py      # grade with another checkout's grader

Outputs in `--out-dir`: `verdicts.jsonl` (one line per completion: both verdicts, our reason, what each grader read,
the ground truth and where it came from), `disagreements.jsonl` (the items to label), `table.md` (counts and
percentages per grader, overall and per model) and `refusals.md` (every right answer our grader refuses, grouped by its
reason, with the completion's tail and the gold).
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import codapo_trl
from codapo_trl.rewards import TIMED_OUT, grade_answers, grader_settings, math_accuracy_reward
from codapo_trl.rewards.deadline_pool import DeadlineProcessPool


logger = logging.getLogger("grader_audit.grade")

HERE = Path(__file__).resolve().parent
LABELS = ("right", "unanchored", "wrong")
TAIL_CHARS = 400


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def read_labels(path: Path) -> dict[str, dict]:
    """Hand labels by id; a bad label or a repeated id is an error naming the line."""
    labels: dict[str, dict] = {}
    if not path.exists():
        return labels
    for number, row in enumerate(read_jsonl(path), 1):
        if row.get("label") not in LABELS or not row.get("id") or not row.get("reason"):
            raise ValueError(f"{path}:{number}: a label needs an id, a label in {LABELS} and a reason, got {row}")
        if row["id"] in labels:
            raise ValueError(f"{path}:{number}: {row['id']} is labelled twice")
        labels[row["id"]] = row
    return labels


def grade_ours(records: list[dict], retries: int) -> list[dict[str, Any]]:
    """Our reward on every completion, with the grader's reason and reading from `grade_answers`.

    The reward's grader gives each answer about 2 s; on a loaded machine a slow answer can time out in one pass and
    not in another. An item the two calls disagree on, or one refused for a timeout, is graded again on its own (up
    to `retries` times) and its final verdict is the first pass where both calls agree without a timeout; the number
    of such items is reported, so a refusal caused by the machine's load is not counted as the grader's.
    """
    completions = [record["completion"] for record in records]
    golds = [record["gold"] for record in records]
    rewards = math_accuracy_reward(completions, answer=golds)
    results = grade_answers(completions, golds)
    verdicts = []
    for record, reward, result in zip(records, rewards, results, strict=True):
        retried = 0
        while (reward != result.reward or result.reason == TIMED_OUT) and retried < retries:
            retried += 1
            reward = math_accuracy_reward([record["completion"]], answer=[record["gold"]])[0]
            result = grade_answers([record["completion"]], [record["gold"]])[0]
        if reward != result.reward:
            logger.warning("%s: the reward and grade_answers still disagree after %d retries", record["id"], retried)
        verdicts.append(
            {
                "ours": reward == 1.0,
                "ours_reason": result.reason,
                "ours_answer": result.predicted,
                "ours_read": result.predicted_parsed,
                "ours_retried": retried,
            }
        )
    return verdicts


def grade_plain(records: list[dict], timeout: float, workers: int) -> list[dict[str, Any]]:
    """Plain math-verify on every completion, each bounded by `timeout` seconds (a timeout or crash pays nothing)."""
    # The workers import `plain_verify` from this folder: run as a script, the folder is first on `sys.path`, which
    # the pool hands to its workers.
    pool = DeadlineProcessPool(
        "plain_verify:verify_pair",
        max_workers=workers,
        item_timeout=timeout,
        soft_timeout=0,  # math-verify sets its own signal alarms; the pool's alarm would replace them
        memory_limit_mb=4096,
        batch_size=8,
    )
    try:
        outcomes = pool.map([(record["gold"], record["completion"]) for record in records])
    finally:
        pool.shutdown()
    verdicts = []
    for outcome in outcomes:
        if outcome.ok:
            paid, gold_read, answer_read = outcome.value
            verdicts.append({"plain": paid, "plain_error": None, "plain_gold": gold_read, "plain_read": answer_read})
        else:
            verdicts.append({"plain": False, "plain_error": outcome.error, "plain_gold": None, "plain_read": None})
    return verdicts


def decide(record: dict, verdict: dict, labels: dict[str, dict]) -> tuple[str | None, str]:
    """Ground truth for one completion and where it came from (`label` or `agreement`); `None` if still unlabelled.

    A hand label wins wherever there is one: every disagreement has one, and so has an agreed item that reading
    showed both graders to get wrong.
    """
    label = labels.get(record["id"])
    if label:
        return label["label"], "label"
    if verdict["ours"] == verdict["plain"]:
        return ("right" if verdict["ours"] else "wrong"), "agreement"
    return None, "unlabelled"


def rate(count: int, total: int) -> str:
    return f"{count} / {total} ({100.0 * count / total:.1f} %)" if total else f"{count} / 0"


def table(rows: list[dict], command: str, settings: dict) -> str:
    """The markdown table: per grader, right answers refused and wrong or unfinished answers paid."""
    lines = [
        "### On real completions",
        "",
        "Real completions on MATH-500, written by models and committed by two public repositories "
        "(`experiments/grader_audit/SOURCES.md`: gemma2:2b, gemma2:9b and qwen2.5-math-7b from labrem/neus2026-labre, "
        "greedy and best-of-n; Qwen2.5-Math-1.5B and -7B runs from XinghanLi66/rl-sft), graded by this reward and by "
        "plain math-verify (`parse` of the gold and of the whole completion, `verify`, default settings). *Right* is a "
        "right answer in its anchored place (the last box, or after a final-answer phrase); *wrong or unfinished* is "
        "everything else: a wrong, hedged, unevaluated or unfinished answer, and a right value stated only in prose "
        "(which this reward does not pay by design; its own column).",
        "",
        f"Corpus: {len(rows)} completions, {len({r['problem_id'] for r in rows})} MATH-500 problems, "
        f"{len({r['model'] for r in rows})} model runs. Ground truth: a hand label wherever there is one "
        f"({sum(r['truth_from'] == 'label' for r in rows)}: all "
        f"{sum(r['ours'] != r['plain'] for r in rows)} disagreements of this run, and items read in other runs or "
        f"among the agreed items below); elsewhere the graders' common verdict "
        f"({sum(r['truth_from'] == 'agreement' for r in rows)}).",
        "",
        "| grader | right answers refused | wrong or unfinished answers paid | of which: a right value stated only "
        "in prose, paid |",
        "|---|---|---|---|",
    ]
    right = [r for r in rows if r["truth"] == "right"]
    wrong = [r for r in rows if r["truth"] != "right"]
    unanchored = [r for r in rows if r["truth"] == "unanchored"]
    for name, key in (("codapo_trl `math_accuracy_reward`", "ours"), ("plain math-verify", "plain")):
        refused = sum(not r[key] for r in right)
        paid = sum(r[key] for r in wrong)
        loose = sum(r[key] for r in unanchored)
        lines.append(
            f"| {name} | {rate(refused, len(right))} | {rate(paid, len(wrong))} | {rate(loose, len(unanchored))} |"
        )
    lines += [
        "",
        "Per model run:",
        "",
        "| model | right | wrong or unfinished | ours refuses right | ours pays wrong | "
        "math-verify refuses right | math-verify pays wrong |",
        "|---|---|---|---|---|---|---|",
    ]
    by_model: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_model[row["model"]].append(row)
    for model, items in by_model.items():
        right_m = [r for r in items if r["truth"] == "right"]
        wrong_m = [r for r in items if r["truth"] != "right"]
        lines.append(
            f"| {model} | {len(right_m)} | {len(wrong_m)} | {rate(sum(not r['ours'] for r in right_m), len(right_m))} "
            f"| {rate(sum(r['ours'] for r in wrong_m), len(wrong_m))} "
            f"| {rate(sum(not r['plain'] for r in right_m), len(right_m))} "
            f"| {rate(sum(r['plain'] for r in wrong_m), len(wrong_m))} |"
        )
    reasons = Counter(r["ours_reason"] or "wrong value" for r in right if not r["ours"])
    if reasons:
        lines += ["", "Our grader's reasons for the right answers it refuses:", ""]
        lines += [f"- `{reason}`: {count}" for reason, count in reasons.most_common()]
    timeouts = Counter(r["plain_error"] for r in rows if r["plain_error"])
    agreed = [r for r in rows if r["ours"] == r["plain"] and r["source_verdict"] is not None]
    doubted = [r for r in agreed if r["source_verdict"] != r["ours"]]
    unread = sum(r["truth_from"] == "agreement" for r in rows) - sum(r["truth_from"] == "agreement" for r in doubted)
    lines += [
        "",
        f"Agreed items: the sources' own graders (the report's checker, the Qwen2.5-Math harness) differ from the two "
        f"graders on {len(doubted)} of the {len(agreed)} agreed items that carry their verdict. Those were read (the ones "
        f"both graders refuse in full, the ones both pay by gold and answer read) and the agreed items found graded wrongly "
        f"carry a hand label; the other {unread} agreed items "
        f"were not read.",
    ]
    lines += [
        "",
        f"Items our grader was asked again (a timeout or a reward/grade_answers mismatch in the first pass, on a "
        f"shared 2-core machine): {sum(r['ours_retried'] > 0 for r in rows)}; still timed out after the retries: "
        f"{sum(r['ours_reason'] == TIMED_OUT for r in rows)}.",
        f"math-verify items that timed out or crashed (counted as not paid): {dict(timeouts) or 0}.",
        f"Grader settings: {json.dumps(settings, sort_keys=True)}.",
        "",
        f"Command: `{command}`",
    ]
    return "\n".join(lines) + "\n"


def refusals(rows: list[dict], records: dict[str, dict]) -> str:
    """Every right answer our grader refuses, grouped by its reason, with the completion's tail and the gold."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        if row["truth"] == "right" and not row["ours"]:
            groups[row["ours_reason"] or "wrong value (no reason)"].append(row)
    total = sum(len(items) for items in groups.values())
    lines = [f"# Right answers the maths reward refuses ({total})", ""]
    for reason, items in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        lines += [f"## `{reason}` ({len(items)})", ""]
        for row in items:
            record = records[row["id"]]
            tail = record["completion"][-TAIL_CHARS:]
            lines += [
                f"### {row['id']}",
                "",
                f"- gold: `{record['gold']}`; our grader read: `{row['ours_answer']}` -> `{row['ours_read']}`; "
                f"math-verify read: `{row['plain_read']}`; truth from: {row['truth_from']}"
                + (f" ({row['label_reason']})" if row.get("label_reason") else ""),
                "",
                "```text",
                ("..." if len(record["completion"]) > TAIL_CHARS else "") + tail,
                "```",
                "",
            ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--corpus", type=Path, default=Path("outputs/grader_audit/normalised.jsonl"), help="convert.py's output."
    )
    parser.add_argument("--labels", type=Path, default=HERE / "labels.jsonl", help="Hand labels of the disagreements.")
    parser.add_argument(
        "--out-dir", type=Path, default=Path("outputs/grader_audit"), help="Where the outputs are written."
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="Hard limit in seconds per math-verify item.")
    parser.add_argument("--workers", type=int, default=2, help="math-verify worker processes.")
    parser.add_argument("--retries", type=int, default=3, help="Retries of an item our grader timed out on.")
    parser.add_argument("--limit", type=int, default=None, help="Grade only the first N completions (a smoke run).")
    parser.add_argument(
        "--unlabelled-only", action="store_true", help="Write the disagreements and stop (for labelling)."
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    records = read_jsonl(args.corpus)[: args.limit]
    labels = read_labels(args.labels)
    ours = grade_ours(records, args.retries)
    plain = grade_plain(records, args.timeout, args.workers)
    rows = []
    for record, our, theirs in zip(records, ours, plain, strict=True):
        row = {"id": record["id"], "model": record["model"], "problem_id": record["problem_id"], **our, **theirs}
        row["truth"], row["truth_from"] = decide(record, row, labels)
        if row["truth_from"] == "label":
            row["label_reason"] = labels[record["id"]]["reason"]
        row["source_verdict"] = record.get("source_verdict")
        rows.append(row)

    args.out_dir.mkdir(parents=True, exist_ok=True)
    by_id = {record["id"]: record for record in records}
    disagreements = [
        {
            "id": row["id"],
            "gold": by_id[row["id"]]["gold"],
            "ours": row["ours"],
            "ours_reason": row["ours_reason"],
            "ours_answer": row["ours_answer"],
            "plain": row["plain"],
            "plain_read": row["plain_read"],
            "source_verdict": row["source_verdict"],
            "label": labels.get(row["id"], {}).get("label"),
            "tail": by_id[row["id"]]["completion"][-TAIL_CHARS:],
        }
        for row in rows
        if row["ours"] != row["plain"]
    ]
    write_jsonl(args.out_dir / "disagreements.jsonl", disagreements)
    unlabelled = [d["id"] for d in disagreements if d["label"] is None]
    logger.info("%d disagreements, %d unlabelled -> %s", len(disagreements), len(unlabelled), args.out_dir)
    if unlabelled:
        if not args.unlabelled_only:
            raise SystemExit(f"Label these in {args.labels} first: {unlabelled}")
        return
    if args.unlabelled_only:
        return

    write_jsonl(args.out_dir / "verdicts.jsonl", rows)
    package = Path(codapo_trl.__file__).resolve().parent.parent
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=package)
    dirty = subprocess.run(["git", "status", "--porcelain", "codapo_trl"], capture_output=True, text=True, cwd=package)
    command = "python experiments/grader_audit/grade.py " + " ".join(argv if argv is not None else sys.argv[1:])
    settings = {
        **grader_settings(),
        "codapo_trl": str(package),
        "codapo_trl_commit": (commit.stdout.strip() or "unknown") + (" + uncommitted changes" if dirty.stdout else ""),
    }
    (args.out_dir / "table.md").write_text(table(rows, command.strip(), settings), encoding="utf-8")
    (args.out_dir / "refusals.md").write_text(refusals(rows, by_id), encoding="utf-8")
    logger.info("%s", (args.out_dir / "table.md").read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
