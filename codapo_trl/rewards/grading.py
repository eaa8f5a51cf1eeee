"""Reward functions for CoDaPO training, and the answer grader shared with evaluation.

The paper's reward is binary accuracy judged by math-verify equivalence, with no format reward. Three rules on top
of that keep the reward honest and training alive:

1. **Only an anchored answer is paid.** The prediction is the content of the last brace-matched `\\boxed{...}`
   (or `\\fbox{...}`), otherwise the text after the last explicit final-answer phrase ("the answer is ...",
   "Final answer: ...", "#### ..."). A bare expression somewhere in the text earns 0: with math-verify's default
   extraction a model learned to answer "What is 5 + 2?" with "5 + 2 =", which parses to 7.
2. **Typed questions.** An optional `answer_type` column per row: `"math"` (default, math-verify equivalence),
   `"number"` (the answer must be a numeric literal such as `7`, `-3`, `2.5` or `1,000`, so `\\boxed{5+2}` earns 0
   even though it equals 7) or `"choice"` (a letter A-J, compared case-insensitively with the gold letter).
3. **Bounded time, no crash.** math-verify runs in worker processes (`codapo_trl.rewards.deadline_pool`) with its own
   signal-based timeouts disabled; each answer gets about 2 s, after which the worker is killed and replaced and
   the answer scores 0. Cheap checks in the calling process reject absurd answers (huge power towers, deep nesting,
   very long answers) before they reach SymPy. A gold answer that cannot be parsed gives `None` (TRL ignores it),
   never 1.0.

Grader settings come from environment variables read when the worker pool first starts, or from
`configure_grader`: `CODAPO_GRADER_WORKERS` (worker processes, default `min(4, cpu_count)`; `0` grades in the calling
process with no time bound, for debugging only), `CODAPO_GRADER_TIMEOUT` (seconds per answer, default 2) and
`CODAPO_GRADER_MEMORY_MB` (address-space limit per worker, default 2048; 0 for none).
"""

from __future__ import annotations

import functools
import importlib
import logging
import math
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from codapo_trl.answers import ANSWER_TYPES, braced_group, completion_text, contains_box, last_boxed
from codapo_trl.rewards.deadline_pool import DeadlineProcessPool, TaskOutcome


logger = logging.getLogger(__name__)

__all__ = [
    "REWARD_FUNCS",
    "GradeResult",
    "check_reward_columns",
    "configure_grader",
    "extract_final_answer",
    "get_reward_funcs",
    "grade_answers",
    "math_accuracy_reward",
    "restates_question",
]

# Limits of the cheap checks done before anything reaches math-verify.
_MAX_SCAN_CHARS = 32_768  # only the tail of a completion can hold its final answer
_MAX_ANSWER_CHARS = 1_000  # longer "answers" are not final answers
_MAX_NESTING = 40  # depth of {}, () and [] together; real answers stay below 10
_MAX_POWER_TOWER = 2  # a^{b^{c}} and deeper are rejected
_MAX_LITERAL_DIGITS = 10_000  # integer powers like 2^{100000} with more digits than this are rejected

# Reasons recorded in `GradeResult.reason`.
NO_ANSWER = "no final answer"
NOT_A_NUMBER = "not a numeric literal"
NOT_A_CHOICE = "not a choice letter"
UNPARSEABLE_ANSWER = "answer not parseable"
GOLD_MISSING = "gold missing"
GOLD_NOT_MATH = "gold is not a math answer"
GOLD_UNPARSEABLE = "gold not parseable"
GOLD_NOT_A_CHOICE = "gold is not a choice letter"
TIMED_OUT = "grading timed out"
GOLD_TIMED_OUT = "gold parsing timed out"
RESTATES_QUESTION = "restates the question"
CRASHED = "grader crashed"
UNAVAILABLE = "grader unavailable"


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
# Anchored extraction (pure Python, linear in the text: runs in the calling process)
# ----------------------------------------------------------------------------------------------------------------

_PHRASE_RE = re.compile(
    r"\banswer\b\s*\**\s*(?::|\bis\b|=)"  # "answer: x", "Answer:** x", "the answer is x", "final answer = x"
    r"|\banswer\s+(?:to|for)\b[^\n.:$]{1,40}?\bis\b"  # "the answer to this question is x"
    r"|####",  # GSM8K style
    re.IGNORECASE,
)
_FRAGMENT_END_RE = re.compile(
    r"\n|;|\.(?=\s|$)|,?\s+(?:because|since|so|which|where|therefore|thus|hence|as)\b|\s+I hope\b", re.IGNORECASE
)
_MATH_DELIMITERS = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))


