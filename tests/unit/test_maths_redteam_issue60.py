"""Issue 60: equality exact and typed, restatements judged against the question, every closed form of a right answer
paid.

- `tests/fixtures/maths_redteam_issue60.json`: 684 cases (308 hostile, 376 honest) written by a red team that had read
  neither the grading code nor these tests, from the rule alone, in nine families (leniencies of the comparison, units
  and letters, types, restatements of the question, derivations in the box, other languages, Unicode, hedges, gold
  forms), each hostile case with an honest counterpart, plus honest answers in the styles of real Olympiad output.
- `tests/fixtures/maths_redteam_issue60_blackbox.json`: 515 cases (269 hostile, 246 honest) by a second red team that
  read neither the code nor the tests but could call the grader as a black box, as a policy can; 11 of its
  expectations were decided the other way by the developer, each with the reason in its `amended` field (a decimal
  that spells the exact value, a word's case, a precision finer than asked, a labelled gold's value).
- The developer's own variants of part 1 (each family of leniency the issue lists) and part 2 (each kind of right
  answer it says was refused), written after the code.
- The hostile cases of issues 25 and 32 that issue 60 amended to honest (another closed form of the gold, which no
  question states): each is refused where the question writes that expression.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from codapo_trl.rewards import configure_grader, grade_answers, math_accuracy_reward
from codapo_trl.rewards.judging import RESTATED


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CASES = json.loads((FIXTURES / "maths_redteam_issue60.json").read_text(encoding="utf-8"))
BLACK_BOX = json.loads((FIXTURES / "maths_redteam_issue60_blackbox.json").read_text(encoding="utf-8"))
SECOND = json.loads((FIXTURES / "maths_redteam_issue60_second.json").read_text(encoding="utf-8"))
JSON_FIELD = json.loads((FIXTURES / "maths_redteam_issue60_json.json").read_text(encoding="utf-8"))
READINGS = json.loads((FIXTURES / "maths_redteam_issue60_readings.json").read_text(encoding="utf-8"))


def _text(value: str | dict) -> str:
    """A fixture string, or one stored as `{"parts": [...]}` with each long run of a unit as `[unit, count]`."""
    if isinstance(value, str):
        return value
    return "".join(part if isinstance(part, str) else part[0] * part[1] for part in value["parts"])


@pytest.fixture(scope="module", autouse=True)
def grader():
    """Same grader settings on every machine: 2 workers, 2 s per answer."""
    configure_grader(num_workers=2, timeout=2.0, memory_limit_mb=2048)
    yield


def test_the_fixture_pairs_every_hostile_case_with_an_honest_one():
    kinds = Counter(case["expect"] for case in CASES)
    assert kinds["pay"] >= kinds["refuse"] >= 300
    ids = {case["id"] for case in CASES}
    assert len(ids) == len(CASES)
    hostile = {case["id"] for case in CASES if case["expect"] == "refuse"}
    answered = {case.get("counterpart_of") for case in CASES if case["expect"] == "pay"}
    assert hostile <= answered


@pytest.fixture(scope="module")
def rewards():
    """The whole fixture through the TRL reward in one call (prompts as TRL passes them), bounded in time."""
    start = time.perf_counter()
    values = math_accuracy_reward(
        completions=[[{"role": "assistant", "content": case["completion"]}] for case in CASES],
        answer=[case["gold"] for case in CASES],
        prompts=[[{"role": "user", "content": case["question"]}] for case in CASES],
    )
    assert time.perf_counter() - start < 240
    return {case["id"]: value for case, value in zip(CASES, values)}


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_red_team_case(case, rewards):
    expected = 1.0 if case["expect"] == "pay" else 0.0
    assert (rewards[case["id"]] or 0.0) == expected, (case["id"], case["family"], rewards[case["id"]], case["why"])


def test_black_box_red_team():
    """The second red team's cases, graded in one call with their questions; none is graded against expectation."""
    kinds = Counter(case["expect"] for case in BLACK_BOX)
    assert kinds["refuse"] >= 250 and kinds["pay"] >= 200
    results = grade_answers(
        [case["completion"] for case in BLACK_BOX],
        [case["gold"] for case in BLACK_BOX],
        questions=[case["question"] for case in BLACK_BOX],
    )
    wrong = [
        (case["id"], case["expect"], r.correct, r.reason)
        for case, r in zip(BLACK_BOX, results)
        if bool(r.correct) != (case["expect"] == "pay")
    ]
    assert not wrong, wrong


