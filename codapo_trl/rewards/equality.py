"""Compare and judge: whether the one value an answer states equals its gold, exactly and by type, and whether the
policy computed it or handed back an expression of the question (run in the grader's worker processes).

The grader reads as one pipeline: `extraction` takes the answer out of the completion (the last box, or the text after
a final-answer phrase), `form_reading` reads its LaTeX into a SymPy tree as written, and this module compares and
judges. docs/rewards.md states the rule with examples; in short:

1. **One value, every member agreeing.** A derivation in the box is read to its last clause (`\\sqrt{100-x}=9
   \\Rightarrow x=19` reads `x=19`); an equality chain is read to its last member, a first member that names the
   asked quantity is a label (`P(\\text{win}) = \\frac56`, `k_{\\max}=\\frac12`, `f(-2) = 18`), and every other
   member must equal the value read (`\\frac{2\\times3+4}{2+3}=\\dots=2` is paid, `2+2=5` is not). Earlier clauses of
   a derivation must hold for the value read where they can be checked.
2. **Equality is exact and typed** (`Value`, `same_value`). Exact values compare exactly: rationals as rationals,
   anything else by SymPy's exact simplification of the difference (with a 60-digit numerical check first, to
   refuse quickly, and as the last resort only where both sides are exact and the difference vanishes to 45
   digits). Nothing is rounded: a decimal answer stands for an exact gold only where the question asks for a decimal
   or an approximation, to the precision it asks for; a decimal gold is matched to the precision it is written in.
   A collection of values (a set or a list), a tuple, an interval, a relation, a matrix and a word are types: a
   value of one type never equals one of another, except what denotes the same thing exactly (an inequality in one
   variable and its interval, `\\emptyset` and "no solution", a pair and the open interval written the same way).
3. **A numeral gold asks for a numeral.** When the gold is written as a plain number (an integer, a decimal, a
   fraction in lowest terms, a mixed number), the answer must be one too (`\\boxed{5+2}` is not 7): the grader
   could finish any arithmetic left in the answer, so it is not a value the policy computed.
4. **Restatement is judged against the question** (`restates_question`). An answer that is, up to notation (the
   order of sums and products, brackets, `\\frac` against `/`) or up to SymPy's automatic evaluation, an expression
   the question itself states is refused, unless the gold is that same expression to the same degree (a "which of
   these" question, or a question that quotes its answer). Any other closed form equal to the gold is paid
   (factored or expanded, `\\binom{4020}{3015}^2` for `\\binom{4020}{1005}^2`).

Nothing strips letters from either side: a unit is read only where it is written as one (`form_reading`).
"""

from __future__ import annotations

import functools
import math
import random
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import sympy

from codapo_trl.rewards.form_reading import Mixed, prepare, read_form


__all__ = [
    "FALSE_RELATION",
    "NOT_A_NUMBER",
    "NOT_CLOSED",
    "OTHER_RELATION",
    "OTHER_TYPE",
    "RESTATED",
    "SEVERAL_VALUES",
    "UNREADABLE",
    "Value",
    "judge",
    "numeral",
    "read_gold",
    "read_value",
    "restates_question",
    "same_value",
]

NOT_A_NUMBER = "not a numeric literal"
SEVERAL_VALUES = "states several values"
FALSE_RELATION = "a member of its chain is not the answer"
OTHER_RELATION = "states a relation, not a value"
UNREADABLE = "answer not readable as written"
RESTATED = "restates an expression of the question"
OTHER_TYPE = "a value of another type"
NOT_CLOSED = "an operation written out, not carried out"

# Bounds on what the question contributes (the worker's deadline bounds the rest).
_MAX_QUESTION_CHARS = 20_000
_MAX_QUESTION_PIECES = 64
_MAX_PIECE_CHARS = 400
_MAX_QUESTION_KEYS = 4_000
_MAX_ITEMS = 32  # members of a collection, tuple or matrix compared pairwise

# ---------------------------------------------------------------------------------------------------------------------
# Numerals and SymPy's own evaluation
# ---------------------------------------------------------------------------------------------------------------------


def numeral(node: Any) -> sympy.Rational | None:
    """The exact value of a numeral as written, or `None` if `node` is not one.

    A numeral is an integer, a decimal, a quotient of integers in lowest terms with a denominator above 1 (either
    sign), a mixed number with a proper fraction, or the negation of one of these written once.

    Example:
        ```python
        >>> numeral(read_form("0.75")), numeral(read_form("\\\\frac{-3}{4}")), numeral(read_form("3\\\\frac12"))
        (3/4, -3/4, 7/2)
        >>> numeral(read_form("\\\\frac68")), numeral(read_form("7+12")), numeral(read_form("-(-19)"))
        (None, None, None)

        ```
    """
    if not isinstance(node, sympy.Basic) or isinstance(node, sympy.MatrixBase):
        return None
    if node.is_Integer or (node.is_Rational and not isinstance(node, sympy.Mul)):
        return sympy.Rational(node)
    if node.is_Float:
        return sympy.Rational(str(node)) if math.isfinite(float(node)) else None
    if isinstance(node, Mixed):
        whole, p, q = (int(a) for a in node.args)
        if 0 < p < q and math.gcd(p, q) == 1:
            return sympy.Rational(whole * q + (p if whole >= 0 else -p), q)
        return None
    if not isinstance(node, sympy.Mul):
        return None
    factors = list(node.args)
    sign = 1
    if sum(f == -1 for f in factors) == 1 and len(factors) > 1:
        factors.remove(sympy.Integer(-1))
        sign = -1
    if len(factors) == 1 and sign == -1 and isinstance(factors[0], sympy.Pow):
        bottom = factors[0]
        if bottom.args[0].is_Integer and bottom.args[0] > 1 and bottom.args[1] == -1:
            return sympy.Rational(-1, int(bottom.args[0]))  # \\frac{-1}{2}
    if len(factors) == 1:
        inner = factors[0]
        if sign == -1 and (inner.is_Number and inner.is_negative or isinstance(inner, sympy.Mul)):
            return None  # -(-19), -(-\\frac{3}{4})
        value = numeral(inner)
        return None if value is None else sign * value
    if len(factors) == 2:
        top, bottom = factors
        if isinstance(top, sympy.Pow):
            top, bottom = bottom, top
        if (
            top.is_Integer
            and isinstance(bottom, sympy.Pow)
            and bottom.args[0].is_Integer
            and bottom.args[1] == -1
            and bottom.args[0] > 1
            and math.gcd(int(top), int(bottom.args[0])) == 1
            and not (sign == -1 and top.is_negative)
        ):
            return sign * sympy.Rational(int(top), int(bottom.args[0]))
    return None