def _leading_math_span(text: str) -> str | None:
    """Content of the `$...$`, `$$...$$`, `\\(...\\)` or `\\[...\\]` span that `text` starts with, if it is closed.
    Inline spans do not cross lines."""
    for opening, closing in _MATH_DELIMITERS:
        if text.startswith(opening):
            end = text.find(closing, len(opening))
            if end == -1 or (opening in ("$", "\\(") and "\n" in text[len(opening) : end]):
                return None
            return text[len(opening) : end].strip()
    return None


def _strip_math_delimiters(fragment: str) -> str:
    """`$x$` -> `x` when one math span is the whole fragment; anything else (`$x$ and $y$`) is left as it is."""
    fragment = fragment.strip()
    for opening, closing in _MATH_DELIMITERS:
        if fragment.startswith(opening) and fragment.endswith(closing) and len(fragment) > len(opening + closing):
            inner = fragment[len(opening) : -len(closing)]
            return fragment if closing in inner else inner.strip()
    return fragment


def _after_last_phrase(text: str) -> str | None:
    match = None
    for match in _PHRASE_RE.finditer(text):  # noqa: B007 - we want the last one
        pass
    if match is None:
        return None
    rest = text[match.end() :].lstrip(" \t\r\n*:")  # "Final Answer:\n\n$$7$$" is common
    span = _leading_math_span(rest)
    if span is not None:
        return span.strip(" *") or None
    end = _FRAGMENT_END_RE.search(rest)
    fragment = rest[: end.start()] if end else rest
    fragment = _strip_math_delimiters(fragment.strip(" \t*"))
    if fragment.count("$") == 1:  # a currency sign, not a math delimiter
        fragment = fragment.replace("$", "")
    return fragment.strip(" .*") or None


def extract_final_answer(text: str | None) -> str | None:
    """The anchored final answer of a model output, or `None` if it states none.

    The content of the last `\\boxed{...}` / `\\fbox{...}` (braces matched, escaped braces skipped) wins; otherwise
    the text after the last final-answer phrase ("the answer is ...", "Final answer: ...", "#### ...") up to the end
    of that sentence or line, with `$...$`, `\\(...\\)` or `\\[...\\]` delimiters removed. A bare expression is not an
    answer. Only the last 32 768 characters are searched. An unclosed last box gives `None` (a truncated answer).

    Args:
        text (`str` or `None`): The model output.

    Returns:
        `str` or `None`: The answer text, stripped, or `None`.

    Example:
        ```python
        >>> extract_final_answer(r"First \\boxed{3}, then $\\boxed{\\frac{1}{2}}$.")
        '\\\\frac{1}{2}'
        >>> extract_final_answer("So the answer is 42.")
        '42'
        >>> extract_final_answer("5 + 2 =") is None
        True
        ```
    """
    if not text:
        return None
    text = text[-_MAX_SCAN_CHARS:]
    if contains_box(text):
        return last_boxed(text)
    return _after_last_phrase(text)


def _extract_gold(gold: str) -> str | None:
    """A gold answer: the last box of a full solution, else the part after `####`, else the text itself."""
    gold = gold[-_MAX_SCAN_CHARS:]
    if contains_box(gold):
        return last_boxed(gold)
    if "####" in gold:
        gold = gold.rsplit("####", 1)[1]
    return _strip_math_delimiters(gold).rstrip(" .") or None


# ----------------------------------------------------------------------------------------------------------------
# Cheap checks and answer types
# ----------------------------------------------------------------------------------------------------------------

_LITERAL_POWER_RE = re.compile(r"(\d+)\s*(?:\^|\*\*)\s*")
_INTEGER_RE = re.compile(r"\d+")


def _nesting_depth(text: str) -> int:
    depth = deepest = 0
    for char in text:
        if char in "{([":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "})]" and depth:
            depth -= 1
    return deepest


def _power_tower_height(text: str) -> int:
    """How many `^` are stacked inside each other's exponents, e.g. 3 for `9^{9^{9^9}}`."""
    text = text.replace("**", "^")
    levels = [0]  # exponent level of each open group
    exponent_next = False
    highest = 0
    for char in text:
        if char == "^":
            highest = max(highest, levels[-1] + 1)
            exponent_next = True
        elif char in "{(":
            levels.append(levels[-1] + 1 if exponent_next else levels[-1])
            exponent_next = False
        elif char in "})":
            if len(levels) > 1:
                levels.pop()
        elif not char.isspace():
            exponent_next = False
    return highest


def _exponent_operand(text: str, start: int) -> str | None:
    """The exponent starting at `start` (a braced group or a run of digits), including its braces."""
    if text[start : start + 1] == "{":
        group = braced_group(text, start)
        return None if group is None else "{" + group + "}"
    match = _INTEGER_RE.match(text, start)
    return match.group() if match else None


def _int_log10(digits: str) -> float:
    digits = digits.lstrip("0")
    if not digits:
        return -math.inf
    head = digits[:15]
    return math.log10(int(head)) + len(digits) - len(head)


