"""Tests for `codapo_trl.rewards` (the answer grader and TRL reward) and its worker pool `codapo_trl.rewards.deadline_pool`."""

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from codapo_trl.rewards import (
    REWARD_FUNCS,
    GradeResult,
    check_reward_columns,
    configure_grader,
    extract_final_answer,
    get_reward_funcs,
    grade_answers,
    grader_settings,
    math_accuracy_reward,
)
from codapo_trl.rewards import grading as rewards
from codapo_trl.rewards.deadline_pool import DeadlineProcessPool
from codapo_trl.rewards.extraction import box_in_expression


# Generous wall-clock bound for a batch of pathological inputs: a behaviour guarantee, not a performance target.
BOUND_S = 20.0


@pytest.fixture(scope="module", autouse=True)
def grader():
    """Same grader settings on every machine: 2 workers, 2 s per answer."""
    configure_grader(num_workers=2, timeout=2.0, memory_limit_mb=2048)
    yield
    configure_grader(num_workers=2, timeout=2.0)  # stops the workers


def rewards_for(completions, answers, answer_types=None, **kwargs):
    if answer_types is not None:
        kwargs["answer_type"] = answer_types
    return math_accuracy_reward(completions, answer=answers, **kwargs)


# ----------------------------------------------------------------------------------------------------------------
# Extraction
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"so the result is \boxed{7}.", "7"),
        (r"first \boxed{3}, then \boxed{\frac{1}{2}}", r"\frac{1}{2}"),  # last box wins
        (r"\boxed{3} or \boxed{4}", "4"),  # not the greedy-regex "3} or \boxed{4"
        (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),  # escaped braces are not group braces
        (r"\fbox{12}", "12"),
        (r"$\boxed{x^2+1}$", "x^2+1"),
        ("The answer is 42.", "42"),
        ("Therefore, the final answer is $\\frac{3}{4}$. I hope it is correct.", r"\frac{3}{4}"),
        ("**Final Answer:** 2.5", "2.5"),
        ("Answer: (B)", "(B)"),
        ("The answer to the question is 19 because 10 + 9 = 19.", "19"),
        ("Natalia sold 72 clips.\n#### 72", "72"),
        ("**Final Answer:**\n\n$$7$$", "7"),
        ("the answer is 5 + 2 = 7", "5 + 2 = 7"),
        (r"The answer is \boxed{7}, not 8", "7"),  # boxed wins over the phrase
        ("5 + 2 =", None),  # bare expression: no anchor
        ("It is 7", None),
        (r"\boxed{\frac{1}{2}", None),  # unclosed last box (truncated output)
        (r"\boxed{}", None),
        ("", None),
        (None, None),
    ],
)
def test_extract_final_answer(text, expected):
    assert extract_final_answer(text) == expected


# Issue 32: the grader reads one value, the box. Text after it is not read (statements, relations, remarks: they cannot
# change the value read; the false contradictions "The final answer is indeed \(36^\circ\)" and
# "**$1250**" were refusals of right answers), except a mark written against the box that continues its value.
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\\boxed{2}^{10}", True),
        ("\\boxed{19}_{8}", True),
        ("So $\\boxed{1}9$.", True),
        ("\\boxed{1}.5", True),
        ("$-\\boxed{5}$", True),  # a sign before the box
        ("$\\frac{\\boxed{23}}{2}$", True),
        ("$\\boxed{23}\\times 2$", True),
        ("$\\boxed{23}\\text{ thousand}$", True),  # a value word written against the box
        ("$\\boxed{23}\\text{ cm}$", False),  # a unit
        ("- \\boxed{7}", False),  # a list bullet, not a sign
        ("**Answer:** **\\boxed{5}** apples", False),  # Markdown emphasis
        ("\\boxed{7} - that is all.", False),
        ("$\\boxed{60}^\\circ$", False),  # a degree sign is a unit, as inside the box
        ("\\boxed{60}^{\\circ}", False),
        ("16 + 7 = 23. \\boxed{23} = 26.\n\nThe answer is 26.", False),  # a second statement is not read
        ("\\boxed{2\\sqrt2} \\approx 2.83", False),
        ("\\boxed{19}. 5 is not a factor of it.", False),
        ("\\boxed{23}\\%", False),  # `23\\%` is read as 23 inside a box too
        ("\\boxed{2}^{10} \\boxed{3}", False),  # only the last box
        ("\\boxed{2}^{10} \\boxed{24", False),  # unclosed last box: nothing read
        ("The answer is 26.", False),
        ("", False),
        (None, False),
    ],
)
def test_box_in_expression(text, expected):
    assert box_in_expression(text) is expected


