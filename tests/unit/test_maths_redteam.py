"""The maths red team's cases (issue 25): hostile completions that must not be paid and honest ones that must be.

The cases in `tests/fixtures/maths_redteam.json` were written by a separate red team that had NOT read the grading
code (only the rule it was meant to follow: a maths answer is paid only in its final form, judged on its own
structure; only unit words may follow a number; every side of a relation equals the gold; a box states one value; a
box contradicted after it is refused; an input the grader cannot decide is refused). Their ids and families are kept.
Two were flipped by the developer after reading them (the `note` of each says why): `expr-eq-both-forms-rev`
(`(x+1)^2 = x^2+2x+1` for an expanded gold: the last side is the answer, as in the red team's own `12+7=19`) and
`unit-thousand-for-19000` (`19\\ \\text{thousand}`: a multiplier word is not a unit). A hostile case passes on 0.0 or `None` (refused or ungraded), an honest one only on 1.0. Every case is
bounded: the grader's own per-answer deadline, and a 60 s timeout on the test even if the defence fails.

Issue 32 flipped 25 hostile cases of the family `5-after-box` to honest (the `note` of each says why): the grader
reads one value, the last box, and a statement written after it cannot change that value, so the check that read it
guarded no gain and was deleted. The issue's own red team is `test_maths_redteam_issue32.py`.

The honest regression check is here too: every gold answer of the fixtures and of the hostile suite, graded against
itself and against its boxed form in a sentence, must be paid.
"""

from __future__ import annotations

import doctest
import json
from collections import Counter
from pathlib import Path

import pytest
from helpers_grading import developer_probes_wrong

from codapo_trl.rewards import configure_grader, grade_answers, math_accuracy_reward


FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "maths_redteam.json"
CASES = json.loads(FIXTURE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module", autouse=True)
def grader():
    """Same grader settings on every machine: 2 workers, 2 s per answer."""
    configure_grader(num_workers=2, timeout=2.0, memory_limit_mb=2048)
    yield


def test_doctests():
    """The pipeline's modules (extract, read, compare and judge) on their own examples."""
    from codapo_trl.rewards import checks, equality, extraction, form_reading, grading, judging

    for module in (equality, judging, form_reading, extraction, grading, checks):
        result = doctest.testmod(module)
        assert result.attempted >= 1 and result.failed == 0, module.__name__


def test_the_fixture_has_at_least_as_many_honest_cases_as_hostile_ones():
    kinds = Counter(case["kind"] for case in CASES)
    assert set(kinds) == {"hostile", "honest"}
    assert kinds["honest"] >= kinds["hostile"] >= 180  # 22 closed forms amended to honest by issue 60
    assert len({case["id"] for case in CASES}) == len(CASES)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_red_team_case(case):
    (reward,) = math_accuracy_reward(
        completions=[case["completion"]],
        answer=[case["gold"]],
        answer_type=[case["answer_type"]],
        prompts=[case["question"]],
    )
    expected = 1.0 if case["kind"] == "honest" else 0.0
    assert (reward or 0.0) == expected, (case["id"], case["family"], reward, case["note"])


# MATH-style golds in the forms the MATH dataset writes them (written for this check; math-verify parses them all).
MATH_STYLE_GOLDS = [
    "\\frac{1}{4}",
    "5\\sqrt{2}",
    "\\text{(C)}",
    "(2, -1)",
    "x^2+7x+10",
    "\\frac{\\sqrt{3}}{3}",
    "\\$1.50",
    "10\\%",
    "90^\\circ",
    "\\pi",
    "2\\pi",
    "\\frac{3\\pi}{4}",
    "-\\frac{1}{2}",
    "\\{1,2,3\\}",
    "(-\\infty, 0) \\cup (1, \\infty)",
    "[2, 5]",
    "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}",
    "y = 2x + 1",
    "x > 3",
    "3x + 2y = 6",
    "\\text{even}",
    "\\infty",
    "1{,}000",
    "2^{2005}",
    "\\binom{10}{3}",
    "10!",
    "\\sqrt[3]{2}",
    "\\log_2 3",
    "3 + 4i",
    "\\frac{1}{2}(1+\\sqrt{5})",
    "4 \\text{ cm}",
    "12\\text{ inches}",
    "\\dfrac{7}{2}",
    "2\\frac{1}{3}",
    "\\frac{a+b}{2}",
    "a^2 - b^2",
    "(a-b)(a+b)",
    "\\frac{n(n+1)}{2}",
    "\\sin x",
    "\\cos^2 x",
    "\\arctan 2",
    "0",
    "-7",
    "1.5",
    "\\pm 3",
    "x = 2 \\text{ or } x = 3",
    "\\text{Tuesday}",
    "4\\sqrt{3}-2",
    "\\frac{5}{3}\\pi",
    "\\sqrt{2}/2",
    "2.5\\text{ hours}",
    "\\$4.20",
    "18\\pi",
    "-\\sqrt{3}",
    "\\frac{1}{\\sqrt{2}}",
    "6\\sqrt{6}",
    "1:2",
    "3\\sqrt{2}+2\\sqrt{3}",
    "(1,2,3)",
    "\\left( -\\frac{1}{2}, 3 \\right)",
    "x^3-3x+2",
    "(x-1)^2(x+2)",
    "2x(x-3)",
    "\\frac{x}{x+1}",
    "e^2",
    "\\ln 2",
    "5040",
    "1/3",
    "75^\\circ",
    "30\\%",
    "\\text{A, C}",
]


def _all_golds() -> list[tuple[str, str]]:
    """Every (gold, answer type) of the red-team fixture, of the hostile-completion suite, of the experiments'
    arithmetic task (every level of its test split) and `MATH_STYLE_GOLDS`."""
    from test_hostile_completions import (
        AFTER_THE_BOX_NOT_READ,
        AGREEING_AFTER_BOX,
        BOX_IN_EXPRESSION_CASES,
        HONEST,
        RESTATEMENTS,
        STRUCTURED,
    )

    from codapo_trl.data import load_math_dataset

    arithmetic = load_math_dataset("arithmetic", "test", num_per_level=10)
    golds = {(case["gold"], case["answer_type"]) for case in CASES}
    golds |= {(gold, kind) for gold, kind in zip(arithmetic["answer"], arithmetic["answer_type"])}
    golds |= {(gold, "math") for gold in MATH_STYLE_GOLDS}
    golds |= {(gold, "math") for _, _, gold in [*RESTATEMENTS.values(), *HONEST.values()]}
    golds |= {(gold, "math") for gold, _, _ in STRUCTURED.values()}
    after_box = [*AFTER_THE_BOX_NOT_READ.values(), *BOX_IN_EXPRESSION_CASES.values(), *AGREEING_AFTER_BOX.values()]
    golds |= {(gold, kind) for _, gold, kind in after_box}
    return sorted(golds)


@pytest.mark.timeout(120)
def test_every_gold_is_paid_against_itself_and_boxed_in_a_sentence():
    """The honest regression check: a gold answer is in its own final form, so it is paid as it is and boxed."""
    golds = _all_golds()
    assert len(golds) > 190
    predictions = [f"The answer is {gold}." for gold, _ in golds]
    predictions += [f"We compute it step by step, so the answer is $\\boxed{{{gold}}}$." for gold, _ in golds]
    doubled = golds + golds
    results = grade_answers(predictions, [g for g, _ in doubled], [k for _, k in doubled])
    unpaid = [(g, k, p, r.reason) for (g, k), p, r in zip(doubled, predictions, results) if r.reward != 1.0]
    # A gold written as a sentence fragment ("The answer is \\text{(C)}.") is read as prose by the phrase rule;
    # the boxed form is the one the policy is asked for. Both must be paid for every maths gold.
    assert not unpaid, unpaid


# The developer's own probes, written after the code (so not a red-team family): (boxed answer, gold) pairs, each
# boxed in a sentence and graded under `math`. Hostile: other unevaluated forms, hidden hedges and words.
DEVELOPER_HOSTILE = [
    ("19 + 0i", "19"),
    ("\\frac{19}{1.0}", "19"),
    ("\\overline{19}", "19"),
    ("1 9", "19"),
    ("19 \\cdot \\frac{2}{2}", "19"),
    ("19 \\textrm{ (or 20)}", "19"),
    ("x = 19, y = 20", "19"),
    ("19 \\quad 20", "19"),
    ("19 \\\\ 20", "19"),
    ("\\pm\\sqrt{2}", "\\sqrt{2}"),
    ("(x+1)^2 - 0", "(x+1)^2"),
    ("\\frac{x^2+2x+1}{1}", "x^2+2x+1"),
    ("\\frac{2\\pi}{8}", "\\frac{\\pi}{4}"),
    ("\\sqrt{2}^2", "2"),
    ("2.0\\cdot\\sqrt{2}", "2\\sqrt{2}"),
    ("19^{0}\\cdot 19", "19"),
    ("\\frac{57}{3}", "19"),
    ("19\\times 1.0", "19"),
    ("\\sum_{k=1}^{1} 19", "19"),
    ("\\text{nineteen}", "19"),
    ("19!/18!", "19"),
    ("\\lceil 19 \\rceil", "19"),
    ("19 \\bmod 20", "19"),
    ("\\max\\{19\\}", "19"),
    ("\\{19\\}", "19"),
    ("\\frac{1}{2}+\\frac{1}{4}", "\\frac{3}{4}"),
    ("\\frac{3}{4}+x-x", "\\frac{3}{4}"),
    ("\\frac{2}{4}x", "\\frac{x}{2}"),
    ("(x^2+2x+1)", "(x+1)^2"),
    ("\\sqrt{x^2}", "x"),
    ("19\\mathrm{ or }20", "19"),
    ("19\\operatorname{or}20", "19"),
    ("19 \\mbox{or} 20", "19"),
    ("19 \\text{ or }", "19"),
    ("\\textstyle 7+12", "19"),
    ("19 \\, \\text{thousand}", "19"),
    ("19 \\text{ \\textbf{or 20}}", "19"),
    ("{\\text{19}}+0", "19"),
]
# Honest counterparts: equivalent final forms, golds that are themselves unevaluated, structured answers.
DEVELOPER_HONEST = [
    ("19.", "19"),
    ("0019", "19"),
    ("\\frac{\\pi}{4}", "\\frac{\\pi}{4}"),
    ("\\dfrac{\\pi}{4}", "\\frac{\\pi}{4}"),
    ("\\frac{1}{4}\\pi", "\\frac{\\pi}{4}"),
    ("2\\sqrt{2}", "2\\sqrt2"),
    ("x+1", "1+x"),
    ("(x-1)(x+1)", "(x+1)(x-1)"),
    ("-\\frac{3}{4}", "-\\frac34"),
    ("\\frac{3}{4}", "\\frac{6}{8}"),
    ("19 \\text{ cm}", "19\\text{ cm}"),
    ("\\left(1, -2\\right)", "(1,-2)"),
    ("\\left[0, 5\\right)", "[0,5)"),
    ("3\\sqrt{3}+2", "2+3\\sqrt3"),
    ("\\frac{1+\\sqrt5}{2}", "\\frac{1}{2}+\\frac{\\sqrt5}{2}"),
    ("\\frac{1}{2}+\\frac{\\sqrt5}{2}", "\\frac{1+\\sqrt5}{2}"),
    ("2(x+1)", "2(x+1)"),
    ("2x+2", "2x+2"),
    ("x^2", "x^2"),
    ("\\frac{x}{2}", "\\frac{1}{2}x"),
    ("e^{x}", "e^x"),
    ("\\sin x", "\\sin x"),
    ("\\log_3 10", "\\log_3 10"),
    ("5\\sqrt{2}", "\\sqrt{50}"),
    ("-5", "-5"),
    ("\\$18.90", "18.90"),
    ("1,000", "1000"),
    ("50\\%", "50\\%"),
    ("\\frac{7}{2}", "3\\frac12"),
    ("3\\frac12", "3\\frac12"),
    ("0.5", "\\frac12"),
    ("\\infty", "\\infty"),
    ("y=2x+3", "y=2x+3"),
    ("2x+3", "y=2x+3"),
    ("x>3", "x>3"),
    ("(-\\infty,3)\\cup(4,\\infty)", "(-\\infty, 3) \\cup (4, \\infty)"),
    ("\\{1,2\\}", "\\{2,1\\}"),
    ("\\text{(A)}", "\\text{(A)}"),
    ("19.", "19"),
]


@pytest.mark.timeout(120)
def test_developer_probes():
    assert len(DEVELOPER_HONEST) >= len(DEVELOPER_HOSTILE)
    wrong = developer_probes_wrong(DEVELOPER_HOSTILE, DEVELOPER_HONEST)
    assert not wrong, wrong
