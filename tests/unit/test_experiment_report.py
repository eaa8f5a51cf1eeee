"""The report of the CoDaPO-vs-GRPO campaign (`experiments/codapo_vs_grpo/report.py`): the pre-registered decision
rule, the question-log and budget read-outs, and a whole report written from a synthetic campaign whose per-seed
differences are known. The evaluation summaries are the real warm start's (committed by `run.py`) with the level
accuracies replaced."""

from __future__ import annotations

import copy
import doctest
import gzip
import json
import shutil
import sys
from pathlib import Path

import pytest
from helpers_scripts import load_script


EXPERIMENT = Path(__file__).resolve().parents[2] / "experiments" / "codapo_vs_grpo"
WARM = EXPERIMENT / "results" / "runs" / "warm_start"


def _load(name: str, as_name: str):
    return load_script(EXPERIMENT / f"{name}.py", as_name)


@pytest.fixture(scope="module")
def report():
    pytest.importorskip("trl")
    pytest.importorskip("scipy")
    saved = {name: sys.modules.get(name) for name in ("run", "stats", "after_box")}
    _load("run", "run")  # report.py imports its siblings by name, as when it runs as a script
    _load("stats", "stats")
    _load("after_box", "after_box")
    module = _load("report", "codapo_vs_grpo_report")
    yield module
    for name, old in saved.items():
        if old is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = old


def test_doctests(report):
    result = doctest.testmod(report)
    assert result.attempted >= 3 and result.failed == 0


def test_decision_rule_is_the_preregistered_one(report):
    interval = report.stats.PairedInterval

    def t(low, high):
        return interval((low + high) / 2, low, high, 6, 3.0, "paired-t", 0.95)

    def boot(low, high):
        return interval((low + high) / 2, low, high, 6, 3.0, "paired-bootstrap", 0.95)

    fine_secondary = t(-2, 4)
    assert report.decide(t(1, 9), boot(2, 8), fine_secondary) == "confirm"
    # a level-5 gain bought with a loss over the trained levels does not confirm
    assert report.decide(t(1, 9), boot(2, 8), t(-8, 1)) == "inconclusive"
    assert report.decide(t(-3, 4), boot(-2, 3), fine_secondary) == "refute"
    assert report.decide(t(-3, 6), boot(-2, 5), fine_secondary) == "inconclusive"
    # the bootstrap check disagreeing makes it inconclusive
    assert report.decide(t(0.5, 9), boot(-0.5, 8), fine_secondary) == "inconclusive"


def test_question_log_read_outs(report):
    rows = [
        {"step": 1, "phase": 0, "level": 5, "num_correct": 0, "num_generations": 8, "selected": True},
        {"step": 1, "phase": 0, "level": 4, "num_correct": 3, "num_generations": 8, "selected": True},
        {"step": 1, "phase": 0, "level": 3, "num_correct": 8, "num_generations": 8, "selected": False},
        {"step": 2, "phase": 1, "level": 4, "num_correct": 5, "num_generations": 8, "selected": None},
        {"step": 3, "phase": 0, "level": 5, "num_correct": 1, "num_generations": 8, "selected": None},
    ]
    assert report.discovery_rate(rows, 5) == (1, 2)
    assert report.discovery_rate(rows, 4, first_sight_only=False) == (2, 2)
    assert report.s_picks_by_level(rows) == {5: 1, 4: 1}
    assert report.s_pick_outcomes(rows) == {"none": 1, "mixed": 1}
    log = [
        {"step": 1, "reward": 0.1, "budget/generated_tokens": 100, "budget/unique_prompts": 8, "step_time": 3.0},
        {
            "step": 2,
            "reward": 0.4,
            "budget/generated_tokens": 250,
            "budget/unique_prompts": 8,
            "step_time": 2.0,
            "codapo/phase": 1.0,
            "clip_ratio/region_mean": 0.25,
        },
        {"step": 2, "train_runtime": 9.0},
    ]
    assert report.budget_at(log, 0) == {"tokens": 0.0, "seconds": 0.0, "questions": 0.0}
    assert report.budget_at(log, 1) == {"tokens": 100, "seconds": 3.0, "questions": 8}
    assert report.budget_at(log, 2) == {"tokens": 250, "seconds": 5.0, "questions": 8}
    assert report.clip_fraction_on_s(log) == 0.25
    assert report.fresh_batch_reward(log, 1, 8) == 0.1  # the S update (phase 1) is not a fresh batch
    assert report.fresh_batch_reward(log, 2, 8) is None


