"""Reading a maths answer as written: the LaTeX the grader reads (`prepare`), the numbers it writes
(`join_digit_groups`, `juxtaposed_numbers`), the unit it carries (`unit_of`) and its SymPy tree (`read_form`).

Length: about 700 lines: the read step of the grader's pipeline (extract, read, compare, judge) is one job; the
number tokens came here from the deleted `computation.py` (issue 60), since only reading uses them.

The grader compares this tree (`codapo_trl.rewards.equality`) and judges it (`codapo_trl.rewards.judging`). The tree
is math-verify's own LaTeX parser (`latex2sympy2_extended`) with the few evaluations that parser makes by itself
switched off, and with letters keeping their case, so that `\\frac68` stays a quotient of 6 by 8, `\\binom84` a
binomial, `3\\frac12` a mixed number, `-(-19)` a double negation, `e^{\\ln 19}` an exponential, `\\det` a
determinant, `x \\approx 19` an approximation and `N` is not `n`. The converter's private class is subclassed here
and nowhere else; a new version of the parser that evaluates something more by itself would change what a
restatement is judged on (docs/rewards.md lists this among what rests on a list).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from fractions import Fraction
from typing import Any

import sympy

from codapo_trl.answers import braced_group_end


__all__ = [
    "JUXTAPOSED",
    "VALUE_WORDS",
    "WORDS",
    "Mixed",
    "changes_value",
    "integer_quotient",
    "qualifies",
    "join_digit_groups",
    "juxtaposed_numbers",
    "prepare",
    "read_form",
    "unit_of",
    "units_differ",
]

# ---------------------------------------------------------------------------------------------------------------------
# Numbers as written
# ---------------------------------------------------------------------------------------------------------------------

# A thousands grouping with a separator that is never a list comma: `{,}`, `,\!` (with spaces), a TeX or plain space
# (`\,`, `\ `, `\thinspace`, `~`, ` `). Joining groups concatenates digits, so it can never turn two numbers into
# their sum: `12 7` and `12\ 7` stay two numbers (7 is not a group of three).
_GROUP_SEPARATOR = r"(?:\{,\}|,\s*\\!\s*|\\[,;: ]|\\thinspace\s*|~| )"
_MARKED_GROUPING_RE = re.compile(r"(?<![\d.])\d{1,3}(?:" + _GROUP_SEPARATOR + r"\d{3})+(?![\d])")
# A plain comma grouping (`1,000`, `-12,345.5`) is one only when the number is the whole answer: `(100,200)` is a pair.
_PLAIN_GROUPING_RE = re.compile(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_SEPARATOR_RE = re.compile(_GROUP_SEPARATOR + "|,")


def join_digit_groups(latex: str) -> str:
    """`latex` with the separators of real thousands groupings removed (`12{,}345`, `12\\,345`, `12 345`, `11,\\! 111`,
    a whole answer `1,000`); any other comma or space between digits is left where it is.

    Example:
        ```python
        >>> join_digit_groups(r"11,\\! 111,\\! 111,\\! 100"), join_digit_groups(r"12\\,345"), join_digit_groups("1,000")
        ('11111111100', '12345', '1000')
        >>> join_digit_groups("(100,200)"), join_digit_groups(r"12\\,34"), join_digit_groups("1, 000")
        ('(100,200)', '12\\\\,34', '1, 000')

        ```
    """
    text = _MARKED_GROUPING_RE.sub(lambda m: _SEPARATOR_RE.sub("", m.group()), latex)
    if _PLAIN_GROUPING_RE.fullmatch(text.strip()):
        text = text.replace(",", "")
    return text


_TOKEN_RE = re.compile(r"\d+(?:\.\d+)?|\.\d+|\\[A-Za-z]+|\\.|\s+|.", re.DOTALL)
_NUMBER_TOKEN_RE = re.compile(r"\d|\.\d")
# Commands that typeset nothing but space; any other command between two numbers is an operation or a name.
_SPACE_COMMANDS = frozenset(
    [
        r"\,",
        r"\;",
        r"\:",
        r"\!",
        r"\>",
        r"\quad",
        r"\qquad",
        r"\enspace",
        r"\thinspace",
        r"\medspace",
        r"\thickspace",
        r"\negthinspace",
        r"\negmedspace",
        r"\negthickspace",
        r"\hfill",
        r"\space",
        r"\nobreakspace",
        r"\displaystyle",
        r"\textstyle",
        r"\scriptstyle",
    ]
) | {"\\ "}
_SCRIPTS = frozenset({"^", "_"})
_TAKES_ARGUMENT = frozenset({r"\sqrt", r"\frac", r"\dfrac", r"\tfrac", r"\binom", r"\dbinom", r"\tbinom"})
_SPACE_WITH_ARGUMENT = frozenset({r"\hspace", r"\hskip", r"\kern", r"\mkern", r"\mskip", r"\vspace"})


def _tokens(latex: str) -> list[str]:
    return _TOKEN_RE.findall(latex)


def juxtaposed_numbers(latex: str) -> bool:
    """Whether two numbers stand side by side with only space, braces or spacing commands between them (`12 7`,
    `12\\ 7`, `12\\quad 7`, `{12}{7}`, `12~7`, `1.5 2`): they are two numbers, which no parser may read as one.
    Digit groupings are joined first (`join_digit_groups`).

    Example:
        ```python
        >>> [juxtaposed_numbers(t) for t in ("12 7", r"12\\ 7", "{12}{7}", r"12\\hspace{1em}7", "12.7", r"3\\frac12")]
        [True, True, True, True, False, False]
        >>> [juxtaposed_numbers(t) for t in ("12+7", "(1, 2)", r"12\\,345", "2 x 3", r"\\sqrt{2} 3", r"\\log_3 10")]
        [False, False, False, False, False, False]

        ```
    """
    tokens = _tokens(join_digit_groups(latex))
    previous_number = False
    gap = False  # something that renders as space (or nothing) since the previous number
    arguments: list[bool] = []  # for each open brace: whether it opens a command's argument (`\\sqrt{2}`, `^{2}`)
    before = ""  # the last token that is not space
    closed_argument = False  # whether the last closed brace closed a command's argument
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if _NUMBER_TOKEN_RE.match(token):
            if previous_number and gap:
                return True
            # a single-token argument (`\\log_3 10`, `x^2 y`, `\\sqrt2 3`) is not a number standing on its own
            previous_number, gap = before not in _SCRIPTS and before not in _TAKES_ARGUMENT, False
        elif token == "{":
            argument = before in ("^", "_") or (before == "}" and closed_argument)
            argument = argument or (before.startswith("\\") and before not in _SPACE_COMMANDS)
            arguments.append(argument)
            gap = gap or not argument
        elif token == "}":
            closed_argument = bool(arguments) and arguments.pop()
            if closed_argument:
                previous_number = False  # the end of a command's argument: `\\sqrt{2} 3` is a product
            gap = True
        elif token.isspace() or token == "~" or token in _SPACE_COMMANDS:
            gap = True
        elif token in _SPACE_WITH_ARGUMENT:
            gap = True
            if index + 1 < len(tokens) and tokens[index + 1] == "{":
                while index < len(tokens) and tokens[index] != "}":
                    index += 1
        else:
            previous_number = False
        if not token.isspace():
            before = token
        index += 1
    return False


# ---------------------------------------------------------------------------------------------------------------------
# Preparing the LaTeX: markup that renders nothing, and the words of \text{...} groups
# ---------------------------------------------------------------------------------------------------------------------

WORDS = "words or marks that change the value read"
JUXTAPOSED = "numbers written side by side"

_TEXT_COMMANDS = (
    "text", "textbf", "textit", "textrm", "textsf", "texttt", "textnormal", "textup", "emph", "mbox", "hbox",
    "mathrm", "mathbf", "mathit", "mathsf", "mathtt", "mathnormal", "operatorname", "boldsymbol", "bm",
)  # fmt: skip
_TEXT_RE = re.compile(r"\\(" + "|".join(sorted(_TEXT_COMMANDS, key=len, reverse=True)) + r")\s*\{")
_DROPPED_WITH_ARGUMENT_RE = re.compile(r"\\(?:color|phantom|hphantom|vphantom|hspace\*?|vspace\*?)\s*\{")
_UNWRAPPED_RE = re.compile(r"\\(?:underline|smash|mathstrut|displaylines)\s*(?=\{)")  # decoration: keep the argument
_ONE_CELL_ARRAY_RE = re.compile(r"\\begin\{(array|aligned|gathered)\}(?:\{[^{}]*\})?([^&]*?)\\end\{\1\}")
_SIZE_RE = re.compile(r"\\(?:tiny|small|normalsize|large|Large|LARGE|huge|Huge|bf|rm|it|sf|tt)(?![A-Za-z])")
_REPEATING_RE = re.compile(r"(\d*)\.(\d*)\\overline\s*\{(\d+)\}")  # 0.\overline{3}
_FRAC_COMMAND_ARGUMENTS_RE = re.compile(r"\\([dt]?frac)\s*(\\[A-Za-z]+|\w)\s*(\\[A-Za-z]+|\w)")  # \frac\pi6
_NUMBER_BASE_RE = re.compile(r"(?<=\d)\s*_\s*(?:\{\s*\(?\s*(\d+)\s*\)?\s*\}|(\d))")  # 19_{10}, 19_{(20)}
_MULTIPLIER_LETTERS = frozenset({"k", "K", "M", "G", "B", "T", "bn", "mn"})  # 19\text{k}: a multiplier, not a unit
_TEXTCOLOR_RE = re.compile(r"\\textcolor\s*\{[^{}]*\}")
_SPACING_RE = re.compile(r"(?<!\\)\\(?:[,;:! ]|quad|qquad|displaystyle|textstyle|scriptstyle)|~")
_DEGREE_RE = re.compile(r"\^\s*(?:\{\s*\\circ\s*\}|\\circ)|\\circ|\\degree(?![A-Za-z])|\u00b0")
_PERCENT_RE = re.compile(r"\\?%")
_UNIT_POWER_RE = re.compile(r"\s*\^\s*(?:\{\s*\d\s*\}|\d)")
_NUMBER_RE = re.compile(r"[-+]?(?:\d+(?:[.,]\d+)*|\.\d+)")
# Words are letters of any script (`42 \\text{ рёбер}`, `42\\text{本}`, `\\text{La réponse est } 42`).
_WORD_RE = re.compile(r"[^\W\d_]+")
_TRAILING_WORDS_RE = re.compile(
    r"(?:(?<=\d)|(?<=\\pi)|(?<=[})]))\s*?\s([^\W\d_]+(?:\s*/\s*[^\W\d_]+|\s+[^\W\d_]+)*)"
    r"(?:\s*\^\s*(?:\{\s*([23])\s*\}|([23])))?\s*\.?$"  # words after a number, then a unit's power (`cm^2`)
)
_LEADING_WORDS_RE = re.compile(r"^((?:[^\W\d_]{2,}\s+)+)(?=[-+]?\d)")  # "Hillary has 7 nickels"
_UNICODE_ROOT_RE = re.compile(r"\u221a\s*(\([^()]*\)|\d+(?:\.\d+)?|[A-Za-z]|\\[A-Za-z]+)")
_SUPERSCRIPTS = str.maketrans("\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079\u207b", "0123456789-")
_SUPERSCRIPT_RE = re.compile("[\u2070\u00b9\u00b2\u00b3\u2074-\u2079\u207b]+")
_DECIMAL_COMMA_RE = re.compile(r"(?<![\d,])(\d+)\{,\}(\d{1,2}|\d{4,})(?![\d,{])")
_VULGAR_FRACTION_RE = re.compile("[\u00bc-\u00be\u2150-\u215e]")


def _vulgar_fraction(match: re.Match) -> str:
    value = Fraction(unicodedata.numeric(match.group())).limit_denominator(10)
    return "\\frac{" + str(value.numerator) + "}{" + str(value.denominator) + "}"


_SUBSCRIPTS = str.maketrans("\u2080\u2081\u2082\u2083\u2084\u2085\u2086\u2087\u2088\u2089", "0123456789")
_SUBSCRIPT_RE = re.compile("[\u2080-\u2089]+")
_E_NOTATION_RE = re.compile(r"(?<![\w.\\])(\d+(?:\.\d+)?)[eE]([-+]?\d+)(?![\w.])")
_UNIT_RATIO_LEFT_RE = re.compile(r"(?<=[\d\s])\s*/\s*$")
# Names written as plain text, as code or a calculator writes them (`(4 * sqrt(29)) / 29`, `7/10 * pi`, `2 ln x`): the
# same functions and constants as their commands, never products of letters (`pi` is not `p i`).
_PLAIN_ROOT_RE = re.compile(r"(?<![A-Za-z\\])sqrt\s*(?:\(([^()]*)\)|(\d+(?:\.\d+)?))")  # sqrt(29), sqrt29
_PLAIN_NAME_RE = re.compile(r"(?<![A-Za-z\\])(sqrt|pi|ln|log|sin|cos|tan|sec|csc|cot|exp|theta|infty)(?![A-Za-z])")
_TILDE_APPROXIMATELY_RE = re.compile(r"\s*~\s*[-+]?\.?\d")
_UNICODE_SYMBOLS = {"\u221a": "\\sqrt ", "\u221b": "\\sqrt[3] ", "\u03c0": "\\pi ", "\u221e": "\\infty "}

# Words that change the value read or add a value, so they never ride along with a number: number words (`19
# thousand`, `19 and a half`), operations (`19 squared`, `19 minus one`), qualifiers (`approximately 19`, `not 19`,
# `at least 19`) and the names of constants a parser reads as maths (`19 pi`). Any other word (a unit, a count noun,
# a label: `cm`, `in/s`, `mL`, `calories`, `marbles`) cannot change the value read and is dropped.
_NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen"
    " eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred hundreds thousand thousands"
    " million millions billion billions trillion trillions dozen dozens score half halves third thirds quarter"
    " quarters fourth fourths fifth fifths sixth sixths eighth eighths tenth tenths hundredth hundredths thousandth"
    " thousandths double twice triple thrice tens ones"
    " tausend million millionen milliarde mille milliard mil millón millones тысяча тысячи тысяч миллион миллиона"
)
_OPERATION_WORDS = (
    "plus minus over divided multiplied squared cubed square power powers factorial mod modulo"
    " negative inverse reciprocal"
)
_QUALIFIER_WORDS = (
    "or not no approximately approx approximate about around roughly nearly almost circa least most than between"
    " maybe perhaps possibly probably might could ish up to from except wrong incorrect false invalid never neither nor"
    # the same qualifiers in the languages whose answer phrases are anchors (German, French, Spanish, Portuguese,
    # Italian): "not", "or", "at least", "at most", "about", "nearly"
    " nicht kein keine oder mindestens wenigstens etwa ungefähr ca fast weniger mehr"
    " pas ou moins environ presque"
    " o ni menos aproximadamente casi alrededor unos unas"
    " ou cerca quase"
    " oppure almeno circa quasi"
    " не около примерно приблизительно или либо менее более больше меньше минимум максимум почти свыше"
)
# Qualifiers of scripts written without spaces between words, found inside a word: "about", "at least", "at most",
# "not", "or", "and", "more than", "less than", "or so" (Chinese, Japanese).
_JOINED_QUALIFIERS = (
    "约",
    "約",
    "至少",
    "至多",
    "最多",
    "最少",
    "不",
    "或",
    "和",
    "及",
    "左右",
    "以上",
    "以下",
    "ない",
    "または",
    "ほど",
)
_MATH_NAMES = "pi infinity infty inf sqrt sin cos tan log ln exp e i"
VALUE_WORDS = frozenset(" ".join((_NUMBER_WORDS, _OPERATION_WORDS, _QUALIFIER_WORDS, _MATH_NAMES)).split())
"""Words that change the value read or add a second one (see above); every other word reads as a unit or a label."""
_UNIT_EXCEPTIONS = frozenset({"square", "per"})
_YES_NO = frozenset({"yes", "no"})  # a word answer (`\\boxed{No}`), though "no" qualifies a number elsewhere
_NO_SOLUTION_RE = re.compile(r"(?i)no\s+(?:real\s+)?solutions?|none")  # `19 square units`, `5 miles per hour`


_QUALIFYING = frozenset(
    f"{_OPERATION_WORDS} {_QUALIFIER_WORDS} times twice thrice double triple half guess bound complement estimate"
    " estimated".split()
)


def qualifies(words: list[str]) -> bool:
    """Whether any of `words` qualifies or transforms a value it introduces (the qualifiers and operations of
    `VALUE_WORDS`, not its number words: "the probability that one ball ..." names a quantity), or negates it."""
    lowered = [w.lower() for w in words]
    if any(q in w for w in lowered if not w.isascii() for q in _JOINED_QUALIFIERS):
        return True
    return any(w in _QUALIFYING or w.endswith("n't") for w in lowered)


def changes_value(words: list[str]) -> bool:
    """Whether any of `words` changes the value of the number it goes with (`VALUE_WORDS`; `square` or `times`
    followed by a word is a unit: `19 square units`, `3 times a day`)."""
    if any(w in _MULTIPLIER_LETTERS for w in words):
        return True
    lowered = [w.lower() for w in words]
    if any(q in w for w in lowered if not w.isascii() for q in _JOINED_QUALIFIERS):
        return True
    for index, word in enumerate(lowered):
        if word in _UNIT_EXCEPTIONS and index + 1 < len(lowered):
            continue
        if word in VALUE_WORDS:
            return True
    return False


def _text_group_reading(content: str, command: str, whole: bool) -> str | None:
    """What a `\\text{content}` group stands for in a maths answer, or `None` if it changes the value read (then the
    answer is refused)."""
    stripped = content.strip(" .,~")
    if not stripped:
        return ""
    if whole and not _NUMBER_RE.search(stripped):  # the whole answer is words (`\\text{east}`, `\\text{(C)}`)
        return "\\text{"
    number = _NUMBER_RE.match(stripped)
    rest = stripped[number.end() :] if number else stripped
    words = _WORD_RE.findall(rest)
    leftover = _WORD_RE.sub("", rest).replace("/", "").replace("^", "").strip(" .,~-()")
    if number and not rest.strip():
        return number.group()
    if words and all(w.lower() in ("and", "or") for w in words) and not re.search(r"\d", content):
        return ","
    if re.fullmatch(r"[A-Za-z]", stripped) and (
        stripped.lower() in VALUE_WORDS
        or command.startswith(("mathbf", "mathit", "mathsf", "mathnormal", "bold", "bm"))
    ):
        return stripped  # a letter under a math font: `\\mathrm{e}`, `\\mathbf{v}` (a roman `\\mathrm{m}` is a unit)
    if words and not leftover and not changes_value(words):
        return number.group() if number else ""
    return None


def _repeating_fraction(match: re.Match) -> str:
    """`0.\\overline{3}` -> `\\frac{1}{3}`: a repeating decimal is the exact fraction it writes."""
    whole, fixed, period = match.group(1) or "0", match.group(2), match.group(3)
    value = (
        sympy.Integer(whole)
        + sympy.Rational(int(fixed or 0), 10 ** len(fixed))
        + sympy.Rational(int(period), (10 ** len(period) - 1) * 10 ** len(fixed))
    )
    return "\\frac{" + str(value.p) + "}{" + str(value.q) + "}"


def prepare(latex: str) -> tuple[str | None, str | None]:
    """The answer as the grader reads it: `(latex, None)`, or `(None, reason)` when it must be refused.

    Markup that renders nothing or only decorates is dropped (`\\color{red}`, `\\phantom{0}`, `\\displaystyle`,
    spacing such as `\\,` and `\\quad`, `\\left`/`\\right` are left to math-verify); Unicode is normalised (NFKC, so
    full-width and mathematical-bold digits are digits; U+2212 is a minus sign); a degree sign, a percent sign and
    `\\$` are units and dropped (so `19\\%` is read as 19, never as 0.19 as well); `√`, `∛`, `π` and `∞` are their
    commands, and so are their names written as plain text (`sqrt(29)`, `pi`, `ln x`). A digit-group separator
    joins a number only in a real thousands grouping, and two numbers side by side (`12 7`, `12\\ 7`) refuse the
    answer (`codapo_trl.rewards.computation`). Words never refuse an answer unless they
    change the value read or add one (`VALUE_WORDS`: `19\\text{ or 20}`, `19 \\text{ squared}`, `\\text{not } 19`,
    `19 thousand`): unit, count and label words are dropped (`\\text{ cm}^2`, `\\text{19 in/s}`, `12 marbles`);
    `and`/`or` between values read as a comma (so the box states several values); a letter under a math font is that
    letter (`\\mathrm{e}`); a group that is the whole answer is a word answer (`\\text{east}`, `\\text{(C)}`).

    Example:
        ```python
        >>> prepare(r"19\\,\\text{km}"), prepare(r"\\color{red}{19}\\%"), prepare(r"19\\text{ thousand}")
        (('19', None), ('19', None), (None, 'words or marks that change the value read'))
        >>> prepare(r"12\\ 7"), prepare(r"11,\\! 111,\\! 100"), prepare("12 marbles"), prepare("2√2")
        ((None, 'numbers written side by side'), ('11111100', None), ('12', None), ('2\\\\sqrt{2}', None))

        ```
    """
    text = _VULGAR_FRACTION_RE.sub(_vulgar_fraction, latex)  # 1½ is the mixed number 1\\frac{1}{2}
    text = _SUPERSCRIPT_RE.sub(lambda m: "^{" + m.group().translate(_SUPERSCRIPTS) + "}", text)  # x² is x^{2}
    text = _SUBSCRIPT_RE.sub(lambda m: "_{" + m.group().translate(_SUBSCRIPTS) + "}", text)  # x₂ is x_{2}
    text = unicodedata.normalize("NFKC", text).replace("\u2212", "-").replace("\u2044", "/")  # ½ is 1/2
    text = _E_NOTATION_RE.sub(lambda m: m.group(1) + "\\times 10^{" + m.group(2) + "}", text)  # 6.02e23
    text = _UNICODE_ROOT_RE.sub(lambda m: "\\sqrt{" + m.group(1).strip("()") + "}", text)  # √2, √(x+1)
    for symbol, command in _UNICODE_SYMBOLS.items():
        text = text.replace(symbol, command)
    text = _PLAIN_ROOT_RE.sub(lambda m: "\\sqrt{" + (m.group(1) or m.group(2)) + "}", text)  # sqrt(29)
    text = _PLAIN_NAME_RE.sub(lambda m: "\\" + m.group(1) + " ", text)  # pi, ln x
    if _TILDE_APPROXIMATELY_RE.match(text):
        return None, WORDS  # `~12`: "about 12" in plain text (a TeX tie stands between words, not before a value)
    text = _TEXTCOLOR_RE.sub("", text)
    for match in reversed(list(_DROPPED_WITH_ARGUMENT_RE.finditer(text))):
        end = braced_group_end(text, match.end() - 1)
        if end is None:
            return None, WORDS
        text = text[: match.start()] + " " + text[end:]  # a space: `1\\phantom{0}9` stays two numbers
    text = _SIZE_RE.sub(" ", _UNWRAPPED_RE.sub("", text))
    text = _ONE_CELL_ARRAY_RE.sub(lambda m: m.group(2) if "\\\\" not in m.group(2).strip(" \\") else m.group(), text)
    text = _REPEATING_RE.sub(_repeating_fraction, text)
    text = _FRAC_COMMAND_ARGUMENTS_RE.sub(r"\\\1{\2}{\3}", text)
    text = text.replace(":=", "=")
    text = _NUMBER_BASE_RE.sub("", text)  # the base of a numeral is compared like a unit (`unit_of`)
    if text.rstrip().endswith("\\") and not text.rstrip().endswith("\\\\"):
        text = text.rstrip()[:-1]  # `\\ 19\\ ` stripped by the box reader: a TeX space cut in half
    text = _DECIMAL_COMMA_RE.sub(r"\1.\2", text)  # `1{,}3020`: a decimal comma (a group of three is a grouping)
    text = join_digit_groups(text).replace("\\!", "")  # 19\\,000 and 11,\\! 111 are numbers; 12\\ 7 is not one
    text = _SPACING_RE.sub(" ", text)
    text = _DEGREE_RE.sub(" ", text)  # a unit is dropped as a space, so that `1^\\circ 9` stays two numbers
    text = _PERCENT_RE.sub(" ", text).replace("\\$", " ").replace("$", " ")
    while True:
        match = _TEXT_RE.search(text)
        if match is None:
            break
        end = braced_group_end(text, match.end() - 1)
        if end is None:
            return None, WORDS
        content = text[match.end() : end - 1]
        if _TEXT_RE.search(content):  # nested text groups: read the inner ones first
            inner, problem = prepare(content)
            if problem is not None:
                return None, problem
            content = inner or ""
        whole = not (text[: match.start()] + text[end:]).strip(" {}()")
        reading = _text_group_reading(content, match.group(1), whole)
        if reading is None:
            return None, WORDS
        tail = text[end:]
        words = _WORD_RE.findall(content)
        unit_power = _UNIT_POWER_RE.match(tail)
        if unit_power and words and not changes_value(words):  # \\text{ cm}^2, \\text{19 cm}^2
            tail = tail[unit_power.end() :]
        if reading == "\\text{":
            return text.strip(), None  # a word answer, compared by math-verify
        if reading == "" and tail.lstrip().startswith(("_", "(")):
            reading = "P"  # a name written in words (`\\text{proj}_{b} a`): one letter, a label for the reader
        text = text[: match.start()] + (" " + reading + " " if reading else " ") + tail
    text = re.sub(r"\s+", " ", text).strip()
    text = _UNIT_RATIO_LEFT_RE.sub("", text)  # `48 \mathrm{km}/\mathrm{h}`: both units dropped, their `/` too
    leading = _LEADING_WORDS_RE.match(text)
    if leading and not changes_value(_WORD_RE.findall(leading.group(1))):
        text = text[leading.end() :]  # plain words before a number: "Hillary has 7 nickels"
    text = _ATTACHED_UNIT_RE.sub(r" \1", text)  # `4ft`: a unit written against its number
    trailing = _TRAILING_WORDS_RE.search(text)
    plain_words = _WORD_RE.findall(trailing.group(1)) if trailing else []
    if plain_words and all(len(w) > 1 for w in plain_words) and not changes_value(plain_words):
        text = text[: trailing.start(1)].rstrip()  # plain words after a number: "19 cm", "12 marbles." (not "3 m")
    if text.endswith(".") and not text.endswith(".."):
        text = text[:-1].rstrip()  # the sentence's full stop written inside the box: 19.
    while text.startswith("{") and braced_group_end(text, 0) == len(text):
        text = text[1:-1].strip()  # {19}: a group, not a set
    if not text:
        return None, WORDS
    if _NO_SOLUTION_RE.fullmatch(text):
        return "\\text{nosolution}", None  # "No solution", "no real solutions", "none": the empty set
    if re.fullmatch(r"[A-Za-z]{2,}", text) and (text.lower() not in VALUE_WORDS or text.lower() in _YES_NO):
        return (
            "\\text{" + text + "}",
            None,
        )  # a bare word is a word answer (`Navin` for `\\text{Navin}`), not a product
    if juxtaposed_numbers(text):
        return None, JUXTAPOSED
    return text, None


# ---------------------------------------------------------------------------------------------------------------------
# The unit an answer carries
# ---------------------------------------------------------------------------------------------------------------------

_UNIT_SYNONYMS = {
    "cm": "centimeter", "centimetre": "centimeter", "mm": "millimeter", "millimetre": "millimeter",
    "km": "kilometer", "kilometre": "kilometer", "m": "meter", "metre": "meter", "in": "inch", "inches": "inch",
    "ft": "foot", "feet": "foot", "yd": "yard", "mi": "mile", "s": "second", "sec": "second", "secs": "second",
    "min": "minute", "mins": "minute", "h": "hour", "hr": "hour", "hrs": "hour", "g": "gram", "kg": "kilogram",
    "l": "liter", "litre": "liter", "ml": "milliliter", "millilitre": "milliliter", "deg": "degree",
    "lb": "pound", "lbs": "pound", "oz": "ounce", "dollar": "dollar", "cents": "cent", "sq": "square",
}  # fmt: skip


# A unit abbreviation of two letters or more written against the number it ends (`4ft`, `12kg`), never one letter
# (`5t` may be a product).
_ATTACHED_UNIT_RE = re.compile(
    r"(?<=\d)("
    + "|".join(sorted((u for u in _UNIT_SYNONYMS if len(u) > 1), key=len, reverse=True))
    + r")(?=(?:\s*\^\s*(?:\{\s*[23]\s*\}|[23]))?\.?$)"
)


def _unit_name(word: str) -> str:
    """One spelling per unit: `cm` and `centimeters` are `centimeter`, `hrs` is `hour`."""
    word = word.lower()
    if word in ("square", "cubic"):
        return word
    if word in _UNIT_SYNONYMS:
        return _UNIT_SYNONYMS[word]
    for suffix in ("es", "s"):
        stem = word[: -len(suffix)]
        if word.endswith(suffix) and len(stem) > 2 and (stem in _UNIT_SYNONYMS or suffix == "s"):
            return _UNIT_SYNONYMS.get(stem, stem)
    return word


@functools.lru_cache(maxsize=4096)
def unit_of(latex: str) -> str:
    """The unit an answer carries, one spelling per unit (`19\\text{ cm}^2` -> `centimeter^2`, `\\$19` -> `dollar`,
    `90^\\circ` -> `degree`), or `""` for none. Two answers whose units differ state different values (`19\\text{ mm}`
    is not `19\\text{ cm}`); a unit on one side only is the question's unit, written or not. The base of a numeral
    other than 10 is a unit too (`52_8` -> `base 8`), one the answer may only write when the gold does.

    Example:
        ```python
        >>> unit_of(r"19\\text{ cm}^2"), unit_of(r"19 \\text{centimeters}^2"), unit_of(r"\\$1.50"), unit_of("19")
        ('centimeter^2', 'centimeter^2', 'dollar', '')

        ```
    """
    text = unicodedata.normalize("NFKC", latex)
    units = [
        f"base {b.group(1) or b.group(2)}"
        for b in _NUMBER_BASE_RE.finditer(text)
        if (b.group(1) or b.group(2)) != "10"
    ]
    if _DEGREE_RE.search(text):
        units.append("degree")
    if _PERCENT_RE.search(text):
        units.append("percent")
    if "\\$" in text:
        units.append("dollar")
    for match in _TEXT_RE.finditer(text):
        end = braced_group_end(text, match.end() - 1)
        if end is None:
            continue
        words = _WORD_RE.findall(text[match.end() : end - 1])
        whole = not (text[: match.start()] + text[end:]).strip(" {}()$")
        if whole or not words or changes_value(words) or all(w.lower() in ("and", "or") for w in words):
            continue
        power = _UNIT_POWER_RE.match(text, end)
        units.append(" ".join(_unit_name(w) for w in words) + ("^" + power.group().strip(" ^{}") if power else ""))
    trailing = _TRAILING_WORDS_RE.search(_ATTACHED_UNIT_RE.sub(r" \1", re.sub(r"\s+", " ", text).strip()))
    if trailing and not changes_value(_WORD_RE.findall(trailing.group(1))):
        power = trailing.group(2) or trailing.group(3)  # `12 cm^2`
        unit = " ".join(_unit_name(w) for w in _WORD_RE.findall(trailing.group(1)))
        units.append(unit + ("^" + power if power else ""))
    unit = " ".join(units)
    return re.sub(r"\b(square|cubic) (\w+)", lambda m: m.group(2) + ("^2" if m.group(1) == "square" else "^3"), unit)


def units_differ(answer: str, gold: str) -> bool:
    """Whether an answer's unit states another value than the gold's: both carry a unit and they share no word
    (`19\\text{ mm}` for `19\\text{ cm}`, `\\text{ ft}^2` for `\\text{ ft}`; `19\\text{ cm long}` shares `cm`), or
    the answer writes a numeral base that the gold does not (`19_{20}` for 19, `52_8` for `52_9`).

    Example:
        ```python
        >>> units_differ(r"19\\text{ mm}", r"19\\text{ cm}"), units_differ(r"19\\text{ cm long}", r"19\\text{ cm}")
        (True, False)
        >>> units_differ(r"19\\text{ cm}", "19"), units_differ("19_{20}", "19"), units_differ("52_8", "52_8")
        (False, True, False)

        ```
    """
    mine, theirs = unit_of(answer), unit_of(gold)
    bases, gold_bases = re.findall(r"base \d+", mine), re.findall(r"base \d+", theirs)
    if bases and bases != gold_bases:
        return True
    words, gold_words = set(mine.replace("/", " ").split()), set(theirs.replace("/", " ").split())
    return bool(words and gold_words and not words & gold_words)


# ---------------------------------------------------------------------------------------------------------------------
# Reading the form: math-verify's parser, without the evaluations it does by itself
# ---------------------------------------------------------------------------------------------------------------------


class Mixed(sympy.Function):
    """A mixed number as written (`3\\frac{1}{2}`): whole part, numerator, denominator."""

    nargs = 3

    @classmethod
    def eval(cls, whole, p, q):
        return None


def _quotient(top: Any, bottom: Any) -> Any:
    return sympy.Mul(top, sympy.Pow(bottom, -1, evaluate=False), evaluate=False)


@functools.cache
def _reader_class() -> type:
    from latex2sympy2_extended.latex2sympy2 import _Latex2Sympy

    class FormReader(_Latex2Sympy):
        """`latex2sympy2_extended`'s converter that keeps what it would evaluate by itself: a quotient of integers
        (`\\frac68`, `6/8`), a binomial, a mixed number, a double negation and scientific notation stay as written."""

        def convert_frac(self, frac):
            top, bottom = self.convert_expr(frac.upper), self.convert_expr(frac.lower)
            if getattr(top, "is_Integer", False) and getattr(bottom, "is_Integer", False):
                return _quotient(top, bottom)
            return super().convert_frac(frac)

        def convert_binom(self, binom):
            return sympy.binomial(self.convert_expr(binom.upper), self.convert_expr(binom.lower), evaluate=False)

        def convert_mp(self, mp):
            if mp.DIV() or mp.CMD_DIV() or mp.COLON():
                left, right = (mp.mp(0), mp.mp(1)) if hasattr(mp, "mp") else (mp.mp_nofunc(0), mp.mp_nofunc(1))
                top, bottom = self.convert_mp(left), self.convert_mp(right)
                if getattr(top, "is_Integer", False) and getattr(bottom, "is_Integer", False):
                    return _quotient(top, bottom)
            return super().convert_mp(mp)

        def convert_unary(self, unary):
            nested = unary.unary() if hasattr(unary, "unary") else unary.unary_nofunc()
            if unary.SUB() and nested is not None:
                inner = self.convert_unary(nested)
                if getattr(inner, "is_Number", False) and (inner.is_negative or nested.SUB()):
                    return sympy.Mul(-1, inner, evaluate=False)  # -(-19) stays a double negation
                if getattr(inner, "is_Number", False):
                    return -inner
                return super().convert_unary(unary)
            return super().convert_unary(unary)

        def convert_postfix_list(self, arr, i=0):
            if i == len(arr) - 2:
                whole = self.convert_postfix(arr[i])
                if getattr(whole, "is_Integer", False):
                    fraction = self.convert_postfix(arr[i + 1])
                    p, q = integer_quotient(fraction)
                    if p is not None and p > 0 and q > 0:
                        return Mixed(whole, p, q)
            return super().convert_postfix_list(arr, i)

        def convert_comp(self, comp):
            if comp.det():
                return sympy.Determinant(sympy.ImmutableMatrix(self.convert_matrix(comp.det())))
            return super().convert_comp(comp)

        def convert_func(self, func):
            single = func.func_normal_single_arg()
            if single is not None and single.start.text == "\\det":
                argument = func.func_single_arg() or func.func_single_arg_noparens()
                return sympy.Determinant(sympy.ImmutableMatrix(self.convert_func_arg(argument)))
            return super().convert_func(func)

        def convert_relation(self, rel):
            if not rel.expr() and rel.APPROX():
                return sympy.Function("approx")(
                    self.convert_relation(rel.relation(0)), self.convert_relation(rel.relation(1))
                )  # an approximation states no value (the stock reader keeps one side)
            return super().convert_relation(rel)

        def handle_exp(self, func):
            if func.supexpr():
                sup = func.supexpr()
                argument = self.convert_expr(sup.expr()) if sup.expr() else self.convert_atom(sup.atom())
                return sympy.exp(argument, evaluate=False)  # e^{\\ln 19} stays as written
            return super().handle_exp(func)

        def convert_atom(self, atom):
            if atom.E_NOTATION():
                mantissa, _, exponent = atom.E_NOTATION().getText().lower().partition("e")
                return sympy.Mul(
                    sympy.Number(mantissa), sympy.Pow(10, sympy.Integer(exponent), evaluate=False), evaluate=False
                )
            return super().convert_atom(atom)

    return FormReader


_ELLIPSIS_RE = re.compile(r"\\(?:[lcvd]dots|dots[bcmio]?)(?![A-Za-z])|…")


@functools.lru_cache(maxsize=4096)
def read_form(latex: str) -> Any:
    """The SymPy tree of `latex` as written (math-verify's parser without its own evaluations, see the module
    docstring), or `None` if it cannot be read."""
    from latex2sympy2_extended.latex2sympy2 import NormalizationConfig, normalize_latex

    if _ELLIPSIS_RE.search(latex):
        return None  # the parser drops `\\ldots`: `1+2+\\ldots+9` would read as 12
    config = NormalizationConfig(
        basic_latex=True, units=False, malformed_operators=True, nits=False, boxed="none", equations=False
    )
    try:
        from latex2sympy2_extended.latex2sympy2 import ConversionConfig

        # Letters keep their case: `N` is not `n`, `A` (a vertex) is not `a` (a side).
        conversion = ConversionConfig(lowercase_symbols=False)
        reader = _reader_class()(is_real=True, convert_degrees=False, config=conversion)  # built on first use
        return reader.parse(normalize_latex(latex, config))
    except Exception:  # noqa: BLE001 - any failure of the parser means "cannot be read"
        return None


def integer_quotient(node: Any) -> tuple[int | None, int | None]:
    """`(p, q)` for a quotient of two integers as written (`Mul(p, Pow(q, -1))`), else `(None, None)`."""
    if isinstance(node, sympy.Mul) and len(node.args) == 2:
        top, bottom = node.args
        if (
            top.is_Integer
            and isinstance(bottom, sympy.Pow)
            and bottom.args[0].is_Integer
            and bottom.args[1] == -1
            and bottom.args[0] != 0
        ):
            return int(top), int(bottom.args[0])
    return None, None