# ----------------------------------------------------------------------------------------------------------------
# Grading: hand-written cases
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("completion", "gold", "expected"),
    [
        (r"Thus \boxed{19}.", "19", 1.0),
        (r"\boxed{0.5}", r"\frac{1}{2}", 1.0),
        (r"\boxed{\frac{1}{2}}", "0.5", 1.0),
        (r"\boxed{\dfrac12}", r"\frac{1}{2}", 1.0),
        (r"\boxed{(3,-1)}", "(3, -1)", 1.0),
        (r"\boxed{1 + x^2}", "x^2+1", 1.0),
        (r"\boxed{2\sqrt{5}}", r"\sqrt{20}", 1.0),
        (r"\boxed{\text{Monday}}", r"\text{Monday}", 1.0),
        ("The answer is $\\frac{1}{2}$.", "0.5", 1.0),
        ("Final answer: x^2+1", "1+x^2", 1.0),
        (r"\boxed{20}", "19", 0.0),
        (r"\boxed{(-1, 3)}", "(3, -1)", 0.0),  # order matters for a point
        (r"\boxed{x^2-1}", "x^2+1", 0.0),
        ("The result is 19", "19", 0.0),  # unanchored
        ("10 + 9 = 19", "19", 0.0),  # unanchored
        (r"\boxed{\frac{1}{2}", "0.5", 0.0),  # unbalanced braces
    ],
)
def test_math_answers(completion, gold, expected):
    assert rewards_for([completion], [gold]) == [expected]


def test_restating_the_question_is_not_paid():
    """The measured hack: answering "What is 5 + 2?" with "5 + 2 =" (math-verify's default extraction pays it)."""
    assert rewards_for(["5 + 2 ="], ["7"]) == [0.0]
    assert rewards_for(["5 + 2 ="], ["7"], ["number"]) == [0.0]
    assert rewards_for(["What is 5 + 2? 5 + 2"], ["7"]) == [0.0]


