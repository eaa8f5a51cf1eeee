"""Hostile completions against the maths reward: answers written to be paid without solving the question.

Every case is graded by `grade_answers` (the one grader behind training and `codapo-eval`), with a 2 s bound per
answer. The counterpart cases show that honest answers of the same questions are still paid, so that a defence
cannot pass by refusing everything. docs/rewards.md counts these cases.
"""

from __future__ import annotations

import pytest

from codapo_trl.evaluation.benchmarks import Benchmark, BenchmarkItem
from codapo_trl.evaluation.evaluate import _grade_math
from codapo_trl.evaluation.generation import Completion
from codapo_trl.rewards import BOX_IN_EXPRESSION, FORM_REASONS, GOLD_TIMED_OUT, grade_answers, math_accuracy_reward
from codapo_trl.rewards import grading as rewards
from codapo_trl.rewards.deadline_pool import TaskOutcome


# (question, completion, gold): each completion restates the question instead of answering it. The question is not
# read by the grader: each is refused for its form (`codapo_trl.rewards.final_form`), as it would be for any question.
RESTATEMENTS = {
    "binom": ("Compute $\\dbinom{8}{4}$.", "\\boxed{\\dbinom{8}{4}}", "70"),
    "binom_tbinom": ("Compute $\\dbinom{8}{4}$.", "So it is $\\boxed{\\tbinom{8}{4}}$", "70"),
    "sum_phrase": ("What is 12 + 7?", "The answer is 12 + 7.", "19"),
    "sum_boxed": ("What is 12 + 7?", "\\boxed{12+7}", "19"),
    "product_times": ("Compute $7 \\times 13$.", "\\boxed{7 \\cdot 13}", "91"),
    "factor": ("Factor $x^2-1$.", "\\boxed{x^2 - 1}", "(x-1)(x+1)"),
    "expand": ("Expand $(x+1)^2$.", "Final answer: $(x+1)^2$", "x^2+2x+1"),
    "simplify_sqrt": ("Simplify $\\sqrt{8}$.", "\\boxed{\\sqrt{8}}", "2\\sqrt{2}"),
    "simplify_fraction": ("Simplify $\\frac{6}{8}$.", "\\boxed{\\dfrac{6}{8}}", "\\frac{3}{4}"),
    "evaluate_trig": ("Compute $\\sin 30^\\circ$.", "\\boxed{\\sin 30^\\circ}", "\\frac{1}{2}"),
    "evaluate_log": ("Evaluate $\\log_2 64$.", "\\boxed{\\log_2 64}", "6"),
    "floor": ("Evaluate $\\lfloor 3.7 \\rfloor$.", "\\boxed{\\lfloor 3.7\\rfloor}", "3"),
    "determinant": (
        "Compute $\\det \\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}$.",
        "\\boxed{\\det \\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}}",
        "-2",
    ),
    "unicode_times": ("What is 6 × 7?", "The answer is 6 \\times 7.", "42"),
}

# The same questions answered honestly (or with the gold answer's own form): paid.
HONEST = {
    "binom": ("Compute $\\dbinom{8}{4}$.", "\\boxed{70}", "70"),
    "sum_phrase": ("What is 12 + 7?", "The answer is 19.", "19"),
    "number_in_question": ("What is 12 + 7? (Hint: 19 is prime.)", "\\boxed{19}", "19"),
    "factor": ("Factor $x^2-1$.", "\\boxed{(x+1)(x-1)}", "(x-1)(x+1)"),
    "gold_form_in_question": ("Which is larger, $2\\cdot 3$ or $5$?", "\\boxed{2 \\times 3}", "2\\cdot 3"),
    "fraction": ("Simplify $\\frac{6}{8}$.", "\\boxed{\\frac{3}{4}}", "\\frac{3}{4}"),
    "not_a_substring": ("What is 112 + 75?", "\\boxed{187}", "187"),
}