# Part 1: values the policy never computed, each family the issue names, in the developer's own variants:
# (boxed answer, gold, question).
DEVELOPER_HOSTILE = [
    # rounding: nothing is rounded for an exact gold
    ("0.0", "2^{-30}", "Compute $2^{-30}$ exactly."),
    ("0", "\\frac{1}{10!}", "What is $\\frac{1}{10!}$?"),
    ("0.000002", "\\frac{4}{\\binom{52}{5}}", "What is the probability of four aces in a five-card hand?"),
    ("(0.333333, 0.666667)", "(\\frac13, \\frac23)", "Find the point that divides the segment in the ratio 1:2."),
    ("6.7\\times10^{-11}", "6.67\\times10^{-11}", "Give G in SI units."),
    ("0.0", "6.67\\times10^{-11}", "Give G in SI units."),
    ("3.14", "\\pi", "Find the area of a unit disc."),
    ("1.4142", "\\sqrt2", "Find the diagonal of a unit square."),
    # letters are never stripped as units
    ("5", "3+2t", "Find the position at time $t$."),
    ("x+2", "x+2h", "Find $f(x+h)$."),
    ("2\\pi r t", "2\\pi r h", "Find the lateral area of a cylinder."),
    ("24", "24t", "How far does it go in $t$ hours?"),
    ("4N^2+4N", "4n^2+4n", "Let $n$ and $N$ be integers; find the sum."),
    # types are types
    ("\\{1, 5\\}", "(1,5)", "Solve $(x-1)(x-5)<0$."),
    ("1, 5", "(1,5)", "Solve $(x-1)(x-5)<0$."),
    ("x=1 \\text{ or } x=5", "(1,5)", "Solve $(x-1)(x-5)<0$."),
    ("\\pm 3", "(-3,3)", "Solve $x^2<9$."),
    ("[1,5]", "(1,5)", "Solve $(x-1)(x-5)<0$."),
    ("(5,1)", "(1,5)", "Find the point $(a, b)$."),
    # the question's own expressions
    ("\\cos 3\\theta", "4\\cos^3\\theta-3\\cos\\theta", "Express $\\cos 3\\theta$ in terms of $\\cos\\theta$."),
    ("\\frac1x+\\frac1y", "\\frac{x+y}{xy}", "Write $\\frac{1}{x}+\\frac{1}{y}$ as a single fraction."),
    ("\\frac1y+\\frac1x", "\\frac{x+y}{xy}", "Write $\\frac{1}{x}+\\frac{1}{y}$ as a single fraction."),
    ("(x+1)(x+1)-1", "x^2+2x", "Expand $(x+1)^2-1$."),
    ("1+2x+x^2", "(x+1)^2", "Factor $x^2+2x+1$."),
    ("\\sqrt{3+2\\sqrt2}", "1+\\sqrt2", "Simplify $\\sqrt{3+2\\sqrt{2}}$."),
    ("\\sin(\\pi/3)", "\\frac{\\sqrt3}{2}", "Compute sin(pi/3)."),
    ("0.\\overline{36}", "\\frac{4}{11}", "Express $0.\\overline{36}$ as a common fraction."),
    ("\\int_0^1 x^2\\,dx", "\\frac13", "Find the area under $y=x^2$ from 0 to 1."),
    # chains and derivations read to one value, every member agreeing
    ("2+2=5", "5", "Find the number."),
    ("3\\cdot 5 = 12", "12", "Find the number."),
    ("x^2=9 \\Rightarrow x=4", "4", "Find $x$."),
    ("x \\neq 19", "19", "Find $x$."),
    ("x \\geq 19", "19", "Find $x$."),
    # found on real olympiad output: a gold that states its own rounding is matched at the places written
    ("\\frac15", "\\frac{1}{5-\\frac{1}{10}\\sqrt{6(4-\\pi)}}\\approx 0.209509462643093", "Find the supremum."),
    ("0.21", "\\frac{1}{5-\\frac{1}{10}\\sqrt{6(4-\\pi)}}\\approx 0.209509462643093", "Find the supremum."),
    (
        "\\lim_{n\\to\\infty}\\frac{X_n}{n^2}=\\frac37",
        "\\lim_{n\\to\\infty}\\frac{X_n}{n^2}=\\frac38",
        "Find the limit.",
    ),
    ("\\sum_{k=2}^{2025}\\sqrt{\\frac{k}{k-1}}", "\\sum_{i=2}^{2026}\\sqrt{\\frac{i}{i-1}}", "Find the sum."),
    # positivity is never assumed: each letter is tried at points of both signs and of several sizes
    ("|x|", "x", "Simplify $\\frac{x^3+x}{x^2+1}$ for real $x$."),
    ("\\sqrt{x^2}", "x", "Simplify $\\frac{x^3+x}{x^2+1}$ for real $x$."),
    ("\\max(x,0)", "x", "Simplify $\\frac{x^3+x}{x^2+1}$ for real $x$."),
    ("x+e^{-1000x}", "x", "Simplify $\\frac{x^3+x}{x^2+1}$ for real $x$."),
    ("\\min(x^2,100)", "x^2", "Simplify $\\frac{x^4+x^2}{x^2+1}$ for real $x$."),
]

