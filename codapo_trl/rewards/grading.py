"""The answer grader behind the maths reward, `codapo-eval` and the analysis: `grade_answers`.

Length: about 600 lines: the verdict reasons, the worker-side grading, the grader's settings and shared pool, its
caches and the public entry point share one cache and one set of reasons. The grader is one pipeline: extract
(`extraction`), read (`form_reading`), compare (`equality`) and judge (`judging`), with `checks` for answer types and absurd
answers; this module runs it within a deadline.

1. **One value is read, and only an anchored one** (`codapo_trl.rewards.extraction`): the last `\\boxed{...}`, else
   the text after the last final-answer phrase (English and nine other languages); a bare expression earns 0. Text
   after the box is not read (it cannot change the value read), except a mark written against the box that
   continues its value (`\\boxed{2}^{10}`), which earns 0 unless the grader is told to read the last box only
   (`read_after_box`).
2. **Equal exactly and by type, and computed** (`codapo_trl.rewards.equality`, `codapo_trl.rewards.judging`): no rounding, no letter stripped, a set
   is not an interval; a derivation or chain in the box is read to its last value, every member agreeing; a numeral
   gold asks for a numeral; an answer that hands back an expression the question states is refused (the question is
   the prompt, `questions=`); any other closed form equal to the gold is paid.
3. **Typed questions.** An optional `answer_type` column per row: `"math"` (default), `"number"` (the answer must be
   a numeral whatever the gold) or `"choice"` (one letter A-J, compared case-insensitively with the gold letter).
4. **Bounded time, no crash.** SymPy runs in worker processes (`codapo_trl.rewards.deadline_pool`); each answer gets
   2 s of the worker's CPU (a soft alarm stops it there and it scores 0), and a worker still busy at 4 times that
   in wall time (a computation stuck in C code) is killed and replaced. Cheap checks in the calling
   process reject absurd answers (huge power towers, deep nesting, very long answers) before they reach SymPy. A
   gold answer that cannot be read gives `None` (TRL ignores it), never 1.0.

Grader settings come from environment variables read when the worker pool first starts, or from
`configure_grader`: `CODAPO_GRADER_WORKERS` (worker processes, default `min(4, cpu_count)`; `0` grades in the calling
process with no time bound, for debugging only), `CODAPO_GRADER_TIMEOUT` (seconds of a worker's CPU per answer, default 2; the wall-clock cut-off is 4 times that) and
`CODAPO_GRADER_MEMORY_MB` (address-space limit per worker, default 2048; 0 for none) and
`CODAPO_GRADER_READ_AFTER_BOX` (`1`, the default: a right box whose value runs on past it, `\\boxed{2}^{10}`, scores 0;
`0`: the last box only, the rule the CoDaPO-vs-GRPO campaign was pre-registered with).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from codapo_trl.answers import ANSWER_TYPES
from codapo_trl.rewards.checks import (
    cases_rows,
    choice_letter,
    looks_like_prose,
    named_option,
    plain_number,
    precheck,
    same_left_side,
    same_number,
    yes_no,
)
from codapo_trl.rewards.deadline_pool import DeadlineProcessPool, TaskOutcome
from codapo_trl.rewards.extraction import box_in_expression, extract_final_answer, extract_gold
from codapo_trl.rewards.form_reading import JUXTAPOSED, WORDS
from codapo_trl.rewards.judging import (
    FALSE_RELATION,
    NOT_A_NUMBER,
    NOT_CLOSED,
    OTHER_RELATION,
    OTHER_TYPE,
    RESTATED,
    SEVERAL_VALUES,
    UNREADABLE,
)


logger = logging.getLogger(__name__)

__all__ = [
    "GradeResult",
    "configure_grader",
    "grade_answers",
    "grader_settings",
]

# Reasons recorded in `GradeResult.reason`.
NO_ANSWER = "no final answer"
NOT_A_CHOICE = "not a choice letter"
UNPARSEABLE_ANSWER = "answer not parseable"
GOLD_MISSING = "gold missing"
GOLD_NOT_MATH = "gold is not a math answer"
GOLD_UNPARSEABLE = "gold not parseable"
GOLD_NOT_A_CHOICE = "gold is not a choice letter"
TIMED_OUT = "grading timed out"
GOLD_TIMED_OUT = "gold parsing timed out"
BOX_IN_EXPRESSION = "the box is only part of the value written"
CRASHED = "grader crashed"
UNAVAILABLE = "grader unavailable"
FORM_REASONS = (
    RESTATED,
    NOT_A_NUMBER,
    NOT_CLOSED,
    OTHER_TYPE,
    SEVERAL_VALUES,
    FALSE_RELATION,
    OTHER_RELATION,
    WORDS,
    JUXTAPOSED,
    UNREADABLE,
    BOX_IN_EXPRESSION,
)
"""The reasons of an answer refused for its form rather than its value (`codapo_trl.rewards.judging`,
`form_reading.prepare`, `extraction.box_in_expression`), counted by `math_accuracy/not_final_frac`."""
NOT_FINAL = RESTATED  # the name of earlier versions: an answer that is the question's own expression


@dataclass(frozen=True)
class GradeResult:
    """The verdict on one prediction.

    Args:
        correct (`bool` or `None`):
            Whether the prediction matches the gold answer; `None` when the gold answer cannot be used (ungraded).
        predicted (`str` or `None`):
            The anchored answer taken from the prediction (see `extract_final_answer`), `None` if there is none.
        gold (`str` or `None`):
            The gold answer after extraction (last `\\boxed{}` of a full solution), `None` if missing.
        reason (`str` or `None`):
            Why the prediction was not graded normally (no answer, not a number, timeout, unusable gold...);
            `None` for an ordinary right-or-wrong verdict.
        predicted_parsed (`str` or `None`):
            How the grader read the prediction (SymPy form, normalised number or choice letter), when it got that far.
        gold_parsed (`str` or `None`):
            How the grader read the gold answer, when it got that far.
    """

    correct: bool | None
    predicted: str | None
    gold: str | None
    reason: str | None = None
    predicted_parsed: str | None = None
    gold_parsed: str | None = None

    @property
    def reward(self) -> float | None:
        """1.0 if correct, 0.0 if not, `None` if ungraded."""
        return None if self.correct is None else float(self.correct)


# ----------------------------------------------------------------------------------------------------------------
# Worker side: math-verify, called with its signal timeouts disabled (the pool enforces the bound)
# ----------------------------------------------------------------------------------------------------------------


# Pairs that take each path of the judge once (SymPy's `simplify` imports `sympy.physics.units` on its first call:
# 0.3-2 s, which would otherwise count against the first item of a worker that needs it).
_WARM_UP_PAIRS = (
    (r"\frac{1}{2}", "0.5", "math", ""),
    (r"3+2\sqrt{2}", r"(1+\sqrt{2})^2", "math", ""),
    (r"x^2+x", r"x(x+1)", "math", ""),
    ("6 - 5i", r"\frac{(1+2i)(2-3i)}{1+i}+i", "math", ""),
    (r"2e^{\frac{\pi}{2}-2}", r"\approx 0.9", "math", ""),
)


def _init_math_worker() -> None:
    """Import SymPy and the LaTeX reader and warm them up, once per worker, before the worker reports ready."""
    for pair in _WARM_UP_PAIRS:
        _grade_pair(pair)


def _shorten(value: Any, limit: int = 200) -> str:
    import sympy

    text = sympy.sstr(value, full_prec=False) if isinstance(value, sympy.Basic) else str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _grade_pair(payload: tuple) -> tuple[bool | None, str | None, str | None, str | None]:
    """Grade one `(predicted, gold, kind, question)` tuple of already extracted answers (read, compare, judge:
    `codapo_trl.rewards.judging.judge`).

    `kind` is `"math"`, `"number"` (the answer must be a numeral) or `"value"` (its value only, for analyses); the
    question (`""` when unknown) is what a restatement is judged against. Returns `(correct, reason,
    predicted_parsed, gold_parsed)`; `correct` is `None` when the gold cannot be read. A `None` prediction only
    checks the gold (the result is then `False` if the gold can be read).
    """
    from codapo_trl.rewards import form_reading, judging

    predicted, gold = payload[0], payload[1]
    kind = payload[2] if len(payload) > 2 else "math"
    question = payload[3] if len(payload) > 3 else ""
    golds = judging.read_gold(gold)
    if golds is None:
        return None, GOLD_UNPARSEABLE, None, None
    gold_text = _shorten(golds[0].node)
    if predicted is None:
        return False, None, None, gold_text
    if kind != "value" and form_reading.units_differ(predicted, gold):
        return False, WORDS, None, gold_text  # 19 mm for 19 cm, 19_{20} for 19: another unit is another value
    correct, reason, predicted_text, _ = judging.judge(predicted, gold, question or "", kind)
    return correct, reason, _shorten(predicted_text) if predicted_text else None, gold_text


# ----------------------------------------------------------------------------------------------------------------
# Grader configuration and the shared pool
# ----------------------------------------------------------------------------------------------------------------


def _env_number(name: str, default: float, cast: Callable[[str], float]) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return cast(raw)
    except ValueError:
        logger.warning("Ignoring %s=%r (not a number); using %s", name, raw, default)
        return default


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _env_flag(name: str, default: bool) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw not in _TRUE + _FALSE:
        raise ValueError(f"{name}={os.environ[name]!r} is not a yes/no value: set it to 1 or 0 (or unset it).")
    return raw in _TRUE


_SETTINGS_LOCK = threading.Lock()
_settings: dict[str, Any] | None = None
_pool: DeadlineProcessPool | None = None
_CACHE_SIZE = 16_384  # verdicts by (prediction, gold, kind, question digest); keys are at most ~1 kB each
_cache: OrderedDict[tuple[str | None, str, str, str], tuple] = OrderedDict()
_gold_cache: OrderedDict[str, tuple] = OrderedDict()  # gold -> its verdict with no prediction (see _check_golds)
_cache_lock = threading.Lock()


def configure_grader(
    num_workers: int | None = None,
    timeout: float | None = None,
    memory_limit_mb: int | None = None,
    read_after_box: bool | None = None,
) -> None:
    """Change the grader's settings. When a worker setting is given (`num_workers`, `timeout`, `memory_limit_mb`),
    running workers are stopped and new ones start on the next call; `read_after_box` alone leaves them running.

    Arguments left as `None` keep their current value (initially from the environment variables described in the
    module docstring).

    Args:
        num_workers (`int`, *optional*):
            Worker processes that grade in parallel. `0` grades in the calling process without any time bound
            (debugging only).
        timeout (`float`, *optional*):
            Seconds of grading CPU allowed per answer: the worker's own CPU time, so that a loaded machine does not
            refuse a right answer that takes its usual computation; an answer is cut off at 4 times this in wall
            time whatever it does.
        memory_limit_mb (`int`, *optional*):
            Address-space limit of each worker in MiB; `0` for none.
        read_after_box (`bool`, *optional*):
            Whether a right last box whose value runs on past it (`\\boxed{2}^{10}`) scores 0 (`True`, the default)
            or the last box alone is graded (`False`); see `grade_answers`.

    Example:
        ```python
        >>> configure_grader(num_workers=2, timeout=2.0)

        ```
    """
    global _pool, _settings
    with _SETTINGS_LOCK:
        settings = dict(_current_settings_locked())
        for key, value in (
            ("workers", num_workers),
            ("timeout", timeout),
            ("memory_mb", memory_limit_mb),
            ("read_after_box", read_after_box),
        ):
            if value is not None:
                settings[key] = value
        if settings["workers"] < 0 or settings["timeout"] <= 0:
            raise ValueError(f"Invalid grader settings: {settings}")
        restart = any(value is not None for value in (num_workers, timeout, memory_limit_mb))
        old_pool = _pool if restart else None
        _pool = None if restart else _pool
        _settings = settings
    if old_pool is not None:
        old_pool.shutdown()


def _current_settings_locked() -> dict[str, Any]:
    global _settings
    if _settings is None:
        _settings = {
            "workers": int(_env_number("CODAPO_GRADER_WORKERS", min(4, os.cpu_count() or 1), int)),
            "timeout": _env_number("CODAPO_GRADER_TIMEOUT", 2.0, float),
            "memory_mb": int(_env_number("CODAPO_GRADER_MEMORY_MB", 2048, int)),
            "read_after_box": _env_flag("CODAPO_GRADER_READ_AFTER_BOX", True),
        }
    return _settings


def grader_settings() -> dict[str, Any]:
    """The grader's current settings (`workers`, `timeout`, `memory_mb`, `read_after_box`), for logs and reports."""
    with _SETTINGS_LOCK:
        return dict(_current_settings_locked())


