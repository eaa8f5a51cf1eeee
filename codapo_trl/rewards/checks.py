"""Checks made on an answer before (or instead of) the judge: cheap, pure Python, in the calling process.

- **Absurd answers** (`precheck`): too long, nested too deeply, power towers, astronomically large literals never
  reach SymPy.
- **Answer types**: a `"choice"` answer is one letter A-J (`choice_letter`); a gold made of words is not a maths
  answer (`looks_like_prose`); two plain decimals are compared without parsing (`plain_number`). Whether a `"math"`
  or `"number"` answer is paid is decided by `codapo_trl.rewards.judging`.
- **Piecewise answers** (`cases_rows`): math-verify has no parser for `cases`; rows are compared normalised.
"""

from __future__ import annotations

import functools
import math
import re
from decimal import Decimal, InvalidOperation

from codapo_trl.answers import braced_group


__all__ = [
    "cases_rows",
    "choice_letter",
    "named_option",
    "same_left_side",
    "yes_no",
    "looks_like_prose",
    "plain_number",
    "precheck",
    "same_number",
]

# Limits of the cheap checks done before anything reaches math-verify.
_MAX_ANSWER_CHARS = 1_000  # longer "answers" are not final answers
_MAX_NESTING = 40  # depth of {}, () and [] together; real answers stay below 10
_MAX_POWER_TOWER = 2  # a^{b^{c}} and deeper are rejected
_MAX_LITERAL_DIGITS = 100_000  # integer powers with more digits than this are rejected (2013^{4025} has 13 299)

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


def precheck(answer: str) -> str | None:
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


_PLAIN_NUMBER_RE = re.compile(r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)")


def plain_number(answer: str) -> str | None:
    """`answer` when it is nothing but a decimal literal (`"19"`, `"-2.5"`, `"+3"`), without its `+`; else `None`.
    Two such literals are compared exactly without any parsing (`same_number`)."""
    text = answer.strip()
    return text.lstrip("+") if _PLAIN_NUMBER_RE.fullmatch(text) else None


_LABEL_RE = re.compile(r"[(\[]?\s*([A-Ja-j])\s*(?:[)\].:]|$)")
_COMMAND_RE = re.compile(r"\\[A-Za-z]+")


def _bare(answer: str) -> str:
    """An answer's text with its `\\text{}` groups unwrapped and its math delimiters and emphasis taken out."""
    return _unwrap_text(answer).replace("$", "").replace("*", "").strip()


def choice_letter(answer: str, strict: bool = True, question: str = "") -> str | None:
    """The option letter A-J that `answer` names (`"B"`, `"(b)"`, `"\\text{(B)}"`, `"(B)\\ 70"`), upper-cased, or
    `None`.

    The answer must name one option: a letter, closed by a bracket or a full stop unless it stands alone, then at
    most the option's own text as the question writes it after that letter (`"D) no horizontal asymptotes"`,
    `"C) f(5)=-5"`, `"A) 1/6"` for `\\text{A)}\\ & \\frac16`), or, where the question lists no such option, a value
    with no letter in it. Where the question lists the option, any other text after the letter names a second one
    (`"A) π/3"` when option A is `\\frac{\\pi}{6}`): no single option. `(B) or (C)`, `(A) (B) (C) (D)`, `B, C`
    and `BC` name no single option. A lower-case letter only counts when it stands alone, so "a prime number" is not
    option A. With `strict=False` (gold answers) a letter followed by any text is accepted. A letter with a value in
    other notation is compared as a value by the grader (`named_option`).

    Example:
        ```python
        >>> question = "Which is odd? \\\\text{A)}\\\\ & f(x)=x^2 & \\\\text{B)}\\\\ & f(x)=x^3"
        >>> choice_letter("B) f(x)=x^3", question=question), choice_letter("B) f(x)=x^3 or A", question=question)
        ('B', None)
        >>> choice_letter("A) f(x)=x^3", question=question), choice_letter("B) f(x)=x", question=question)
        (None, None)
        >>> listed = "(A) 60 (B) 70"
        >>> choice_letter("(B) 70"), choice_letter("(B) 71", question=listed), choice_letter("(B) 70", question=listed)
        ('B', None, 'B')

        ```
    """
    text = _OPTION_WORD_RE.sub("", _bare(answer))  # "Option C", "Choice (B)"
    match = re.fullmatch(r"[(\[]?\s*([A-Ja-j])\s*[)\]]?\s*\.?", text)
    if match is not None:
        return match.group(1).upper()
    if not strict:
        match = re.match(r"[(\[]?\s*([A-Ja-j])\s*(?:[)\].:]|$)(?:\s|$)", text)
        return match.group(1).upper() if match else None
    match = _LABEL_RE.match(text)
    if match is None or not match.group(1).isupper():
        return None
    letter, rest = match.group(1), text[match.end() :]
    if not rest.strip(" .") or _is_option_text(letter, rest, question):
        return letter
    if _lists_option(letter, question):
        return None  # a value the question's option does not write: the letter and the value name two options
    return letter if not re.search(r"[A-Za-z]", _COMMAND_RE.sub(" ", rest)) else None


