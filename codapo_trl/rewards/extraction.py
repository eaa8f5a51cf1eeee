"""Anchored answer extraction: which part of a model output is its final answer (pure Python, linear in the text,
run in the calling process).

Only an anchored answer is paid: the content of the last brace-matched `\\boxed{...}` (or `\\fbox{...}`; the box rule
is `codapo_trl.answers.last_boxed`), otherwise the text after the last explicit final-answer phrase ("the answer is
...", "Final answer: ...", "#### ...") or the value of the last JSON `"answer"` field, whichever comes last. A bare
expression somewhere in the text earns 0: with math-verify's default extraction a model learned to answer "What is
5 + 2?" with "5 + 2 =", which parses to 7. The one value read is that
answer: text after the last box is not read, except a mark written against the box that continues the value it shows
(`box_in_expression`: `\\boxed{2}^{10}`, `-\\boxed{23}`).
"""

from __future__ import annotations

import re
from decimal import Decimal

from codapo_trl.answers import contains_box, last_boxed, text_around_last_box
from codapo_trl.rewards.form_reading import changes_value as _changes_value
from codapo_trl.rewards.form_reading import qualifies as _qualifies


__all__ = ["box_in_expression", "extract_final_answer", "extract_gold"]

_MAX_SCAN_CHARS = 32_768  # only the tail of a completion can hold its final answer

_PHRASE_RE = re.compile(
    r"\banswer\b\s*\**\s*(?::|\bis\b|=)"  # "answer: x", "Answer:** x", "the answer is x", "final answer = x"
    r"|\banswer\s+(?:to|for)\b[^\n.:$]{1,40}?\bis\b"  # "the answer to this question is x"
    r"|\bfinal\s+answer\b(?=[\s*:]*(?:\$|\\\[|\\\())"  # a "**Final Answer**" heading over a display
    r"|####"  # GSM8K style
    # The same anchors in other languages: Chinese, Japanese, Korean, Spanish, Portuguese, French, Italian, German,
    # Russian ("the (final) answer is", "answer:").
    r"|(?:最终|最後の|最终的)?(?:答案|答え|解答)\s*(?:是|为|為|は|：|:)"
    r"|(?:정답|답)\s*(?:은|는|:|：)"
    r"|\b(?:la\s+)?respuesta(?:\s+final)?\s*(?:es\b|:)"
    r"|\b(?:a\s+)?resposta(?:\s+final)?\s*(?:é|:)"
    r"|\b(?:la\s+)?réponse(?:\s+finale)?\s*(?:est\b|:)"
    r"|\b(?:la\s+)?risposta(?:\s+finale)?\s*(?:è|:)"
    r"|\b(?:die\s+)?(?:endgültige\s+)?antwort\s*(?:ist\b|lautet\b|:)|\bist\s+die\s+(?:endgültige\s+)?antwort\b"
    r"|(?<![\u4e00-\u9fff])答\s*[:：]"
    r"|\b(?:окончательный\s+|финальный\s+)?ответ\s*(?::|—|–|-|равен\b)"
    # a "final answer" heading over a display, in those languages
    r"|(?:\b(?:respuesta|resposta)\s+final|\bréponse\s+finale|\bendgültige\s+antwort|\brisposta\s+finale"
    r"|\b(?:финальный|окончательный)\s+ответ|最终答案)(?=[\s*:：.#]*(?:\$|\\\[|\\\())",
    re.IGNORECASE,
)
_FRAGMENT_END_RE = re.compile(
    r"\n|;|。|；|，|\s*[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]|\.(?=\s|$)|,?\s+(?:because|since|so|which|where|therefore|thus|hence|as)\b|\s+I hope\b",
    re.IGNORECASE,
)
# A sentence after an answer phrase that names the quantity, then states its value at the end ("The maximum volume
# of the solid is **120**", "La probabilidad es $\\frac13$"): the value read is what follows its last verb. Found
# with one scan each (linear in the fragment, which comes from the completion, in the trainer's process).
_SENTENCE_START_RE = re.compile(r"(?:[-*•]\s*)?(?:[^\W\d_]+[\s,]+){2}")
_STATING_VERB_RE = re.compile(r"\b(?:is|are|equals|es|est|ist|è|é|равно|равна|равен)\s+", re.IGNORECASE)
_LAST_VERB_RE = re.compile(r"\b(?:is|are|equals)\s", re.IGNORECASE)
_MATH_DELIMITERS = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))
# The box is the whole value of the expression it is written in. What continues that value right after it: a power,
# an index, a digit (`\boxed{2}^{10}`, `\boxed{19}_{8}`, `\boxed{1}9`, `\boxed{1}.5`, `\boxed{23},000`,
# `\boxed{23}\,000`), an operation (`\boxed{23}\times 2`, `\boxed{23} + 1`, `\boxed{23}/24`). A degree sign is a
# unit, as inside the box (`\boxed{60}^\circ`); a `*` is Markdown emphasis (`**\boxed{5}**`); prose is not read.
_SPACE = r"(?:[ \t]|\\[,;: !]|\\q?quad\b|~)*"
_AFTER_BOX_RE = re.compile(
    r"(?:\^(?!\s*\{?\s*\\circ)|_|\.?\d|(?:,|\{,\}|\\,)\d)"
    r"|" + _SPACE + r"(?:\+|/|\^(?!\s*\{?\s*\\circ)|\\(?:times|cdot|div|pm|mp|over)(?![A-Za-z])|-\s*[\d\\(])"
)
# ...and right before it: a sign, an operation, a digit, or the argument of an operation (`-\boxed{23}`,
# `2\times\boxed{23}`, `1\boxed{9}`, `\frac{\boxed{23}}{2}`, `\sqrt{\boxed{23}}`, `2^{\boxed{3}}`). A list bullet
# (`- \boxed{23}` at the start of a line) is not a sign.
_BEFORE_BOX_RE = re.compile(
    r"(?:(?<=\S)-|\+|/|\^|_|\d|\\(?:times|cdot|div|pm|mp)|"
    r"\\(?:[dt]?frac|sqrt|binom|dbinom|tbinom)\s*(?:\[[^\]]*\])?\s*\{(?:[^{}]*\}\s*\{)?)" + _SPACE + r"$"
)
_TEXT_AFTER_BOX_RE = re.compile(r"\s*\\(?:text|mbox|textrm|mathrm)\s*\{([^{}]*)\}")


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