_WALL_FACTOR = 4.0  # the hard wall-clock bound per answer, in units of its CPU budget


def _get_pool() -> DeadlineProcessPool | None:
    """The shared worker pool (created on first use), or `None` when grading in-process."""
    global _pool
    with _SETTINGS_LOCK:
        settings = _current_settings_locked()
        if settings["workers"] == 0:
            return None
        if _pool is None:
            _pool = DeadlineProcessPool(
                f"{__name__}:_grade_pair",
                initializer=f"{__name__}:_init_math_worker",
                max_workers=int(settings["workers"]),
                cpu_timeout=float(settings["timeout"]),
                item_timeout=_WALL_FACTOR * float(settings["timeout"]),
                memory_limit_mb=int(settings["memory_mb"]) or None,
            )
        return _pool


def _map_pairs(pairs: list[tuple]) -> list[TaskOutcome]:
    pool = _get_pool()
    if pool is not None:
        return pool.map(pairs)
    outcomes = []
    for pair in pairs:
        try:
            outcomes.append(TaskOutcome(value=_grade_pair(pair)))
        except Exception as exc:  # noqa: BLE001
            outcomes.append(TaskOutcome(error=f"error: {type(exc).__name__}: {exc}"))
    return outcomes


def _check_golds(golds: set[str]) -> dict[str, tuple]:
    """Parse each gold answer once (cached): `(False, None, None, gold_parsed)` for a usable gold, `(None, reason,
    None, None)` for one that cannot be parsed or whose parsing times out or crashes (its items are then ungraded,
    not scored 0, and it is not parsed again)."""
    with _cache_lock:
        known = {g: _gold_cache[g] for g in golds if g in _gold_cache}
    todo = sorted(g for g in golds if g not in known)
    if todo:
        fresh = {}
        for gold, outcome in zip(todo, _map_pairs([(None, g, "math", "") for g in todo])):
            if outcome.ok:
                fresh[gold] = outcome.value
            elif outcome.error == "timeout":
                fresh[gold] = (None, GOLD_TIMED_OUT, None, None)
            elif outcome.error == "unavailable":
                known[gold] = (None, UNAVAILABLE, None, None)  # not cached: the pool may come back
            else:
                fresh[gold] = (None, f"gold {outcome.error}", None, None)
        known.update(fresh)
        with _cache_lock:
            _gold_cache.update(fresh)
            while len(_gold_cache) > _CACHE_SIZE:
                _gold_cache.popitem(last=False)
    return known