def _literal_log10(text: str) -> float | None:
    """log10 of an integer literal or of a tower of integer literals (`9^{9^9}`); `None` for anything else."""
    text = text.strip()
    while text.startswith("{") and braced_group(text, 0) == text[1:-1]:
        text = text[1:-1].strip()
    if _INTEGER_RE.fullmatch(text):
        return _int_log10(text)
    match = _LITERAL_POWER_RE.match(text)
    exponent = _exponent_operand(text, match.end()) if match else None
    if exponent is None or match.end() + len(exponent) != len(text):
        return None
    exponent_log10 = _literal_log10(exponent)
    if exponent_log10 is None:
        return None
    return _power_log10(match.group(1), exponent_log10)


def _power_log10(base: str, exponent_log10: float) -> float:
    """log10 of `base ** exponent`, given log10 of the exponent; inf when it is absurdly large."""
    base_log10 = _int_log10(base)
    if base_log10 <= 0:  # 0 or 1
        return 0.0
    if exponent_log10 > 300:
        return math.inf
    return base_log10 * 10**exponent_log10


def _precheck(answer: str) -> str | None:
    """Why `answer` must not reach SymPy (too long, nested too deeply, astronomically large), or `None`."""
    if len(answer) > _MAX_ANSWER_CHARS:
        return "answer too long"
    if _nesting_depth(answer) > _MAX_NESTING:
        return "answer nested too deeply"
    if _power_tower_height(answer) > _MAX_POWER_TOWER:
        return "power tower too high"
    for match in _LITERAL_POWER_RE.finditer(answer):
        exponent = _exponent_operand(answer, match.end())
        exponent_log10 = _literal_log10(exponent) if exponent is not None else None
        if exponent_log10 is not None and _power_log10(match.group(1), exponent_log10) > _MAX_LITERAL_DIGITS:
            return "number too large"
    return None