def test_number_type_requires_a_literal():
    completions = [
        r"\boxed{5+2}",  # equals 7, but it only restates the question
        r"\boxed{7}",
        "The answer is 5 + 2.",
        "The answer is 5 + 2 = 7.",  # computed, then stated: every side equals 7 and the last one is a literal
        r"\boxed{7 \text{ apples}}",
        r"\boxed{7x}",
        r"\boxed{\frac{14}{2}}",
        r"\boxed{3.5\cdot 2}",
    ]
    expected = [0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert rewards_for(completions, ["7"] * len(completions), ["number"] * len(completions)) == expected
    assert rewards_for(
        ["The answer is x = 7.", r"\boxed{7 = 7}", r"\boxed{7 = 5+2}", r"\boxed{8 = 7}"], ["7"] * 4
    ) == [
        1.0,
        1.0,
        0.0,  # the last side is the answer, and it is not final
        0.0,  # every side must equal the gold
    ]
    # Typed "math" (default), \boxed{5+2} is refused too: the gold 7 is a numeral, so the answer must be one
    # (issue 25: the gold's form, not the type label, decides); an expression gold keeps expressions.
    assert rewards_for([r"\boxed{5+2}", r"\boxed{2 \cdot 3}"], ["7", r"3 \times 2"]) == [0.0, 1.0]


@pytest.mark.parametrize(
    ("completion", "gold", "expected"),
    [
        (r"\boxed{-3}", "-3", 1.0),
        (r"\boxed{2.5}", r"\frac{5}{2}", 1.0),
        ("The answer is 1,000.", "1000", 1.0),
        (r"\boxed{1{,}000}", "1,000", 1.0),
        (r"\boxed{\$18.90}", "18.9", 1.0),
        (r"\boxed{-4}", "4", 0.0),
    ],
)
def test_number_type_literals(completion, gold, expected):
    assert rewards_for([completion], [gold], ["number"]) == [expected]


@pytest.mark.parametrize(
    ("completion", "gold", "expected"),
    [
        (r"\boxed{B}", "B", 1.0),
        (r"\boxed{b}", "B", 1.0),  # case-insensitive
        (r"\boxed{\text{(C)}}", "C", 1.0),
        ("The answer is (B).", "B", 1.0),
        ("**Answer:** D) 42", "D", 1.0),
        (r"\boxed{B}", "(b)", 1.0),
        (r"\boxed{J}", "J", 1.0),  # MMLU-Pro has ten options
        (r"\boxed{A}", "B", 0.0),
        ("The answer is a prime number.", "A", 0.0),  # the article "a" is not option A
        ("B", "B", 0.0),  # unanchored
        (r"\boxed{42}", "B", 0.0),
    ],
)
def test_choice_type(completion, gold, expected):
    assert rewards_for([completion], [gold], ["choice"]) == [expected]


def test_gold_from_full_solution_uses_last_box():
    solution = r"We try $\boxed{2}$ first, which fails. Then \boxed{\frac{3}{4}} works."
    assert rewards_for([r"\boxed{0.75}", r"\boxed{2}"], [solution, solution]) == [1.0, 0.0]
    (result,) = grade_answers([r"\boxed{0.75}"], [solution])
    assert result.gold == r"\frac{3}{4}"


@pytest.mark.parametrize(
    "gold", ["hello world", "", None, "}{", r"\boxed{\frac{1}{2}", r"9^{9^{9^9}}", "yes and no", "Natalia sold clips"]
)
def test_unusable_gold_gives_none(gold):
    assert rewards_for([r"\boxed{7}", "no answer"], [gold, gold]) == [None, None]


_OPTIONS_QUESTION = (
    "Which equation shows $f(x)=12x^2+36x+27$ in intercept form?\n\\begin{align*}\n"
    "\\text{A)}\\ & f(x)=3(2x-3)^2 &\n\\text{B)}\\ & f(x)=3(2x+3)^2 \\\\\n"
    "\\text{C)}\\ & f(x)=(6x-9)(2x-3)  &\n\\text{D)}\\ & \\text{None of these}\\\\\n\\end{align*}"
)


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        (r"\boxed{B) f(x)=3(2x+3)^2}", 1.0),  # the letter with its option's own text, as the question writes it
        ('{"answer": "B) $f(x) = 3(2x+3)^2$"}', 1.0),
        ("The answer is D) None of these.", 0.0),  # the right text of another option: its letter is D, not B
        (r"\boxed{B) f(x)=3(2x+3)}", 0.0),  # part of the option's text is not its text
        (r"\boxed{B) f(x)=3(2x+3)^2 \text{ or } C}", 0.0),  # a second option after it
        (r"\boxed{A) f(x)=3(2x+3)^2}", 0.0),  # option B's text under the letter A names neither
        (r"\boxed{B) 12}", 0.0),  # a value option B does not write: the letter and the value disagree
    ],
)
def test_choice_with_the_options_own_text(completion, expected):
    """A letter followed by words is no single option unless the words are that option's text in the question."""
    question = [[{"role": "user", "content": _OPTIONS_QUESTION}]]
    assert rewards_for([completion], ["B"], ["choice"], prompts=question) == [expected]
    if expected:  # without the question the words cannot be told from a hedge
        assert rewards_for([completion], ["B"], ["choice"]) == [0.0]


def test_choice_with_the_options_value_in_another_notation():
    """The option's text may be written in other notation (`1/6` for `\\frac16`, `3π/2` for `\\frac{3\\pi}{2}`); a
    value under a letter whose option is another value names two options."""
    question = (
        "Find it.\n\\begin{align*}\n\\text{A)}\\ & \\frac{1}{6} & \\text{B)}\\ & \\frac{3\\pi}{2} \\\\\n\\end{align*}"
    )
    prompts = [[{"role": "user", "content": question}]] * 4
    completions = [r"\boxed{A) 1/6}", r"\boxed{B) 3π/2}", r"\boxed{A) 3π/2}", r"\boxed{B) π/2}"]
    assert rewards_for(completions, ["A", "B", "A", "B"], ["choice"] * 4, prompts=prompts) == [1.0, 1.0, 0.0, 0.0]
    # compared as values where the notation differs (`-16m^4p^6/n^5` is `\frac{-16m^4p^6}{n^5}`); an option's
    # relation is compared whole, its left side is no label (`f(15) = -5` is not `f(5)=-5`)
    question = "Which?\n\\text{A)}\\ & \\frac{-16m^4p^6}{n^5} & \\text{B)}\\ & f(5)=-5 \\\\"
    prompts = [[{"role": "user", "content": question}]] * 4
    completions = [
        r"\boxed{A) -16m^4p^6/n^5}",
        r"\boxed{A) -16m^4p^5/n^5}",
        r"\boxed{B) f(5) = -5}",
        r"\boxed{B) f(15) = -5}",
    ]
    assert rewards_for(completions, ["A", "A", "B", "B"], ["choice"] * 4, prompts=prompts) == [1.0, 0.0, 1.0, 0.0]


