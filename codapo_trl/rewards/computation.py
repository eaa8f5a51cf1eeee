"""How computed an answer is, read from its own LaTeX tokens, before any parser evaluates anything.

The final-form rule (`codapo_trl.rewards.final_form`) pays an answer only when it is no less computed than the gold.
What a parser happens to evaluate by itself cannot decide that: SymPy adds `12 7` into 19, and leaves
`\\sqrt{3+2\\sqrt2}`, `\\log_3 5+\\log_3 2` and `(1+\\sqrt2)^2` alone, so each looked as final as `1+\\sqrt2`,
`\\log_3 10` and `3+2\\sqrt2`. This module reads the answer's tokens instead:

- **Numbers** (`join_digit_groups`, `juxtaposed_numbers`): a digit-group separator joins a number only in a real
  thousands grouping (`12{,}345`, `12\\,345`, `11,\\! 111,\\! 100`, and `1,000` when the number is the whole
  answer); two numbers side by side with nothing but space between them (`12 7`, `12\\ 7`, `12\\quad 7`, `{12}{7}`)
  are two numbers, never one.
- **The computation left in a form** (`computation`): its function heads by class (roots and powers, logarithms,
  trigonometric functions, binomials and factorials, floor and ceiling...), how deeply heads nest inside each other
  (`\\sqrt{3+2\\sqrt2}`: 2), and the arithmetic operations written inside their arguments (radicands, log arguments,
  the base of a power). `more_computed` compares an answer's with its gold's: deeper nesting, more operations inside
  arguments at the same depth, or more heads of a class at the same depth is *less computed* than the gold.

A power of a letter by an integer (`x^2`, `n^{-1}`) is arithmetic, like a product; a power of a number, of a group, by
a fraction or by a letter (`2^{10}`, `(1+\\sqrt2)^2`, `8^{1/3}`, `2^n`) is a head of the root-and-power class, with the
square root.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field


__all__ = ["Computation", "computation", "join_digit_groups", "juxtaposed_numbers", "more_computed"]

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
# The computation left in a form
# ---------------------------------------------------------------------------------------------------------------------

_HEAD_CLASSES = {
    "root": (r"\sqrt", r"\exp", "^"),
    "log": (r"\log", r"\ln", r"\lg"),
    "trig": tuple(
        "\\" + name
        for base in ("sin", "cos", "tan", "cot", "sec", "csc")
        for name in (base, "arc" + base, base + "h", "a" + base)
    ),
    "combinatorial": (r"\binom", r"\dbinom", r"\tbinom", r"\choose", "!"),
    "rounding": (r"\lfloor", r"\lceil"),
    "extremum": (r"\max", r"\min", r"\gcd", r"\lcm", r"\sup", r"\inf", r"\arg", r"\mod", r"\bmod", r"\pmod"),
    "calculus": (r"\sum", r"\prod", r"\int", r"\iint", r"\lim", r"\det", r"\partial", r"\nabla"),
}
_HEAD_CLASS = {head: name for name, heads in _HEAD_CLASSES.items() for head in heads}
_BINARY_OPERATIONS = frozenset(
    {"+", "-", "*", "/", r"\cdot", r"\times", r"\div", r"\pm", r"\mp", r"\over", ":", r"\ast", "\u00d7", "\u00b7"}
)
_TWO_ARGUMENTS = frozenset({r"\frac", r"\dfrac", r"\tfrac", r"\cfrac", r"\binom", r"\dbinom", r"\tbinom"})
_CLOSERS = {"(": ")", "[": "]", "{": "}", r"\lfloor": r"\rfloor", r"\lceil": r"\rceil", r"\{": r"\}"}
_IGNORED = frozenset(
    {r"\left", r"\right", r"\big", r"\Big", r"\bigg", r"\Bigg", r"\bigl", r"\bigr", r"\Bigl", r"\Bigr"}
)
_ARGUMENT_STOPS = frozenset({"+", "-", "=", ",", ";", r"\pm", r"\mp", "<", ">", r"\le", r"\ge", r"\leq", r"\geq"})
_MAX_TOKENS = 2_000


@dataclass
class Computation:
    """What is left to compute in a form: `heads` (function heads by class), `depth` (how deeply heads nest) and
    `inner` (arithmetic operations written inside head arguments); `operations` and `terms` count the arithmetic
    operations and the additions outside any head (the first becomes the `inner` of the head around it)."""

    heads: Counter = field(default_factory=Counter)
    depth: int = 0
    inner: int = 0
    operations: int = 0
    terms: int = 0  # additions and subtractions outside any head
    largest: float = 0.0  # the largest number written outside any head
    inner_largest: float = 0.0  # the largest number written inside a head's arguments (a radicand, a log's base)

    def add(self, other: Computation) -> None:
        self.heads.update(other.heads)
        self.depth = max(self.depth, other.depth)
        self.inner += other.inner
        self.operations += other.operations
        self.terms += other.terms
        self.largest = max(self.largest, other.largest)
        self.inner_largest = max(self.inner_largest, other.inner_largest)

    def headed(self, head_class: str) -> Computation:
        """This form as the argument of a head of `head_class`."""
        heads = Counter(self.heads)
        heads[head_class] += 1
        inner_largest = max(self.inner_largest, self.largest)
        return Computation(heads, self.depth + 1, self.inner + self.operations, 0, 0, 0.0, inner_largest)


class _Reader:
    """A recursive-descent reading of the tokens: atoms, heads with their arguments, and the operations between."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = [t for t in tokens if not t.isspace() and t not in _IGNORED and t not in _SPACE_COMMANDS]
        self.index = 0

    def peek(self) -> str | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self) -> str | None:
        token = self.peek()
        self.index += 1
        return token

    def sequence(self, closer: str | None = None, stops: frozenset = frozenset()) -> Computation:
        """Atoms and operations up to `closer` (consumed) or a token of `stops` (not consumed)."""
        total = Computation()
        atoms = 0
        while self.peek() is not None:
            token = self.peek()
            if token == closer:
                self.take()
                break
            if token in stops or (closer is None and token in (")", "]", "}", r"\rfloor", r"\rceil", r"\}")):
                break
            if token in _BINARY_OPERATIONS or token in ("=", ",", ";", "<", ">", "|", "&", r"\\"):
                self.take()
                total.operations += token in _BINARY_OPERATIONS
                total.terms += token in ("+", "-", r"\pm", r"\mp")
                atoms = 0
                continue
            atom = self.atom()
            atoms += 1
            if atoms > 1:
                atom.operations += 1  # juxtaposition: an implicit product (`2\\sqrt2`, `n(n+1)`)
            total.add(atom)
        return total

    def group(self) -> Computation:
        """A braced group, a bracketed group or a single atom: the argument of a head."""
        token = self.peek()
        if token == "{":
            self.take()
            return self.sequence("}")
        return self.atom(postfix=False)

    def atom(self, postfix: bool = True) -> Computation:
        token = self.take()
        result = Computation()
        letter_base = False
        if token is None:
            return result
        if token in _CLOSERS:
            result = self.sequence(_CLOSERS[token])
            if token in (r"\lfloor", r"\lceil"):
                result = result.headed(_HEAD_CLASS[token])
        elif token in _TWO_ARGUMENTS or token == r"\sqrt":
            if token == r"\sqrt" and self.peek() == "[":
                self.take()
                index = self.sequence("]")
                result.add(index)
            arguments = [self.group() for _ in range(2 if token in _TWO_ARGUMENTS else 1)]
            for argument in arguments:
                result.add(argument)
            if token in _HEAD_CLASS:
                result = result.headed(_HEAD_CLASS[token])
            else:
                result.operations += 1  # a quotient
        elif token in _HEAD_CLASS:
            result = self.function(token)
        elif token.startswith("\\") and token[1:].isalpha() and token in (r"\text", r"\mathrm", r"\operatorname"):
            result = self.group()
        elif _NUMBER_TOKEN_RE.match(token):
            result.largest = float(token)
        else:
            letter_base = len(token) == 1 and token.isalpha()
        while postfix and self.peek() in ("^", "_", "!", "'"):
            mark = self.take()
            if mark == "!":
                result = result.headed("combinatorial")
            elif mark == "_":
                self.group()  # an index names; it computes nothing
            elif mark == "^":
                exponent_tokens = self._exponent_tokens()
                exponent = _Reader(exponent_tokens).sequence()
                integer = bool(re.fullmatch(r"-?\d+", "".join(exponent_tokens)))
                if letter_base and integer:
                    result.operations += 1  # x^2: a product
                else:
                    exponent.operations = 0  # `2^{1/3}` is `\\sqrt[3]{2}`: the exponent is an index
                    result.add(exponent)
                    result = result.headed("root")
        return result

    def _exponent_tokens(self) -> list[str]:
        if self.peek() == "{":
            start = self.index + 1
            depth = 0
            while self.peek() is not None:
                token = self.take()
                depth += token == "{"
                depth -= token == "}"
                if depth == 0:
                    break
            return self.tokens[start : self.index - 1]
        token = self.take()
        return [token] if token is not None else []

    def function(self, head: str) -> Computation:
        """`\\log_3 10`, `\\sin^2 x`, `\\sin(2x)`, `\\sum_{k=1}^n k`: the head, its index and power, its argument."""
        index = Computation()
        power = None
        while self.peek() in ("_", "^"):
            mark = self.take()
            part = self.group()
            if mark == "_":
                index.add(part)
            else:
                power = part
        bracketed = self.peek() in ("(", "{", "[")
        argument = self.atom(postfix=False) if bracketed else self.sequence(stops=_ARGUMENT_STOPS)
        argument.add(index)
        result = argument.headed(_HEAD_CLASS[head])
        if power is not None:
            result.add(power)
            result = result.headed("root")
        return result


