"""Tests of `codapo_trl.answers`, the one home of the answer vocabulary.

Where two copies of a rule used to disagree (two boxed-answer extractors, two completion-text readers, three orders of
question-id columns), each case below fails under the rule that lost; the reason for each choice is in the module.
"""

import doctest

import pytest

from codapo_trl import answers, data, rewards
from codapo_trl.answers import (
    QUESTION_ID_COLUMNS,
    completion_text,
    last_boxed,
    row_question_id,
    solution_last_boxed,
    text_after_last_box,
)
from codapo_trl.evaluation.benchmarks import _item_id
from codapo_trl.rewards import extract_final_answer, grade_answers
from codapo_trl.rewards.code import extract_code


def test_doctests():
    result = doctest.testmod(answers)
    assert result.attempted >= 10 and result.failed == 0


# ---------------------------------------------------------------------------------------------------------------------
# Boxed answers


@pytest.mark.parametrize(
    "text",
    [
        r"\boxed{19} and finally \boxed{}",  # an empty last box withholds the answer
        r"\boxed{19} and finally \boxed{  }",
        r"\boxed{19} and finally \boxed{20",  # truncated inside the last box: no earlier fallback
        r"\boxed 19 or 20",  # brace-less: no end, a hedge
    ],
)
def test_grading_rule_never_reads_an_earlier_or_braceless_box(text):
    """The old dataset extractor read these as `19` (or `""`); the grader must not pay them for gold 19."""
    assert last_boxed(text) is None
    assert extract_final_answer(text) is None
    assert [r.reward for r in grade_answers([text], ["19"])] == [0.0]


def test_braced_box_after_a_braceless_one_is_the_answer():
    assert last_boxed(r"\boxed 20 then \boxed{19}") == "19"
    assert last_boxed(r"\boxed{19} then \boxed 20") == "19"  # a brace-less `\boxed` is not a box for grading


@pytest.mark.parametrize(
    ("text", "after"),
    [
        (r"\boxed{23} = 26. The answer is 26.", " = 26. The answer is 26."),
        (r"\boxed{\frac{1}{2}} hence \fbox{\{1\}} then 3", " then 3"),  # nested and escaped braces, the last box
        (r"$\boxed{7}$", "$"),
        (r"\boxed{7} \boxed 8", r" \boxed 8"),  # a brace-less `\boxed` is text, not a box
        (r"\boxed{7} \boxed{8", None),  # unclosed last box: no answer, nothing after it
        (r"\boxed{}", ""),
        ("The answer is 7.", None),
    ],
)
def test_text_after_last_box(text, after):
    assert text_after_last_box(text) == after


def test_empty_last_box_is_no_answer_in_both_modes():
    """The old dataset extractor returned `""` for an empty box; both modes now say `None`."""
    assert last_boxed(r"\boxed{7} \boxed{}", lenient=True) is None
    assert solution_last_boxed(r"\fbox{ }") is None


def test_line_break_before_closing_brace():
    r"""`\\}` is a LaTeX line break then a closing brace; the old dataset extractor took it for an escaped brace and
    found the box unclosed (then fell back to an earlier box)."""
    text = r"\boxed{1} then \boxed{\begin{matrix} 1 \\ 2 \\}"
    assert last_boxed(text) == r"\begin{matrix} 1 \\ 2 \\"
    assert solution_last_boxed(text) == r"\begin{matrix} 1 \\ 2 \\"


def test_dataset_rule_is_the_lenient_one():
    """`codapo_trl.data.last_boxed` (the `"last_boxed"` answer parser) keeps the lenient dataset rule."""
    assert data.last_boxed is solution_last_boxed
    assert data.ANSWER_PARSERS["last_boxed"] is solution_last_boxed
    assert solution_last_boxed(r"first \boxed{3} then broken \boxed{4") == "3"
    assert solution_last_boxed("so \\boxed 5.") == "5"


# ---------------------------------------------------------------------------------------------------------------------
# Completion text


def _assistant(*contents):
    return [{"role": "assistant", "content": c} for c in contents]


def test_completion_text_is_the_last_assistant_message():
    """The code reward used to join every assistant message: a draft's code block or box was then graded."""
    assert completion_text(_assistant(r"draft \boxed{19}", "I am not sure.")) == "I am not sure."
    assert [r.reward for r in grade_answers([completion_text(_assistant(r"\boxed{19}", ""))], ["19"])] == [0.0]
    assert rewards.math_accuracy_reward([_assistant(r"\boxed{19}", "no answer")], answer=["19"]) == [0.0]
    assert extract_code(_assistant("```python\nprint(1)\n```", "never mind")) is None
    assert extract_code(_assistant("draft", "```python\nprint(2)\n```")) == "print(2)\n"


def test_completion_text_ignores_other_roles_and_non_text_blocks():
    """The maths reward used to grade the last message of any role when there was no assistant message; the code
    reward read any content block with a `text` key and turned `None` content into `"None"`."""
    assert completion_text([{"role": "tool", "content": r"\boxed{19}"}]) == ""
    assert completion_text({"role": "user", "content": r"\boxed{19}"}) == ""
    assert rewards.math_accuracy_reward([[{"role": "tool", "content": r"\boxed{19}"}]], answer=["19"]) == [0.0]
    blocks = [{"type": "reasoning", "text": r"\boxed{19}"}, {"type": "text", "text": "no idea"}]
    assert completion_text(_assistant(blocks)) == "no idea"
    assert completion_text(_assistant(None)) == ""
    assert completion_text([{"content": "no role"}]) == "no role"
    assert completion_text("plain") == "plain" and completion_text(None) == ""


# ---------------------------------------------------------------------------------------------------------------------
# Answer types and question ids


def test_one_answer_types_tuple():
    assert data.ANSWER_TYPES is answers.ANSWER_TYPES
    with pytest.raises(ValueError, match="answer_type must be one of"):
        data.DatasetSpec(name="x", hub_id="a/b", answer_type="code")


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"task_id": "HumanEval/0", "id": 7}, "7"),  # evaluation's old order said "HumanEval/0"
        ({"unique_id": "test/a.json", "qid": "q1"}, "q1"),  # analysis's old order said "test/a.json"
        ({"Record ID": "rec1", "problem_idx": 3}, "rec1"),
        ({"name": "taco-1", "id": None}, "taco-1"),
        ({"problem": "1+1?"}, None),
    ],
)
def test_question_id_order(row, expected):
    assert row_question_id(row) == expected
    assert _item_id(row, 5) == (expected if expected is not None else "5")


def test_question_id_columns_start_with_the_training_logs_order():
    """`codapo_question_log` files on disk name questions by this order; it must not change under them."""
    assert QUESTION_ID_COLUMNS[:6] == ("id", "qid", "unique_id", "question_id", "problem_id", "task_id")


# ---------------------------------------------------------------------------------------------------------------------
# The version report (`codapo_trl.versions`, the other piece of shared vocabulary written into result files)


def test_version_report_names_the_grader_and_trl():
    """Evaluation's old report left out `trl`, analysis's left out `math-verify`; both decide a result."""
    import importlib.metadata

    from codapo_trl import versions

    assert doctest.testmod(versions).failed == 0
    report = versions.package_versions()
    for package in ("trl", "math-verify", "torch"):
        assert report[package] == importlib.metadata.version(package)
    assert "no-such-package" not in report