def test_choice_gold_must_be_a_letter():
    assert rewards_for([r"\boxed{B}"], ["42"], ["choice"]) == [None]


def test_conversational_and_string_completions():
    conversational = [
        [{"role": "assistant", "content": r"2 + 5 = 7, so \boxed{7}"}],
        [{"role": "assistant", "content": "5 + 2 ="}],
        [{"role": "assistant", "content": None}],
        [{"role": "assistant", "content": [{"type": "text", "text": r"\boxed{7}"}]}],
        [],
    ]
    assert rewards_for(conversational, ["7"] * 5) == [1.0, 0.0, 0.0, 1.0, 0.0]
    assert rewards_for([r"\boxed{7}", "5 + 2 =", None], ["7"] * 3) == [1.0, 0.0, 0.0]


def test_trl_call_signature_and_logging():
    extra, metrics = {}, {}
    completions = [[{"role": "assistant", "content": c}] for c in (r"\boxed{\frac{1}{2}}", "5 + 2 =", r"\boxed{B}")]
    out = math_accuracy_reward(
        prompts=[[{"role": "user", "content": "q"}]] * 3,
        completions=completions,
        completion_ids=[[1, 2], [3], [4]],
        answer=["0.5", "7", "B"],
        answer_type=["math", "number", "choice"],
        problem=["q1", "q2", "q3"],
        trainer_state=None,
        log_extra=lambda column, values: extra.__setitem__(column, values),
        log_metric=lambda name, value: metrics.__setitem__(name, value),
    )
    assert out == [1.0, 0.0, 1.0]
    assert set(extra) == {"gold_parsed", "answer_parsed"}
    assert extra["gold_parsed"] == ["0.5", "7", "B"]
    assert extra["answer_parsed"] == ["1/2", "", "B"]
    assert all(isinstance(v, str) for values in extra.values() for v in values)
    assert metrics["math_accuracy/no_answer_frac"] == pytest.approx(1 / 3)
    assert "math_accuracy/contradicted_frac" not in metrics  # issue 32: nothing after the box is read, so gone
    assert metrics["math_accuracy/not_final_frac"] == 0.0
    assert metrics["math_accuracy/ungraded_frac"] == 0.0


def test_refusals_by_form_are_counted():
    metrics = {}
    completions = [r"\boxed{7+12}", r"\boxed{19\text{ thousand}}", r"\boxed{19}", r"\boxed{20}"]
    out = math_accuracy_reward(completions, answer=["19"] * 4, log_metric=lambda k, v: metrics.__setitem__(k, v))
    assert out == [0.0, 0.0, 1.0, 0.0]
    assert metrics["math_accuracy/not_final_frac"] == 0.5


def test_grade_answers_results():
    results = grade_answers(
        [r"\boxed{0.5}", "nothing", r"\boxed{5+2}", r"\boxed{3}"],
        ["1/2", "7", "7", "hello world"],
        ["math", "math", "number", None],
    )
    assert all(isinstance(r, GradeResult) for r in results)
    assert [r.correct for r in results] == [True, False, False, None]
    assert [r.reward for r in results] == [1.0, 0.0, 0.0, None]
    assert results[0].predicted == "0.5" and results[0].reason is None
    assert results[1].predicted is None and results[1].reason == rewards.NO_ANSWER
    assert results[2].predicted == "5+2" and results[2].reason == rewards.NOT_A_NUMBER
    assert results[3].reason == rewards.GOLD_NOT_MATH
    with pytest.raises(ValueError):
        grade_answers(["a"], ["b", "c"])