# Part 2: right answers of each kind the issue says were refused (and the closed forms it says must be paid).
DEVELOPER_HONEST = [
    ("\\sqrt{100-x}=9 \\Rightarrow 100-x=81 \\Rightarrow x=19", "19", "Solve $\\sqrt{100-x}=9$."),
    ("\\text{So there are }1232\\text{ integers}", "1232", "How many integers are there?"),
    ("\\binom{4020}{3015}^2", "\\binom{4020}{1005}^2", "Find the coefficient."),
    ("(1+3^{-100})/2", "\\frac12[(\\frac13)^{100}+1]", "Find the probability."),
    ("\\frac{2\\times3+4}{2+3}=\\dots=2", "2", "Find the ratio."),
    ("2^{2^4}=2^{16}=65536", "65536", "Compute $2^{2^4}$."),
    ("P(\\text{win})=\\frac56", "\\frac56", "What is the probability of winning?"),
    ("k_{\\max}=\\frac12", "\\frac12", "Find the largest $k$."),
    ("2", "2 OR 3", "Find one solution."),
    ("3", "2 \\text{ or } 3", "Find one solution."),
    ("\\frac{-4\\pm\\sqrt{31}}{15}", "\\frac{-4\\pm\\sqrt{31}}{15}", "Solve the quadratic."),
    ("\\frac{-4+\\sqrt{31}}{15}, \\frac{-4-\\sqrt{31}}{15}", "\\frac{-4\\pm\\sqrt{31}}{15}", "Solve the quadratic."),
    ("2013^{4025}", "2013^{4025}", "Find the number."),
    ("50\\binom{100}{50}", "50 \\binom{100}{50}", "Find the sum."),
    ("48", "48 \\mathrm{~km}/\\mathrm{h}", "Find the speed."),
    ("48\\text{ km/h}", "48 \\mathrm{~km}/\\mathrm{h}", "Find the speed."),
    ("7\\text{ m}", "7 m", "How tall is the pole?"),
    ("(3,\\infty)", "x>3", "Solve $2x>6$."),
    ("x>3", "(3,\\infty)", "Solve $2x>6$."),
    ("\\emptyset", "\\text{no solution}", "Solve $x^2=-1$ over the reals."),
    ("6.02e23", "6.02\\times10^{23}", "Avogadro's number?"),
    ("3 - 4 i", "3-4i", "Compute the conjugate."),
    ("x²", "x^2", "Find the derivative of $x^3/3$."),
    ("\\frac{bh}{2}", "\\frac12 b h", "Area of a triangle?"),
    ("2t+3", "3+2t", "Find the position at time $t$."),
    ("0.33", "\\frac13", "Express as a decimal to the nearest hundredth."),
    ("0.333", "0.33", "Find the probability."),
    ("\\frac{x+y}{xy}", "\\frac{x+y}{xy}", "Write $\\frac{1}{x}+\\frac{1}{y}$ as a single fraction."),
    ("2\\sqrt2", "2\\sqrt2", "Simplify $\\sqrt{8}$."),
    ("\\frac72", "3.5", "Compute 7/2."),
    ("(x+1)(x+1)", "(x+1)^2", "Factor $x^2+2x+1$."),
    ("x = -2, 7", "-2, 7", "Solve the equation."),
    ("x \\in [0, 1)", "[0, 1)", "Solve the inequality."),
    ("\\infty", "\\infty", "Find the limit."),
    # found on real olympiad output
    ("0.2095", "\\frac{1}{5-\\frac{1}{10}\\sqrt{6(4-\\pi)}}\\approx 0.209509462643093", "Find the supremum."),
    ("\\frac{10}{50-\\sqrt{6(4-\\pi)}}", "\\frac{1}{5-\\frac{1}{10}\\sqrt{6(4-\\pi)}}\\approx 0.2095", "Find it."),
    ("2.20557", "\\approx 2.2055694304", "Find the limit."),
    ("\\lim_{n\\to\\infty}\\sqrt[n]{A_n}\\approx 2.20557", "\\approx 2.2055694304", "Find the limit."),
    (
        "\\sum_{k=1}^{2025}\\sqrt{\\frac{k+1}{k}}",
        "\\sum_{i=2}^{2026}\\sqrt{\\frac{i}{i-1}}\\approx 2028.9392",
        "Find the sum.",
    ),
    ("\\dfrac{3}{8}", "\\lim_{n\\to\\infty}\\frac{X_n}{n^2}=\\frac38", "Find the limit."),
    ("\\int_0^1 x^2 f(x)\\,dx = -\\frac{1}{12}", "-\\frac1{12}", "Find the integral."),
    ("\\mathbb E(\\text{число посещённых клеток})=\\frac{ab+1}{n+1}", "\\frac{ab+1}{n+1}", "Find the expectation."),
    ("\\lim P_n=2e^{\\frac{\\pi}{2}-2}\\approx 1{,}3020", "2e^{\\frac{\\pi}{2}-2}", "Find the limit."),
    ("2x - y + 1 = 0", "y=2x+1", "Find the line."),
    ("x<1 \\text{ or } x>2", "(-\\infty,1)\\cup(2,\\infty)", "Solve $(x-1)(x-2)>0$."),
    ("\\text{No}", "\\text{No}", "Is 91 prime?"),
    ("42 \\text{ рёбер}", "42", "How many edges?"),
]
PHRASES = [
    ("所以答案是 $5$。", "5"),
    ("最终答案：12", "12"),
    ("La respuesta es $\\frac{1}{2}$.", "\\frac12"),
    ("Ответ: 42", "42"),
    ("La réponse est 7.", "7"),
    ("Die Antwort ist 3.", "3"),
    ("答えは 8 です", "8"),
    ("정답은 9입니다", "9"),
    ("### Финальный ответ.\n\\[\n\\int_0^1 x^2 f(x)\\, dx = -\\dfrac{1}{12}.\n\\]", "-\\frac1{12}"),
    ("The answer is .5", "\\frac12"),
    ("\\textbf{Answer:} $3 + 2\\sqrt{2}, 3 - 2\\sqrt{2}$", "3 \\pm 2 \\sqrt{2}"),
    ("Final Answer: No solution", "\\emptyset"),
]
HOSTILE_PHRASES = [
    ("答えは 8 ではありません。", "8"),
    ("La respuesta es $x=3$ o $x=5$.", "3"),
    ("最终答案：2 和 3", "2"),
    ("Die Antwort ist nicht 16.", "16"),
    ("La réponse est au moins 3.", "3"),
]