# After an anchored answer, in the same sentence: a negation ("is not 8", 答えは 8 ではありません, 不是) or a
# conjunction and a second value (`$x=3$ o $x=5$`, 2 和 3) change the value read, so the phrase states none.
_NEGATION_AFTER_RE = re.compile(
    r"^[^\n。.!?]*?(?:ではな|じゃな|ません|ない|不是|不|没有|아니|\bnot\b|\bno es\b|\bn'est\b)"
)
_SECOND_VALUE_RE = re.compile(
    r"^\s*(?:or|and|o|y|e|ou|et|oder|und|или|и|或者|或|和|及|与|と|や|또는|및)\s*(?:\$|\\\(|[-+]?\d)", re.IGNORECASE
)
# What separates a phrase from its answer: space, emphasis, a colon, a closing brace, a heading's full stop (never
# the point of `.5`).
_AFTER_PHRASE_RE = re.compile(r"^[ \t\r\n*:：}]*(?:\.(?=\s))?[ \t\r\n*:：}]*")
_CJK_ANCHOR_RE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]")


# A JSON field named "answer", as a model writes when the prompt asks it to end with `{"reasoning": ..., "answer":
# ...}`: an anchor like a phrase. Its value is a JSON string (one line, escapes decoded) or a JSON number, and what
# follows it is the next key or the end of its object (`"5" if x else "6"`, `"5" + "0"` and `5, 6` are no JSON value);
# anything else (an array of anything but numbers, an object, `null`, a string that never closes) states no answer.
_JSON_ANSWER_RE = re.compile(r'"answer"\s*:\s*')
_JSON_VALUE_RE = re.compile(
    r'"((?:[^"\\\n]|\\[^\n])*+)"(?=\s*(?:$|,\s*(?:"|\}|$)|\}))'  # a string, closed (the text may end after it)
    r"|(?:(-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?)"
    r"|(\[[-+.\deE, ]*\]))"  # an array of numbers, read as the list it writes (`[1, 2]`)
    r'(?=\s*(?:,\s*(?:"|\}|$)|\}))'
    # an expression written without quotes, not valid JSON (`"answer": 869/27`), up to the next key or the end of
    # its object (an expression's characters only: no quotes, commas, marks or units)
    r"|(?!(?:null|true|false)\b)([\w.+\-*/^()\\][\w.+\-*/^()\\]*+(?:[ \t]++[\w.+\-*/^()\\]++)*+)"
    r'(?=[ \t]*+,?[ \t]*+(?:\n\s*+)?\}|[ \t]*+,\s*+"[^"\n]*+"\s*+:)'
)
# After the object: closing brackets, quotes or emphasis, a full stop or a comment, then the end of its line or a code
# fence (`{"answer": "5"}["answer"] + "0"` is code).
_JSON_AFTER_OBJECT_RE = re.compile(r"[ \t\]}`'\"*)]*(?:```|[.,;]?[ \t]*(?://[^\n]*)?(?:\n|$))")
# JSON's escapes. `\b`, `\f`, `\n`, `\r` and `\t` before a letter are LaTeX commands written under-escaped
# (`\frac`, `\neq`, `\times`), kept as written; any other backslash is kept too (`\(`, `\,`).
_JSON_ESCAPE_RE = re.compile(r'\\(?:u([0-9a-fA-F]{4})|(["\\/])|([bfnrt])(?![A-Za-z]))')
_JSON_WHITESPACE = {"b": " ", "f": " ", "n": "\n", "r": "\r", "t": "\t"}  # a space: never two digits made one
# A string that never closes is one token up to its line's end (possessive: no retry from each quote inside it).
_JSON_SCAN_RE = re.compile(r'"(?:[^"\\\n]|\\.|\\(?=\n|\Z))*+(?:"|(?=\n)|\Z)|[{}]')