def test_read_after_box_setting(monkeypatch):
    """The rule is a grader setting: the environment gives the first value (a non yes/no value is an error naming the
    variable), `configure_grader` changes it without restarting the workers, and an explicit argument wins."""
    continued = r"16 + 7 = 23. \boxed{2}^{10}"  # the box is only part of the value written (issue 32)
    before = grader_settings()
    pool = rewards._get_pool()
    monkeypatch.setattr(rewards, "_settings", None)
    for raw, value in (("0", False), ("no", False), (" 1 ", True), ("", True)):
        monkeypatch.setenv("CODAPO_GRADER_READ_AFTER_BOX", raw)
        monkeypatch.setattr(rewards, "_settings", None)
        assert grader_settings()["read_after_box"] is value
    monkeypatch.setenv("CODAPO_GRADER_READ_AFTER_BOX", "maybe")
    monkeypatch.setattr(rewards, "_settings", None)
    with pytest.raises(ValueError, match="CODAPO_GRADER_READ_AFTER_BOX='maybe'.*1 or 0"):
        grader_settings()
    from datasets import Dataset

    with pytest.raises(ValueError, match="CODAPO_GRADER_READ_AFTER_BOX"):  # before any generation
        check_reward_columns([math_accuracy_reward], Dataset.from_dict({"prompt": ["q"], "answer": ["1"]}))
    monkeypatch.setattr(rewards, "_settings", dict(before))
    try:
        configure_grader(read_after_box=False)
        assert rewards._pool is pool  # not restarted
        assert rewards_for([continued], ["2"]) == [1.0]
        assert grade_answers([continued], ["2"], read_after_box=True)[0].reason == rewards.BOX_IN_EXPRESSION
        configure_grader(read_after_box=True)
        assert rewards_for([continued], ["2"]) == [0.0]
        assert grade_answers([continued], ["2"], read_after_box=False)[0].correct is True
    finally:
        configure_grader(read_after_box=before["read_after_box"])


def test_length_mismatch_is_an_error():
    with pytest.raises(ValueError):
        math_accuracy_reward([r"\boxed{1}"], answer=["1", "2"])


def test_in_process_mode():
    configure_grader(num_workers=0)
    try:
        assert rewards_for([r"\boxed{\frac{1}{2}}", r"\boxed{\frac{2}{4}}", r"\boxed{3}"], ["0.5", "0.5", "4"]) == [
            1.0,
            0.0,  # not in lowest terms: not the final form of 0.5
            0.0,
        ]
    finally:
        configure_grader(num_workers=2)


# ----------------------------------------------------------------------------------------------------------------
# Pathological inputs: bounded time, 0.0, on the main thread and off it
# ----------------------------------------------------------------------------------------------------------------

PATHOLOGICAL = [
    (r"\boxed{2^{2^{2^{2^{100}}}}}", "7"),
    (r"\boxed{9^{9^{9^9}}}", "7"),
    ("The answer is 9^{9^{9^9}}", "7"),
    (r"\boxed{10^{10^{10}}}", "7"),
    (r"\boxed{2^{1000000000}}", "7"),
    (r"\boxed{(10^{10})!}", "7"),  # passes the cheap checks: stopped by the per-answer timeout
    ("\\boxed{" + "{" * 10_000 + "7", "7"),  # 10 000 unclosed braces
    ("\\boxed{" + "{" * 10_000 + "7" + "}" * 10_001, "7"),  # 10 000 nested braces
    ("\\boxed{" + "{" * 60 + "7" + "}" * 61, "7"),  # short but deeply nested
    ("The answer is " + "(" * 5_000 + "7" + ")" * 5_000, "7"),
    ("x = 5 + 2. " * 10_000, "7"),  # 110 kB, no final answer
    ("", "7"),
    (None, "7"),
    (r"\boxed{}}}{{{", "7"),
    ("}" * 1000 + r"\boxed{" + "}" * 1000, "7"),
]


def _grade_pathological():
    start = time.monotonic()
    out = rewards_for([c for c, _ in PATHOLOGICAL], [g for _, g in PATHOLOGICAL])
    return out, time.monotonic() - start


def test_pathological_inputs_main_thread():
    out, elapsed = _grade_pathological()
    assert out == [0.0] * len(PATHOLOGICAL)
    assert elapsed < BOUND_S


