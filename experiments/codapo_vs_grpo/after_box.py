"""What a completion states after its last box: for analyses only. The grader does not read it (issue 32).

The grader reads one value, the last box (`codapo_trl.rewards.extraction`): text after it cannot change that value,
so the reward neither reads nor pays for it. Analyses still ask what completions write there: the CoDaPO-vs-GRPO
campaign's report counts right boxes followed by a different answer (`\\boxed{23} = 26. The answer is 26.`), which
the grader refused from issue 25 until issue 32. `stated_after_box` reads those statements and
`contradicted_after_box` grades them against the gold by value, with the same bounded grader.
"""

from __future__ import annotations

import re

from codapo_trl.answers import text_after_last_box
from codapo_trl.rewards.checks import looks_like_prose
from codapo_trl.rewards.extraction import _MAX_SCAN_CHARS, _answer_fragment


__all__ = ["UNDECIDABLE", "contradicted_after_box", "number_words", "stated_after_box"]

UNDECIDABLE = "\x00undecidable"
"""What `stated_after_box` returns for a statement that cannot be read: a relation other than an equality (`\\neq`,
`<`), a hedge (`or 20`), a retraction (`that's wrong`), or a statement too long or too deep."""

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


_UNITS = {
    w: i
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
        ]
    )
}
_TENS = {
    w: 10 * i
    for i, w in enumerate(["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"])
    if i > 1
}
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}


def number_words(text: str) -> str | None:
    """The integer that `text` spells in English words (`"twenty-six"` -> `"26"`, `"minus three"` -> `"-3"`, `"one
    hundred and five"` -> `"105"`), or `None` when it is not only number words.

    Example:
        ```python
        >>> number_words("twenty-six"), number_words("Two thousand and one."), number_words("six apples")
        ('26', '2001', None)

        ```
    """
    words = re.findall(r"[a-z]+", text.lower())
    if not words or re.sub(r"[a-z\s,.!-]", "", text.lower()):
        return None
    sign, total, current, seen = 1, 0, 0, False
    for index, word in enumerate(words):
        if word in ("minus", "negative") and index == 0:
            sign = -1
        elif word in _UNITS:
            current += _UNITS[word]
            seen = True
        elif word in _TENS:
            current += _TENS[word]
            seen = True
        elif word == "hundred" and seen:
            current *= 100
        elif word in _SCALES and seen:
            total += current * _SCALES[word]
            current = 0
        elif word != "and" or not seen:
            return None
    return str(sign * (total + current)) if seen else None


def contradicted_after_box(
    predictions: list[str | None], golds: list[str | None], answer_types: list[str | None] | None = None
) -> list[bool]:
    """For each prediction, whether its right last box is followed by a statement (`stated_after_box`) that is
    graded as a different value from the gold, or cannot be decided (unreadable, too long, timed out, a retraction);
    `False` for a wrong box or one followed by no statement. Statements are graded by value alone (as a letter for
    `choice`); number words are read as numbers (`twenty-six`); other prose states nothing.

    Example:
        ```python
        >>> contradicted_after_box([r"\\boxed{23} = 26. The answer is 26.", r"\\boxed{23}. The answer is 23."], ["23", "23"])
        [True, False]

        ```
    """
    from codapo_trl.rewards.grading import _grade_extracted, _normalise_type, grade_answers

    n = len(predictions)
    kinds = [_normalise_type(t) for t in (answer_types or [None] * n)]
    boxes = grade_answers(predictions, golds, kinds, read_after_box=False)
    out = [False] * n
    owners, statements, statement_golds, statement_kinds = [], [], [], []
    for index, (result, text) in enumerate(zip(boxes, predictions)):
        if result.correct is not True:
            continue
        for statement in stated_after_box(text):
            if statement is UNDECIDABLE:
                out[index] = True
                break
            spelled = number_words(statement)
            if spelled is not None:
                statement = spelled
            elif looks_like_prose(statement):
                continue
            owners.append(index)
            statements.append(statement)
            statement_golds.append(golds[index])
            statement_kinds.append("choice" if kinds[index] == "choice" else "value")
    if statements:
        for index, verdict in zip(owners, _grade_extracted(statements, statement_golds, statement_kinds)):
            out[index] = out[index] or verdict.correct is not True
    return out