def _json_escape(match: re.Match[str]) -> str:
    code, literal, blank = match.groups()
    if code is not None:
        return chr(int(code, 16))
    return literal if literal is not None else _JSON_WHITESPACE[blank]


def _json_object_end(text: str, start: int) -> int:
    """Where the JSON object around `start` closes (the index after its `}`), or `len(text)` if it never does; one
    scan of the strings and braces after `start` (linear in the text)."""
    depth = 1
    for token in _JSON_SCAN_RE.finditer(text, start):
        if token.group() == "{":
            depth += 1
        elif token.group() == "}":
            depth -= 1
            if depth == 0:
                return token.end()
    return len(text)


def _json_answer(text: str, question: str = "") -> tuple[int, str | None] | None:
    """The last `"answer": value` field of `text` outside the object of an earlier one: `(where its object ends, the
    value read)`, the value `None` when it is no JSON string or number; `None` if `text` has no such field. A field inside an earlier field's object (an unescaped quote in its "reasoning") is part of that
    object, not read; the fields are found in one pass (linear in the text)."""
    last, position = None, 0
    while (field := _JSON_ANSWER_RE.search(text, position)) is not None:
        value = _JSON_VALUE_RE.match(text, field.end())
        end = _json_object_end(text, field.end() if value is None else value.end())
        last, position = (end, value), max(end, field.end())
    if last is None:
        return None
    end, value = last
    if value is None or (end < len(text) and not _JSON_AFTER_OBJECT_RE.match(text, end)):
        return end, None
    string, number, array, unquoted = value.groups()
    if number is not None:
        return end, _json_number(number)
    if string is None:
        return end, (array or unquoted).strip() or None
    decoded = _JSON_ESCAPE_RE.sub(_json_escape, string)
    if any("\ud800" <= char <= "\udfff" for char in decoded):
        try:  # a pair of `\uXXXX` surrogates is one character; a lone one is no text
            decoded = decoded.encode("utf-16", "surrogatepass").decode("utf-16")
        except UnicodeDecodeError:
            return end, None
    return end, _field_value(decoded.strip(" \t\r\n*"), question) or None


def _json_number(number: str) -> str | None:
    """A JSON number as a numeral: `1e3` is `1000`, `2.5E-2` is `0.025`; `None` past a thousand digits."""
    value = Decimal(number)
    exponent = value.as_tuple().exponent
    if not isinstance(exponent, int) or abs(exponent) > 1000:
        return None
    return format(value, "f") if "e" in number.lower() else number


_YES_NO_START_RE = re.compile(r"(?:yes|no)\b", re.IGNORECASE)