def test_pathological_inputs_in_threads():
    """TRL may call reward functions off the main thread, where signal-based timeouts cannot work."""
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=3) as executor:
        futures = [executor.submit(_grade_pathological) for _ in range(3)]
        outputs = [future.result(timeout=60) for future in futures]
    assert all(out == [0.0] * len(PATHOLOGICAL) for out, _ in outputs)
    assert time.monotonic() - start < BOUND_S

    box: dict = {}
    thread = threading.Thread(target=lambda: box.setdefault("out", _grade_pathological()))
    thread.start()
    thread.join(timeout=60)
    assert box["out"][0] == [0.0] * len(PATHOLOGICAL)


def test_timed_out_answer_is_reported():
    """`(10^{10})!` for a numeric gold is refused by its form before SymPy computes anything; against an expression
    gold the form check evaluates it, and the worker's deadline stops it."""
    assert grade_answers([r"\boxed{(10^{10})!}"], ["7"])[0].reason == rewards.NOT_A_NUMBER
    (result,) = grade_answers([r"\boxed{(10^{10})!}"], ["x"])
    assert result.correct is False and result.reason == rewards.TIMED_OUT


def test_huge_completion_with_answer_at_the_end():
    text = "Let me think. " * 8_000 + r"So the answer is \boxed{7}."
    assert len(text) > 100_000
    assert rewards_for([text], ["7"]) == [1.0]


def test_concurrent_callers_get_their_own_results():
    batches = [
        ([rf"\boxed{{{i}}}" for i in range(40)], [str(i + offset) for i in range(40)], offset)
        for offset in (0, 1, 0, 1, 0)
    ]

    def run(batch):
        completions, golds, offset = batch
        return rewards_for(completions, golds), offset

    with ThreadPoolExecutor(max_workers=5) as executor:
        for out, offset in executor.map(run, batches):
            assert out == [1.0 if offset == 0 else 0.0] * 40


def test_workers_are_reused():
    rewards_for([rf"\boxed{{{i}}}" for i in range(50)], [str(i + 1) for i in range(50)])  # starts both workers
    pool = rewards._get_pool()
    started = pool.stats()["started"]
    assert rewards_for([rf"\boxed{{{i}}}" for i in range(50)], [str(i) for i in range(50)]) == [1.0] * 50
    assert pool.stats()["started"] == started
    assert pool.stats()["alive"] <= 2


# ----------------------------------------------------------------------------------------------------------------
# The worker pool itself: hard kills, crashes, replacement
# ----------------------------------------------------------------------------------------------------------------


def hang_or_crash(payload):
    """Test handler: `"hang"` ignores the worker's own alarm and spins, like a computation stuck in C code, so only
    the parent's hard kill stops it; `"crash"` kills the worker; `"raise"` raises."""
    if payload == "hang":
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        signal.signal(signal.SIGPROF, signal.SIG_IGN)
        while True:
            pass
    if payload == "crash":
        os._exit(3)
    if payload == "raise":
        raise RuntimeError("boom")
    if payload == "sleep":
        time.sleep(1.5)  # waiting, as a worker does on a loaded machine: no CPU of its own
        return "slept"
    if payload == "spin":
        while True:  # computing in Python: the worker's own alarm stops it
            pass
    if payload == "allocate":
        return len(bytearray(8 * 2**30))  # over the workers' 2 GiB address-space limit
    return payload * 2


@pytest.fixture
def test_pool():
    pool = DeadlineProcessPool(f"{__name__}:hang_or_crash", max_workers=1, item_timeout=1.0)
    yield pool
    pool.shutdown()


def test_worker_killed_on_timeout_is_replaced(test_pool):
    start = time.monotonic()
    outcomes = test_pool.map([1, "hang", 2, 3])
    assert time.monotonic() - start < BOUND_S
    assert [o.value for o in outcomes] == [2, None, 4, 6]  # the rest of the batch went to the replacement
    assert outcomes[1].error == "timeout"
    stats = test_pool.stats()
    assert stats["timeouts"] == 1 and stats["started"] == 2 and stats["alive"] == 1
    assert [o.value for o in test_pool.map([5, 6])] == [10, 12]  # the next call still works