def _run_judge(pairs: list[tuple[str | None, str, str, str]]) -> list[tuple]:
    """Grade `(predicted, gold, kind, question)` tuples (see `_grade_pair`), through the caches and the worker pool.
    Golds are checked first, so that an unusable gold makes its items ungraded (None) instead of timing out on every
    prediction. Verdicts are cached by the question's digest, not its text."""
    results: list[tuple | None] = [None] * len(pairs)
    todo: dict[tuple[str | None, str, str, str], list[int]] = {}
    sent: dict[tuple[str | None, str, str, str], tuple] = {}
    gold_verdicts = _check_golds({pair[1] for pair in pairs})
    with _cache_lock:
        for index, pair in enumerate(pairs):
            key = (pair[0], pair[1], pair[2], hashlib.sha1(pair[3].encode("utf-8", "replace")).hexdigest())
            gold_verdict = gold_verdicts[pair[1]]
            if gold_verdict[0] is None or pair[0] is None:
                results[index] = gold_verdict
            elif key in _cache:
                _cache.move_to_end(key)
                results[index] = _cache[key]
            else:
                todo.setdefault(key, []).append(index)
                sent[key] = pair
    if not todo:
        return results  # type: ignore[return-value]
    unique = list(todo)
    outcomes = _map_pairs([sent[key] for key in unique])
    fresh = {}
    for pair, outcome in zip(unique, outcomes):
        if outcome.ok:
            verdict = outcome.value
            fresh[pair] = verdict
        elif outcome.error == "timeout":
            verdict = (False, TIMED_OUT, None, None)
        elif outcome.error == "crashed":
            verdict = (False, CRASHED, None, None)
        elif outcome.error == "unavailable":
            verdict = (None, UNAVAILABLE, None, None)
        else:
            _warn_once("grader-error", "the grader raised on an answer (scored 0.0): %s", outcome.error)
            verdict = (False, outcome.error, None, None)
        for index in todo[pair]:
            results[index] = verdict
    with _cache_lock:
        _cache.update(fresh)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return results  # type: ignore[return-value]


