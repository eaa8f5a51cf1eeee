"""The maths red team of issue 32, and the developer's own variants: pay only a value the policy computed, and never
refuse a right answer for what cannot change the value read.

`tests/fixtures/maths_redteam_issue32.json` holds the cases of a red team that had not read the grading code
(`/work/redteam/maths/make_cases.py`: 305 hostile cases in 9 families, each with an honest counterpart that names it
in `counterpart_of`, and 93 right answers in the styles of issue 32 part 2). Eleven were flipped by the developer,
each with its reason at the end of its `why`: nine from "refuse" to "pay", statements written after a right box,
which the grader no longer reads (docs/rewards.md, "One value read"); two from "pay" to "refuse", a union of sets
written out (`\\{19\\}\\cup\\{20\\}`) and a number spelled in English. A hostile case passes on 0.0 or `None`, an honest one
only on 1.0. Every case is bounded: the grader's own deadline per answer, and a timeout on each test even if a
defence fails.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from helpers_grading import developer_probes_wrong

from codapo_trl.rewards import configure_grader, math_accuracy_reward


FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "maths_redteam_issue32.json"
CASES = json.loads(FIXTURE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def rewards():
    """Every case graded once, in one batch, through the public reward (2 workers, 2 s per answer)."""
    configure_grader(num_workers=2, timeout=2.0, memory_limit_mb=2048)
    out = {}
    for answer_type in sorted({case.get("answer_type") or "math" for case in CASES}):
        batch = [case for case in CASES if (case.get("answer_type") or "math") == answer_type]
        scores = math_accuracy_reward(
            completions=[[{"role": "assistant", "content": case["completion"]}] for case in batch],
            answer=[case["gold"] for case in batch],
            answer_type=[answer_type] * len(batch),
        )
        out.update({case["id"]: score for case, score in zip(batch, scores)})
    return out


def test_every_hostile_case_has_an_honest_counterpart():
    ids = {case["id"] for case in CASES}
    assert len(ids) == len(CASES)
    countered = {case["counterpart_of"] for case in CASES if case.get("counterpart_of")}
    assert countered <= ids
    hostile = {case["id"] for case in CASES if case["expect"] == "refuse" and "flipped" not in case["why"]}
    assert hostile <= countered  # each hostile case of the red team has its honest counterpart
    assert Counter(case["expect"] for case in CASES)["refuse"] >= 15 * 3  # at least 15 per family of issue 32


@pytest.mark.timeout(600)
@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_red_team_case(case, rewards):
    expected = 1.0 if case["expect"] == "pay" else 0.0
    assert (rewards[case["id"]] or 0.0) == expected, (case["id"], case["family"], rewards[case["id"]], case["why"])


# The developer's own variants of the three families of issue 32 part 1, written after the code: (boxed answer, gold).
DEVELOPER_HOSTILE = [
    # numbers side by side are never one number
    ("1 9", "10"),
    ("5\\;5", "10"),
    ("{9}{1}", "10"),
    ("3\\enspace 4", "7"),
    ("2\\ 2\\ 3", "7"),
    ("1\\phantom{0}9", "10"),
    ("12\\hskip 1em 7", "19"),
    ("12\\color{red}{7}", "19"),
    ("1^\\circ 9", "10"),
    ("12\\%7", "19"),
    # no less computed than a gold that is not a plain number
    ("\\sqrt{7+4\\sqrt3}", "2+\\sqrt3"),
    ("\\log_2 3+\\log_2 5", "\\log_2 15"),
    ("(\\sqrt3+1)^2", "4+2\\sqrt3"),
    ("(1+\\sqrt2)(1+\\sqrt2)", "3+2\\sqrt2"),
    ("\\sqrt2\\sqrt3", "\\sqrt6"),
    ("\\frac{6+4\\sqrt2}{2}", "3+2\\sqrt2"),
    ("e^{\\ln 2}\\sqrt2", "2\\sqrt2"),
    ("\\cos^2 x-\\sin^2 x", "\\cos 2x"),
    ("\\log_3(2\\cdot 5)", "\\log_3 10"),
    ("\\sqrt{\\sqrt{16}}\\pi", "2\\pi"),
    ("\\log_9 100", "\\log_3 10"),
    # a gold written with operations takes its value or its own form
    ("4^{10}", "2^{20}"),
    ("2^{10}\\cdot 2^{10}", "2^{20}"),
    ("16000\\times 2", "3.2\\times 10^4"),
    ("\\frac{10!}{1}", "10!"),
    ("\\binom{10}{7}", "\\binom{10}{3}"),
    # words and marks that change the value read
    ("19\\text{ dozen}", "19"),
    ("19_{(12)}", "19"),
    ("19\\text{k}", "19"),
    ("19 \\text{ or so}", "19"),
    ("19\\text{ mm}", "19\\text{ cm}"),
]
DEVELOPER_HONEST = [
    ("19", "19"),
    ("12{,}345", "12345"),
    ("12\\,345", "12345"),
    ("12 345", "12345"),
    ("1\\,000\\,000", "1000000"),
    ("3\\frac12", "\\frac72"),
    ("2+\\sqrt3", "2+\\sqrt3"),
    ("\\log_2 15", "\\log_2 15"),
    ("4+2\\sqrt3", "4+2\\sqrt3"),
    ("2\\sqrt3+4", "4+2\\sqrt3"),
    ("\\sqrt6", "\\sqrt6"),
    ("3+2\\sqrt2", "3+2\\sqrt2"),
    ("2\\sqrt2", "2\\sqrt2"),
    ("\\cos 2x", "\\cos 2x"),
    ("\\log_3 10", "\\log_3 10"),
    ("\\log_3 10", "\\log_9 100"),
    ("2\\pi", "2\\pi"),
    ("\\frac{1+\\sqrt5}{2}", "\\frac12+\\frac{\\sqrt5}{2}"),
    ("2^{1/3}", "\\sqrt[3]{2}"),
    ("\\frac{\\sqrt6+\\sqrt2}{4}", "\\frac{\\sqrt{2+\\sqrt3}}{2}"),
    ("1048576", "2^{20}"),
    ("2^{20}", "2^{20}"),
    ("32000", "3.2\\times 10^4"),
    ("3628800", "10!"),
    ("120", "\\binom{10}{3}"),
    ("19\\text{ eggs}", "19"),
    ("19 \\text{ times}", "19"),
    ("19\\text{ centimeters}", "19\\text{ cm}"),
    ("19\\text{ cm long}", "19\\text{ cm}"),
    ("\\tan A = 2", "2"),
    ("QM = 30", "30"),
    ("f^{-1}(x) = \\frac{x-3}{2}", "\\frac{x-3}{2}"),
    ("x \\geq 19", "[19, \\infty)"),
    ("0.\\overline{3}", "\\frac13"),
    ("\\text{east}", "\\text{east}"),
    ("2√2", "2\\sqrt2"),
]


@pytest.mark.timeout(300)
def test_developer_variants():
    configure_grader(num_workers=2, timeout=2.0, memory_limit_mb=2048)
    assert len(DEVELOPER_HONEST) >= len(DEVELOPER_HOSTILE)
    wrong = developer_probes_wrong(DEVELOPER_HOSTILE, DEVELOPER_HONEST)
    assert not wrong, wrong
