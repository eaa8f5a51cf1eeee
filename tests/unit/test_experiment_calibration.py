"""The warm-start data and the calibration metrics of the CoDaPO-vs-GRPO experiment (`experiments/codapo_vs_grpo/`).

The scripts live outside the package; they are loaded from their files. No model is trained or sampled here: the
tests check the data the warm start trains on (easy levels, train split only, computed boxed answers that the
training reward pays) and the group statistics the calibration reports.
"""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest
from helpers_scripts import load_script

from codapo_trl.data import arithmetic_pool_sizes, load_math_dataset
from codapo_trl.evaluation.evaluate import QuestionRecord, SampleRecord
from codapo_trl.rewards import grade_answers


EXPERIMENT = Path(__file__).resolve().parents[2] / "experiments" / "codapo_vs_grpo"


def _load(name: str):
    return load_script(EXPERIMENT / f"{name}.py", f"codapo_vs_grpo_{name}")


@pytest.fixture(scope="module")
def warm_start():
    pytest.importorskip("trl")
    return _load("warm_start")


@pytest.fixture(scope="module")
def calibrate():
    return _load("calibrate")


def test_warm_start_data_is_easy_train_only_and_paid_by_the_reward(warm_start):
    data = warm_start.build_sft_dataset(num_per_level=60, seed=3)
    assert len(data) == 120
    assert set(data["level"]) == {1, 2}
    sizes = arithmetic_pool_sizes("test")
    test = load_math_dataset("arithmetic", "test", num_per_level={1: sizes[1], 2: sizes[2]})
    assert not set(data["question"]) & set(test["question"]), "the warm start must never see held-out questions"
    prompts = data["prompt"]
    assert all(p[0]["role"] == "system" and "boxed" in p[0]["content"] for p in prompts)
    completions = [c[0]["content"] for c in data["completion"]]
    golds = [str(sum(map(int, q.removeprefix("What is ").removesuffix("?").split(" + ")))) for q in data["question"]]
    verdicts = grade_answers(completions, golds, ["number"] * len(golds))
    assert all(v.correct for v in verdicts), [c for c, v in zip(completions, verdicts) if not v.correct][:3]
    # the answer is computed (the sum is written before the box), in more than one phrasing
    assert all(f"= {g}" in c for c, g in zip(completions, golds))
    assert len({c.split(":")[0][:12] for c in completions}) > 1


def test_warm_start_data_is_seeded(warm_start):
    a = warm_start.build_sft_dataset(num_per_level=20, seed=0)
    b = warm_start.build_sft_dataset(num_per_level=20, seed=0)
    c = warm_start.build_sft_dataset(num_per_level=20, seed=1)
    assert a["completion"] == b["completion"] and a["question"] == b["question"]
    assert a["question"] != c["question"]


def test_warm_start_completion_format(warm_start):
    assert warm_start.warm_start_completion(7, 8, 0) == "7 + 8 = 15.\n\nThe answer is \\boxed{15}."
    with pytest.raises(IndexError):
        warm_start.warm_start_completion(1, 2, len(warm_start.ANSWER_TEMPLATES))


def test_mixed_group_rate_by_hand(calibrate):
    # n = G: a group is the whole sample set; mixed exactly when 0 < c < n.
    assert calibrate.mixed_group_rate(8, [0, 8, 1, 7], 8) == pytest.approx(0.5)
    # c = 2 of n = 4, G = 2: all right 1/6, all wrong 1/6 -> mixed 2/3.
    assert calibrate.mixed_group_rate(4, [2], 2) == pytest.approx(2 / 3)
    # G = 1 can never be mixed
    assert calibrate.mixed_group_rate(4, [1, 2, 3], 1) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="group_size"):
        calibrate.mixed_group_rate(4, [1], 8)


def _question(level: int, correct: list[bool], boxed: bool = True) -> QuestionRecord:
    record = QuestionRecord("arithmetic", 0, "0", level, "What is 1 + 2?", "3", "number")
    for i, ok in enumerate(correct):
        text = ("1 + 2 = 3. \\boxed{3}" if ok else "1 + 2 = 4. \\boxed{4}") if boxed else "I think 3"
        record.samples.append(
            SampleRecord(i, text, "3" if ok else ("4" if boxed else None), None, ok, float(ok),
                         None if ok or boxed else "no anchored answer", 10, "stop")
        )  # fmt: skip
    return record


def test_level_report_counts(calibrate):
    questions = [_question(3, [True, False, False, False]), _question(3, [False] * 4, boxed=False)]
    report = calibrate.level_report(questions, group_size=4, num_examples=2)
    assert report["pass_rate"] == pytest.approx(1 / 8)
    assert report["boxed_rate"] == pytest.approx(0.5)
    assert report["no_answer_rate"] == pytest.approx(0.5)
    assert report["discovery_rate"] == pytest.approx(0.5)
    assert report["mixed_group_rate"] == pytest.approx(0.5)
    assert report["failure_reasons"] == {"no anchored answer": 4, "wrong answer": 3}
    assert len(report["examples"]) == 2


def test_in_band(calibrate):
    assert calibrate.in_band({3: 0.5, 4: 0.1, 5: 0.01}) == {3: True, 4: True, 5: True}
    assert calibrate.in_band({3: 0.2, 4: 0.3, 5: 0.0}) == {3: False, 4: False, 5: False}
    # round 2: the hard band moves to the candidate level, and the round-1 band levels are not held to anything
    bands = calibrate.target_bands(7)
    assert calibrate.in_band({4: 0.6, 5: 0.3, 7: 0.03}, bands) == {7: True}
    assert calibrate.in_band({7: 0.17}, bands) == {7: False}
    assert calibrate.target_bands(5) == calibrate.TARGET_BAND


def test_docstring_examples_hold(warm_start, calibrate):
    for module in (warm_start, calibrate):
        failures, attempted = doctest.testmod(module, verbose=False)
        assert attempted >= 1 and failures == 0, module.__name__