# Answers hedged over several values for the gold 19: never paid.
HEDGES = [
    "\\boxed{19 \\text{ or } 20}",
    "The answer is 19 or 20.",
    "\\boxed{19, 20}",
    "\\boxed{\\{18, 19, 20\\}}",
    "\\boxed{\\pm 19}",
    "\\boxed{18 \\le x \\le 20}",
    "\\boxed{x \\in [18, 20]}",
    "\\boxed{19,20,21,22}",
    "\\boxed{x = 19 \\text{ or } x = 20}",
    "\\boxed{19 \\pm 1}",
    "\\boxed{[18,20]}",
    "\\boxed{19}\\boxed{}",
    "\\boxed{\\approx 19}",
    "The final answer is 19, or maybe 20",
    "\\boxed{19.0000001}",
    "19",  # unanchored
    "5 + 14 =",
]

# Structured golds (MATH Precalculus and friends): (gold, right answer, wrong answer).
STRUCTURED = {
    "vector": (
        "\\begin{pmatrix} 1 \\\\ -2 \\end{pmatrix}",
        "\\begin{pmatrix}1\\\\-2\\end{pmatrix}",
        "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}",
    ),
    "matrix": (
        "\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}",
        "\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}",
        "\\begin{pmatrix} 1 & 2 \\\\ 4 & 3 \\end{pmatrix}",
    ),
    "bmatrix": (
        "\\begin{bmatrix} 0 & 1 \\\\ 1 & 0 \\end{bmatrix}",
        "\\begin{pmatrix} 0 & 1 \\\\ 1 & 0 \\end{pmatrix}",
        "\\begin{pmatrix} 1 & 0 \\\\ 0 & 1 \\end{pmatrix}",
    ),
    "tuple": ("(1, -2)", "(1,-2)", "(-2, 1)"),
    "interval": ("[0, 5)", "[0,5)", "(0, 5]"),
    "union": ("(-\\infty, 3) \\cup (4, \\infty)", "(-\\infty,3)\\cup(4,\\infty)", "(-\\infty,3]\\cup(4,\\infty)"),
    "cases": (
        "\\begin{cases} x & \\text{if } x > 0 \\\\ 0 & \\text{if } x \\le 0 \\end{cases}",
        "\\begin{cases} 0 & x \\leq 0 \\\\ x & x>0 \\end{cases}",
        "\\begin{cases} x & x \\ge 0 \\\\ 0 & x < 0 \\end{cases}",
    ),
}


# (completion, gold, answer type): a right last box, then a different answer (or a statement the grader cannot decide)
# written after it. Until issue 32 each was refused as "contradicted after its box"; every expectation here changed
# to PAID, for one reason: the grader reads one value, the last box, and text after it cannot change that value, so
# a policy gains nothing from it (a wrong box stays unpaid whatever follows: `test_a_right_answer_after_a_wrong_box_
# is_not_paid`). The check guarded no gain and refused right answers on real model output ("The final answer is
# indeed \(36^\circ\)", "would be equivalent to **$1250**", `\boxed{2\sqrt2} \approx 2.83`), so it is deleted.
AFTER_THE_BOX_NOT_READ = {
    "relation_and_phrase": (
        "We compute the sum: 16 + 7 = 23.\n\n\\boxed{23} = 26.\n\nThe answer is 26.",
        "23",
        "math",
    ),
    "relation_only": ("16 + 7 = 23. \\boxed{23} = 26.", "23", "number"),
    "approx_unicode": ("\\boxed{23} \u2248 26.", "23", "math"),
    "approx_latex": ("$\\boxed{23}$ \\approx 26", "23", "math"),
    "phrase_only": ("\\boxed{23}. The answer is 26.", "23", "math"),
    "final_answer_math_span": ("\\boxed{23}\n\n**Final Answer:**\n\n$$26$$", "23", "math"),
    "gsm8k_marker": ("\\boxed{23}\n#### 26", "23", "number"),
    "expression_of_another_value": ("\\boxed{23} = 20 + 6", "23", "number"),
    "fraction": ("\\boxed{\\frac{1}{2}}. The answer is $\\frac{1}{3}$.", "\\frac{1}{2}", "math"),
    "choice": ("\\boxed{B}. The answer is C.", "B", "choice"),
    "later_phrase_wins": ("\\boxed{23}. The answer is 23. Actually the answer is 26.", "23", "math"),
    "unparseable": ("\\boxed{23} = \\frac{", "23", "math"),
    "retraction": ("\\boxed{23}. Hmm, that is wrong.", "23", "number"),
    "qualified": ("\\boxed{23} \\neq 23", "23", "number"),
    "number_words_other_value": ("\\boxed{23} = twenty-six", "23", "math"),
    "bold_and_double_equals": ("**$\\boxed{23}$** == 26", "23", "number"),
    "should_be": ("\\boxed{23}. Actually it should be 26.", "23", "number"),
    "percent_after_box": ("\\boxed{19}\\%", "19", "number"),  # `19\\%` is read as 19 inside a box too
    "relation_inside_text": ("\\boxed{23}\\text{ = 26}", "23", "number"),
    # issue 32's real refusals, and its `\\boxed{60}^\\circ`
    "indeed_degrees": ("The final answer is $\\boxed{36}$. The final answer is indeed \\(36^\\circ\\).", "36", "math"),
    "bold_currency": ("So $\\boxed{1250}$. This would be equivalent to **$1250**.", "1250", "math"),
    "degree_after_box": ("$\\boxed{60}^\\circ$", "60", "math"),
    "approximation_after_box": ("\\boxed{2\\sqrt2} \\approx 2.83", "2\\sqrt2", "math"),
}

