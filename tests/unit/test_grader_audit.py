"""The grader audit's scripts (`experiments/grader_audit/`): reading a source report, ground truth, the table.

The scripts live outside the package and are loaded from their files. The real corpus is kept outside the repository,
so these tests build small inputs of their own.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers_scripts import load_script


AUDIT = Path(__file__).resolve().parents[2] / "experiments" / "grader_audit"


def _load(name: str):
    return load_script(AUDIT / f"{name}.py", f"grader_audit_{name}")


@pytest.fixture(scope="module")
def convert():
    return _load("convert")


@pytest.fixture(scope="module")
def grade():
    return _load("grade")


def _problems(n: int = 500) -> list[dict]:
    return [
        {
            "problem": f"What is {i} + {i}?",
            "answer": str(2 * i),
            "solution": f"$\\boxed{{{2 * i}}}$",
            "unique_id": f"t/{i}",
        }
        for i in range(n)
    ]


def _report(problems: list[dict], response: str) -> str:
    items = []
    for i, problem in enumerate(problems):
        items.append(
            f"## Problem math_{i:05d}\n  Level: 1\n  Type: algebra\n  Problem Statement: {problem['problem']}\n"
            f"  Ground Truth: {problem['answer']}\n\n## Response math_{i:05d}\n  Attempt: 1\n  Answer: x\n"
            f"  Is Correct: {'True' if i % 2 else 'False'}\n\n--- System Prompt ---\n(empty)\n--- End System Prompt ---\n\n"
            f"--- LLM Response ---\n{response.format(answer=problem['answer'])}\n--- End LLM Response ---\n\n"
            "--------------------------------------------------------\n"
        )
    return "# Report\n\n# Detailed Results\n\n" + "\n".join(items)


def test_a_report_gives_one_record_per_problem_with_its_whole_response(convert):
    problems = _problems()
    response = "Line one.\n\n## Not a heading of the report\n\nSo the answer is $\\boxed{{{answer}}}$."
    run = convert.Run("labrem/x", "results/x.md", "model x")
    records = convert.convert_labrem(run, _report(problems, response), problems)
    assert len(records) == 500
    assert records[7]["id"] == "labrem/x/t/7"
    assert records[7]["completion"] == response.format(answer="14")
    assert records[7]["gold"] == "14" and records[7]["source_verdict"] is True
    assert records[8]["source_verdict"] is False


def test_a_report_that_is_not_math500_is_refused(convert):
    problems = _problems()
    run = convert.Run("labrem/x", "results/x.md", "model x")
    with pytest.raises(ValueError, match="expected 500"):
        convert.convert_labrem(run, _report(problems[:499], "{answer}"), problems)
    shifted = problems[1:] + problems[:1]
    with pytest.raises(ValueError, match="is not MATH-500 problem"):
        convert.convert_labrem(run, _report(shifted, "{answer}"), problems)


def test_a_hand_label_wins_and_a_disagreement_needs_one(grade):
    labels = {"a": {"id": "a", "label": "unanchored", "reason": "prose"}}
    assert grade.decide({"id": "a"}, {"ours": True, "plain": True}, labels) == ("unanchored", "label")
    assert grade.decide({"id": "b"}, {"ours": True, "plain": True}, labels) == ("right", "agreement")
    assert grade.decide({"id": "b"}, {"ours": False, "plain": False}, labels) == ("wrong", "agreement")
    assert grade.decide({"id": "b"}, {"ours": True, "plain": False}, labels) == (None, "unlabelled")


def test_labels_are_checked(grade, tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps({"id": "a", "label": "maybe", "reason": "?"}) + "\n")
    with pytest.raises(ValueError, match="a label needs"):
        grade.read_labels(path)
    row = {"id": "a", "label": "right", "reason": "boxed"}
    path.write_text(json.dumps(row) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(ValueError, match="labelled twice"):
        grade.read_labels(path)


def test_the_table_counts_refused_right_and_paid_wrong_per_grader(grade):
    def row(truth, ours, plain, reason=None):
        return {
            "id": f"{truth}{ours}{plain}{reason}",
            "model": "m",
            "problem_id": "p",
            "truth": truth,
            "truth_from": "label",
            "ours": ours,
            "plain": plain,
            "ours_reason": reason,
            "plain_error": None,
            "ours_retried": 0,
            "source_verdict": None,
        }

    rows = [
        row("right", True, True),
        row("right", False, True, "states several values"),
        row("wrong", False, True),
        row("unanchored", False, True),
    ]
    text = grade.table(rows, "python grade.py", {})
    assert "| codapo_trl `math_accuracy_reward` | 1 / 2 (50.0 %) | 0 / 2 (0.0 %) | 0 / 1 (0.0 %) |" in text
    assert "| plain math-verify | 0 / 2 (0.0 %) | 2 / 2 (100.0 %) | 1 / 1 (100.0 %) |" in text
    assert "- `states several values`: 1" in text


def test_plain_math_verify_reads_the_whole_completion():
    plain = _load("plain_verify")
    assert plain.verify_pair(("\\frac12", "so the answer is $\\boxed{0.5}$"))[0] is True
    assert plain.verify_pair(("2", "The answer is 3."))[0] is False


def test_round_4_truth_and_table():
    """Issue 60's audit (`audit_r4.py`): a label decides; else the source's verdict where plain math-verify agrees;
    else the item is unknown and counts for neither grader. The table counts each grader against that truth."""
    saved = sys.modules.get("grade")
    load_script(AUDIT / "grade.py", "grade")  # audit_r4.py imports its sibling by name, as when it runs as a script
    try:
        audit = _load("audit_r4")
    finally:
        if saved is None:
            sys.modules.pop("grade", None)
        else:
            sys.modules["grade"] = saved
    labels = {"a": {"id": "a", "label": "unanchored", "reason": "prose"}}
    assert audit.truth_of({"id": "a", "source_verdict": True}, True, labels) == (False, "label")
    assert audit.truth_of({"id": "b", "source_verdict": True}, True, labels) == (True, "source and math-verify")
    assert audit.truth_of({"id": "c", "source_verdict": True}, False, labels) == (None, "unknown")
    assert audit.truth_of({"id": "d", "source_verdict": None}, True, labels) == (None, "unknown")
    rows = [
        {"source": "s", "truth": True, "ours": False, "plain": True},  # we refuse a right answer
        {"source": "s", "truth": True, "ours": True, "plain": True},
        {"source": "s", "truth": False, "ours": False, "plain": True},  # math-verify pays a wrong one
        {"source": "s", "truth": None, "ours": True, "plain": False},  # unknown: counted for neither
        {"source": "s", "truth": True, "ours": False, "plain": True, "reason": "grading timed out"},
    ]
    rows.append({"source": "s", "part": "college", "truth": True, "ours": True, "plain": False})
    text = audit.table(rows)
    assert "| s | 5 | 4 | 2 / 3 | 1 | 0 / 3 | 0 / 1 | 1 / 1 | 1 |" in text  # a timeout is a refusal, counted apart
    assert "| s (college) | 1 | 1 | 0 / 1 | 0 | 1 / 1 | 0 / 0 | 0 / 0 | 0 |" in text  # a part of a source apart