# An option as a question lists it: its letter closed by a bracket or a full stop, then its text up to the next
# option, line or column (`\text{A)}\ & f(x)=3(2x-3)^2 &`, `(B) 12, (C) 13`, `C. None of these`).
_OPTION_WORD_RE = re.compile(r"^(?:option|choice)\s+(?=[(\[]?\s*[A-Ja-j]\b)", re.IGNORECASE)
# Blanks, math delimiters, alignment marks, and a command's backslash and braces (`\\cos^{2}x` is `cos^2x`): how the
# question and the answer write an option's text may differ only in these.
_OPTION_SEPARATORS_RE = re.compile(r"\\\\|&|\n|\\[ ,;:!]|\\q?quad\b|~|\$|\\[()\[\]]|\s+")


_OPTION_FRAC_RE = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_OPTION_SYMBOLS = str.maketrans({"\u03c0": "pi", "\u221a": "sqrt", "\u2212": "-", "\u2264": "leq", "\u2265": "geq"})


def _flatten_option(text: str) -> str:
    """`text` with its `\\text{}` groups unwrapped, every blank, math delimiter and alignment mark taken out, `\\frac`
    written as `/` and `π`, `√` as their names."""
    text = _OPTION_FRAC_RE.sub(r"(\1)/(\2)", _unwrap_text(text)).translate(_OPTION_SYMBOLS)
    text = _DIGIT_GAP_RE.sub("|", text)  # `1 6` and `1,6` stay two numbers, never `16`
    text = re.sub(r"\\le(?![a-z])", r"\\leq", re.sub(r"\\ge(?![a-z])", r"\\geq", text))
    flat = _OPTION_SEPARATORS_RE.sub("", text).replace("\\", "").replace("{", "").replace("}", "").rstrip(".,;")
    return _FRACTION_PART_RE.sub(lambda m: m.group(1) or m.group(2), flat)  # `(1)/(6)` is `1/6`


_DIGIT_GAP_RE = re.compile(r"(?<=\d)(?:\s+|\s*,\s*)(?=\d)")
_FRACTION_PART_RE = re.compile(r"\((\w+)\)(?=/)|(?<=/)\((\w+)\)")


def _is_option_text(letter: str, rest: str, question: str) -> bool:
    """Whether `rest` is the text the question gives option `letter`, whole: after the letter's mark, and followed
    by the next option, the end of a line or the end of the question (blanks and alignment marks not compared)."""
    written = _flatten_option(rest).replace(",", "")
    if not written or not question:
        return False
    flat = _flat_question(question)
    if re.search(r"[A-Za-z]{3}", written):  # words ("Horizontal Asymptote" for `\\text{horizontal asymptote}`)
        written, flat, letter = written.lower(), flat.lower(), letter.lower()  # case counts in `2x`, not in words
    for mark in (f"({letter})", f"{letter})", f"{letter}.", f"{letter}:"):
        start = flat.find(mark + written)
        while start != -1:
            end = start + len(mark) + len(written)
            if end == len(flat) or flat[end] in "\n;" or re.match(r"\(?[A-Ja-j][).:]", flat[end : end + 3]):
                return True
            start = flat.find(mark + written, start + 1)
    return False


@functools.lru_cache(maxsize=256)
def _flat_question(question: str) -> str:
    """The question's lines, each flattened as `_flatten_option` does, commas out; cached, as every rollout of a
    question asks for it."""
    lines = re.sub(r"\\\\|\n", "\n", _unwrap_text(question)).split("\n")
    return "\n".join(_flatten_option(line).replace(",", "") for line in lines)


_OPTION_MARK_RE = re.compile(
    r"(?:^|(?<=[\s&(]))(?:\((?P<a>[A-Ja-j])\)|(?P<b>[A-Ja-j])[).:])(?=[\s\\&$]|$)", re.MULTILINE
)
_OPTION_END_RE = re.compile(r"\\\\|\n")