# (completion, gold, answer type): a right box that is only part of the value written: an operation, a sign, a digit
# or a value word written against it. The box does not hold the value written, so it is refused
# (`extraction.box_in_expression`); the first two were in CONTRADICTIONS before issue 32 and are refused as before.
BOX_IN_EXPRESSION_CASES = {
    "power_after_box": ("\\boxed{2}^{10}", "2", "math"),
    "digit_after_box": ("So $\\boxed{1}9$.", "1", "number"),
    "sign_before_box": ("So the answer is $-\\boxed{23}$.", "23", "math"),
    "fraction_around_box": ("$\\frac{\\boxed{23}}{2}$", "23", "math"),
    "root_around_box": ("$\\sqrt{\\boxed{23}}$", "23", "math"),
    "product_after_box": ("$\\boxed{23}\\times 2$", "23", "number"),
    "sum_after_box": ("$\\boxed{23} + 1$", "23", "number"),
    "thousands_after_box": ("$\\boxed{23},000$", "23", "number"),
    "thin_space_thousands": ("$\\boxed{23}\\,000$", "23", "number"),
    "value_word_after_box": ("$\\boxed{23}\\text{ thousand}$", "23", "number"),
}

# (completion, gold, answer type): a right last box followed by text that agrees with it or states no answer; paid.
AGREEING_AFTER_BOX = {
    "same_value": ("\\boxed{23}. The answer is 23.", "23", "math"),
    "same_value_other_form": ("\\boxed{\\frac{1}{2}} = 0.5", "\\frac{1}{2}", "math"),
    "same_value_expression": ("\\boxed{5} = 2 + 3", "5", "number"),  # a literal in the box; its value after it
    "prose": ("\\boxed{23}. I hope the answer is correct.", "23", "math"),
    "number_words": ("\\boxed{23} = twenty-three", "23", "math"),
    "working": ("\\boxed{23}. Check: 23 - 7 = 16, so x = 16 works.", "23", "math"),
    "choice_same_letter": ("\\boxed{B}. The answer is (B).", "B", "choice"),
    "nothing_after": ("16 + 7 = 23, so \\boxed{23}", "23", "math"),
    "sentence_after": ("So \\boxed{19}. 5 is not a factor of it.", "19", "number"),
    "exclamation": ("The answer is \\boxed{23}!", "23", "number"),
    "unit_after_box": ("\\boxed{23} cm.", "23", "number"),
    "plain_unit_in_phrase": ("The answer is 23 apples.", "23", "number"),
}


@pytest.mark.parametrize("case", sorted(AFTER_THE_BOX_NOT_READ))
def test_text_after_a_right_box_is_not_read(case):
    completion, gold, answer_type = AFTER_THE_BOX_NOT_READ[case]
    result = grade_answers([completion], [gold], [answer_type])[0]
    assert result.reward == 1.0, (case, result)


@pytest.mark.parametrize("case", sorted(BOX_IN_EXPRESSION_CASES))
def test_a_box_inside_a_larger_value_is_not_paid(case):
    completion, gold, answer_type = BOX_IN_EXPRESSION_CASES[case]
    result = grade_answers([completion], [gold], [answer_type])[0]
    assert (result.reward, result.reason) == (0.0, BOX_IN_EXPRESSION), (case, result)
    pinned = grade_answers([completion], [gold], [answer_type], read_after_box=False)[0]
    assert pinned.reward == 1.0, (case, pinned)  # the last box alone, as the CoDaPO-vs-GRPO campaign grades