def evaluate(node: Any) -> Any:
    """`node` with SymPy's automatic evaluation applied bottom-up (what `evaluate=True` would have built)."""
    if isinstance(node, Mixed):
        whole, p, q = node.args
        return whole + sympy.Rational(p, q) if whole >= 0 else whole - sympy.Rational(p, q)
    if not isinstance(node, sympy.Basic) or not node.args or isinstance(node, (sympy.Symbol, sympy.Number)):
        return node
    if isinstance(node, sympy.MatrixBase):
        return node.applyfunc(evaluate)
    args = [evaluate(a) for a in node.args]
    try:
        return node.func(*args)
    except Exception:  # noqa: BLE001
        try:
            return node.func(*args, evaluate=False)
        except Exception:  # noqa: BLE001
            return node


def _key(node: Any) -> str:
    """A text key of `node` as written, up to notation: the order of the terms of sums and the factors of products,
    and their nesting (`(a+b)+c` is `a+(b+c)`), do not count."""
    if not isinstance(node, sympy.Basic):
        return repr(node)
    if not node.args:
        return str(node)
    if isinstance(node, (sympy.Add, sympy.Mul)):
        kind = type(node)
        flat: list[Any] = []
        stack = list(node.args)
        while stack:
            arg = stack.pop()
            if type(arg) is kind:
                stack.extend(arg.args)
            elif kind is sympy.Mul and arg == 1:
                continue
            else:
                flat.append(arg)
        return kind.__name__ + "(" + ",".join(sorted(_key(a) for a in flat)) + ")"
    if isinstance(node, sympy.MatrixBase):
        return "Matrix" + str(node.shape) + "(" + ",".join(_key(a) for a in node) + ")"
    return type(node).__name__ + "(" + ",".join(_key(a) for a in node.args) + ")"


def _evaluated_key(node: Any) -> str:
    try:
        return _key(evaluate(node))
    except Exception:  # noqa: BLE001
        return _key(node)


# ---------------------------------------------------------------------------------------------------------------------
# Typed values
# ---------------------------------------------------------------------------------------------------------------------

SCALAR, COLLECTION, TUPLE, PAIR, INTERVAL, RELATION, MATRIX, TEXT, EMPTY = (
    "scalar", "collection", "tuple", "pair", "interval", "relation", "matrix", "text", "empty",
)  # fmt: skip
_EMPTY_WORDS = frozenset(
    {"nosolution", "nosolutions", "norealsolution", "norealsolutions", "none", "emptyset", "varnothing", "nosuch"}
)


@dataclass(frozen=True)
class Value:
    """One value as read, with its type.

    Args:
        kind (`str`): `scalar`, `collection` (a set or a list: order-free), `tuple`, `pair` (`(a, b)`: a point or the
            open interval, written the same way), `interval` (an interval or a union of them), `relation`, `matrix`,
            `text` (a word answer) or `empty` (the empty set, "no solution").
        node (`Any`): The SymPy tree as written.
        items (`tuple`): The members of a collection, tuple, pair or matrix (as written), else `(node,)`.
    """

    kind: str
    node: Any
    items: tuple = ()


def _word_name(node: Any) -> str | None:
    if isinstance(node, sympy.Symbol) and len(node.name) > 1:
        return re.sub(r"[^a-z0-9]", "", node.name.lower())
    return None


def _typed(node: Any, text: str) -> Value:
    stripped = text.strip()
    if isinstance(node, sympy.Eq) and isinstance(node.lhs, sympy.Symbol) and isinstance(node.rhs, sympy.Set):
        node, stripped = node.rhs, re.split(r"\\in(?![A-Za-z])|=", stripped, maxsplit=1)[-1].strip()  # x \in [0, 1)
    if isinstance(node, sympy.sets.sets.EmptySet) or _word_name(node) in _EMPTY_WORDS:
        return Value(EMPTY, node)
    if _word_name(node) is not None and not node.name.startswith(("\\", "_")):
        return Value(TEXT, node)
    if isinstance(node, sympy.FiniteSet):
        return Value(COLLECTION, node, tuple(node.args))
    if isinstance(node, sympy.Tuple):
        return Value(TUPLE, node, tuple(node.args))
    if isinstance(node, sympy.Interval):
        finite = node.start.is_finite and node.end.is_finite
        if node.left_open and node.right_open and finite and stripped.startswith("(") and stripped.endswith(")"):
            return Value(PAIR, node, (node.start, node.end))
        return Value(INTERVAL, node)
    if isinstance(node, (sympy.Union, sympy.Intersection, sympy.Complement)):
        return Value(INTERVAL, node)
    if isinstance(node, sympy.MatrixBase):
        return Value(MATRIX, node, tuple(node))
    if isinstance(node, (sympy.Rel, sympy.And, sympy.Or)):
        return Value(RELATION, node)
    return Value(SCALAR, node, (node,))