def computation(latex: str) -> Computation | None:
    """What is left to compute in `latex`, read from its tokens (see the module docstring); `None` when it is too long
    to read (over 2 000 tokens).

    Example:
        ```python
        >>> c = computation(r"\\sqrt{3+2\\sqrt2}"); (dict(c.heads), c.depth, c.inner)
        ({'root': 2}, 2, 2)
        >>> c = computation(r"\\log_3 5+\\log_3 2"); (dict(c.heads), c.depth, c.inner)
        ({'log': 2}, 1, 0)
        >>> c = computation(r"x^2+7x+10"); (dict(c.heads), c.depth, c.operations)
        ({}, 0, 4)

        ```
    """
    tokens = _tokens(latex)
    if len(tokens) > _MAX_TOKENS:
        return None
    reader = _Reader(tokens)
    total = reader.sequence()
    while reader.peek() is not None:  # an unbalanced closer: read on past it
        reader.take()
        total.add(reader.sequence())
    return total


def more_computed(answer: str, gold: str) -> bool:
    """Whether `answer` leaves more to compute than `gold`: heads nested more deeply; or, at the same depth, more
    arithmetic inside head arguments, more heads of some class, or a larger number inside a head's arguments (`\\sqrt{3+2\\sqrt2}` against `1+\\sqrt2`,
    `\\log_3 5+\\log_3 2` against `\\log_3 10`, `(1+\\sqrt2)^2` against `3+2\\sqrt2`). A form nested less deeply
    than its gold is never more computed (`\\frac{\\sqrt6+\\sqrt2}{4}` for `\\frac{\\sqrt{2+\\sqrt3}}{2}`).

    Example:
        ```python
        >>> more_computed(r"\\sqrt{3+2\\sqrt2}", r"1+\\sqrt2"), more_computed(r"(1+\\sqrt2)^2", r"3+2\\sqrt2")
        (True, True)
        >>> more_computed(r"\\frac{1+\\sqrt5}{2}", r"\\frac12+\\frac{\\sqrt5}{2}"), more_computed(r"2^{1/3}", r"\\sqrt[3]2")
        (False, False)

        ```
    """
    mine, theirs = computation(answer), computation(gold)
    if mine is None or theirs is None:
        return mine is None
    if mine.depth != theirs.depth:
        return mine.depth > theirs.depth
    if mine.inner > theirs.inner or any(count > theirs.heads[name] for name, count in mine.heads.items()):
        return True
    if mine.inner_largest > theirs.inner_largest:
        return (
            True  # a larger radicand or log argument than the gold's, the rest equal: `\\log_9 100` for `\\log_3 10`
        )
    # With transcendental heads, a term added around them is an identity not yet applied (`\\sec^2 x - 1` for
    # `\\tan^2 x`); with roots alone it may be an honest rearrangement (`\\frac12+\\frac{\\sqrt5}2`), and a
    # coefficient moved in or out of a quotient is one anywhere (`\\frac12\\sin 2x`).
    return bool(mine.heads.keys() & {"trig", "log"}) and mine.terms > theirs.terms