@pytest.mark.parametrize("case", sorted(AGREEING_AFTER_BOX))
def test_a_box_confirmed_or_followed_by_no_answer_is_paid(case):
    completion, gold, answer_type = AGREEING_AFTER_BOX[case]
    result = grade_answers([completion], [gold], [answer_type])[0]
    assert result.reward == 1.0, (case, result)


def test_a_right_answer_after_a_wrong_box_is_not_paid():
    """The box is the answer: a right value after a wrong box buys nothing, so the rule is no hedge."""
    results = grade_answers(["\\boxed{26}. The answer is 23.", "\\boxed{26} = 23"], ["23", "23"])
    assert [r.reward for r in results] == [0.0, 0.0]


def test_the_reward_refuses_and_counts_boxes_inside_larger_values():
    metrics = {}
    completions = ["$-\\boxed{23}$", "\\boxed{23}", "\\boxed{23}. The answer is 26.", "23"]
    rewards_out = math_accuracy_reward(
        completions, answer=["23"] * 4, log_metric=lambda name, value: metrics.__setitem__(name, value)
    )
    assert rewards_out == [0.0, 1.0, 1.0, 0.0]
    assert metrics["math_accuracy/not_final_frac"] == 0.25  # counted with the refusals for form
    assert metrics["math_accuracy/no_answer_frac"] == 0.25
    assert "math_accuracy/contradicted_frac" not in metrics  # issue 32: nothing after the box is read


def test_a_pathological_statement_after_the_box_is_bounded():
    """What follows the box is not read (issue 32: it cannot change the value read), so a statement that would take
    SymPy forever, or one too deep to parse, costs nothing and leaves the right box paid (before issue 32 these were
    read, timed out and refused the box); a pathological box is still bounded and refused."""
    import time

    start = time.perf_counter()
    results = grade_answers(
        ["\\boxed{7} = (10^{10})!", "\\boxed{7} = 9^{9^{9^9}}", "\\boxed{7} = " + "{" * 5000, "\\boxed{(10^{10})!}"],
        ["7"] * 4,
    )
    assert time.perf_counter() - start < 30
    assert [r.reward for r in results] == [1.0, 1.0, 1.0, 0.0], results


@pytest.mark.parametrize("answer_type", ["math", "number"])
@pytest.mark.parametrize("case", sorted(RESTATEMENTS))
def test_restating_the_question_is_not_paid(case, answer_type):
    question, completion, gold = RESTATEMENTS[case]
    result = grade_answers([completion], [gold], [answer_type], questions=[question])[0]
    assert result.reward == 0.0, (case, result)
    if case != "evaluate_trig":  # sin 30 (degrees dropped) is read in radians: a wrong value, not only a wrong form
        assert result.reason in FORM_REASONS, result


@pytest.mark.parametrize("case", sorted(HONEST))
def test_honest_answers_are_paid(case):
    question, completion, gold = HONEST[case]
    assert grade_answers([completion], [gold], questions=[question])[0].reward == 1.0, case


@pytest.mark.parametrize("completion", HEDGES)
def test_hedged_answers_are_not_paid(completion):
    assert grade_answers([completion], ["19"])[0].reward == 0.0


@pytest.mark.parametrize("case", sorted(STRUCTURED))
def test_structured_golds_are_graded(case):
    gold, right, wrong = STRUCTURED[case]
    results = grade_answers([f"\\boxed{{{right}}}", f"\\boxed{{{wrong}}}", "no answer"], [gold] * 3)
    assert [r.reward for r in results] == [1.0, 0.0, 0.0], [(r.reward, r.reason) for r in results]


def test_the_question_does_not_decide():
    """The verdict is the answer's form, whatever the question says: `12 + 7` is refused for a question that does not
    contain it, and `19` is paid for a question that does; the reward takes the question columns without reading
    them."""
    restated = [{"role": "assistant", "content": "The answer is 12 + 7."}]
    honest = [{"role": "assistant", "content": "The answer is 19."}]
    by_column = math_accuracy_reward([restated, honest], answer=["19", "19"], question=["Add twelve and seven."] * 2)
    prompts = [[{"role": "system", "content": "Reason."}, {"role": "user", "content": "What is 19 + 0?"}]] * 2
    by_prompt = math_accuracy_reward([restated, honest], answer=["19", "19"], prompts=prompts)
    assert by_column == by_prompt == math_accuracy_reward([restated, honest], answer=["19", "19"]) == [0.0, 1.0]