def _field_value(value: str, question: str) -> str | None:
    """What a field's string states: what follows an answer phrase in it ("Final answer: 5"), else the value a
    sentence states ("The eighth term is 194." -> `194`; "There are 12 ways to ..." as `_counted` reads it), else
    the string itself, read like a box."""
    if _PHRASE_RE.search(value):
        return _after_last_phrase(value, question, fields=False)
    if _YES_NO_START_RE.match(value):
        return value  # "No, the equilibrium is not stable.": a yes/no answer and its reason, read by the grader
    counted = _counted(value, question)
    if counted is not None:
        return counted
    stated = _stated_value(value)
    return value if stated is None else _strip_math_delimiters(stated.strip(" \t*")).rstrip(" .*")


def _after_last_phrase(text: str, question: str = "", fields: bool = True) -> str | None:
    match = None
    for match in _PHRASE_RE.finditer(text):  # noqa: B007 - we want the last one
        pass
    field = _json_answer(text, question) if fields else None
    if field is not None and (match is None or match.start() < field[0]):
        return field[1]  # the field is the last anchor; a phrase in its object (a "reasoning" key) is not read
    if match is None:
        return None
    rest = _AFTER_PHRASE_RE.sub("", text[match.end() :], count=1)  # "Final Answer:\n\n$$7$$", "\\textbf{Answer:} 7"
    fragment = _answer_fragment(rest, question)
    if fragment is None:
        return None
    after = rest[_fragment_length(rest) :]
    if _SECOND_VALUE_RE.match(after) or (_CJK_ANCHOR_RE.search(match.group()) and _NEGATION_AFTER_RE.match(after)):
        return None
    return fragment


def _fragment_length(rest: str) -> int:
    """Where the fragment `_answer_fragment` reads from `rest` ends."""
    for opening, closing in _MATH_DELIMITERS:
        if rest.startswith(opening):
            end = rest.find(closing, len(opening))
            return len(rest) if end == -1 else end + len(closing)
    end = _FRAGMENT_END_RE.search(rest)
    return end.start() if end else len(rest)


def _stated_value(fragment: str) -> str | None:
    """What a sentence of two words or more states after its last verb ("The maximum volume is **120**" -> `**120**`),
    or `None` when it is no such sentence: the first stating verb after the sentence's first two words that no "is",
    "are" or "equals" follows."""
    start = _SENTENCE_START_RE.match(fragment)
    if start is None:
        return None
    last = -1
    for match in _LAST_VERB_RE.finditer(fragment):
        last = match.start()
    for verb in _STATING_VERB_RE.finditer(fragment, start.end()):
        if last < verb.end() < len(fragment):
            return fragment[verb.end() :]
    return None


# A line of words after the phrase that introduces what follows and ends in a stating word and a colon ("The
# probability is:", "который можно записать как:"): the answer is the display on the next line, read like a box; no
# number or math may follow it (words are not read; a fenced code block after it is skipped). A word in the line that
# qualifies, transforms or negates what follows ("probably", "at least", "minus", "not", "不是") makes it no such line.
_INTRODUCING_LINE_RE = re.compile(
    r"(?=[^\W\d_])([^\n]{0,400}?(?:\b(?:is|are|equals?|as|es|est|ist|sind|sont|son|è|é|beträgt|как|равн[аоы]?|равен|это)"
    r"|是|为|為|は))[ \t]*"
    r"[:：][ \t*]*\r?\n\s*(?=\$\$|\\\[)",
    re.IGNORECASE,
)
_WORD_RE = re.compile(r"[^\W\d_]+(?:'t)?")
_MAX_DISPLAYS = 4
_ARITHMETIC_RE = re.compile(r"\d\s*[-+*/^×÷=]\s*\d")
_MATH_SPAN_RE = re.compile(r"\$[^$\n]*\$|\\\(.*?\\\)")
_VALUE_AFTER_RE = re.compile(r"[\d$]|\\[\[(]")
_CODE_FENCE_RE = re.compile(r"```")
# "There are 1940 ways to ...": the number the sentence counts, where the word after it is a noun, not a word that
# changes the value ("1940 thousand", "1940 times as many") and no second value follows ("1940 or 1941 ways").
_COUNTED_RE = re.compile(
    r"(?:(?:so|thus|hence|therefore),?\s+)?(?:there\s+(?:is|are|exist|exists)|il\s+y\s+a|hay|es\s+gibt|существу\w+)"
    r"\s+(?:exactly\s+)?(\$?[-+]?\d[\d,]*(?:\.\d+)?\$?|\\\(\s*[-+]?\d[\d,]*(?:\.\d+)?\s*\\\))\s+([^\W\d_]+)",
    re.IGNORECASE,
)
_NOT_COUNT_NOUNS = frozenset({"times", "percent", "fold", "more", "fewer", "less", "as", "per"})
_TOKEN_RE = re.compile(r"[^\W_]+|[^\w\s]")
_PLAIN_GROUPING_RE = re.compile(r"\d{1,3}(?:,\d{3})+")
_LINKING_WORDS = frozenset(
    ["to", "that", "which", "who", "whose", "where", "in", "of", "for", "with", "such", "the", "a", "an"]
)