def read_value(prepared: str) -> Value | None:
    """The typed value of a prepared answer (`form_reading.prepare`), or `None` when it cannot be read.

    Example:
        ```python
        >>> [read_value(t).kind for t in ("19", "(1,5)", "\\\\{1,5\\\\}", "1, 5", "[1,5)", "x>3", "\\\\emptyset")]
        ['scalar', 'pair', 'collection', 'collection', 'interval', 'relation', 'empty']

        ```
    """
    node = read_form(prepared)
    if node is None:
        return None
    return _typed(node, prepared)


def _expand_pm(text: str) -> list[str]:
    """The texts a `\\pm` (or `\\mp`) stands for, at most two signs (four texts); `[text]` without one. A leading
    `\\pm` is the parser's own (`\\pm 3` is the set of -3 and 3)."""
    texts = [text]
    for _ in range(2):
        grown = []
        for item in texts:
            match = re.search(r"\\(pm|mp)(?![A-Za-z])", item)
            if match is None or not item[: match.start()].strip():
                grown.append(item)
                continue
            first, second = ("+", "-") if match.group(1) == "pm" else ("-", "+")
            grown.extend(item[: match.start()] + sign + item[match.end() :] for sign in (first, second))
        texts = grown
    return texts


def _read_members(prepared: str) -> Value | None:
    """`read_value`, with a `\\pm` inside the expression read as the collection of both values."""
    texts = _expand_pm(prepared)
    if len(texts) == 1:
        return read_value(prepared)
    nodes = [read_form(t) for t in texts]
    if any(n is None for n in nodes):
        return None
    return Value(COLLECTION, sympy.FiniteSet(*nodes, evaluate=False), tuple(nodes))


# ---------------------------------------------------------------------------------------------------------------------
# Exact equality
# ---------------------------------------------------------------------------------------------------------------------


def _has_float(node: Any) -> bool:
    return isinstance(node, sympy.Basic) and node.has(sympy.Float)


def _exact(node: Any) -> Any:
    """`node` evaluated, with every decimal it writes read as the exact rational it spells (`0.1` is 1/10)."""
    value = evaluate(node)
    if _has_float(value):
        value = value.xreplace({f: sympy.Rational(str(f)) for f in value.atoms(sympy.Float)})
    return value


def _numeric(value: Any, digits: int = 60) -> complex | None:
    try:
        number = complex(sympy.N(value, digits))
    except (TypeError, ValueError, OverflowError, ZeroDivisionError):
        return None
    return number if math.isfinite(number.real) and math.isfinite(number.imag) else None


def _zero(difference: Any, scale: Any) -> bool:
    """Whether an exact difference is 0: SymPy's evaluation, then simplification; numbers are first evaluated to 60
    digits, so that a clearly non-zero difference is refused without simplifying."""
    if difference == 0:
        return True
    if not difference.free_symbols:
        estimate = _numeric(difference)
        size = _numeric(scale)
        magnitude = max(1.0, abs(size)) if size is not None else 1.0
        if estimate is not None and abs(estimate) > 1e-30 * magnitude:
            return False
    try:
        if sympy.simplify(difference) == 0:
            return True
    except Exception:  # noqa: BLE001
        pass
    try:
        if sympy.expand(difference) == 0 or sympy.nsimplify(difference) == 0:
            return True
    except Exception:  # noqa: BLE001
        pass
    if difference.free_symbols:
        return _zero_at_points(difference)
    estimate = _numeric(difference, 120)
    return estimate is not None and abs(estimate) < 1e-45  # exact sides whose difference vanishes to 45 digits


def _zero_at_points(difference: Any) -> bool:
    """A difference in letters that SymPy cannot simplify to 0: zero to 40 digits at five rational points."""
    symbols = sorted(difference.free_symbols, key=str)
    generator = random.Random(20260)
    for _ in range(5):
        point = {s: sympy.Rational(generator.randint(11, 97), generator.randint(7, 31)) for s in symbols}
        try:
            value = _numeric(difference.xreplace(point), 60)
        except Exception:  # noqa: BLE001
            return False
        if value is None or abs(value) > 1e-40:
            return False
    return True


def _scalar_equal(answer: Any, gold: Any, context: _Context) -> bool:
    if _has_float(gold) and not gold.free_symbols:
        return _matches_decimal_gold(answer, gold, context.gold_ulp)
    if _has_float(answer) and not _has_float(gold):
        exact_answer, exact_gold = _as_fraction(answer), _as_fraction(gold)
        if exact_answer is not None and exact_answer == exact_gold:
            return True  # `0.75` for `\frac34`: the decimal spells the gold's exact value, nothing is rounded
        ulp = context.asked_ulp
        if ulp is None:
            return False  # a rounded decimal for an exact gold, where the question asks for no decimal
        return _within(answer, gold, ulp if ulp > 0 else _written_ulp(context.answer_text))
    if answer == gold:
        return True  # the same tree (`\\infty`, `\\pi`): nothing to compute
    try:
        a, g = _exact(answer), _exact(gold)
        if a == g:
            return True
        if a.is_Rational and g.is_Rational:
            return a == g
        if isinstance(a, sympy.Basic) and isinstance(g, sympy.Basic):
            if (a.is_rational is True and g.is_irrational is True) or (a.is_irrational is True and g.is_rational):
                return False
            return _zero(a - g, g)
    except Exception:  # noqa: BLE001
        return False
    return False


def _within(answer: Any, gold: Any, ulp: Fraction | None) -> bool:
    """Whether `answer` is `gold` rounded at `ulp` (half of it either way), exactly in rationals."""
    if ulp is None:
        return False
    a, g = _as_fraction(answer), _as_fraction(gold)
    if a is None or g is None:
        estimate_a, estimate_g = _numeric(_exact(answer)), _numeric(_exact(gold))
        if estimate_a is None or estimate_g is None or estimate_a.imag or estimate_g.imag:
            return False
        return abs(estimate_a.real - estimate_g.real) <= float(ulp) / 2 * (1 + 1e-12)
    return abs(a - g) <= ulp / 2