_warned: set[str] = set()


def _warn_once(key: str, message: str, *args: Any) -> None:
    if key not in _warned:
        _warned.add(key)
        logger.warning(message, *args)


# ----------------------------------------------------------------------------------------------------------------
# Public grading API
# ----------------------------------------------------------------------------------------------------------------


def _normalise_type(answer_type: Any) -> str:
    if answer_type is None:
        return "math"
    name = str(answer_type).strip().lower()
    if name in ANSWER_TYPES:
        return name
    _warn_once(f"type-{name}", "Unknown answer_type %r: grading it as 'math' (known: %s)", answer_type, ANSWER_TYPES)
    return "math"


def grade_answers(
    predictions: Sequence[str | None],
    golds: Sequence[str | None],
    answer_types: Sequence[str | None] | None = None,
    *,
    questions: Sequence[str | None] | None = None,
    read_after_box: bool | None = None,
) -> list[GradeResult]:
    """Grade model outputs against gold answers; the one implementation behind training rewards and evaluation.

    Args:
        predictions (`Sequence[str | None]`):
            Full model outputs. The answer is taken with `extract_final_answer`; an output without an anchored
            answer is wrong.
        golds (`Sequence[str | None]`):
            Gold final answers (`"19"`, `"\\frac{1}{2}"`, `"(3, -1)"`, `"B"`), or full solutions whose last
            `\\boxed{}` holds the answer.
        answer_types (`Sequence[str | None]`, *optional*):
            Per item `"math"` (default), `"number"` or `"choice"`, see the module docstring.
        questions (`Sequence[str | None]`, *optional*):
            The question each prediction answers (the prompt's text). An answer that hands back an expression the
            question states is refused (`codapo_trl.rewards.judging.restates_question`), and a decimal stands for
            an exact gold only where the question asks for one. Without questions, neither can be judged: every
            closed form equal to the gold is paid and a decimal never stands for an exact gold.
        read_after_box (`bool`, *optional*):
            Whether a right last box whose value runs on past it (`box_in_expression`: `\\boxed{2}^{10}`,
            `\\boxed{1}9`) scores 0 with reason `BOX_IN_EXPRESSION`. Nothing else after the box is read: it cannot change
            the one value read. `None` (default) takes the grader setting (`configure_grader`,
            `CODAPO_GRADER_READ_AFTER_BOX`, on unless set to 0); `False` grades the last box alone.

    Returns:
        `list[GradeResult]`: One result per prediction, in order. Never raises for bad inputs; grading of each
        answer is bounded in time (a timeout or a crashed worker gives `correct=False` with a reason).

    Example:
        ```python
        >>> [r.correct for r in grade_answers([r"so \\boxed{0.5}", "5 + 2 =", r"\\boxed{5+2}"], ["1/2", "7", "7"])]
        [True, False, False]
        >>> [(r.correct, r.reason) for r in grade_answers([r"\\boxed{2}^{10}", r"\\boxed{2}. Or 3?"], ["2", "2"])]
        [(False, 'the box is only part of the value written'), (True, None)]
        >>> grade_answers([r"\\boxed{2}^{10}"], ["2"], read_after_box=False)[0].correct
        True

        ```
    """
    n = len(predictions)
    if len(golds) != n:
        raise ValueError(f"Got {n} predictions but {len(golds)} gold answers")
    if answer_types is None:
        answer_types = ["math"] * n
    elif len(answer_types) != n:
        raise ValueError(f"Got {n} predictions but {len(answer_types)} answer types")
    if questions is None:
        questions = [""] * n
    elif len(questions) != n:
        raise ValueError(f"Got {n} predictions but {len(questions)} questions")
    if read_after_box is None:
        read_after_box = bool(grader_settings()["read_after_box"])

    texts = [p if isinstance(p, str) else None for p in predictions]
    kinds = [_normalise_type(answer_type) for answer_type in answer_types]
    asked = [q if isinstance(q, str) else "" for q in questions]
    results = _grade_extracted([extract_final_answer(t, q) for t, q in zip(texts, asked)], golds, kinds, asked)
    if read_after_box:
        for index, text in enumerate(texts):
            if results[index].correct is True and box_in_expression(text):
                results[index] = dataclasses.replace(results[index], correct=False, reason=BOX_IN_EXPRESSION)
    return results