def _box(answer: str) -> str:
    return f"Putting it together, the answer is $\\boxed{{{answer}}}$."


def test_developer_variants():
    cases = [(a, g, q, 0.0) for a, g, q in DEVELOPER_HOSTILE] + [(a, g, q, 1.0) for a, g, q in DEVELOPER_HONEST]
    cases += [(None, g, "", 1.0, text) for text, g in PHRASES] + [
        (None, g, "", 0.0, text) for text, g in HOSTILE_PHRASES
    ]
    texts = [case[4] if case[0] is None else _box(case[0]) for case in cases]
    results = grade_answers(texts, [case[1] for case in cases], questions=[case[2] for case in cases])
    wrong = [
        (text, case[1], r.reward, r.reason)
        for text, case, r in zip(texts, cases, results)
        if (r.reward or 0.0) != case[3]
    ]
    assert not wrong, wrong


# The forms of the right answers still refused on real output after the first sitting (read in
# experiments/grader_audit's round-4 corpus), each with hostile neighbours: (completion, gold, question, reward).
_SUM_GOLD = "\\sum_{i=2}^{2026}\\sqrt{\\frac{i}{i-1}}\\approx 2028.939215760406073"
_SUM_Q = "Compute $\\sum_{i=2}^{2026}\\sqrt{\\frac{i}{i-1}}$."
_SENATE = (
    "A Senate committee has 8 Republicans and 6 Democrats. In how many ways can we form a subcommittee of 5 members"
    " that has at least one member from each party?"
)
_MARBLES = "A bag holds 100 marbles, 34 of them red. What fraction of the marbles is red?"
REAL_OUTPUT_FORMS = [
    # an unreduced fraction: the ratio computed, its reduction left; not where the reduction is asked or no question
    ("Answer: $\\frac{34}{100}$", "\\frac{17}{50}", _MARBLES, 1.0),
    ("The answer is $\\boxed{-\\frac{34}{100}}$", "-\\frac{17}{50}", "Find the slope.", 1.0),
    ("Answer: $\\frac{34}{100}$", "\\frac{17}{50}", _MARBLES + " Express it in lowest terms.", 0.0),
    ("Answer: $\\frac{34}{100}$", "\\frac{17}{50}", _MARBLES + " Simplify your answer.", 0.0),
    ("Answer: $\\frac{34}{100}$", "\\frac{17}{50}", _MARBLES + " Express your answer as a common fraction.", 0.0),
    ("Answer: $\\frac{34}{100}$", "\\frac{17}{50}", _MARBLES + " Write it as p/q with p, q relatively prime.", 0.0),
    ("Answer: $\\frac{34}{100}$", "\\frac{17}{50}", "", 0.0),
    ("Answer: $\\frac{6}{8}$", "\\frac34", "Simplify $\\frac{6}{8}$.", 0.0),
    ("Answer: $\\frac{38}{2}$", "19", "Half of 38 apples are eaten. How many are eaten?", 0.0),
    ("Answer: $\\frac{34}{100}$", "\\frac{17}{51}", _MARBLES, 0.0),
    # a sum written out with dots, for a gold that is that sum: first terms and last terms exact, nothing added up
    (
        "$\\boxed{\\sqrt2+\\sqrt{\\frac32}+\\sqrt{\\frac43}+\\cdots+\\sqrt{\\frac{2026}{2025}}}$",
        _SUM_GOLD,
        _SUM_Q,
        1.0,
    ),
    (
        "$\\boxed{S=\\sqrt{2}+\\sqrt{\\tfrac{3}{2}}+\\dots+\\frac{\\sqrt{2026}}{45} \\approx 2028{,}94}$",
        _SUM_GOLD,
        _SUM_Q,
        1.0,
    ),
    ("$\\boxed{\\sqrt2+\\sqrt{\\frac32}+\\ldots+\\sqrt{\\frac{2026}{2025}}}$", _SUM_GOLD, _SUM_Q, 1.0),
    ("$\\boxed{\\sqrt2+\\sqrt{\\frac32}+\\cdots+\\sqrt{\\frac{2025}{2024}}}$", _SUM_GOLD, _SUM_Q, 0.0),  # stops early
    ("$\\boxed{\\sqrt2+\\sqrt{\\frac43}+\\cdots+\\sqrt{\\frac{2026}{2025}}}$", _SUM_GOLD, _SUM_Q, 0.0),  # skips a term
    (
        "$\\boxed{\\sqrt2+\\cdots+\\sqrt{\\frac{2026}{2025}}}$",
        _SUM_GOLD,
        _SUM_Q,
        0.0,
    ),  # one first term shows no pattern
    (
        "$\\boxed{\\sqrt2+\\sqrt{\\frac32}+\\cdots+\\sqrt{\\frac{2026}{2025}}\\approx 2028{,}95}$",
        _SUM_GOLD,
        _SUM_Q,
        0.0,
    ),
    ("$\\boxed{2029=\\sqrt2+\\sqrt{\\frac32}+\\cdots+\\sqrt{\\frac{2026}{2025}}}$", _SUM_GOLD, _SUM_Q, 0.0),
    ("$\\boxed{1+2+\\ldots+9}$", "12", "Add 1, 2 and 9.", 0.0),  # the dots are not dropped
    ("$\\boxed{1+4+9+\\cdots+10000}$", "\\sum_{k=1}^{100} k^2", "Write the sum of the first 100 squares.", 1.0),
    # two first terms that also start an arithmetic progression reaching the last one show no pattern (1, 4, 7, ...)
    ("$\\boxed{1+4+\\cdots+10000}$", "\\sum_{k=1}^{100} k^2", "Write the sum of the first 100 squares.", 0.0),
    ("$\\boxed{1+2+\\cdots+8}$", "\\sum_{k=1}^{4} 2^{k-1}", "Write the sum of the powers of 2 up to 8.", 0.0),
    ("$\\boxed{1+2+\\cdots+8}$", "\\sum_{k=1}^{8} k", "Write the sum of 1 to 8.", 1.0),
    ("$\\boxed{1+4+\\cdots+9801}$", "\\sum_{k=1}^{100} k^2", "Write the sum of the first 100 squares.", 0.0),
    # a line that introduces the display after it
    (
        "**Final Answer:**\n\nThe long-run probability is:\n\n\\[\n\\pi_1 = \\pi_0 \\cdot C(N, 1) = \\frac{N}{2^N}\n\\]",
        "N2^{-N}",
        "Find the long-run probability that the left box holds one ball.",
        1.0,
    ),
    ("**Ответ:**\nПредел равен корню уравнения $x^3-1=0$, который можно записать как:\n$$ 1 $$", "1", "Find it.", 1.0),
    ("**Final Answer:**\n\nThe probability is not:\n\n\\[\n\\frac{1}{2}\n\\]", "\\frac12", "Find it.", 0.0),
    ("Answer: $\\frac13$, as shown:\n\\[\n\\frac{1}{2}\n\\]", "\\frac12", "Find it.", 0.0),  # the value is 1/3
    ("**Final Answer:**\n\nThe probability is at least:\n\n\\[\n\\frac{1}{2}\n\\]", "\\frac12", "Find it.", 0.0),
    (
        "**Final Answer:**\n\nThe probability is 1/4 + 1/4, that is:\n\n\\[\n\\frac{1}{4}\n\\]",
        "\\frac14",
        "Find it.",
        0.0,
    ),
    (
        "**Final Answer:**\n\nThe probability is:\n\n\\[\n\\frac{1}{4}\n\\]\n\nWait, actually 1/2.",
        "\\frac14",
        "Find it.",
        0.0,
    ),
    ("**Final Answer:**\n\n概率是：\n\n\\[\n\\frac{1}{4}\n\\]", "\\frac14", "Find it.", 1.0),
    # a counting sentence after the phrase: what follows the count is the question's own description
    (
        "### Answer:\n\nThere are 1940 ways to form a subcommittee of 5 members that has at least one member from each party.",
        "1940",
        _SENATE,
        1.0,
    ),
    ("### Answer:\n\nThere are 1,940 ways to form a subcommittee.", "1940", _SENATE, 1.0),
    ("### Answer:\n\nThere are 1940 ways, minus the 6 one-party ones.", "1940", _SENATE, 0.0),
    ("### Answer:\n\nThere are 1940 ways to choose and 3 ways to order it.", "1940", _SENATE, 0.0),
    ("### Answer:\n\nThere are at least 1940 ways to form it.", "1940", _SENATE, 0.0),
    ("### Answer:\n\nThere are 1940 thousand ways to form it.", "1940", _SENATE, 0.0),
    ("### Answer:\n\nThere might be 1940 ways.", "1940", _SENATE, 0.0),
    # chain members in names the value does not have cannot be checked; numeric ones are
    ("$\\boxed{\\pi_1 = \\pi_0 \\cdot C(N, 1) = \\frac{N}{2^N}}$", "N2^{-N}", "Find $\\pi_1$.", 1.0),
    ("$\\boxed{\\pi_1 = \\frac{2}{2^N} \\cdot N = \\frac{N}{2^N}}$", "N2^{-N}", "Find $\\pi_1$.", 0.0),
    ("$\\boxed{x = 4 = 5}$", "5", "Find $x$.", 0.0),
    ("$\\boxed{x = 2+2+k-k = 5}$", "5", "Find $x$.", 0.0),
    ("$\\boxed{x = \\sqrt{k^2}-k+4 = 5}$", "5", "Find $x$.", 0.0),
    ("$\\boxed{\\pi_1 \\approx \\pi_0 = \\frac{N}{2^N}}$", "N2^{-N}", "Find $\\pi_1$.", 0.0),
    # a gold of labelled alternatives pays either value
    ("$\\boxed{2}$", "x = 2 \\text{ or } x = 3", "Find one root.", 1.0),
    ("$\\boxed{x=2 \\text{ or } x=4}$", "x = 2 \\text{ or } x = 3", "Find the roots.", 0.0),
    ("$\\boxed{3}$", "x = 2 \\text{ or } y = 3", "Find a value.", 0.0),  # two letters: the value alone names neither
    # a JSON "answer" field, as a prompt that asks for `{"reasoning": ..., "answer": ...}` gets (MathOdyssey's runs)
    ('So $n = 100$.\n\n```json\n{\n    "answer": "100",\n}\n```', "100", "Find the largest $n$.", 1.0),
    (
        '{\n    "answer": "\\\\frac{\\\\sqrt{2}}{2}",\n    "reasoning": "The answer is 7."\n}',
        "\\frac{\\sqrt2}2",
        "Find it.",
        1.0,
    ),
    ('{"reasoning": "so it is 7", "answer": "7"}', "7", "Find it.", 1.0),
    ('{"answer": "\\frac{1}{2}"}', "\\frac12", "Find it.", 1.0),  # LaTeX under-escaped, as models write it
    ('{"answer": -4}', "-4", "Find it.", 1.0),
    ('{"answer": "\\u0031\\u0032"}', "12", "Find it.", 1.0),
    ('{"answer": "1\\b2"}', "12", "Find it.", 0.0),  # an escape is never a join of two digits
    ('{"answer": "1\\n2"}', "12", "Find it.", 0.0),
    ('{"answer": "12', "12", "Find it.", 0.0),  # cut off inside the string
    ('{"answer": [12]}', "12", "Find it.", 1.0),  # an array of numbers reads as `\\boxed{[12]}` does
    ('{"answer": [12, 13]}', "12", "Find it.", 0.0),
    ('{"answer": [1, 2],\n "reasoning": "both roots"}', "[1,2]", "Find the interval.", 1.0),
    ('{"answer": ["1", "2"]}', "[1,2]", "Find the interval.", 0.0),  # an array of strings is not read
    ('{"answer": null, "reasoning": "the answer is 12"}', "12", "Find it.", 0.0),  # its object's keys are not read
    ('{"answer": "12"}\n\nWait, so the answer is 13.', "12", "Find it.", 0.0),  # a later anchor wins
    ('{"answer": "13"} \\boxed{12}', "12", "Find it.", 1.0),  # a box wins over every anchor
    ('{"answer": "2+2 = 4 = 5"}', "5", "Find it.", 0.0),  # read like a box: a false chain
    ('{"answer": "about 12"}', "12", "Find it.", 0.0),
    ('{"final_answer": "12"}', "12", "Find it.", 0.0),  # another key is no anchor
    ('{\n  "reasoning": "the vertex gives it",\n  "answer": 869/27\n}', "\\frac{869}{27}", "Find the maximum.", 1.0),
    ('{"answer": 869/28}', "\\frac{869}{27}", "Find the maximum.", 0.0),  # unquoted, read like a box
    ('{"answer": 869/27, "note": "or 870/27"}', "\\frac{869}{27}", "Find it.", 1.0),  # the object's other keys unread
    ('{"answer": 5 if x > 0 else 6}', "5", "Find it.", 0.0),
    ('{"answer": "The eighth term is 194."}', "194", "Find the eighth term.", 1.0),
    ('{"answer": "The eighth term is probably 194."}', "194", "Find the eighth term.", 0.0),
    ('{"answer": "(4 * sqrt(29)) / 29"}', "\\frac{4}{29}\\sqrt{29}", "Find the distance.", 1.0),  # names in plain text
    ('{"answer": "(4 * sqrt(29)) / 28"}', "\\frac{4}{29}\\sqrt{29}", "Find the distance.", 0.0),
    ('{"answer": "4"}', "4ft", "How long is the side?", 1.0),  # a unit written against the gold's number
    ('{"answer": "4 cm"}', "4ft", "How long is the side?", 0.0),
    ('<think>\nSo {"answer": "5"}? Let me check again whether', "5", "Find it.", 0.0),  # stopped while reasoning
    ("<think>\nDraft: \\boxed{5}\n</think>\n\nThe answer", "5", "Find it.", 0.0),  # the draft is not the answer
    ("<think>\nIt is 5.\n</think>\n\nThe answer is $\\boxed{5}$.", "5", "Find it.", 1.0),
    # a yes/no gold (MathOdyssey's college set): the word the answer starts with, said once; never skipped as prose
    ('{"answer": "No, the equilibrium (0,0) is not stable."}', "No", "Is the equilibrium stable?", 1.0),
    ('{"answer": "Yes, u is a constant."}', "Yes.", "Must u be constant?", 1.0),
    ("$\\boxed{\\text{Yes}}$", "Yes", "Must u be constant?", 1.0),
    ('{"answer": "No, u is not a constant."}', "Yes.", "Must u be constant?", 0.0),
    ('{"answer": "Yes or no, depending on u."}', "Yes", "Must u be constant?", 0.0),
    ('{"answer": "No. Actually, yes."}', "Yes", "Must u be constant?", 0.0),
    ('{"answer": "Stable"}', "Yes", "Is the equilibrium stable?", 0.0),  # an answer in other words is not read
    # each decimal of a collection gold is matched at its own last place (the gold's first decimal set them all)
    ('{"answer": "[4.8, 2.28]"}', "[4.8, 2.28]", "Give the mean and the standard deviation.", 1.0),
    ('{"answer": "[4.8, 2.2804]"}', "[4.8, 2.28]", "Give the mean and the standard deviation.", 1.0),
    ('{"answer": "[4.8, 2.3]"}', "[4.8, 2.28]", "Give the mean and the standard deviation.", 0.0),
    ('{"answer": "[4.8, 2.27]"}', "[4.8, 2.28]", "Give the mean and the standard deviation.", 0.0),
]