def _as_fraction(node: Any) -> Fraction | None:
    try:
        value = _exact(node)
    except Exception:  # noqa: BLE001
        return None
    if getattr(value, "is_Rational", False):
        return Fraction(int(value.p), int(value.q))
    return None


def _matches_decimal_gold(answer: Any, gold: Any, ulp: Fraction | None) -> bool:
    """A decimal gold is matched at the precision it is written in: the answer, rounded half up at the gold's last
    place, is the gold (`0.333` and `\\frac13` for `0.33`; not `0.3`)."""
    a, g = _as_fraction(answer), _as_fraction(gold)
    if a is None or g is None or ulp is None:
        return False
    rounded = math.floor(a / ulp + Fraction(1, 2)) * ulp
    return rounded == g


def _written_ulp(text: str) -> Fraction | None:
    """The unit in the last place of the decimal `text` writes (`0.33` -> 1/100, `6.67\\times10^{-11}` -> 1/10^13),
    for a number of at least three significant digits; `None` otherwise."""
    match = re.search(r"(\d*)\.(\d+)", text)
    if match is None:
        return None
    digits = (match.group(1) + match.group(2)).lstrip("0")
    exponent = re.search(r"(?:\\times|\\cdot)\s*10\s*\^\s*\{?\s*([-+]?\d+)", text)
    places = len(match.group(2)) - (int(exponent.group(1)) if exponent else 0)
    if len(digits) < 3:
        return None
    return Fraction(1, 10**places) if places >= 0 else Fraction(10 ** (-places))


def _gold_ulp(text: str) -> Fraction | None:
    match = re.search(r"(\d*)\.(\d+)|(\d+)", text)
    if match is None:
        return None
    places = len(match.group(2)) if match.group(2) else 0
    exponent = re.search(r"(?:\\times|\\cdot)\s*10\s*\^\s*\{?\s*([-+]?\d+)", text)
    places -= int(exponent.group(1)) if exponent else 0
    return Fraction(1, 10**places) if places >= 0 else Fraction(10 ** (-places))


_PLACE_WORDS = {
    "whole number": 0, "integer": 0, "unit": 0, "one": 0, "ones": 0, "dollar": 0, "degree": 0, "percent": 0,
    "tenth": 1, "tenths": 1, "hundredth": 2, "hundredths": 2, "cent": 2, "thousandth": 3, "thousandths": 3,
    "ten-thousandth": 4, "ten thousandth": 4, "ten": -1, "tens": -1, "hundred": -2, "hundreds": -2,
    "thousand": -3, "thousands": -3,
}  # fmt: skip
_COUNT_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_ASKS_DECIMAL_RE = re.compile(
    r"\bdecimal|\bnearest\b|\bround|approximat|\bestimate|significant (?:figure|digit)|\bto \w+ places?\b", re.I
)
_NEAREST_RE = re.compile(r"nearest\s+(whole number|ten[- ]thousandth|[a-z]+)", re.I)
_PLACES_RE = re.compile(r"\b(\d+|one|two|three|four|five|six)\s+(?:decimal\s+)?places?\b", re.I)
_SIGNIFICANT_RE = re.compile(r"\b(\d+|one|two|three|four|five|six)\s+significant\s+(?:figure|digit)", re.I)


@functools.lru_cache(maxsize=1024)
def asked_precision(question: str) -> Fraction | None:
    """The precision a question asks a decimal answer for: the unit in the last place asked (`to the nearest
    tenth` -> 1/10), `Fraction(0)` when it asks for a decimal or an approximation without a precision, `None` when
    it asks for none (an exact answer).

    Example:
        ```python
        >>> asked_precision("Round to the nearest hundredth."), asked_precision("Express as a decimal.")
        (Fraction(1, 100), Fraction(0, 1))
        >>> asked_precision("Give your answer to 3 decimal places."), asked_precision("Find x.") is None
        (Fraction(1, 1000), True)

        ```
    """
    text = question[-_MAX_QUESTION_CHARS:]
    if not _ASKS_DECIMAL_RE.search(text):
        return None
    nearest = _NEAREST_RE.search(text)
    if nearest and nearest.group(1).lower() in _PLACE_WORDS:
        places = _PLACE_WORDS[nearest.group(1).lower()]
        return Fraction(1, 10**places) if places >= 0 else Fraction(10 ** (-places))
    count = _PLACES_RE.search(text)
    if count:
        places = int(_COUNT_WORDS.get(count.group(1).lower(), count.group(1)))
        return Fraction(1, 10 ** min(places, 50))
    return Fraction(0)  # asked for a decimal at no stated precision (significant figures: at the answer's own)


@dataclass(frozen=True)
class _Context:
    question: str
    answer_text: str
    gold_text: str

    @property
    def asked_ulp(self) -> Fraction | None:
        return asked_precision(self.question) if self.question else None

    @property
    def gold_ulp(self) -> Fraction | None:
        return _gold_ulp(self.gold_text)


def _one_variable_set(node: Any) -> Any:
    if not isinstance(node, (sympy.Rel, sympy.And, sympy.Or)) or isinstance(node, sympy.Eq):
        return None
    if len(node.free_symbols) != 1:
        return None
    try:
        return node.as_set()
    except Exception:  # noqa: BLE001
        return None


def _as_set(value: Value) -> Any:
    if value.kind in (INTERVAL, PAIR):
        return evaluate(value.node)
    if value.kind == RELATION:
        return _one_variable_set(value.node)
    if value.kind == EMPTY:
        return sympy.S.EmptySet
    return None