@functools.lru_cache(maxsize=256)
def _listed_options(question: str) -> dict[str, str]:
    """The options a question lists, letter -> text as written (`\\text{}` unwrapped): each mark (`(B)`, `B)`, `B.`)
    after a blank, a line's start or an alignment mark, its text up to the next mark or the end of its line; only
    where two letters or more are listed. Cached per question (callers only read it)."""
    text = _unwrap_text(question)
    marks = list(_OPTION_MARK_RE.finditer(text))
    options: dict[str, str] = {}
    for mark, after in zip(marks, marks[1:] + [None]):
        body = text[mark.end() : after.start() if after is not None else len(text)]
        cut = _OPTION_END_RE.search(body)
        body = (body[: cut.start()] if cut else body).replace("&", " ").replace("\\ ", " ").strip(" \t.,;")
        options.setdefault((mark.group("a") or mark.group("b")).upper(), body)
    return options if len(options) >= 2 else {}


def _lists_option(letter: str, question: str) -> bool:
    """Whether the question lists option `letter` with its text (`_listed_options`)."""
    return bool(question) and letter in _listed_options(question)


def same_left_side(value: str, option: str) -> bool:
    """Whether a value and an option that are both relations (`f(5)=-5`) relate the same left side, as written (blanks,
    delimiters and notation as `_flatten_option` ignores them): in an option the left side is its text, not a label
    (`C) f(15) = -5` is not option `f(5)=-5`). A value that labels an option's plain value (`x = \\frac{5\\pi}{6}`)
    agrees."""
    if "=" not in value or "=" not in option:
        return True
    return _flatten_option(value.split("=", 1)[0]).lower() == _flatten_option(option.split("=", 1)[0]).lower()


def named_option(answer: str, question: str) -> tuple[str, str, str] | None:
    """`(letter, value, the option's text)` for an answer that writes a letter the question lists and a value after
    it in its own notation (`"A) -16m^4p^6/n^5"` for `\\text{A)}\\ & \\frac{-16m^4p^6}{n^5}`), to be compared with
    the option's text as values; `None` for any other answer."""
    text = _OPTION_WORD_RE.sub("", _bare(answer))
    match = _LABEL_RE.match(text)
    if match is None or not match.group(1).isupper() or not question:
        return None
    rest = text[match.end() :].strip(" .")
    option = _listed_options(question).get(match.group(1))
    if not rest or not option:
        return None
    return match.group(1), rest, option


_YES_NO_GOLD_RE = re.compile(r"(yes|no)\.?", re.IGNORECASE)
_LEADING_YES_NO_RE = re.compile(r"(yes|no)\b(?:\s*[,.;:!-]\s*|\s*$)", re.IGNORECASE)
_ANY_YES_NO_RE = re.compile(r"\b(?:yes|no)\b", re.IGNORECASE)


def yes_no(answer: str, gold: bool = False) -> str | None:
    """`"yes"` or `"no"` for a gold that is that word (`Yes.`, `\\text{No}`), or for an answer that starts with it
    and says it once (`No, the equilibrium is not stable.`: the sentence after the word explains it); `None` for
    anything else (`Yes or no`, `No. Actually yes`, `Stable`).

    Example:
        ```python
        >>> yes_no("Yes.", gold=True), yes_no("No, the equilibrium is not stable."), yes_no("No. Actually, yes.")
        ('yes', 'no', None)

        ```
    """
    text = _bare(answer)
    if gold:
        match = _YES_NO_GOLD_RE.fullmatch(text)
        return match.group(1).lower() if match else None
    match = _LEADING_YES_NO_RE.match(text)
    if match is None or _ANY_YES_NO_RE.search(text, match.end()):
        return None
    return match.group(1).lower()


_ENVIRONMENT_RE = re.compile(r"\\(?:begin|end)\s*\{[A-Za-z*]+\}")


def looks_like_prose(gold: str) -> bool:
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


def _math_normalise(text: str) -> str:
    """Spacing- and notation-insensitive form of math text (`\\dfrac{1}{2}` -> `1/2`, `7 \\times 3` -> `7*3`), used
    to compare the rows of `cases` answers. Spaces are kept only between two word characters."""
    for old, new in _NORMALISE:
        text = text.replace(old, new)
    text = _unwrap_text(text)
    text = _SIMPLE_FRAC_RE.sub(r"\1/\2", text)
    text = re.sub(r"\s+", " ", text)
    text = re.sub(r"\s*([^\w\s])\s*", r"\1", text)
    return text.strip().rstrip(".")


_CASES_RE = re.compile(r"\\begin\s*\{cases\}(.*?)\\end\s*\{cases\}", re.DOTALL)


def cases_rows(text: str) -> frozenset[tuple[str, ...]] | None:
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


def same_number(a: str, b: str) -> bool:
    try:
        return Decimal(a) == Decimal(b)
    except InvalidOperation:
        return False