def _introduced_display(rest: str) -> str | None:
    """The display after a line that introduces it (`_INTRODUCING_LINE_RE`), when no other value follows it (a
    number or a math span; a fenced code block, as a JSON answer, is not read); else `None`. Further displays, each
    after a line that introduces it ("This can also be written as:"), are other forms of the same value: they are
    joined into one chain, every member of which must then equal the value read."""
    displays: list[str] = []
    while len(displays) < _MAX_DISPLAYS:
        introduced = _INTRODUCING_LINE_RE.match(rest)
        if introduced is None or _qualifies(_WORD_RE.findall(introduced.group(1))):
            break
        if _ARITHMETIC_RE.search(_MATH_SPAN_RE.sub(" ", introduced.group(1))):
            return None  # "The probability is 1/4 + 1/4, that is:": the line states a value of its own
        display = rest[introduced.end() :]
        span = _leading_math_span(display)
        if span is None or not span.strip(" *,."):
            return None
        displays.append(span.strip(" *").rstrip(",.").strip())
        rest = display[_fragment_length(display) :].lstrip()
    if not displays:
        return None
    fences = [m.start() for m in _CODE_FENCE_RE.finditer(rest)]
    if len(fences) % 2 == 0 and fences:
        rest = rest[: fences[0]] + rest[fences[-1] + 3 :]
    if _VALUE_AFTER_RE.search(rest):
        return None  # a display or a number after it ("Wait, actually 1/2"); words are not read
    return " = ".join(displays)


def _counted(fragment: str, question: str) -> str | None:
    """The number a counting sentence states (`_COUNTED_RE`), or `None`. What follows the counted noun describes
    what is counted, so it must be the question's own description: a linking word, then only words and numbers of
    the question ("ways to form a subcommittee of 5 members that has at least one member from each party"); anything
    else ("minus the 6 symmetric ones", "of which 6 are valid", "roughly") makes it no counting sentence."""
    counted = _COUNTED_RE.match(fragment)
    if counted is None:
        return None
    noun = counted.group(2)
    if noun.lower() in _NOT_COUNT_NOUNS or _changes_value([noun]) or _qualifies([noun]):
        return None
    asked = {_stem(t) for t in _TOKEN_RE.findall(question[-20_000:].lower())}
    if _stem(noun.lower()) not in asked:
        return None  # the question counts ways and the sentence pairs of them
    tokens = _TOKEN_RE.findall(fragment[counted.end() :].lower().rstrip(" .!"))
    if tokens and (
        tokens[0] not in _LINKING_WORDS or any(_stem(t) not in asked for t in tokens if t not in _LINKING_WORDS)
    ):
        return None
    number = _strip_math_delimiters(counted.group(1).strip()).strip("\\() ")
    return number.replace(",", "") if _PLAIN_GROUPING_RE.fullmatch(number) else number or None


def _stem(word: str) -> str:
    """A word's first five letters, so that "arrange" is the question's "arranged" and "subcommittees" its
    "subcommittee"."""
    return word[:5]


def _answer_fragment(rest: str, question: str = "") -> str | None:
    """The answer that `rest` starts with: a leading math span; else the display after a line that introduces it
    (ending in a stating word and a colon); else the text up to the end of its sentence or line."""
    span = _leading_math_span(rest)
    if span is not None:
        return span.strip(" *") or None
    introduced = _introduced_display(rest)
    if introduced is not None:
        return introduced
    end = _FRAGMENT_END_RE.search(rest)
    fragment = rest[: end.start()] if end else rest
    fragment = _strip_math_delimiters(fragment.strip(" \t*"))
    counted = _counted(fragment, question)
    if counted is not None:
        return counted  # "There are 1940 ways to form ..."
    stated = _stated_value(fragment)
    if stated is not None:
        fragment = _strip_math_delimiters(stated.strip(" \t*"))  # "The maximum volume is **120**."
    if fragment.count("$") == 1:  # a currency sign (`$19`, `\\$19`), not a math delimiter
        fragment = fragment.replace("\\$", "").replace("$", "")
    return fragment.rstrip(" .*").lstrip(" *") or None  # `.5` keeps its point