_TEXT_COMMAND_RE = re.compile(r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")
_NUMBER_RE = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+")
_TRAILING_WORDS_RE = re.compile(r"(?:\s+[A-Za-z]+\.?)+$")  # units: "7 apples", "7 \text{ cm}"
# Words that may appear bare in a math answer; any other word of 3+ letters makes a gold answer look like prose.
_MATH_WORDS = frozenset(
    {
        *("sin", "cos", "tan", "cot", "sec", "csc", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh"),
        *("log", "exp", "sqrt", "max", "min", "gcd", "lcm", "mod", "det", "inf", "infty", "infinity", "deg"),
        *("degree", "degrees", "undefined", "dne", "none", "and", "inch", "inches", "foot", "feet", "yard", "yards"),
        *("mile", "miles", "meter", "meters", "metre", "metres", "unit", "units", "square", "cubic", "hour", "hours"),
        *("minute", "minutes", "second", "seconds", "day", "days", "week", "weeks", "year", "years", "dollar"),
        *("dollars", "cent", "cents", "percent"),
    }
)


def _unwrap_text(answer: str) -> str:
    return _TEXT_COMMAND_RE.sub(r"\1", answer)


def _numeric_literal(answer: str) -> str | None:
    """`answer` as a plain decimal number (`"1,000"` -> `"1000"`, `"x = 7"` -> `"7"`, `"50\\%"` kept as a
    percentage), or `None` if it is not a single numeric literal (`"5+2"`, `"\\frac{1}{2}"`, `"2^3"`)."""
    text = answer
    if "=" in text and "," not in text:
        text = text.rsplit("=", 1)[1]
    text = _unwrap_text(text)
    for old, new in (("\\!", ""), ("\\,", ""), ("\\;", ""), ("\\ ", " "), ("{,}", ","), ("\\$", ""), ("$", "")):
        text = text.replace(old, new)
    text = text.replace("\u2212", "-").strip()
    percent = text.endswith("%")
    text = text.rstrip("%").rstrip("\\").strip()
    text = _TRAILING_WORDS_RE.sub("", text).strip().rstrip(".")
    if not _NUMBER_RE.fullmatch(text):
        return None
    text = text.replace(",", "").lstrip("+")
    return text + "\\%" if percent else text


def _choice_letter(answer: str, strict: bool = True) -> str | None:
    """The option letter A-J in `answer` (`"B"`, `"(b)"`, `"\\text{(B)}"`, `"B) 42"`), upper-cased, or `None`.

    A lower-case letter only counts when it stands alone, so "a prime number" is not option A. With
    `strict=False` (gold answers) a lower-case letter followed by text is accepted too.
    """
    text = _unwrap_text(answer).replace("$", "").replace("*", "").strip()
    match = re.fullmatch(r"[(\[]?\s*([A-Ja-j])\s*[)\]]?\s*\.?", text)
    if match is None:
        letters = "A-Ja-j" if not strict else "A-J"
        match = re.match(rf"[(\[]?\s*([{letters}])\s*(?:[)\].:]|$)(?:\s|$)", text)
    return match.group(1).upper() if match else None


_ENVIRONMENT_RE = re.compile(r"\\(?:begin|end)\s*\{[A-Za-z*]+\}")


def _looks_like_prose(gold: str) -> bool:
    """True for a gold answer made of words ("hello world") rather than math; `\\text{...}` groups and environment
    names (`\\begin{pmatrix}`, `\\begin{cases}`) are fine."""
    text = _ENVIRONMENT_RE.sub(" ", gold)
    text = _TEXT_COMMAND_RE.sub(" ", text)
    text = re.sub(r"\\[A-Za-z]+", " ", text)
    words = [word for word in re.findall(r"[A-Za-z]{3,}", text) if word.lower() not in _MATH_WORDS]
    return bool(words) and (len(words) >= 2 or not re.search(r"\d", text))


_NORMALISE = (
    ("\\dfrac", "\\frac"),
    ("\\tfrac", "\\frac"),
    ("\\dbinom", "\\binom"),
    ("\\tbinom", "\\binom"),
    ("\\displaystyle", ""),
    ("\\left", ""),
    ("\\right", ""),
    ("\\!", ""),
    ("\\,", ""),
    ("\\;", ""),
    ("\\:", ""),
    ("\\ ", " "),
    ("\\cdot", "*"),
    ("\\times", "*"),
    ("\u00d7", "*"),
    ("\u00b7", "*"),
    ("\\div", "/"),
    ("\u00f7", "/"),
    ("\u2212", "-"),
    ("{,}", ","),
    ("$", " "),
    ("\\(", " "),
    ("\\)", " "),
    ("\\[", " "),
    ("\\]", " "),
)
_SIMPLE_FRAC_RE = re.compile(r"\\frac\{(\w+)\}\{(\w+)\}")
_ATOM_RE = re.compile(r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)|[-+]?[A-Za-z]|[-+]?\\[A-Za-z]+")


def _math_normalise(text: str) -> str:
    """Spacing- and notation-insensitive form of math text (`\\dfrac{1}{2}` -> `1/2`, `7 \\times 3` -> `7*3`), used
    to find an answer inside its question. Spaces are kept only between two word characters."""
    for old, new in _NORMALISE:
        text = text.replace(old, new)
    text = _unwrap_text(text)
    text = _SIMPLE_FRAC_RE.sub(r"\1/\2", text)
    text = re.sub(r"\s+", " ", text)
    text = re.sub(r"\s*([^\w\s])\s*", r"\1", text)
    return text.strip().rstrip(".")


def restates_question(predicted: str | None, question: str | None, gold: str | None = None) -> bool:
    """Whether `predicted` is an unevaluated expression copied from the question (`\\dbinom{8}{4}` for "Compute
    $\\dbinom{8}{4}$", `12 + 7` for "What is 12 + 7?") rather than an answer. A number, a single symbol and any
    form of the gold answer itself (up to spacing and notation) are never restatements.

    Example:
        ```python
        >>> restates_question("12 + 7", "What is 12 + 7?", "19")
        True
        >>> restates_question("19", "What is 12 + 7? Hint: 19 is prime.", "19")
        False
        ```
    """
    if not predicted or not question:
        return False
    answer = _math_normalise(predicted)
    if not answer or _ATOM_RE.fullmatch(answer):
        return False
    if gold is not None and answer == _math_normalise(gold):
        return False
    pattern = re.escape(answer)
    if re.match(r"[\w.]", answer):
        pattern = r"(?<![\w.])" + pattern
    if re.search(r"\w$", answer):
        pattern += r"(?!\w|\.\d)"
    return re.search(pattern, _math_normalise(question)) is not None


_CASES_RE = re.compile(r"\\begin\s*\{cases\}(.*?)\\end\s*\{cases\}", re.DOTALL)


def _cases_rows(text: str) -> frozenset[tuple[str, ...]] | None:
    """The rows of a `cases` environment as normalised `(value, condition)` tuples, or `None` if there is none."""
    match = _CASES_RE.search(text)
    if match is None:
        return None
    rows = []
    for row in re.split(r"\\\\", match.group(1)):
        if not row.strip():
            continue
        cells = []
        for cell in row.split("&"):
            cell = re.sub(r"\\(?:text|mbox|textrm)\s*\{\s*(?:if|for|when|otherwise)?\s*\}", "", cell)
            cell = re.sub(r"\b(?:if|for|when)\b", "", cell)
            cell = cell.replace("\\leq", "\\le").replace("\\geq", "\\ge").replace("\\quad", "").replace("\\qquad", "")
            cells.append(_math_normalise(cell).strip(",") or "")
        rows.append(tuple(cells))
    return frozenset(rows)


def _same_number(a: str, b: str) -> bool:
    try:
        return Decimal(a) == Decimal(b)
    except InvalidOperation:
        return False


# ----------------------------------------------------------------------------------------------------------------
# Worker side: math-verify, called with its signal timeouts disabled (the pool enforces the bound)
# ----------------------------------------------------------------------------------------------------------------


def _init_math_worker() -> None:
    """Import math-verify and warm up its parser, once per worker, before the worker reports ready."""
    # Timeouts are disabled on purpose (the pool enforces them); silence math-verify's warning about it.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    _grade_pair((r"\frac{1}{2}", "0.5"))


@functools.cache
def _latex_extraction_config() -> Any:
    from math_verify import LatexExtractionConfig

    return LatexExtractionConfig(boxed_match_priority=0, try_extract_without_anchor=False)


@functools.lru_cache(maxsize=4096)
def _parse_answer(answer: str) -> tuple:
    from math_verify import parse

    return tuple(
        parse(
            "\\boxed{" + answer + "}",
            extraction_config=[_latex_extraction_config()],
            fallback_mode="no_fallback",
            parsing_timeout=None,
        )
    )


def _shorten(value: Any, limit: int = 200) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _grade_pair(payload: tuple[str | None, str]) -> tuple[bool | None, str | None, str | None, str | None]:
    """Grade one `(predicted, gold)` pair of already extracted answers with math-verify.

    Returns `(correct, reason, predicted_parsed, gold_parsed)`; `correct` is `None` when the gold cannot be parsed.
    A `None` prediction only checks the gold (the result is then `False` if the gold parses).
    """
    from math_verify import verify

    predicted, gold = payload
    gold_parsed = _parse_answer(gold)
    if not gold_parsed:
        return None, GOLD_UNPARSEABLE, None, None
    gold_text = _shorten(gold_parsed[0])
    if predicted is None:
        return False, None, None, gold_text
    predicted_parsed = _parse_answer(predicted)
    if not predicted_parsed:
        return False, UNPARSEABLE_ANSWER, None, gold_text
    correct = verify(list(gold_parsed), list(predicted_parsed), timeout_seconds=None)
    return bool(correct), None, _shorten(predicted_parsed[0]), gold_text


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


_SETTINGS_LOCK = threading.Lock()
_settings: dict[str, float] | None = None
_pool: DeadlineProcessPool | None = None
_CACHE_SIZE = 16_384  # verdicts by (prediction, gold); keys are at most ~1 kB each
_cache: OrderedDict[tuple[str | None, str], tuple] = OrderedDict()
_gold_cache: OrderedDict[str, tuple] = OrderedDict()  # gold -> its verdict with no prediction (see _check_golds)
_cache_lock = threading.Lock()


def configure_grader(
    num_workers: int | None = None, timeout: float | None = None, memory_limit_mb: int | None = None
) -> None:
    """Change the grader's settings; running workers are stopped and new ones start on the next call.

    Arguments left as `None` keep their current value (initially from the environment variables described in the
    module docstring).

    Args:
        num_workers (`int`, *optional*):
            Worker processes that grade in parallel. `0` grades in the calling process without any time bound
            (debugging only).
        timeout (`float`, *optional*):
            Seconds of grading allowed per answer.
        memory_limit_mb (`int`, *optional*):
            Address-space limit of each worker in MiB; `0` for none.

    Example:
        ```python
        >>> configure_grader(num_workers=2, timeout=2.0)
        ```
    """
    global _pool, _settings
    with _SETTINGS_LOCK:
        settings = dict(_current_settings_locked())
        for key, value in (("workers", num_workers), ("timeout", timeout), ("memory_mb", memory_limit_mb)):
            if value is not None:
                settings[key] = value
        if settings["workers"] < 0 or settings["timeout"] <= 0:
            raise ValueError(f"Invalid grader settings: {settings}")
        old_pool, _pool, _settings = _pool, None, settings
    if old_pool is not None:
        old_pool.shutdown()


def _current_settings_locked() -> dict[str, float]:
    global _settings
    if _settings is None:
        _settings = {
            "workers": int(_env_number("CODAPO_GRADER_WORKERS", min(4, os.cpu_count() or 1), int)),
            "timeout": _env_number("CODAPO_GRADER_TIMEOUT", 2.0, float),
            "memory_mb": int(_env_number("CODAPO_GRADER_MEMORY_MB", 2048, int)),
        }
    return _settings


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
                item_timeout=float(settings["timeout"]),
                memory_limit_mb=int(settings["memory_mb"]) or None,
            )
        return _pool


def _map_pairs(pairs: list[tuple[str | None, str]]) -> list[TaskOutcome]:
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
        for gold, outcome in zip(todo, _map_pairs([(None, g) for g in todo])):
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


def _run_math_verify(pairs: list[tuple[str | None, str]]) -> list[tuple]:
    """Grade `(predicted, gold)` pairs, through the caches and the worker pool. Golds are checked first, so that an
    unusable gold makes its items ungraded (None) instead of timing out on every prediction."""
    results: list[tuple | None] = [None] * len(pairs)
    todo: dict[tuple[str | None, str], list[int]] = {}
    gold_verdicts = _check_golds({gold for _, gold in pairs})
    with _cache_lock:
        for index, pair in enumerate(pairs):
            gold_verdict = gold_verdicts[pair[1]]
            if gold_verdict[0] is None or pair[0] is None:
                results[index] = gold_verdict
            elif pair in _cache:
                _cache.move_to_end(pair)
                results[index] = _cache[pair]
            else:
                todo.setdefault(pair, []).append(index)
    if not todo:
        return results  # type: ignore[return-value]
    unique = list(todo)
    outcomes = _map_pairs(unique)
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
            _warn_once("grader-error", "math-verify raised on an answer (scored 0.0): %s", outcome.error)
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
    questions: Sequence[str | None] | None = None,
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
            The questions (or prompts): under `"math"`, an answer that is an unevaluated expression copied from its
            question scores 0 unless it is a form of the gold answer (see `restates_question`).

    Returns:
        `list[GradeResult]`: One result per prediction, in order. Never raises for bad inputs; grading of each
        answer is bounded in time (a timeout or a crashed worker gives `correct=False` with a reason).

    Example:
        ```python
        >>> [r.correct for r in grade_answers([r"so \\boxed{0.5}", "5 + 2 =", r"\\boxed{5+2}"], ["1/2", "7", "7"],
        ...                                   ["math", "math", "number"])]
        [True, False, False]
        ```
    """
    if len(predictions) != len(golds):
        raise ValueError(f"Got {len(predictions)} predictions but {len(golds)} gold answers")
    if answer_types is None:
        answer_types = ["math"] * len(predictions)
    elif len(answer_types) != len(predictions):
        raise ValueError(f"Got {len(predictions)} predictions but {len(answer_types)} answer types")
    if questions is None:
        questions = [None] * len(predictions)
    elif len(questions) != len(predictions):
        raise ValueError(f"Got {len(predictions)} predictions but {len(questions)} questions")

    results: list[GradeResult | None] = [None] * len(predictions)
    # index, extracted prediction, gold, what math-verify gets (None: only check the gold), reason already known
    pending: list[tuple[int, str | None, str, str | None, str | None]] = []
    for index, (prediction, gold, answer_type, question) in enumerate(
        zip(predictions, golds, answer_types, questions)
    ):
        predicted = extract_final_answer(prediction if isinstance(prediction, str) else None)
        gold_answer = _extract_gold(gold) if isinstance(gold, str) else None
        verdict = _precheck_item(
            _normalise_type(answer_type), predicted, gold_answer, question if isinstance(question, str) else None
        )
        if isinstance(verdict, _ToMathVerify):
            pending.append((index, predicted, gold_answer, verdict.predicted, verdict.reason))  # type: ignore[arg-type]
        else:
            correct, reason, predicted_parsed, gold_parsed = verdict
            results[index] = GradeResult(correct, predicted, gold_answer, reason, predicted_parsed, gold_parsed)

    if pending:
        verdicts = _run_math_verify([(sent, gold_answer) for _, _, gold_answer, sent, _ in pending])
        for (index, predicted, gold_answer, _, known_reason), verdict in zip(pending, verdicts):
            correct, reason, predicted_parsed, gold_parsed = verdict
            if known_reason is not None and correct is not None:  # the gold is fine; the prediction was not
                correct, reason = False, known_reason
            results[index] = GradeResult(correct, predicted, gold_answer, reason, predicted_parsed, gold_parsed)
    return results  # type: ignore[return-value]


@dataclass(frozen=True)
class _ToMathVerify:
    """What `_precheck_item` hands to math-verify: a prediction, or `None` with the reason it already failed (the
    gold must still be parsed, since an unusable gold makes the item ungraded whatever the prediction)."""

    predicted: str | None
    reason: str | None = None


def _precheck_item(
    kind: str, predicted: str | None, gold: str | None, question: str | None = None
) -> tuple | _ToMathVerify:
    """Everything decided without math-verify: a final `(correct, reason, predicted_parsed, gold_parsed)` verdict,
    or what to hand to math-verify."""
    if gold is None:
        return None, GOLD_MISSING, None, None
    if kind == "choice":
        gold_letter = _choice_letter(gold, strict=False)
        if gold_letter is None:
            return None, GOLD_NOT_A_CHOICE, None, None
        if predicted is None:
            return False, NO_ANSWER, None, gold_letter
        letter = _choice_letter(predicted)
        if letter is None:
            return False, NOT_A_CHOICE, None, gold_letter
        return letter == gold_letter, None, letter, gold_letter
    gold_problem = _precheck(gold)
    if gold_problem is not None:
        return None, f"gold rejected: {gold_problem}", None, None
    if _looks_like_prose(gold):
        return None, GOLD_NOT_MATH, None, None
    gold_rows = _cases_rows(gold)
    if gold_rows is not None:  # piecewise answers: math-verify has no parser for `cases`; rows compared normalised
        if predicted is None:
            return False, NO_ANSWER, None, _shorten(sorted(gold_rows))
        rows = _cases_rows(predicted)
        return rows == gold_rows, None, None if rows is None else _shorten(sorted(rows)), _shorten(sorted(gold_rows))
    if predicted is None:
        return _ToMathVerify(None, NO_ANSWER)
    problem = _precheck(predicted)
    if problem is not None:
        return _ToMathVerify(None, problem)
    if kind == "math" and restates_question(predicted, question, gold):
        return _ToMathVerify(None, RESTATES_QUESTION)
    if kind == "number":
        number = _numeric_literal(predicted)
        if number is None:
            return _ToMathVerify(None, NOT_A_NUMBER)
        gold_number = _numeric_literal(gold)
        if gold_number is not None and _same_number(number, gold_number):
            return True, None, number, gold_number
        return _ToMathVerify(number)
    return _ToMathVerify(predicted)


def _question_texts(kwargs: dict[str, Any], n: int) -> list[str | None] | None:
    """The questions of a batch, for the restatement check: the dataset's `question` column if TRL passed it,
    else the text of the prompts' user messages."""
    questions = kwargs.get("question")
    if isinstance(questions, (list, tuple)) and len(questions) == n:
        return [q if isinstance(q, str) else None for q in questions]
    prompts = kwargs.get("prompts")
    if not isinstance(prompts, (list, tuple)) or len(prompts) != n:
        return None
    out: list[str | None] = []
    for prompt in prompts:
        if isinstance(prompt, str):
            out.append(prompt)
        elif isinstance(prompt, (list, tuple)):
            out.append(
                "\n".join(str(m.get("content", "")) for m in prompt if isinstance(m, dict) and m.get("role") == "user")
            )
        else:
            out.append(None)
    return out


def math_accuracy_reward(completions: list[Any], answer: list[str | None], **kwargs: Any) -> list[float | None]:
    """Binary accuracy reward: 1.0 if the completion's anchored final answer equals the gold answer, else 0.0.

    A TRL reward function (pass it in `reward_funcs`, or by name `"math_accuracy"` via `get_reward_funcs`). Grading
    follows `grade_answers`: the answer must be boxed or follow a final-answer phrase, the optional `answer_type`
    column selects `"math"`, `"number"` or `"choice"` grading, and each answer is graded within about 2 s (timeouts
    score 0.0). A gold answer that cannot be parsed gives `None`, which TRL leaves out of the mean.

    Args:
        completions (`list[str]` or `list[list[dict]]`):
            Completions, as strings or conversational messages (the assistant message's content is graded).
        answer (`list[str]`):
            The dataset's gold-answer column; a full solution is reduced to its last `\\boxed{}`.
        **kwargs:
            Other columns from TRL. Used: `answer_type` (`list[str]`, default `"math"` for all), `question` or else
            `prompts` (an answer copied from its question scores 0, see `restates_question`), `log_extra` (logs
            `gold_parsed` and `answer_parsed` columns to the completions table) and `log_metric` (logs
            `math_accuracy/no_answer_frac` and `math_accuracy/ungraded_frac`).

    Returns:
        `list[float | None]`: One reward per completion.

    Example:
        ```python
        >>> completions = [[{"role": "assistant", "content": r"2 + 5 = 7, so \\boxed{7}"}], [{"role": "assistant",
        ...                 "content": "5 + 2 ="}]]
        >>> math_accuracy_reward(completions, answer=["7", "7"])
        [1.0, 0.0]
        ```
    """
    if len(answer) != len(completions):
        raise ValueError(f"Got {len(completions)} completions but {len(answer)} gold answers")
    texts = [completion_text(completion) for completion in completions]
    answer_types = kwargs.get("answer_type")
    results = grade_answers(texts, answer, answer_types, _question_texts(kwargs, len(completions)))

    log_extra = kwargs.get("log_extra")
    if callable(log_extra):
        log_extra("gold_parsed", [r.gold_parsed or r.gold or "" for r in results])
        log_extra("answer_parsed", [r.predicted_parsed or r.predicted or "" for r in results])
    log_metric = kwargs.get("log_metric")
    if callable(log_metric) and results:
        log_metric("math_accuracy/no_answer_frac", sum(r.reason == NO_ANSWER for r in results) / len(results))
        log_metric(
            "math_accuracy/ungraded_frac",
            sum(r.correct is None or r.reason in (TIMED_OUT, CRASHED) for r in results) / len(results),
        )
    return [r.reward for r in results]


# ----------------------------------------------------------------------------------------------------------------
# Registry
# ----------------------------------------------------------------------------------------------------------------


def code_execution_reward(completions, tests, **kwargs) -> list[float | None]:
    """Pass rate of the completion's last Python code block on the problem's tests, run in the sandbox (see
    `codapo_trl.rewards.code`); imported on first use so that maths training never loads the sandbox."""
    from codapo_trl.rewards.code import code_execution_reward as reward

    return reward(completions, tests, **kwargs)


code_execution_reward.required_columns = ("tests",)  # type: ignore[attr-defined]
math_accuracy_reward.required_columns = ("answer",)  # type: ignore[attr-defined]


def check_reward_columns(reward_funcs: Any, train_dataset: Any, eval_dataset: Any = None) -> None:
    """Fail early when a dataset lacks a column one of the reward functions needs.

    Reward functions declare the dataset columns they read in a `required_columns` attribute (a tuple of names,
    e.g. `("answer",)` for `math_accuracy_reward`); functions without it, and reward models, are not checked.
    Called by the training recipes after loading the data and by the trainers at construction, so that a missing
    column stops the job before the first generation instead of inside the first reward call.

    Args:
        reward_funcs: one reward function or a list of them (as given to the trainer).
        train_dataset: the training dataset (`datasets.Dataset` / `IterableDataset`, or anything with
            `column_names`); `None` is not checked.
        eval_dataset: the evaluation dataset, or a dict of them; `None` is not checked.

    Raises:
        `ValueError`: naming the reward function, the missing column(s), the dataset and its columns.

    Example:
        ```python
        >>> from datasets import Dataset
        >>> check_reward_columns([math_accuracy_reward], Dataset.from_dict({"prompt": ["1+1?"], "solution": ["2"]}))
        Traceback (most recent call last):
        ...
        ValueError: The reward function 'math_accuracy_reward' reads the dataset column(s) ['answer'], ...
        ```
    """
    funcs = reward_funcs if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
    datasets_to_check: list[tuple[str, Any]] = [("train_dataset", train_dataset)]
    if isinstance(eval_dataset, dict):
        datasets_to_check += [(f"eval_dataset[{k!r}]", v) for k, v in eval_dataset.items()]
    else:
        datasets_to_check.append(("eval_dataset", eval_dataset))
    for label, dataset in datasets_to_check:
        columns = getattr(dataset, "column_names", None)
        if dataset is None or columns is None:  # streaming datasets may not know their columns
            continue
        for func in funcs:
            needed = getattr(func, "required_columns", ())
            missing = [c for c in needed if c not in columns]
            if missing:
                name = getattr(func, "__name__", type(func).__name__)
                raise ValueError(
                    f"The reward function {name!r} reads the dataset column(s) {missing}, which {label} lacks (its "
                    f"columns: {sorted(columns)}). Add or rename the column (e.g. `dataset.rename_column`), or use a "
                    "reward function that matches the data."
                )


REWARD_FUNCS: dict[str, Callable[..., list[float | None]]] = {
    "math_accuracy": math_accuracy_reward,
    "accuracy": math_accuracy_reward,
    "code_execution": code_execution_reward,
}
"""Reward functions by name, for the training script's `reward_funcs` list. A plain dict: add entries to extend."""


def get_reward_funcs(names: Sequence[str] | str) -> list[Callable[..., list[float | None]]]:
    """Look up reward functions by registry name or dotted import path.

    Args:
        names (`list[str]` or `str`):
            Names from `REWARD_FUNCS` (e.g. `"math_accuracy"`) or import paths such as `"my_pkg.rewards.my_reward"`.

    Returns:
        `list[Callable]`: The reward functions, in order.

    Raises:
        `ValueError`: For an unknown name or an import path that does not lead to a callable; the message lists the
        valid names.

    Example:
        ```python
        >>> [f.__name__ for f in get_reward_funcs(["accuracy"])]
        ['math_accuracy_reward']
        ```
    """
    if isinstance(names, str):
        names = [names]
    funcs = []
    for name in names:
        if name in REWARD_FUNCS:
            funcs.append(REWARD_FUNCS[name])
            continue
        valid = ", ".join(sorted(REWARD_FUNCS))
        hint = f"Valid names: {valid}; or give a dotted import path like 'my_package.my_module.my_reward'."
        module_name, _, attr = name.rpartition(".")
        if not module_name:
            raise ValueError(f"Unknown reward function {name!r}. {hint}")
        try:
            func = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"Could not import reward function {name!r}: {exc}. {hint}") from exc
        if not callable(func):
            raise ValueError(f"{name!r} is not callable. {hint}")
        funcs.append(func)
    return funcs
