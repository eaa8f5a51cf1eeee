"""Anchored answer extraction: which part of a model output is its final answer (pure Python, linear in the text,
run in the calling process).

Only an anchored answer is paid: the content of the last brace-matched `\\boxed{...}` (or `\\fbox{...}`; the box rule
is `codapo_trl.answers.last_boxed`), otherwise the text after the last explicit final-answer phrase ("the answer is
...", "Final answer: ...", "#### ..."). A bare expression somewhere in the text earns 0: with math-verify's default
extraction a model learned to answer "What is 5 + 2?" with "5 + 2 =", which parses to 7. The one value read is that
answer: text after the last box is not read, except a mark written against the box that continues the value it shows
(`runs_past_box`: `\\boxed{2}^{10}`).
"""

from __future__ import annotations

import re

from codapo_trl.answers import contains_box, last_boxed, text_after_last_box


__all__ = ["extract_final_answer", "extract_gold", "runs_past_box"]

_MAX_SCAN_CHARS = 32_768  # only the tail of a completion can hold its final answer

_PHRASE_RE = re.compile(
    r"\banswer\b\s*\**\s*(?::|\bis\b|=)"  # "answer: x", "Answer:** x", "the answer is x", "final answer = x"
    r"|\banswer\s+(?:to|for)\b[^\n.:$]{1,40}?\bis\b"  # "the answer to this question is x"
    r"|\bfinal\s+answer\b(?=[\s*:]*(?:\$|\\\[|\\\())"  # a "**Final Answer**" heading over a display
    r"|####",  # GSM8K style
    re.IGNORECASE,
)
_FRAGMENT_END_RE = re.compile(
    r"\n|;|\.(?=\s|$)|,?\s+(?:because|since|so|which|where|therefore|thus|hence|as)\b|\s+I hope\b", re.IGNORECASE
)
_MATH_DELIMITERS = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))
# Written against the box, it continues the value the box shows: `\boxed{2}^{10}`, `\boxed{19}_{8}`, `\boxed{1}9`,
# `\boxed{1}.5`. A degree sign (`\boxed{60}^\circ`) is a unit, like inside the box.
_CONTINUATION_RE = re.compile(r"\s*(?:\^(?!\s*\{?\s*\\circ)|_)|\.?\d")


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
    return _answer_fragment(text[match.end() :].lstrip(" \t\r\n*:"))  # "Final Answer:\n\n$$7$$" is common


def _answer_fragment(rest: str) -> str | None:
    """The answer that `rest` starts with: a leading math span, else the text up to the end of its sentence or line."""
    span = _leading_math_span(rest)
    if span is not None:
        return span.strip(" *") or None
    end = _FRAGMENT_END_RE.search(rest)
    fragment = rest[: end.start()] if end else rest
    fragment = _strip_math_delimiters(fragment.strip(" \t*"))
    if fragment.count("$") == 1:  # a currency sign (`$19`, `\\$19`), not a math delimiter
        fragment = fragment.replace("\\$", "").replace("$", "")
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


def extract_gold(gold: str) -> str | None:
    """A gold answer: the last box of a full solution, else the part after `####`, else the text itself."""
    gold = gold[-_MAX_SCAN_CHARS:]
    if contains_box(gold):
        return last_boxed(gold)
    if "####" in gold:
        gold = gold.rsplit("####", 1)[1]
    return _strip_math_delimiters(gold).rstrip(" .") or None


def runs_past_box(text: str | None) -> bool:
    """Whether the value a completion writes runs on past its last closed box (`\\boxed{2}^{10}`, `\\boxed{19}_{8}`,
    `\\boxed{1}9`): the box then does not hold the value written, so it is not the answer read.

    Nothing else after the box is read: the grader reads one value, the box, and text after it (a remark, a unit, a
    degree sign, a restatement, an approximation such as `\\approx 2.83`) cannot change it.

    Example:
        ```python
        >>> runs_past_box(r"\\boxed{2}^{10}"), runs_past_box(r"So $\\boxed{1}9$."), runs_past_box(r"$\\boxed{60}^\\circ$")
        (True, True, False)
        >>> runs_past_box(r"\\boxed{23} = 26. The answer is 26."), runs_past_box("The answer is 7.")
        (False, False)

        ```
    """
    after = text_after_last_box(text[-_MAX_SCAN_CHARS:]) if text else None
    return bool(after) and _CONTINUATION_RE.match(after) is not None