def _sets_equal(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return False
    try:
        return bool(sympy.simplify(sympy.Complement(a, b)) == sympy.S.EmptySet) and bool(
            sympy.simplify(sympy.Complement(b, a)) == sympy.S.EmptySet
        )
    except Exception:  # noqa: BLE001
        return a == b


def _relations_equal(a: Any, b: Any) -> bool:
    """Two equations are equal when one side minus the other of each is a non-zero constant multiple of the other's
    (`2y = 4x + 6` is `y = 2x + 3`); two inequalities in one variable when they hold on the same set."""
    if isinstance(a, sympy.Eq) and isinstance(b, sympy.Eq):
        left, right = evaluate(a.lhs - a.rhs), evaluate(b.lhs - b.rhs)
        if left == 0 or right == 0:
            return left == right
        try:
            ratio = sympy.simplify(left / right)
        except Exception:  # noqa: BLE001
            return False
        return bool(ratio.is_number and ratio != 0 and ratio.is_finite)
    set_a, set_b = _one_variable_set(a), _one_variable_set(b)
    if set_a is not None and set_b is not None:
        return a.free_symbols == b.free_symbols and _sets_equal(set_a, set_b)
    if type(a) is type(b) and isinstance(a, sympy.Rel):
        return _zero(evaluate((a.lhs - a.rhs) - (b.lhs - b.rhs)), sympy.Integer(1))
    return False


def _matched(answers: tuple, golds: tuple, context: _Context) -> bool:
    """Whether two collections hold the same values, each member matched once (order-free)."""
    if len(answers) != len(golds) or len(golds) > _MAX_ITEMS:
        return False
    left = list(golds)
    for item in answers:
        for index, gold in enumerate(left):
            if _scalar_equal(_label_value(item), _label_value(gold), context):
                del left[index]
                break
        else:
            return False
    return True


def _label_value(node: Any) -> Any:
    """`x = 2` inside a collection is the value 2 (`x=1 \\text{ or } x=2`)."""
    if isinstance(node, sympy.Eq) and isinstance(node.lhs, sympy.Symbol):
        return node.rhs
    return node


def same_value(answer: Value, gold: Value, context: _Context | None = None) -> bool:
    """Whether two typed values are the same value, exactly (see the module docstring).

    Example:
        ```python
        >>> v = lambda t: read_value(prepare(t)[0])
        >>> same_value(v("1+\\\\sqrt2"), v("\\\\sqrt{3+2\\\\sqrt2}")), same_value(v("(1,5)"), v("\\\\{1,5\\\\}"))
        (True, False)
        >>> same_value(v("0.0"), v("2^{-30}")), same_value(v("x>3"), v("(3,\\\\infty)"))
        (False, True)

        ```
    """
    context = context or _Context("", "", "")
    kinds = {answer.kind, gold.kind}
    if answer.kind == gold.kind == SCALAR:
        return _scalar_equal(answer.node, gold.node, context)
    if answer.kind == gold.kind == COLLECTION:
        return _matched(answer.items, gold.items, context)
    if kinds <= {TUPLE, PAIR}:
        return len(answer.items) == len(gold.items) and all(
            _scalar_equal(a, g, context) for a, g in zip(answer.items, gold.items)
        )
    if answer.kind == gold.kind == MATRIX:
        return answer.node.shape == gold.node.shape and all(
            _scalar_equal(a, g, context) for a, g in zip(answer.items, gold.items)
        )
    if answer.kind == gold.kind == TEXT:
        return _word_name(answer.node) == _word_name(gold.node)
    if answer.kind == gold.kind == EMPTY:
        return True
    if answer.kind == gold.kind == RELATION:
        return _relations_equal(answer.node, gold.node)
    if kinds <= {INTERVAL, PAIR, RELATION, EMPTY} and kinds & {INTERVAL, RELATION, EMPTY}:
        return _sets_equal(_as_set(answer), _as_set(gold))  # an inequality in one variable is its interval
    return False


# ---------------------------------------------------------------------------------------------------------------------
# The question's own expressions
# ---------------------------------------------------------------------------------------------------------------------

_MATH_SPAN_RE = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
# Plain-text maths outside delimiters: runs without spaces (`x^2-1`, `(x+1)^2`, `sqrt(8)`, `7/2`) and arithmetic
# spaced around its operators (`12 + 7`), ending before punctuation that closes a sentence.
_BARE_MATH_RE = re.compile(r"[^\s,;:?!$]+(?:\s*[-+*/^=×÷·]\s*[^\s,;:?!$]+)*")
_BARE_MARK_RE = re.compile(r"[\d+\-*/^()=×÷·√]")
_PLAIN_SQRT_RE = re.compile(r"(?<![\\A-Za-z])sqrt\(([^()]*)\)")
_PLAIN_FUNCTIONS_RE = re.compile(r"(?<![\\A-Za-z])(sqrt|sin|cos|tan|log|ln|exp|pi)(?![A-Za-z])")
_PIECE_SPLIT_RE = re.compile(
    r"\\(?:le|ge|leq|geq|ne|neq|approx|Rightarrow|implies|iff|quad|qquad|text\s*\{[^{}]*\})(?![A-Za-z])|[=<>,;:]"
)


def _pieces(question: str) -> list[str]:
    """The maths a question writes (its `$...$`, `\\(...\\)` and `\\[...\\]` spans, and plain arithmetic such as
    `12 + 7`), cut at relations and commas: each piece is an expression the question states."""
    text = question[-_MAX_QUESTION_CHARS:]
    spans = [next(g for g in m.groups() if g is not None) for m in _MATH_SPAN_RE.finditer(text)]
    for match in _BARE_MATH_RE.finditer(_MATH_SPAN_RE.sub(" ", text)):
        run = match.group().rstrip(".")
        if _BARE_MARK_RE.search(run) and re.search(r"[\dA-Za-z]", run):
            run = _PLAIN_SQRT_RE.sub(r"\\sqrt{\1}", run)  # sqrt(8) is \\sqrt{8}
            spans.append(_PLAIN_FUNCTIONS_RE.sub(lambda m: "\\" + m.group(1), run).replace("×", "\\times "))
    pieces: list[str] = []
    for span in spans:
        for piece in _PIECE_SPLIT_RE.split(span):
            piece = piece.strip()
            if piece and len(piece) <= _MAX_PIECE_CHARS and any(c.isalnum() for c in piece):
                pieces.append(piece)
        pieces.append(span.strip())
        if len(pieces) >= _MAX_QUESTION_PIECES:
            break
    return pieces[:_MAX_QUESTION_PIECES]


@functools.lru_cache(maxsize=256)
def _question_keys(question: str) -> tuple[frozenset[str], frozenset[str]]:
    """The keys (as written, and after SymPy's automatic evaluation) of every compound expression the question
    states, and of every compound part of one."""
    from codapo_trl.rewards.checks import precheck

    written: set[str] = set()
    evaluated: set[str] = set()
    for piece in _pieces(question):
        if len(piece) > _MAX_PIECE_CHARS or precheck(piece) is not None:
            continue
        prepared = prepare(piece)[0]
        node = read_form(prepared) if prepared else None
        if not isinstance(node, sympy.Basic):
            continue
        for part in sympy.preorder_traversal(node):
            if len(written) >= _MAX_QUESTION_KEYS:
                break
            if isinstance(part, sympy.Basic) and part.args and not isinstance(part, sympy.Number):
                written.add(_key(part))
                evaluated.add(_evaluated_key(part))
    return frozenset(written), frozenset(evaluated)


def restates_question(answer: Any, gold: Any, question: str) -> bool:
    """Whether `answer` (a tree as written) hands back an expression the question states: the same expression up to
    notation, or up to SymPy's automatic evaluation, where the gold is not that expression to the same degree.

    Example:
        ```python
        >>> q = "Simplify $\\\\sqrt{8}$."
        >>> restates_question(read_form("\\\\sqrt{8}"), read_form("2\\\\sqrt2"), q)
        True
        >>> restates_question(read_form("2\\\\sqrt2"), read_form("2\\\\sqrt2"), q)
        False
        >>> restates_question(read_form("7+12"), read_form("19"), "What is 12 + 7?")
        True

        ```
    """
    if not question or not isinstance(answer, sympy.Basic) or not answer.args or numeral(answer) is not None:
        return False  # a numeral has nothing left to compute, whatever the question writes (`\\frac72` for 7/2)
    written, evaluated = _question_keys(question)
    answer_key = _key(answer)
    if answer_key == _key(gold):
        return False  # written as the gold is: the question states its own answer ("which of these")
    if answer_key in written:
        return True
    evaluated_key = _evaluated_key(answer)
    return evaluated_key in evaluated and _evaluated_key(gold) != evaluated_key


# ---------------------------------------------------------------------------------------------------------------------
# Reading the gold, and the verdict
# ---------------------------------------------------------------------------------------------------------------------

_UNIT_AFTER_NUMBER_RE = re.compile(r"([-+]?\d+(?:\.\d+)?)\s+[A-Za-z]{1,3}(?:\s*/\s*[A-Za-z]{1,3})?(?:\^\{?\d\}?)?")
_OR_RE = re.compile(r"\bor\b")
_ALTERNATIVES_RE = re.compile(r"\s+OR\s+|\s*\\(?:text|mathrm)\s*\{\s*OR\s*\}\s*")


@functools.lru_cache(maxsize=4096)
def read_gold(gold: str) -> tuple[Value, ...] | None:
    """The values a gold answer accepts: one, or several alternatives joined by `OR` (Omni-MATH's way of writing two
    forms of one answer) or by "or" (`2 \\text{ or } 3`: either value, or both where the question asks for all);
    `None` when it cannot be read. A `\\pm` stands for both values, and a unit written after a number (`7 m`) may
    be left out.

    Example:
        ```python
        >>> [v.kind for v in read_gold("\\\\frac{1}{2} OR 0.5")], [v.kind for v in read_gold("1 \\\\text{ or } 5")]
        (['scalar', 'scalar'], ['scalar', 'scalar', 'collection'])
        >>> read_gold("\\\\frac{-4\\\\pm\\\\sqrt{31}}{15}")[0].kind
        'collection'

        ```
    """
    values = []
    for part in _ALTERNATIVES_RE.split(gold):
        prepared, _ = prepare(part)
        value = _read_members(prepared) if prepared else None
        if value is None:
            continue
        if value.kind == RELATION and isinstance(value.node, sympy.Eq) and _is_label(value.node.lhs):
            value = _typed(value.node.rhs, _top_level_split(prepared, _EQUALS_RE)[-1])  # `y = 2x + 3`: its value
        unit = _UNIT_AFTER_NUMBER_RE.fullmatch(prepared)
        if unit is not None and value.kind == SCALAR:
            number = read_form(unit.group(1))  # `7 m`, `48 km/h`: a unit written after the number, as datasets do
            if number is not None:
                values.append(Value(SCALAR, number, (number,)))
        if value.kind == COLLECTION and len(value.items) > 1 and _OR_RE.search(part):
            values.extend(_typed(item, str(item)) for item in value.items)  # `2 \\text{ or } 3`: either one
            values.append(value)  # ...or both, where the question asks for every value
            continue
        if value.kind == COLLECTION and len(value.items) > 1:
            first = Value(SCALAR, value.items[0], (value.items[0],))
            if all(same_value(Value(SCALAR, item, (item,)), first) for item in value.items[1:]):
                values.extend(Value(SCALAR, item, (item,)) for item in value.items)  # forms of one value
                continue
        values.append(value)
    return tuple(values) or None


_CLAUSE_RE = re.compile(r"\\(?:Rightarrow|implies|Longrightarrow|therefore|iff|Leftrightarrow)(?![A-Za-z])|;")
_DOTS_RE = re.compile(r"^\s*(?:\\[lc]?dots|\\ldots|\.\.\.|…)\s*$")


def _top_level_split(text: str, separators: re.Pattern) -> list[str]:
    parts, depth, start = [], 0, 0
    for match in separators.finditer(text):
        depth = _depth(text, match.start())
        if depth == 0:
            parts.append(text[start : match.start()])
            start = match.end()
    parts.append(text[start:])
    return parts


def _depth(text: str, end: int) -> int:
    depth = 0
    index = 0
    while index < end:
        char = text[index]
        if char == "\\" and index + 1 < end and text[index + 1] in "{}":
            index += 2
            continue
        if char in "{([":
            depth += 1
        elif char in "})]":
            depth -= 1
        index += 1
    return depth


_EQUALS_RE = re.compile(r"(?<![<>!:\\])=(?!=)")
_COMMA_RE = re.compile(r",")
_NEGATED_RE = re.compile(r"\\not(?![A-Za-z])|\\neq?(?![A-Za-z])|\u2260|!=")
_LABELLED_LIST_RE = re.compile(r"\s*[A-Za-z](?:_\{?\w+\}?)?\s*=\s*([^=]+,[^=]+)")


def _is_label(node: Any) -> bool:
    """A name that labels a value: `x`, `a_1`, `f(x)`, `f(3)`, `QM`, `\\tan A`, `f^{-1}(x)`."""
    from sympy.core.function import AppliedUndef

    if isinstance(node, (sympy.Symbol, AppliedUndef)):
        return True
    if isinstance(node, sympy.Mul):
        return all(isinstance(f, (sympy.Symbol, AppliedUndef)) for f in node.args)  # QM, AB
    if isinstance(node, sympy.Pow):
        return node.args[1] == -1 and _is_label(node.args[0])  # f^{-1}(x)
    if isinstance(node, sympy.Function) and len(node.args) == 1:
        return isinstance(node.args[0], sympy.Symbol)  # \\tan A
    return False


def _rounded_to(node: Any) -> Any:
    """The exact side of `exact \\approx decimal` when the decimal is that value rounded (or cut) at its own last
    place (`\\sqrt{53} \\approx 7.28`); else `None` (`19 \\approx 20` states no value)."""
    if not (str(getattr(node, "func", "")) == "approx" and len(node.args) == 2):
        return None
    exact, rounded = node.args
    if not getattr(rounded, "is_Float", False) or _has_float(exact):
        return None
    places = len(str(rounded).rstrip("0").partition(".")[2])
    estimate = _numeric(_exact(exact))
    if estimate is None or estimate.imag:
        return None
    return exact if abs(estimate.real - float(rounded)) <= 10.0**-places else None


def _approximates(node: Any) -> bool:
    return isinstance(node, sympy.Basic) and any(
        str(getattr(part, "func", "")) == "approx" for part in sympy.preorder_traversal(node)
    )


@dataclass(frozen=True)
class Reading:
    """What the judge read of an answer: the value read (`None` with `reason` when it was refused before any
    comparison), the members of its chain that must agree with it, and the text of the value read."""

    value: Value | None
    others: tuple = ()
    text: str = ""
    reason: str | None = None
    clauses: tuple = ()
    raw: str = ""


def _read_answer(answer: str, gold_is_relation: bool, gold_has_letters: bool) -> Reading:
    clauses = [c for c in _top_level_split(answer, _CLAUSE_RE) if c.strip()]
    if not clauses:
        return Reading(None, reason=UNREADABLE)
    last = clauses[-1]
    if _NEGATED_RE.search(last):
        return Reading(None, reason=OTHER_RELATION)  # `x \not= 19`, `x \neq 19` state no value
    prepared, problem = prepare(last)
    if problem is not None:
        return Reading(None, reason=problem)
    listed = _LABELLED_LIST_RE.fullmatch(prepared)
    if listed is not None and not gold_is_relation:
        prepared = listed.group(1)  # `x = -2, 7`: the name of the values listed
    if gold_is_relation:
        value = _read_members(prepared)
        return Reading(value, text=prepared, reason=None if value else UNREADABLE, raw=last)
    members = [m for m in _top_level_split(prepared, _EQUALS_RE) if not _DOTS_RE.match(m)]
    if len(members) == 1 or len(_top_level_split(prepared, _COMMA_RE)) > 1:  # `x=1, x=5`: a collection
        value = _read_members(prepared)
        return Reading(
            value, text=prepared, reason=None if value else UNREADABLE, clauses=tuple(clauses[:-1]), raw=last
        )
    readings = [(m, _member(m)) for m in members]
    if len(readings) == 2 and readings[1][1] is not None and _is_label(readings[1][1]):
        readings.reverse()  # `19 = x`: the name on the right
    first_text, first = readings[0]
    label = (
        not first_text.strip()  # `\\operatorname{lcm} = 90`: a name in words, dropped by `prepare`
        or (first is None and re.search(r"[A-Za-z]", first_text) is not None)
        or (first is not None and _is_label(first))
        or (first is not None and not gold_has_letters and bool(getattr(first, "free_symbols", None)))
    )
    rest = readings[1:] if label else readings
    if any(node is None for _, node in rest):
        return Reading(None, reason=UNREADABLE)
    value_text = rest[-1][0].strip()
    value = _read_members(value_text)
    if value is None:
        return Reading(None, reason=UNREADABLE)
    others = tuple(_typed(node, text) for text, node in rest[:-1])
    return Reading(value, others, value_text, clauses=tuple(clauses[:-1]), raw=last)


def _member(text: str) -> Any:
    """The tree of one member of a chain (a `\\pm` in it read as both values), or `None`."""
    if not text.strip():
        return None
    if re.search(r"\\(?:pm|mp)(?![A-Za-z])", text):
        value = _read_members(text.strip())
        return None if value is None else value.node
    return read_form(text.strip())


def _clauses_hold(clauses: tuple, value: Value) -> bool:
    """Whether the earlier clauses of a derivation hold for the value read, where that can be checked: a clause in
    numbers must be true, a clause in the one letter the value names must be true at that value."""
    for clause in clauses[-4:]:
        prepared, _ = prepare(clause)
        node = read_form(prepared) if prepared else None
        if not isinstance(node, sympy.Eq) or value.kind != SCALAR:
            continue
        symbols = node.free_symbols
        try:
            if not symbols:
                truth = _zero(evaluate(node.lhs - node.rhs), sympy.Integer(1))
            elif len(symbols) == 1 and value.node is not None and not value.node.free_symbols:
                symbol = next(iter(symbols))
                difference = evaluate((node.lhs - node.rhs).xreplace({symbol: evaluate(value.node)}))
                truth = _zero(difference, sympy.Integer(1))
            else:
                continue
        except Exception:  # noqa: BLE001
            continue
        if not truth:
            return False
    return True


def judge(answer: str, gold: str, question: str = "", kind: str = "math") -> tuple[bool | None, str | None, str, str]:
    """The verdict on one extracted answer against one extracted gold: `(correct, reason, answer_read, gold_read)`.

    `correct` is `None` when the gold cannot be read. `kind` is `"math"`, `"number"` (the answer must be a numeral
    whatever the gold) or `"value"` (the value only: no numeral rule and no question, for analyses).

    Example:
        ```python
        >>> judge("\\\\frac{2\\\\times3+4}{2+3}=\\\\dots=2", "2")[:2], judge("2+2=5", "5")[:2]
        ((True, None), (False, 'a member of its chain is not the answer'))
        >>> judge("0.0", "2^{-30}")[:2], judge("\\\\{1,5\\\\}", "(1,5)")[:2]
        ((False, None), (False, None))
        >>> judge("\\\\cos 3\\\\theta", "4\\\\cos^3\\\\theta-3\\\\cos\\\\theta", "Express $\\\\cos 3\\\\theta$ in terms of $\\\\cos\\\\theta$.")[:2]
        (False, 'restates an expression of the question')

        ```
    """
    golds = read_gold(gold)
    if golds is None:
        return None, "gold not parseable", "", ""
    gold_text = sympy.sstr(golds[0].node, full_prec=False)[:200]
    gold_is_relation = all(g.kind == RELATION for g in golds)
    letters = any(isinstance(g.node, sympy.Basic) and bool(g.node.free_symbols) for g in golds)
    reading = _read_answer(answer, gold_is_relation, letters)
    if reading.value is None:
        return False, reading.reason, "", gold_text
    value = reading.value
    answer_text = sympy.sstr(value.node, full_prec=False)[:200]
    if value.kind == SCALAR and _approximates(value.node):
        exact = _rounded_to(value.node)
        if exact is None:
            return False, OTHER_RELATION, answer_text, gold_text
        value = Value(SCALAR, exact, (exact,))
    verdict_reason: str | None = None
    for gold_value in golds:
        gold_prepared = prepare(_ALTERNATIVES_RE.split(gold)[0])[0] or gold
        context = _Context(question if kind != "value" else "", reading.text, gold_prepared)
        reason = _judge_against(value, reading, gold_value, kind, context)
        if reason is None:
            return True, None, answer_text, gold_text
        verdict_reason = verdict_reason or (reason if reason != "" else None)
    return False, verdict_reason, answer_text, gold_text


_NOT_CARRIED_OUT = (
    sympy.Integral, sympy.Sum, sympy.Product, sympy.Limit, sympy.Derivative, sympy.Determinant,
)  # fmt: skip


def _left_to_carry_out(node: Any) -> bool:
    """Whether an answer still holds an integral, a sum, a product, a limit, a derivative or a determinant: an
    operation written out, not carried out, so no closed form of a value."""
    return isinstance(node, sympy.Basic) and node.has(*_NOT_CARRIED_OUT)


def _squeezed(text: str) -> str:
    return re.sub(r"\s+|\\[,;:! ]|\\left|\\right", "", text)


def _restates_text(raw: str, context: _Context) -> bool:
    """Whether the answer, as the policy wrote it, is a piece the question writes (`0.\\overline{36}` for "Express
    $0.\\overline{36}$ as a fraction"), where the gold is written otherwise; what `prepare` reads before the
    comparison (a repeating decimal read as its fraction) cannot hide it."""
    answer = _squeezed(raw)
    return (
        bool(answer)
        and answer != _squeezed(context.gold_text)
        and answer in {_squeezed(piece) for piece in _pieces(context.question)}
    )


def _judge_against(value: Value, reading: Reading, gold: Value, kind: str, context: _Context) -> str | None:
    """`None` when `value` is paid for `gold`; else the reason (`""` for a plain wrong value)."""
    if value.kind == RELATION and gold.kind == SCALAR:
        return OTHER_RELATION
    gold_number = numeral(gold.node) if gold.kind == SCALAR else None
    if kind == "number" or (kind != "value" and gold_number is not None):
        if value.kind != SCALAR:
            return SEVERAL_VALUES if value.kind in (COLLECTION, TUPLE, PAIR) else OTHER_TYPE
        if numeral(value.node) is None:
            return NOT_A_NUMBER
    if value.kind in (COLLECTION, TUPLE, PAIR) and gold.kind == SCALAR:
        return SEVERAL_VALUES
    if _left_to_carry_out(value.node) and not _left_to_carry_out(gold.node):
        return NOT_CLOSED
    if not same_value(value, gold, context):
        return ""
    for other in reading.others:
        if not same_value(other, value):
            return FALSE_RELATION
    if reading.clauses and not _clauses_hold(reading.clauses, value):
        return FALSE_RELATION
    if kind != "value" and context.question and restates_question(value.node, gold.node, context.question):
        return RESTATED
    if kind != "value" and context.question and _restates_text(reading.raw, context):
        return RESTATED
    return None