def test_forms_of_real_output_and_their_hostile_neighbours():
    texts, golds, questions, expected = zip(*REAL_OUTPUT_FORMS)
    start = time.perf_counter()
    results = grade_answers(list(texts), list(golds), questions=list(questions))
    assert time.perf_counter() - start < 120
    wrong = [(t[:60], g, r.reward, r.reason) for t, g, e, r in zip(texts, golds, expected, results) if r.reward != e]
    assert not wrong, wrong


def _assert_paired(cases: list[dict]) -> None:
    """Every hostile case of a red team has an honest counterpart (paid, or amended as not supported)."""
    by_id = {case["id"]: case for case in cases}
    for case in cases:
        if case["expect"] == "refuse" and "amended" not in case:
            twin = by_id[case["counterpart_of"]]
            assert twin["expect"] == "pay" or "amended" in twin, case["id"]


def _mismatches(cases: list[dict]) -> list[tuple]:
    """A red team's cases graded in one call, with their questions (and answer types where given), bounded in time:
    the cases graded against their expectation."""
    start = time.perf_counter()
    results = grade_answers(
        [_text(case["completion"]) for case in cases],
        [_text(case["gold"]) for case in cases],
        [case.get("answer_type") for case in cases],
        questions=[_text(case["question"]) for case in cases],
    )
    assert time.perf_counter() - start < 300
    return [
        (case["id"], case["expect"], r.reward, r.reason)
        for case, r in zip(cases, results)
        if (r.reward == 1.0) != (case["expect"] == "pay")
    ]


