"""Anchored answer extraction: which part of a model output is its final answer (pure Python, linear in the text,
run in the calling process).

Only an anchored answer is paid: the content of the last brace-matched `\\boxed{...}` (or `\\fbox{...}`; the box rule
is `codapo_trl.answers.last_boxed`), otherwise the text after the last explicit final-answer phrase ("the answer is
...", "Final answer: ...", "#### ..."). A bare expression somewhere in the text earns 0: with math-verify's default
extraction a model learned to answer "What is 5 + 2?" with "5 + 2 =", which parses to 7. What a completion states
after its last box (`stated_after_box`) is read too, so that the grader can refuse a box the completion goes on to
contradict.
"""

from __future__ import annotations

import re

from codapo_trl.answers import contains_box, last_boxed, text_after_last_box


__all__ = ["UNDECIDABLE", "extract_final_answer", "extract_gold", "stated_after_box"]

UNDECIDABLE = "\x00undecidable"
"""What `stated_after_box` returns for a statement the grader must not try to read: a relation other than an
equality (`\\neq`, `<`), a hedge (`or 20`), a retraction (`that's wrong`), or a statement too long or too deep."""

_MAX_SCAN_CHARS = 32_768  # only the tail of a completion can hold its final answer

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
# What may stand between a box and a relation written after it: spaces, math delimiters, bold, TeX spacing, a line
# break, a stray brace ("**$\boxed{23}$** = 26", "$\boxed{23}$$\,= 26$", "\boxed{19} \\ = 20").
_GAP = r"(?:\s|\$|\\\)|\\\]|\*|\}|~|\\[,;:! ]|\\quad\b|\\qquad\b|\\\\|\\(?:text|mbox|textbf|textrm|mathrm)\s*\{)*"
# A relation that states a value: "= 26", "== 26", ":= 26", "\approx 26", "\Rightarrow 26", "\to 26".
_EQUALITY_AFTER_BOX_RE = re.compile(
    _GAP
    + r"(?:==|:=|=|\u2248|\u2192|\u21d2|\\(?:approx|Rightarrow|implies|to|rightarrow|longrightarrow|Longrightarrow"
    r"|sim|simeq|cong|doteq)(?![A-Za-z]))"
)
# A relation or connective that qualifies the box instead of stating a value: "\neq 19", "< 20", "\text{ or } 20".
_QUALIFIER_AFTER_BOX_RE = re.compile(
    _GAP + r"(?:\u2260|\u2264|\u2265|<|>|\\(?:neq?|le|ge|leq|geq|lt|gt|pm|mp|lor|vee)(?![A-Za-z])"
    r"|\\(?:text|mbox|textbf|mathrm)\s*\{\s*(?:or|and)\b|or\b)"
)
# Written against the box, it changes the value it shows: \boxed{2}^{10}, \boxed{19}_{8}, \boxed{19}\%, \boxed{1}9.
_MODIFIER_AFTER_BOX_RE = re.compile(r"\s*(?:\^|_|'|\\%|%)|\.?\d")
# After the box, phrases that state an answer, more than the extraction's: "Answers: 26", "the answer, however, is
# 26", "it should be 26", "actually 26", "i.e. 26", "the correct answer is 26".
_PHRASE_AFTER_BOX_RE = re.compile(
    r"\banswers?\b[^.\n]{0,40}?(?:\bis\b|\bare\b|\bequals\b|\bbe\b|:|=)"
    r"|\b(?:should|must|would|will|shall)\s+be\b|\bactually\b|\bi\.\s?e\.|\bcorrect\b[^.\n]{0,30}?(?:\bis\b|:)"
    r"|\bin fact\b|\brather\b|####",
    re.IGNORECASE,
)
# A retraction of the box: the completion says it is wrong.
_RETRACTION_RE = re.compile(r"\b(?:wrong|incorrect|mistaken|not (?:correct|right)|isn't (?:correct|right))\b", re.I)
_MAX_STATEMENT_CHARS = 1_000


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


def stated_after_box(text: str | None) -> list[str]:
    """The final answers a completion states after its last closed box, which `extract_final_answer` never reads.

    Read after the box: a relation written right after it (`\\boxed{23} = 26`, `== 26`, `\\approx 26`,
    `\\Rightarrow 26`, with spaces, `$`, `**`, TeX spacing or a line break between: its right-hand side up to the
    end of the sentence or line), and the text after the last answer phrase there (`The answer is 26`, `Answers: 26`,
    `the answer, however, is 26`, `it should be 26`, `actually 26`, `i.e. 26`). `UNDECIDABLE` stands for what the
    grader must refuse without reading: a qualifying relation or connective right after the box (`\\neq 19`,
    `< 20`, `\\text{ or } 20`), a mark written against the box that changes the value it shows (`\\boxed{2}^{10}`,
    `\\boxed{19}\\%`, `\\boxed{1}9`), a retraction (`that's wrong`), a statement longer than 1 000 characters.
    Anything else after the box (working, prose, a bare expression) states no answer. Like `extract_final_answer`, only the
    last 32 768 characters are searched; without a closed last box the list is empty.

    Args:
        text (`str` or `None`): The model output.

    Returns:
        `list[str]`: The stated answers, stripped, in the order above (`UNDECIDABLE` for one that must be refused);
        empty when there are none.

    Example:
        ```python
        >>> stated_after_box(r"16 + 7 = 23. \\boxed{23} = 26. The answer is 26.")
        ['26', '26']
        >>> stated_after_box(r"$\\boxed{\\frac{1}{2}}$, so the answer is $0.5$."), stated_after_box(r"\\boxed{7}. Done.")
        (['0.5'], [])
        >>> stated_after_box(r"**$\\boxed{23}$** == 26"), stated_after_box(r"\\boxed{19}. Hmm, that's wrong.") == [UNDECIDABLE]
        (['26'], True)

        ```
    """
    after = text_after_last_box(text[-_MAX_SCAN_CHARS:]) if text else None
    if not after:
        return []
    stated = []
    if _QUALIFIER_AFTER_BOX_RE.match(after) or _MODIFIER_AFTER_BOX_RE.match(after) or _RETRACTION_RE.search(after):
        return [UNDECIDABLE]
    relation = _EQUALITY_AFTER_BOX_RE.match(after)
    if relation is not None:
        rest = after[relation.end() :].lstrip(" \t")
        value = _answer_fragment(rest)
        if value is not None:
            stated.append(value)
        elif rest.strip(" \t$.*"):
            stated.append(UNDECIDABLE)
    match = None
    for match in _PHRASE_AFTER_BOX_RE.finditer(after):  # noqa: B007 - we want the last one
        pass
    if match is not None:
        phrase = _answer_fragment(after[match.end() :].lstrip(" \t\r\n*:,"))
        if phrase is not None:
            stated.append(phrase)
    return [UNDECIDABLE if len(s) > _MAX_STATEMENT_CHARS else s for s in stated]