def _answer_region(text: str | None) -> str | None:
    """Where a completion's answer can be: its last 32 768 characters, after the last `</think>` (what the model
    reasoned before it answered is not its answer); `None` for no text, or a `<think>` block never closed (the
    model stopped while reasoning)."""
    if not text:
        return None
    text = text[-_MAX_SCAN_CHARS:]
    folded = text.lower()
    thought = folded.rfind("</think>")
    if thought != -1:
        text, folded = text[thought + len("</think>") :], folded[thought + len("</think>") :]
    return None if "<think>" in folded else text  # a block opened again after the last close is never closed


def extract_final_answer(text: str | None, question: str = "") -> str | None:
    """The anchored final answer of a model output, or `None` if it states none.

    The content of the last `\\boxed{...}` / `\\fbox{...}` (braces matched, escaped braces skipped) wins; otherwise
    the text after the last final-answer phrase ("the answer is ...", "Final answer: ...", "#### ...") up to the end
    of that sentence or line, with `$...$`, `\\(...\\)` or `\\[...\\]` delimiters removed, or the value of a JSON
    `"answer"` field (a string, its escapes decoded, or a number) where that field comes after the last phrase; the
    other keys of its object are not read. A bare expression is not an answer. Only the last 32 768 characters are
    searched, and only after the last `</think>`; a `<think>` block never closed gives `None`, and so does an
    unclosed last box (a truncated answer).

    Args:
        text (`str` or `None`): The model output.
        question (`str`, *optional*): The question it answers; what a counting sentence may say after its number
            is the question's own description ("There are 1940 ways to form a subcommittee ...").

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
        >>> extract_final_answer('So it is 7.\\n{"answer": "\\\\\\\\frac{7}{2}", "reasoning": "the answer is 3"}')
        '\\\\frac{7}{2}'

        ```
    """
    text = _answer_region(text)
    if text is None:
        return None
    if contains_box(text):
        return last_boxed(text)
    return _after_last_phrase(text, question)


def extract_gold(gold: str) -> str | None:
    """A gold answer: the last box of a full solution, else the part after `####`, else the text itself."""
    gold = gold[-_MAX_SCAN_CHARS:]
    if contains_box(gold):
        return last_boxed(gold)
    if "####" in gold:
        gold = gold.rsplit("####", 1)[1]
    return _strip_math_delimiters(gold).rstrip(" .") or None


def box_in_expression(text: str | None) -> bool:
    """Whether the last closed box of a completion is only part of the value it writes: an operation, a sign, a digit
    or a value word written against the box (`\\boxed{2}^{10}`, `\\boxed{1}9`, `-\\boxed{23}`,
    `\\frac{\\boxed{23}}{2}`, `\\boxed{23}\\times 2`, `\\boxed{23}\\text{ thousand}`). The box then does not hold the
    value written, so it is not the answer read.

    Nothing else around the box is read: the grader reads one value, the box, and text after it (a remark, a unit, a
    degree sign, a restatement, a second statement, an approximation such as `\\approx 2.83`) cannot change it.

    Example:
        ```python
        >>> box_in_expression(r"\\boxed{2}^{10}"), box_in_expression(r"So $\\boxed{1}9$."), box_in_expression(r"$-\\boxed{5}$")
        (True, True, True)
        >>> box_in_expression(r"$\\boxed{60}^\\circ$"), box_in_expression(r"\\boxed{23} = 26. The answer is 26.")
        (False, False)
        >>> box_in_expression("- \\\\boxed{7}"), box_in_expression(r"\\boxed{7} - that is all."), box_in_expression("7")
        (False, False, False)

        ```
    """
    region = _answer_region(text)
    around = text_around_last_box(region) if region else None
    if around is None:
        return False
    before, after = around
    if _AFTER_BOX_RE.match(after) or _BEFORE_BOX_RE.search(before[-200:]):
        return True
    words = _TEXT_AFTER_BOX_RE.match(after)
    return words is not None and _changes_value(re.findall(r"[A-Za-z]+", words.group(1)))