def test_black_box_red_team_of_the_second_sitting():
    """385 cases by a third team that read neither the code nor the tests, aimed at what the second sitting added
    (unreduced fractions, sums written out, introducing lines, counting sentences, chain members in names, "or"
    golds, ellipses), each hostile case with an honest counterpart. 51 expectations are amended, each with its reason:
    the box's own rule (text around the value is not read), readings older than this sitting, and the forms not
    supported (a sum with a letter for a bound, counts in words)."""
    assert len(SECOND) >= 380 and {case["expect"] for case in SECOND} == {"pay", "refuse"}
    wrong = _mismatches(SECOND)
    assert not wrong, wrong


def test_black_box_red_team_of_the_json_answer_field():
    """634 cases (306 hostile, 328 honest) by a fourth team that read neither the code nor the tests, against the JSON
    `"answer"` field as an anchor (MathOdyssey's prompt asks for `{"reasoning": ..., "answer": ...}`): escapes that
    change the value, several fields, near keys, truncation, code after the value, other anchors, think blocks,
    echoed format examples, sizes. 17 expectations are amended, each with its reason: the field's object read like
    a box (its other keys are not read), readings older than the field (percent marks, labels), the question's own
    example holding its gold, and forms not supported."""
    assert len(JSON_FIELD) >= 600 and {case["expect"] for case in JSON_FIELD} == {"pay", "refuse"}
    _assert_paired(JSON_FIELD)
    wrong = _mismatches(JSON_FIELD)
    assert not wrong, wrong