def _summary_with(base: dict, level5: float, level3: float = 20.0) -> dict:
    summary = copy.deepcopy(base)
    levels = summary["benchmarks"]["arithmetic"]["levels"]
    levels["5"]["metrics"]["avg@n"] = level5 / 100
    levels["3"]["metrics"]["avg@n"] = level3 / 100
    return summary


def _fake_campaign(root: Path, seeds: list[int], codapo_gain: list[float]) -> Path:
    """A results directory: the real warm start, and per seed four arms whose level-5 accuracies are known."""
    runs = root / "runs"
    shutil.copytree(WARM, runs / "warm_start")
    base = json.loads((WARM / "avg4" / "summary.json").read_text())
    for seed, gain in zip(seeds, codapo_gain):
        for arm in ("grpo", "codapo", "codapo_weighting", "codapo_uniform"):
            run_dir = runs / f"{arm}-seed{seed}"
            level5 = 2.0 + seed + (gain if arm == "codapo" else 0.0)
            for step in (8, 16, 24, 31, 32):
                for kind in ("greedy", "avg4") if step >= 31 else ("greedy",):
                    out = run_dir / "eval" / f"step{step}-{kind}"
                    out.mkdir(parents=True)
                    (out / "summary.json").write_text(json.dumps(_summary_with(base, level5)))
                    shutil.copy(WARM / "avg4" / "samples.jsonl.gz", out / "samples.jsonl.gz")
            log = [
                {
                    "step": s,
                    "reward": 0.9 if arm != "grpo" and s % 2 == 0 else 0.2,  # S updates score chosen questions
                    "budget/generated_tokens": 1000 * s,
                    "budget/unique_prompts": 8 * s,
                    "step_time": 10.0,
                    "codapo/phase": float(s % 2 == 0) if arm != "grpo" else None,
                    "dynamics/bin3/count": 64.0,
                    "dynamics/bin3/token_weight": 0.5,
                }
                for s in range(1, 33)
            ]
            (run_dir / "trainer_state.json").write_text(json.dumps({"log_history": log}))
            rows = [{"step": 1, "phase": 0, "level": 5, "num_correct": 1, "num_generations": 8, "selected": True}]
            (run_dir / "questions.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
            (run_dir / "done.json").write_text("{}")
    return root


def test_report_computes_the_paired_endpoint(report, tmp_path):
    if not (WARM / "avg4" / "summary.json").exists():
        pytest.skip("the warm start's evaluation is not committed yet")
    gains = [4.0, 6.0, 5.0]
    results = _fake_campaign(tmp_path, [0, 1, 2], gains)
    (results / "runs" / "codapo_uniform-seed2" / "done.json").unlink()  # an arm of seed 2 still running
    report.main(["--results-dir", str(results)])
    text = (results / "report.md").read_text()
    summary = json.loads((results / "summary.json").read_text())
    assert summary["seeds"] == [0, 1] and summary["primary_seeds"] == [0, 1, 2] and summary["verdict"] is None
    assert "CoDaPO - uniform control | update 32, avg4 (seeds [0, 1])" in text
    assert summary["primary"]["differences"] == pytest.approx(gains)
    assert "+5.0 [" in text and "No verdict yet" in text  # mean of 4, 6, 5
    assert summary["required_seeds"] == report.stats.required_seeds(5.0, 1.0)  # SD of 4, 6, 5 is 1
    assert summary["fresh_batch_reward"]["codapo"] == pytest.approx([0.2] * 4)  # S updates' 0.9 left out
    assert "| CoDaPO | 0.20 (0.20-0.20) | 0.20 (0.20-0.20) |" in text
    # every finished run has its own row, the unfinished one none
    assert summary["per_seed"]["codapo"]["2"]["5"] == pytest.approx(2.0 + 2 + 5.0)
    assert "| 2 | CoDaPO | " in text and "| 2 | uniform control | " not in text
    assert sorted(summary["per_seed"]["codapo_uniform"]) == ["0", "1"]
    assert (results / "budget_axes.png").stat().st_size > 10_000
    with gzip.open(WARM / "avg4" / "samples.jsonl.gz", "rt") as f:
        first_level5 = next(q for q in map(json.loads, f) if q["level"] == 5)
    assert first_level5["question"] in text  # completions are quoted, not only scores


def test_report_gives_a_verdict_at_six_seeds(report, tmp_path):
    if not (WARM / "avg4" / "summary.json").exists():
        pytest.skip("the warm start's evaluation is not committed yet")
    results = _fake_campaign(tmp_path, list(range(6)), [1.0, -1.0, 0.5, -0.5, 0.0, 0.2])
    report.main(["--results-dir", str(results)])
    summary = json.loads((results / "summary.json").read_text())
    assert summary["verdict"] == "refute"
    text = (results / "report.md").read_text()
    # the headline says what the rule's label means in this regime, and no more (issue 27)
    assert "**No level-5 gain of 5 points or more in this regime** (a quickly learnable hard level" in text
    assert "The pre-registered rule's label is **refute**, which means only that" in text
    assert "GRPO is not shown better" in text and "is not tested here" in text
    # differences 1, -1, 0.5, -0.5, 0, 0.2 all lie below 5: only the observed sign pattern is as extreme, 1 of 64
    assert summary["sign_flip_p_effect_at_least_5"] == pytest.approx(1 / 64)
    assert "one-sided p = 0.016 (1 of 64 sign patterns)" in text
    assert "**Loss confound.**" in text and "uniform control (a second update" in text
    # the fake logs have one level-5 group with 1 of 8 correct at update 1, per run
    assert "update 1 (the warm start): 12.5 % (6/48)" in text


def _samples_file(path: Path, rows: list[tuple[int, str, str, bool]]) -> Path:
    """A read-out's samples file: one question per row (level, gold, completion, graded correct)."""
    with gzip.open(path, "wt") as f:
        for index, (level, gold, completion, correct) in enumerate(rows):
            sample = {"completion": completion, "correct": correct}
            question = {"level": level, "question": f"What is {gold}?", "gold": gold, "answer_type": "number"}
            f.write(json.dumps({**question, "index": index, "samples": [sample]}) + "\n")
    return path


def test_answers_after_the_box_count_contradictions(report, tmp_path):
    # graded as the campaign's reward does (last box); the strict reading is the grader's read_after_box rule
    path = _samples_file(
        tmp_path / "samples.jsonl.gz",
        [
            (3, "23", r"16 + 7 = 23. \boxed{23} = 26. The answer is 26.", True),  # contradicted
            (3, "23", r"16 + 7 = 23. \boxed{23} = 23. The answer is 23.", True),  # agrees
            (4, "87", r"86 + 1 = 87. \boxed{87}", True),  # nothing after the box
            (4, "87", r"86 + 1 = 88. \boxed{88}. So the answer is 87.", False),  # wrong box, right later: stays wrong
            (4, "87", r"86 + 1 = 87. \boxed{87} = 88.", True),  # a relation after the box, no phrase: contradicted
            (5, "159", "131 + 28 = 159. The answer is 159.", True),  # no box: the phrase is the answer itself
            (5, "159", r"\boxed{159} hence the answer is 131 + 28", True),  # the same value as an expression: agrees
        ],
    )
    counts = report.answers_after_box(path)
    assert dict(counts[3]) == {"samples": 2, "correct": 2, "stated": 2, "contradicted": 1}
    assert dict(counts[4]) == {"samples": 3, "correct": 2, "stated": 2, "contradicted": 1}
    assert dict(counts[5]) == {"samples": 2, "correct": 2, "stated": 1, "contradicted": 0}
    strict = report.strict_accuracy(counts)
    assert strict == pytest.approx({"3": 50.0, "4": 100 / 3, "5": 100.0, "3-5": (50 + 100 / 3 + 100) / 3})