def _grade_extracted(
    answers: Sequence[str | None],
    golds: Sequence[str | None],
    kinds: Sequence[str],
    questions: Sequence[str] | None = None,
) -> list[GradeResult]:
    """`grade_answers` on answers already extracted from their outputs (`kinds` normalised, or `"value"`)."""
    results: list[GradeResult | None] = [None] * len(answers)
    # index, extracted prediction, gold, what the worker gets (None: only check the gold), reason already known
    pending: list[tuple[int, str | None, str, str | None, str | None, str, str]] = []
    options: list[tuple[int, str | None, str, str, str]] = []  # a choice's value, to compare with its option's text
    questions = questions if questions is not None else [""] * len(answers)
    for index, (predicted, gold, kind, question) in enumerate(zip(answers, golds, kinds, questions)):
        gold_answer = extract_gold(gold) if isinstance(gold, str) else None
        verdict = _precheck_item(kind, predicted, gold_answer, question or "")
        if isinstance(verdict, _ToMathVerify) and verdict.against is not None:
            options.append((index, predicted, gold_answer, verdict.predicted, verdict.against))
        elif isinstance(verdict, _ToMathVerify):
            pending.append((index, predicted, gold_answer, verdict.predicted, verdict.reason, kind, question))  # type: ignore[arg-type]
        else:
            correct, reason, predicted_parsed, gold_parsed = verdict
            results[index] = GradeResult(correct, predicted, gold_answer, reason, predicted_parsed, gold_parsed)

    if pending:
        verdicts = _run_judge(
            [(sent, gold_answer, kind, question) for _, _, gold_answer, sent, _, kind, question in pending]
        )
        for (index, predicted, gold_answer, _, known_reason, _, _), verdict in zip(pending, verdicts):
            correct, reason, predicted_parsed, gold_parsed = verdict
            if known_reason is not None and correct is not None:  # the gold is fine; the prediction was not
                correct, reason = False, known_reason
            results[index] = GradeResult(correct, predicted, gold_answer, reason, predicted_parsed, gold_parsed)
    if options:  # the option's text is the question's: compared as a value, no restatement to judge
        verdicts = _run_judge([(value, option, "math", "") for _, _, _, value, option in options])
        for (index, predicted, gold_answer, value, option), verdict in zip(options, verdicts):
            letter = choice_letter(gold_answer, strict=False)
            same = verdict[0] is True and same_left_side(value, option)
            results[index] = GradeResult(same, predicted, gold_answer, None if same else NOT_A_CHOICE, letter, letter)
    return results  # type: ignore[return-value]