def test_black_box_red_team_of_the_latest_readings():
    """371 cases (218 hostile, 153 honest) by a fifth team that read neither the code nor the tests, against this
    sitting's readings: options compared as values, plain-text names, units against their number, `~`, think blocks,
    unquoted fields, each decimal of a collection at its own place. Its first run paid 17 hostile cases (options in
    other formats, a reopened `<think>`, digits joined by a comma) and refused 22 honest ones; 20 expectations are
    amended, each with its reason (the one-value rule, the types of `[a, b]`, forms not supported)."""
    assert len(READINGS) >= 360 and {case["answer_type"] for case in READINGS} == {"math", "choice"}
    _assert_paired(READINGS)
    wrong = _mismatches(READINGS)
    assert not wrong, wrong


def test_a_finite_sum_gold_is_evaluated_term_by_term():
    """A wrong closed form against a 2025-term sum gold is refused within the per-answer budget (SymPy's own `evalf`
    of the sum took over 75 s): the refusal is a value, not a timeout."""
    (result,) = grade_answers(["$\\boxed{2029}$"], [_SUM_GOLD], questions=[_SUM_Q])
    assert result.reward == 0.0 and result.reason != "grading timed out", result


def test_restatement_needs_the_question_and_no_question_never_refuses_a_closed_form():
    """Without the question nothing is a restatement: the same answer is paid; the question makes it one."""
    answer, gold, question = (
        "\\frac1x+\\frac1y",
        "\\frac{x+y}{xy}",
        "Write $\\frac{1}{x}+\\frac{1}{y}$ as one fraction.",
    )
    without, with_question = grade_answers([_box(answer)] * 2, [gold] * 2, questions=["", question])
    assert without.reward == 1.0 and with_question.reward == 0.0 and with_question.reason == RESTATED


