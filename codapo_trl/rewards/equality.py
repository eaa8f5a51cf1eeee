"""Compare: whether two typed values are the same value, exactly (run in the grader's worker processes).

Length: about 745 lines: typed values and the exact equality of each type (numbers, decimals at a precision,
expressions in letters, sums, collections, intervals and relations) are one job, comparing; the judgement of what an
answer states, against the question, is `judging`'s.

The grader reads as one pipeline: `extraction` takes the answer out of the completion, `form_reading` reads its LaTeX
into a SymPy tree as written, this module compares, and `judging` decides what the answer states and whether it was
computed (against the question). docs/rewards.md states the rule with examples. Here:

- **Typed values** (`Value`, `read_value`): a scalar, a collection of values (a set or a list, order-free), a tuple,
  a pair `(a, b)` (a point, or the open interval written the same way), an interval or a union of them, a relation,
  a matrix, a word, the empty set. A value of one type never equals one of another, except what denotes the same
  thing exactly (an inequality in one variable and its interval, `\\emptyset` and "no solution", a pair and an open
  interval).
- **Exact equality** (`same_value`): rationals compare as rationals, anything else by SymPy's exact simplification
  of the difference, with a 60-digit numerical estimate first (to refuse a clearly non-zero difference at once);
  only where SymPy cannot simplify, a difference that vanishes to 45 digits (at seven rational points of both signs
  and several sizes, for letters). Nothing is rounded: a decimal that spells the gold's exact value is exact; any
  other decimal stands for an exact gold only where the question asks for a decimal (`asked_precision`), to the
  place it asks for; a decimal gold is matched at the place it is written to.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import sympy

from codapo_trl.rewards.form_reading import Mixed, read_form


__all__ = ["Value", "asked_precision", "evaluate", "numeral", "read_value", "same_value", "written_out_sum"]


MAX_QUESTION_CHARS = 20_000  # the tail of a question that is read (the worker's deadline bounds the rest)
_MAX_ITEMS = 32  # members of a collection, tuple or matrix compared pairwise

# ---------------------------------------------------------------------------------------------------------------------
# Numerals and SymPy's own evaluation
# ---------------------------------------------------------------------------------------------------------------------


def numeral(node: Any, lowest_terms: bool = True) -> sympy.Rational | None:
    """The exact value of a numeral as written, or `None` if `node` is not one.

    A numeral is an integer, a decimal, a quotient of integers in lowest terms with a denominator above 1 (either
    sign), a mixed number with a proper fraction, or the negation of one of these written once. With
    `lowest_terms=False` a quotient of integers need not be in lowest terms (`\\frac{34}{100}`).

    Example:
        ```python
        >>> numeral(read_form("0.75")), numeral(read_form("\\\\frac{-3}{4}")), numeral(read_form("3\\\\frac12"))
        (3/4, -3/4, 7/2)
        >>> numeral(read_form("\\\\frac68")), numeral(read_form("7+12")), numeral(read_form("-(-19)"))
        (None, None, None)
        >>> numeral(read_form("\\\\frac68"), lowest_terms=False)
        3/4

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
        value = numeral(inner, lowest_terms)
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
            and (not lowest_terms or math.gcd(int(top), int(bottom.args[0])) == 1)
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

SCALAR, COLLECTION, TUPLE, PAIR, INTERVAL, RELATION, MATRIX, TEXT, EMPTY, APPROXIMATE = (
    "scalar", "collection", "tuple", "pair", "interval", "relation", "matrix", "text", "empty", "approximate",
)  # fmt: skip
_EMPTY_WORDS = frozenset(
    {"nosolution", "nosolutions", "norealsolution", "norealsolutions", "none", "emptyset", "varnothing", "nosuch"}
)


@dataclass(frozen=True)
class Value:
    """One value as read, with its type.

    Args:
        kind (`str`): `approximate` (a gold that says it is a rounding: `\\approx 2.2056`), `scalar`, `collection` (a set or a list: order-free), `tuple`, `pair` (`(a, b)`: a point or the
            open interval, written the same way), `interval` (an interval or a union of them), `relation`, `matrix`,
            `text` (a word answer) or `empty` (the empty set, "no solution").
        node (`Any`): The SymPy tree as written.
        items (`tuple`): The members of a collection, tuple, pair or matrix (as written), else `(node,)`.
        text (`str`): The prepared text the value was read from (a decimal's places are counted on it).
    """

    kind: str
    node: Any
    items: tuple = ()
    text: str = ""


def _word_name(node: Any) -> str | None:
    if isinstance(node, sympy.Symbol) and len(node.name) > 1:
        return re.sub(r"[^a-z0-9]", "", node.name.lower())
    return None


def _typed(node: Any, text: str) -> Value:
    return dataclasses.replace(_typed_value(node, text), text=text.strip())


def _typed_value(node: Any, text: str) -> Value:
    stripped = text.strip()
    if isinstance(node, sympy.Eq) and isinstance(node.lhs, sympy.Symbol) and isinstance(node.rhs, sympy.Set):
        node, stripped = node.rhs, re.split(r"\\in(?![A-Za-z])|=", stripped, maxsplit=1)[-1].strip()  # x \in [0, 1)
    if isinstance(node, sympy.sets.sets.EmptySet) or _word_name(node) in _EMPTY_WORDS:
        return Value(EMPTY, node)
    if _word_name(node) is not None and not node.name.startswith(("\\", "_")):
        return Value(TEXT, node)
    if isinstance(node, sympy.FiniteSet):
        items = tuple(node.args)
        if len(items) > 1 and all(_one_variable_set(item) is not None for item in items):
            return Value(RELATION, sympy.Or(*items, evaluate=False))  # `x<1 \\text{ or } x>2`: one relation
        return Value(COLLECTION, node, items)
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


_MAX_SUM_TERMS = 5_000  # a finite sum with at most this many terms is evaluated term by term


def _terms_added(node: Any, digits: int) -> Any:
    """`node` with each finite sum of at most `_MAX_SUM_TERMS` terms over integer bounds replaced by its terms
    evaluated one by one and added, to `digits` + 10 digits (SymPy's `evalf` of a `Sum` goes through Euler-Maclaurin:
    tens of seconds for `\\sum_{i=2}^{2026}\\sqrt{i/(i-1)}`, 0.3 s this way)."""

    def added(sum_node: sympy.Sum) -> Any:
        if len(sum_node.limits) != 1:
            return sum_node
        index, low, high = sum_node.limits[0]
        if not (low.is_Integer and high.is_Integer) or not 0 <= int(high) - int(low) < _MAX_SUM_TERMS:
            return sum_node
        function = sum_node.function
        terms = (function.evalf(digits + 10, subs={index: k}) for k in range(int(low), int(high) + 1))
        return sympy.Add(*terms)

    if not isinstance(node, sympy.Basic) or not node.has(sympy.Sum):
        return node
    return node.replace(lambda n: isinstance(n, sympy.Sum), added)


def _numeric(value: Any, digits: int = 60) -> complex | None:
    try:
        number = complex(sympy.N(_terms_added(value, digits), digits))
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


# Where a difference in letters is tried: both signs, small and large, never an integer (no accidental root).
_POINTS = tuple(sympy.Rational(p, q) for p, q in ((-37, 3), (-5, 2), (-1, 7), (3, 11), (7, 4), (13, 2), (1501, 7)))


def _zero_at_points(difference: Any) -> bool:
    """A difference in letters that SymPy cannot simplify to 0: zero to 40 digits at seven points of both signs and
    of sizes from 1/7 to 214 (so `|x|`, `\\max(x, 0)`, `x + e^{-1000x}` or `\\min(x^2, 100)` is not `x` or `x^2`),
    each letter at its own point."""
    symbols = sorted(difference.free_symbols, key=str)
    for shift in range(len(_POINTS)):
        point = {s: _POINTS[(shift + i) % len(_POINTS)] for i, s in enumerate(symbols)}
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
        if exact_answer is None and _spells_exactly(answer, gold, context):
            return True  # `0.5\pi` for `\frac{\pi}{2}`: each decimal written is exact, and so is the value
        ulp = context.asked_ulp
        if ulp is None:
            return False  # a rounded decimal for an exact gold, where the question asks for no decimal
        return _within(answer, gold, ulp if ulp > 0 else _written_ulp(context.answer_text))
    if answer == gold:
        return True  # the same tree (`\\infty`, `\\pi`): nothing to compute
    same = _same_sum(answer, gold)
    if same is not None:
        return same
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


def _same_sum(answer: Any, gold: Any) -> bool | None:
    """Two sums over one index each, compared term by term after shifting the index (`\\sum_{k=1}^{2025}
    \\sqrt{\\frac{k+1}{k}}` is `\\sum_{i=2}^{2026}\\sqrt{\\frac{i}{i-1}}`), without adding their terms up; `None`
    when they are not two such sums."""
    if not (isinstance(answer, sympy.Sum) and isinstance(gold, sympy.Sum)):
        return None
    if len(answer.limits) != 1 or len(gold.limits) != 1:
        return None
    (i, low, high), (j, gold_low, gold_high) = answer.limits[0], gold.limits[0]
    shift = evaluate(gold_low - low)
    if evaluate(gold_high - high - shift) != 0:
        return False
    k = sympy.Symbol("k_index", integer=True)
    term = evaluate(answer.function.xreplace({i: k}))
    gold_term = evaluate(gold.function.xreplace({j: k + shift}))
    return _zero(evaluate(term - gold_term), sympy.Integer(1))


def written_out_sum(terms: list[Any], gold: Any) -> bool:
    """Whether a sum written out with dots (`\\sqrt2+\\sqrt{\\frac32}+\\cdots+\\sqrt{\\frac{2026}{2025}}`) is `gold`, a
    sum over one index with integer bounds (`\\sum_{i=2}^{2026}\\sqrt{\\frac{i}{i-1}}`): `terms` are the trees of the
    written terms, `None` where the dots stand; at least two terms before the dots must be the gold's first terms
    and at least one after them its last, each equal exactly. Nothing is added up, so the answer is exactly as
    carried out as the gold.

    Example:
        ```python
        >>> gold = read_form("\\\\sum_{k=1}^{100} k^2")
        >>> written_out_sum([read_form("1"), read_form("4"), read_form("9"), None, read_form("10000")], gold)
        True
        >>> written_out_sum([read_form("1"), read_form("4"), read_form("9"), None, read_form("9801")], gold)
        False
        >>> written_out_sum([read_form("1"), read_form("4"), None, read_form("10000")], gold)  # or 1, 4, 7, ...?
        False

        ```
    """
    if not isinstance(gold, sympy.Sum) or len(gold.limits) != 1 or terms.count(None) != 1:
        return False
    index, low, high = gold.limits[0]
    if not (low.is_Integer and high.is_Integer):
        return False
    dots = terms.index(None)
    before, after = terms[:dots], terms[dots + 1 :]
    if len(before) < 2 or not after or len(before) + len(after) > int(high) - int(low) + 1:
        return False
    indices = [int(low) + n for n in range(len(before))] + [int(high) - len(after) + 1 + n for n in range(len(after))]
    for term, at in zip(before + after, indices):
        if not isinstance(term, sympy.Expr) or term.free_symbols:
            return False
        expected = evaluate(gold.function.xreplace({index: sympy.Integer(at)}))
        if not _zero(evaluate(term) - expected, sympy.Integer(1)):
            return False
    return (
        len(before) > 2
        or any(numeral(t) is None for t in before)
        or not _also_arithmetic(before, after[-1], gold.function, index)
    )


def _also_arithmetic(before: list[Any], last: Any, function: Any, index: Any) -> bool:
    """Whether two first terms written as numerals and a last one also read as an arithmetic progression that reaches
    the last term (`1+2+\\cdots+8` is 1 to 8, not the powers of 2 a gold `\\sum_{k=1}^{4} 2^{k-1}` sums): then two terms
    do not show the gold's pattern, unless the gold's terms are themselves arithmetic (terms written with their
    operations, `1^2+2^2+\\cdots`, show it)."""
    if function.is_polynomial(index) and sympy.Poly(function, index).degree() <= 1:
        return False
    first, second = (evaluate(t) for t in before)
    step = _numeric(evaluate(second - first))
    span = _numeric(evaluate(last - first))
    if step is None or span is None or abs(step) < 1e-30:
        return False
    count = span / step
    return abs(count.imag) < 1e-9 and count.real > 1 - 1e-9 and abs(count.real - round(count.real)) < 1e-9


def _spells_exactly(answer: Any, gold: Any, context: _Context) -> bool:
    """Whether an answer with decimals in it (`0.5\\pi`, `0.7 \\cdot \\pi`), each read as the exact rational it
    writes, is the gold exactly; a decimal that rounds (`0.33\\pi` for `\\frac{\\pi}{3}`) is not."""
    try:
        exact = _exact(answer)
    except Exception:  # noqa: BLE001
        return False
    return not _has_float(exact) and _scalar_equal(exact, gold, context)


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


def _approximately(answer: Any, gold: Any, context: _Context) -> bool:
    """A gold that is itself an approximation (`\\approx 2.2055694304`): a decimal answer of three significant
    digits or more is the gold rounded at the answer's own last place; an exact answer is the gold at the gold's."""
    if _has_float(answer):
        return _within(answer, gold, _written_ulp(context.answer_text))
    return _within(answer, gold, context.gold_ulp)


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
    if a is None or g is None:
        return False
    own = _places_ulp(g)  # a member of a collection has its own places: `(4.8, 2.28)` is not matched at tenths
    if own is not None and (ulp is None or own < ulp):
        ulp = own
    if ulp is None:
        return False
    rounded = math.floor(a / ulp + Fraction(1, 2)) * ulp
    return rounded == g


def _places_ulp(value: Fraction) -> Fraction | None:
    """The unit in the last decimal place `value` needs (`2.28` -> 1/100), up to 30 places; `None` past them."""
    for places in range(31):
        if (value * 10**places).denominator == 1:
            return Fraction(1, 10**places)
    return None


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
    text = question[-MAX_QUESTION_CHARS:]
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
        if not (a.free_symbols and b.free_symbols):
            return False  # an equation in no letter states a value (a label on the left), compared as that value
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
        >>> from codapo_trl.rewards.form_reading import prepare
        >>> v = lambda t: read_value(prepare(t)[0])
        >>> same_value(v("1+\\\\sqrt2"), v("\\\\sqrt{3+2\\\\sqrt2}")), same_value(v("(1,5)"), v("\\\\{1,5\\\\}"))
        (True, False)
        >>> same_value(v("0.0"), v("2^{-30}")), same_value(v("x>3"), v("(3,\\\\infty)"))
        (False, True)

        ```
    """
    context = context or _Context("", "", "")
    kinds = {answer.kind, gold.kind}
    if gold.kind == APPROXIMATE and answer.kind == SCALAR:
        return _approximately(answer.node, gold.node, context)
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