def test_the_soft_limit_counts_the_workers_cpu_not_the_wall_clock():
    """With `cpu_timeout` (the maths grader's setting), an input that waits longer than its CPU budget but computes
    little finishes (a loaded machine changes no verdict), one that computes past it is stopped without killing the
    worker, and one stuck where the alarm cannot reach is killed at the wall-clock bound."""
    pool = DeadlineProcessPool(f"{__name__}:hang_or_crash", max_workers=1, cpu_timeout=0.5, item_timeout=4.0)
    try:
        start = time.monotonic()
        outcomes = pool.map(["sleep", "spin", 3, "hang", 4])
        elapsed = time.monotonic() - start
        assert [o.value for o in outcomes] == ["slept", None, 6, None, 8]
        assert outcomes[1].error == "timeout" and outcomes[3].error == "timeout"
        assert pool.stats()["started"] == 2  # only the hang cost a worker
        assert 4.0 <= elapsed < BOUND_S
    finally:
        pool.shutdown()
    with pytest.raises(ValueError, match="cpu_timeout"):
        DeadlineProcessPool(f"{__name__}:hang_or_crash", cpu_timeout=5.0, item_timeout=2.0)


def test_worker_crash_does_not_propagate(test_pool):
    outcomes = test_pool.map(["a", "crash", "b", "raise", "c"])
    assert [o.value for o in outcomes] == ["aa", None, "bb", None, "cc"]
    assert outcomes[1].error == "crashed"
    assert outcomes[3].error.startswith("error: RuntimeError")
    assert test_pool.map([1]) == [type(outcomes[0])(value=2)]


def test_worker_memory_limit(test_pool):
    outcomes = test_pool.map(["allocate", "x"])
    assert outcomes[0].error.startswith("error: MemoryError")
    assert outcomes[1].value == "xx"


def test_pool_startup_failure_is_reported():
    pool = DeadlineProcessPool("codapo_trl_no_such_module:f", max_workers=1)
    with pytest.raises(RuntimeError, match="codapo_trl_no_such_module"):
        pool.map([1])


# ----------------------------------------------------------------------------------------------------------------
# Registry
# ----------------------------------------------------------------------------------------------------------------


def test_registry_names():
    assert REWARD_FUNCS["math_accuracy"] is math_accuracy_reward
    assert REWARD_FUNCS["accuracy"] is math_accuracy_reward
    assert [f.__name__ for f in get_reward_funcs(["math_accuracy", "accuracy"])] == ["math_accuracy_reward"] * 2


def test_registry_unknown_name_lists_valid_names():
    with pytest.raises(ValueError) as excinfo:
        get_reward_funcs(["format"])
    message = str(excinfo.value)
    assert "'format'" in message and "math_accuracy" in message and "accuracy" in message


def test_registry_dotted_path():
    assert get_reward_funcs(["codapo_trl.rewards.math_accuracy_reward"]) == [math_accuracy_reward]
    assert get_reward_funcs(["os.path.join"]) == [os.path.join]
    with pytest.raises(ValueError, match="math_accuracy"):
        get_reward_funcs(["codapo_trl.rewards.no_such_reward"])
    with pytest.raises(ValueError, match="math_accuracy"):
        get_reward_funcs(["no_such_package.module.func"])


def test_unreadable_golds_are_named_when_the_dataset_loads(caplog):
    """Issue 60: a gold the grader cannot read would make its question skipped (None) in every batch; the checks
    made at construction name it, and a dataset of readable golds (any form the grader reads) says nothing."""
    import logging

    from datasets import Dataset

    from codapo_trl.rewards import check_reward_columns

    bad = Dataset.from_dict({"prompt": ["q"] * 3, "answer": ["7", "\\frac{}{", "2 OR 3"]})
    with caplog.at_level(logging.WARNING, logger="codapo_trl.rewards.math"):
        check_reward_columns([math_accuracy_reward], bad)
    assert "1 of the 3 distinct gold answers of train_dataset" in caplog.text and "\\\\frac{}{" in caplog.text
    caplog.clear()
    good = Dataset.from_dict(
        {
            "prompt": ["q"] * 4,
            "answer": ["48 \\mathrm{~km}/\\mathrm{h}", "\\frac{-4\\pm\\sqrt{31}}{15}", "2013^{4025}", "B"],
            "answer_type": ["math", "math", "math", "choice"],
        }
    )
    with caplog.at_level(logging.WARNING, logger="codapo_trl.rewards.math"):
        check_reward_columns([math_accuracy_reward], good)
    assert caplog.text == ""