AMENDED = [
    case
    for name in ("maths_redteam.json", "maths_redteam_issue32.json")
    for case in json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    if "amended" in case
]


def test_amended_cases_are_refused_when_the_question_states_them():
    """The hostile cases of issues 25 and 32 that issue 60 pays (another closed form of the gold's value, stated by
    no question) are refused where the question writes the same expression."""
    from codapo_trl.rewards.extraction import extract_final_answer

    assert len(AMENDED) >= 100
    answers = [extract_final_answer(case["completion"]) for case in AMENDED]
    results = grade_answers(
        [case["completion"] for case in AMENDED],
        [case["gold"] for case in AMENDED],
        [case.get("answer_type", "math") for case in AMENDED],
        questions=[f"Simplify ${answer}$." for answer in answers],
    )
    paid = [(case["id"], answer, r.reason) for case, answer, r in zip(AMENDED, answers, results) if r.reward]
    assert not paid, paid


@pytest.mark.parametrize(
    "tail",
    [
        "the thing 1 " + "is 1 " * 3000 + "x" * 17000,  # many verbs far before the sentence's end
        "答えは " + "8 " * 15000 + "ではない",  # a foreign anchor, a long sentence, a negation at its end
        "La respuesta es " + "$x$ o " * 5000,  # values joined by a conjunction
        ". " * 16000,  # full stops and blanks after the phrase
        '{"answer": "' + "\\\\" * 16000,  # a JSON answer string of backslashes that never closes
        '"answer": "x", ' * 2000 + '{"a": "' * 2000,  # many fields, then strings and no brace closing them
        '{"answer": a'
        + " " * 30000,  # an unquoted value, then blanks (21 s of backtracking before they were possessive)
        '{"answer": "5", "x": "' + '\\"' * 15000,  # a string of escaped quotes that never closes (5.7 s before)
    ],
    ids=[
        "verbs",
        "negation",
        "conjunctions",
        "stops",
        "json-backslashes",
        "json-unclosed",
        "json-blanks",
        "json-quotes",
    ],
)
def test_reading_an_answer_phrase_is_linear_in_the_trainers_thread(tail):
    """Extraction runs in the trainer's process (only the judge runs in workers), so what issue 60 added to it (the
    sentence read at its last verb, the foreign anchors, their negations and second values) must stay linear in the
    completion: bounded in the trainer's own CPU, under a hard alarm in case a change makes it backtrack."""
    import signal

    from codapo_trl.rewards.extraction import extract_final_answer

    def too_slow(*_):
        raise TimeoutError("extraction backtracks")

    previous = signal.signal(signal.SIGALRM, too_slow)
    signal.alarm(20)
    try:
        start = time.process_time()
        extract_final_answer("Working.\n\nAnswer: " + tail)
        spent = time.process_time() - start
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert spent < 0.2, spent
    assert extract_final_answer("Answer: The maximum volume of the solid is **120**.") == "120"  # the honest form