@dataclass(frozen=True)
class _ToMathVerify:
    """What `_precheck_item` hands to the worker: a prediction, or `None` with the reason it already failed (the
    gold must still be parsed, since an unusable gold makes the item ungraded whatever the prediction)."""

    predicted: str | None
    reason: str | None = None
    against: str | None = None  # for a choice: the option's text, compared as a value with what follows the letter


def _precheck_item(kind: str, predicted: str | None, gold: str | None, question: str = "") -> tuple | _ToMathVerify:
    """Everything decided without the worker: a final `(correct, reason, predicted_parsed, gold_parsed)` verdict,
    or what to hand to the worker."""
    if gold is None:
        return None, GOLD_MISSING, None, None
    if kind == "choice":
        gold_letter = choice_letter(gold, strict=False)
        if gold_letter is None:
            return None, GOLD_NOT_A_CHOICE, None, None
        if predicted is None:
            return False, NO_ANSWER, None, gold_letter
        letter = choice_letter(predicted, question=question)
        if letter is None:
            named = named_option(predicted, question)  # "A) -16m^4p^6/n^5": the option's value in other notation
            if named is None:
                return False, NOT_A_CHOICE, None, gold_letter
            if named[0] != gold_letter:
                return False, None, named[0], gold_letter
            return _ToMathVerify(named[1], against=named[2])
        return letter == gold_letter, None, letter, gold_letter
    gold_problem = precheck(gold)
    if gold_problem is not None:
        return None, f"gold rejected: {gold_problem}", None, None
    gold_word = yes_no(gold, gold=True)
    if gold_word is not None:  # a yes/no question: the word the answer starts with, said once
        said = yes_no(predicted) if predicted is not None else None
        return said == gold_word, None if said else (NO_ANSWER if predicted is None else WORDS), said, gold_word
    if looks_like_prose(gold):
        return None, GOLD_NOT_MATH, None, None
    gold_rows = cases_rows(gold)
    if gold_rows is not None:  # piecewise answers: math-verify has no parser for `cases`; rows compared normalised
        if predicted is None:
            return False, NO_ANSWER, None, _shorten(sorted(gold_rows))
        rows = cases_rows(predicted)
        return rows == gold_rows, None, None if rows is None else _shorten(sorted(rows)), _shorten(sorted(gold_rows))
    if predicted is None:
        return _ToMathVerify(None, NO_ANSWER)
    problem = precheck(predicted)
    if problem is not None:
        return _ToMathVerify(None, problem)
    number, gold_number = plain_number(predicted), plain_number(gold)
    if kind in ("number", "math") and number is not None and gold_number is not None and "." not in gold_number:
        return same_number(number, gold_number), None, number, gold_number  # a plain number for an integer gold
    return _ToMathVerify(predicted)