def test_evaluation_grades_like_training():
    item = BenchmarkItem(0, "0", [], "What is 12 + 7?", "19", "math", None)
    bench = Benchmark("toy", "Toy", "math", "test", [item])
    texts = ["The answer is 12 + 7.", "The answer is 19."]
    graded = _grade_math([bench], {"toy": [[Completion(t, 5, "stop") for t in texts]]})
    assert [graded[("toy", 0, s)][2] for s in range(2)] == [False, True]
    training = math_accuracy_reward(texts, answer=["19", "19"])
    assert training == [0.0, 1.0]


def test_unusable_gold_is_skipped_and_parsed_once(monkeypatch):
    calls = []
    real = rewards._map_pairs

    def fake(pairs):
        calls.extend(pairs)
        return [TaskOutcome(error="timeout") if p[:2] == (None, "\\slowgold{1}") else real([p])[0] for p in pairs]

    monkeypatch.setattr(rewards, "_map_pairs", fake)
    for _ in range(3):
        results = grade_answers(["\\boxed{1}", "\\boxed{2}"], ["\\slowgold{1}", "\\slowgold{1}"])
        assert [r.correct for r in results] == [None, None] and results[0].reason == GOLD_TIMED_OUT
    assert [p[:2] for p in calls].count((None, "\\slowgold{1}")) == 1  # the gold was tried once, then cached
    assert not [p for p in calls if p[0] is not None and p[1] == "\\slowgold{1}"]  # no prediction graded against it
    unparseable = grade_answers(["\\boxed{1}"], ["\\frac{}{"])[0]
    assert unparseable.correct is None and unparseable.reward is None


def test_missing_reward_column_fails_before_generation():
    from datasets import Dataset

    from codapo_trl.rewards import check_reward_columns, code_execution_reward
    from codapo_trl.rewards.code import make_code_execution_reward

    math_data = Dataset.from_dict({"prompt": ["What is 1 + 1?"], "solution": ["2"]})
    with pytest.raises(ValueError, match=r"'math_accuracy_reward' reads the dataset column\(s\) \['answer'\]"):
        check_reward_columns([math_accuracy_reward], math_data)
    with pytest.raises(ValueError, match=r"\['tests'\], which eval_dataset\['hard'\] lacks"):
        check_reward_columns(
            code_execution_reward, Dataset.from_dict({"tests": ["{}"]}), {"hard": Dataset.from_dict({"x": [1]})}
        )
    assert make_code_execution_reward.__name__ and code_execution_reward.required_columns == ("tests",)
    check_reward_columns([math_accuracy_reward, lambda completions, **kw: [0.0]], Dataset.from_dict({"answer": ["2"]}))


def test_trainer_refuses_a_dataset_without_the_reward_column(tiny_model_dir, tmp_path):
    from fakes import question_dataset

    from codapo_trl import CoDaPOConfig, CoDaPOTrainer

    args = CoDaPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=8,
        max_steps=1,
        report_to="none",
        use_cpu=True,
        bf16=False,
        save_strategy="no",
    )
    data = question_dataset().rename_column("answer", "solution")
    with pytest.raises(ValueError, match=r"\['answer'\], which train_dataset lacks"):
        CoDaPOTrainer(tiny_model_dir, math_accuracy_reward, args=args, train_dataset=data)


@pytest.mark.parametrize("case", sorted(STRUCTURED))
def test_structured_golds_from_full_solutions(case):
    """The dataset loaders keep a MATH solution's last box (`data.last_boxed`); the grader reads full solutions too."""
    from codapo_trl.data import last_boxed

    gold, right, wrong = STRUCTURED[case]
    solution = f"We compute step by step. Therefore the answer is $\\boxed{{{gold}}}$."
    assert last_boxed(solution) == gold
    results = grade_answers([f"\\boxed{{{right}}}", f"\\boxed{{{wrong}}}"], [solution, last_boxed(solution)])
    assert [r.reward for r in results] == [1.0, 0.0]
