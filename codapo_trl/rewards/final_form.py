"""The final-form rule of the maths grader: an answer is paid only in its final form, judged on its own parse tree.

An answer equal to the gold is still refused when it is *less computed* than the gold (docs/rewards.md states the
rule with examples), by two measures: the answer's own tokens (`codapo_trl.rewards.computation`: function heads,
their nesting and the arithmetic inside their arguments, which no parser evaluates) and its parse tree below. The answer and the gold are read by math-verify's own LaTeX parser (`latex2sympy2_extended`)
with the few evaluations it does by itself switched off (`codapo_trl.rewards.form_reading`), so that the SymPy tree is the answer as
written: `\\frac68` stays a quotient of 6 by 8, `\\binom84` a binomial, `-(-19)` a double negation. Then:

1. **Numbers.** When the gold is a numeral (an integer, a decimal, a fraction of integers in lowest terms, a mixed
   number, each with its sign), the answer must be a numeral too (`numeral`), and equal to it exactly (`0.75` for
   `\\frac34`, not `0.7500000001`). Under the `number` answer type the answer must be a numeral whatever the gold.
   This is a whitelist of node types: a sum, product, power, root, binomial, factorial, logarithm, floor, integral,
   limit or any other operation on literals is not a numeral, listed or not.
2. **Not less computed.** By the tokens (`computation.more_computed`): no deeper nesting of heads, and at the same
   depth no more arithmetic inside head arguments nor more heads of a class (`\\sqrt{3+2\\sqrt2}` for `1+\\sqrt2`,
   `\\log_3 5+\\log_3 2` for `\\log_3 10`, `(1+\\sqrt2)^2` for `3+2\\sqrt2`). A gold written with operations whose
   value is rational (`3.2\\times10^4`, `2^{2010}`) takes a numeral or its own form, nothing else. By the tree
   (`pending_operations`): the answer may not hold more operations that SymPy's own automatic
   evaluation would carry out (`7+12`, `x+x`, `\\sqrt 8`, `2^{3/2}`, `\\frac{6}{8}`, `\\frac{4}{\\sqrt2}`, `\\cdot 1`,
   `+0`, `\\log_2 64`, an unevaluated union...) than the gold does. Integrals, sums, products and limits always count.
3. **Polynomials** in the gold's form: an expanded gold asks for an answer with no product or power of a sum; a
   factored gold asks for at least as many factors (`factor_count`); a fraction of polynomials may not keep a common
   factor the gold has cancelled (`uncancelled_fractions`).
4. **Relations.** When the gold is not a relation (a gold `x = 5` or `x \\in [-2, 7]` is its value), the value read
   is the last side of an equation in the answer that is not a bare name; a side that names something (`\\tan A`,
   `f(-2)`, `QM`, `f^{-1}(x)`) is a label, and any other side must equal the gold: `12 + 7 = 19`, `x = 19` and
   `\\tan A = 2` are paid, `20 = 19` and `x^2+2x+1 = (x+1)^2` (for an expanded gold) are not. An inequality in one
   name is the set it describes when the gold is an interval (`x \\geq 19` for `[19, \\infty)`); any other relation
   (`<`, `\\ne`, `\\approx`) states no value.
5. **One value.** A set or list of values (`\\pm`, `or`, a comma list) is an answer only where the gold is one.

What still rests on lists is said in docs/rewards.md: the words that change a value (`form_reading.VALUE_WORDS`), the
LaTeX markup that is dropped before reading, and the head classes of `computation`.
"""

from __future__ import annotations

import math
import re
from typing import Any

import sympy

from codapo_trl.rewards.computation import more_computed
from codapo_trl.rewards.form_reading import Mixed, prepare, read_form


__all__ = [
    "FormVerdict",
    "evaluate",
    "factor_count",
    "gold_numeral",
    "judge_form",
    "numeral",
    "pending_operations",
    "prepare",
    "read_form",
]  # `prepare` and `read_form` live in `codapo_trl.rewards.form_reading`; re-exported for the grader

# ---------------------------------------------------------------------------------------------------------------------
# Measures on the tree
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


def _evaluate(node: Any) -> Any:
    """`node` with SymPy's automatic evaluation applied bottom-up (what `evaluate=True` would have built)."""
    if isinstance(node, Mixed):
        whole, p, q = node.args
        return whole + sympy.Rational(p, q) if whole >= 0 else whole - sympy.Rational(p, q)
    if not isinstance(node, sympy.Basic) or not node.args or isinstance(node, (sympy.Symbol, sympy.Number)):
        return node
    args = [_evaluate(a) for a in node.args]
    try:
        return node.func(*args)
    except Exception:  # noqa: BLE001
        return node.func(*args, evaluate=False)


def _same(a: Any, b: Any) -> bool:
    """Structural equality up to the order of the arguments of sums and products."""
    if type(a) is not type(b):
        return False
    if not getattr(a, "args", ()) or not getattr(b, "args", ()):
        return a == b
    if len(a.args) != len(b.args):
        return False
    if isinstance(a, (sympy.Add, sympy.Mul)):
        remaining = list(b.args)
        for arg in a.args:
            for index, other in enumerate(remaining):
                if _same(arg, other):
                    del remaining[index]
                    break
            else:
                return False
        return True
    return all(_same(x, y) for x, y in zip(a.args, b.args))


_ALWAYS_PENDING = (sympy.Integral, sympy.Sum, sympy.Product, sympy.Limit, sympy.Derivative, sympy.Determinant)
_CONTAINERS = (sympy.Tuple, sympy.FiniteSet, sympy.Interval, sympy.MatrixBase, sympy.Eq, sympy.Rel, sympy.And)


def _flat_mul(node: Any) -> list[Any]:
    out = []
    for arg in node.args:
        if isinstance(arg, sympy.Mul):
            out.extend(_flat_mul(arg))
        else:
            out.append(arg)
    return out


def _flat_add(node: Any) -> list[Any]:
    out = []
    for arg in node.args:
        out.extend(_flat_add(arg) if isinstance(arg, sympy.Add) else [arg])
    return out


def _pending_here(node: Any) -> bool:
    """Whether SymPy's automatic evaluation would rewrite `node` itself (its arguments already evaluated)."""
    if isinstance(node, _ALWAYS_PENDING):
        return True
    if isinstance(node, (Mixed, *_CONTAINERS)) or numeral(node) is not None or not node.args:
        return False
    if isinstance(node, sympy.Add):
        terms = _flat_add(node)
        if sum(numeral(t) is not None or t.is_Number for t in terms) > 1:
            return True  # 7 + 12, x + 1 + 2
        if any(t == 0 for t in terms):
            return True
        evaluated = sympy.Add(*[_evaluate(t) for t in terms])
        return not _same(evaluated, sympy.Add(*[_evaluate(t) for t in terms], evaluate=False))
    if isinstance(node, sympy.Mul):
        if numeral(node) is not None:
            return False
        factors = _flat_mul(node)
        tops = [f for f in factors if (f.is_Number or numeral(f) is not None) and f != -1]
        bottoms = [f for f in factors if isinstance(f, sympy.Pow) and f.args[0].is_Number and f.args[1] == -1]
        literal = [f for f in factors if f == -1 or f in tops or f in bottoms]
        if len(tops) > 1 or len(bottoms) > 1:
            return True  # 2 \\cdot 3, \\frac{3}{4} \\cdot 1, 1.9 \\times 10 (the power is checked on its own)
        if bottoms and (
            bottoms[0].args[0] == 1
            or (
                tops
                and tops[0].is_Integer
                and bottoms[0].args[0].is_Integer
                and math.gcd(int(tops[0]), int(bottoms[0].args[0])) != 1
            )
        ):
            return True  # \\frac{6x}{8}, \\frac{x}{1}
        if tops and tops[0] == 1 and not bottoms and len(factors) > 1:
            return True  # \\cdot 1
        others = [_evaluate(f) for f in factors if f not in literal]
        coefficient = sympy.Mul(*[_evaluate(f) for f in literal]) if literal else sympy.Integer(1)
        if len(others) == 1 and isinstance(others[0], sympy.Add):
            # A coefficient times one sum: SymPy distributes it, and writing it is not less evaluated, unless the
            # quotient keeps a common factor of the sum's terms and its denominator (`\\frac{6+4\\sqrt2}{2}`).
            return _uncancelled_content(coefficient, others[0])
        if len(others) > 1 and all(_same(o, others[0]) for o in others) and isinstance(others[0], sympy.Add):
            return False  # (x+1)(x+1): as factored as (x+1)^2
        evaluated = sympy.Mul(coefficient, *others)
        written = (
            sympy.Mul(coefficient, *others, evaluate=False) if coefficient != 1 else sympy.Mul(*others, evaluate=False)
        )
        if len(others) == 1 and coefficient == 1:
            written = others[0]
        return not _same(evaluated, written)
    if isinstance(node, sympy.Pow):
        base, exponent = node.args
        if exponent == -1 and (base.is_Integer and base != 1):
            return False  # 1/q inside a quotient
        evaluated = sympy.Pow(_evaluate(base), _evaluate(exponent))
        return not _same(evaluated, sympy.Pow(_evaluate(base), _evaluate(exponent), evaluate=False))
    if isinstance(node, sympy.log) and len(node.args) == 2:
        return not _evaluate(node).has(sympy.log)  # \log_2 64 is 6; \log_3 10 stays a logarithm
    if isinstance(node, (sympy.Union, sympy.Intersection, sympy.Complement)):
        return True
    if isinstance(node, (sympy.Function, sympy.Basic)):
        evaluated = _evaluate(node)
        return not _same(evaluated, node.func(*[_evaluate(a) for a in node.args], evaluate=False))
    return False


def _uncancelled_content(coefficient: Any, total: Any) -> bool:
    """Whether `coefficient * total` (a rational times a sum) keeps a factor common to the integer coefficients of
    the sum's terms and the denominator (`\\frac{6+4\\sqrt2}{2}`, `\\frac{2+2\\sqrt5}{4}`; not `\\frac{1+\\sqrt5}{2}`)."""
    if not getattr(coefficient, "is_Rational", False) or coefficient.q == 1:
        return False
    content = 0
    for term in _flat_add(total):
        number = _evaluate(term).as_coeff_Mul()[0]
        if not number.is_Integer:
            return False
        content = math.gcd(content, int(number))
    return math.gcd(content, int(coefficient.q)) > 1


def pending_operations(node: Any) -> int:
    """How many operations of `node` (as written) SymPy's automatic evaluation would still carry out.

    Example:
        ```python
        >>> [pending_operations(read_form(t)) for t in ("2\\\\sqrt{2}", "\\\\sqrt 8", "x^2+2x+1", "x+x", "\\\\frac34")]
        [0, 1, 0, 1, 0]

        ```
    """
    if node is None or not isinstance(node, sympy.Basic):
        return 0
    if isinstance(node, Mixed) or numeral(node) is not None:
        return 0
    own = 0
    try:
        own = int(_pending_here(node))
    except Exception:  # noqa: BLE001 - an operation SymPy cannot even build is not final
        own = 1
    children = node.args
    if isinstance(node, sympy.MatrixBase):
        children = tuple(node)
    return own + sum(pending_operations(c) for c in children if isinstance(c, sympy.Basic))


def _polynomial(node: Any) -> bool:
    value = _evaluate(node)
    try:
        return bool(value.free_symbols) and value.is_polynomial(*value.free_symbols)
    except Exception:  # noqa: BLE001
        return False


def _expanded(node: Any) -> bool:
    """No product or positive integer power of a sum, as written."""
    if isinstance(node, sympy.Mul) and any(isinstance(f, sympy.Add) for f in _flat_mul(node)):
        return False
    if isinstance(node, sympy.Pow) and isinstance(node.args[0], sympy.Add) and node.args[1].is_positive:
        return False
    return all(_expanded(a) for a in getattr(node, "args", ()) if isinstance(a, sympy.Basic))


def factor_count(node: Any) -> int:
    """Multiplicative factors of `node` as written: non-constant factors with multiplicity, plus one for a numeric
    coefficient other than +-1 (`2(x+1)`: 2, `(x+1)^2`: 2, `x^2-1`: 1)."""
    if isinstance(node, sympy.Pow) and node.args[1].is_Integer and node.args[1] > 0:
        return int(node.args[1]) * factor_count(node.args[0])
    if isinstance(node, sympy.Mul):
        count = 0
        for factor in _flat_mul(node):
            value = numeral(factor) if numeral(factor) is not None else (factor if factor.is_Number else None)
            if value is not None:
                count += abs(value) != 1
            else:
                count += factor_count(factor)
        return count
    return 1


def uncancelled_fractions(node: Any) -> int:
    """Quotients of polynomials, as written, whose numerator and denominator share a non-constant factor."""
    count = 0
    if isinstance(node, sympy.Mul):
        factors = _flat_mul(node)
        bottom = [f.args[0] for f in factors if isinstance(f, sympy.Pow) and f.args[1].is_negative]
        top = [f for f in factors if not (isinstance(f, sympy.Pow) and f.args[1].is_negative)]
        if bottom and top:
            numerator, denominator = _evaluate(sympy.Mul(*top)), _evaluate(sympy.Mul(*bottom))
            symbols = numerator.free_symbols | denominator.free_symbols
            try:
                if symbols and numerator.is_polynomial(*symbols) and denominator.is_polynomial(*symbols):
                    count += sympy.degree(sympy.gcd(numerator, denominator), *list(symbols)[:1]) > 0 or bool(
                        sympy.gcd(numerator, denominator).free_symbols
                    )
            except Exception:  # noqa: BLE001
                pass
    return count + sum(uncancelled_fractions(a) for a in getattr(node, "args", ()) if isinstance(a, sympy.Basic))


# ---------------------------------------------------------------------------------------------------------------------
# The verdict
# ---------------------------------------------------------------------------------------------------------------------

NOT_FINAL = "not in final form"
NOT_A_NUMBER = "not a numeric literal"
SEVERAL_VALUES = "states several values"
FALSE_RELATION = "a side of its relation is not the answer"
OTHER_RELATION = "states a relation, not a value"
UNREADABLE = "answer not readable as written"


class FormVerdict(tuple):
    """`(reason, value_sides)`: `reason` is `None` when the form is final; `value_sides` are the parts of the answer
    that must each equal the gold (the answer itself, or the sides of its equation that are not names)."""


def _is_label(node: Any) -> bool:
    """A name that labels a value: `x`, `a_1`, `f(x)`, `f(3)`, `QM`, `\\tan A`, `f^{-1}(x)`."""
    from sympy.core.function import AppliedUndef

    if isinstance(node, (sympy.Symbol, AppliedUndef)):
        return True
    if isinstance(node, sympy.Mul):
        return all(isinstance(f, sympy.Symbol) for f in node.args)  # QM, AB
    if isinstance(node, sympy.Pow):
        return node.args[1] == -1 and _is_label(node.args[0])  # f^{-1}(x)
    if isinstance(node, sympy.Function) and len(node.args) == 1:
        return isinstance(node.args[0], sympy.Symbol)  # \\tan A
    return False


def _names_something(node: Any) -> bool:
    """A side that cannot be a value read: it holds a name (`x^2 + 1`, `f(-2)`, `\\tan A`)."""
    from sympy.core.function import AppliedUndef

    return isinstance(node, sympy.Basic) and bool(node.free_symbols or node.atoms(AppliedUndef))


def _relation_sides(node: Any) -> list[Any] | None:
    """The sides of an equation or a chain of them (`x = 2 + 2 = 4`), else `None`."""
    if isinstance(node, sympy.Eq):
        return [*(_relation_sides(node.lhs) or [node.lhs]), node.rhs]
    if isinstance(node, sympy.And) and all(isinstance(a, sympy.Eq) for a in node.args):
        sides: list[Any] = []
        for equation in node.args:
            for side in (equation.lhs, equation.rhs):
                if not sides or not _same(sides[-1], side):
                    sides.append(side)
        return sides
    return None


def _side_texts(latex: str, count: int) -> list[str]:
    """The text of each side of a prepared equation (split at its top-level `=`), or `[latex]` when the split does
    not give `count` sides."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(latex):
        depth += char in "{([" and (index == 0 or latex[index - 1] != "\\")
        depth -= char in "})]" and (index == 0 or latex[index - 1] != "\\")
        if char == "=" and depth == 0 and latex[index - 1 : index] not in ("<", ">", "!", ":"):
            parts.append(latex[start:index])
            start = index + 1
    parts.append(latex[start:])
    return parts if len(parts) == count else [latex]


def _value_of(node: Any) -> Any:
    """`x = 2` is the value 2 inside a set or tuple (`x=1 \\text{ or } x=2`)."""
    sides = _relation_sides(node)
    if sides and len(sides) == 2 and _is_label(sides[0]):
        return sides[1]
    return node


def _entries(node: Any) -> list[Any] | None:
    if isinstance(node, (sympy.Tuple, sympy.FiniteSet)):
        return [_value_of(a) for a in node.args]
    if isinstance(node, sympy.Interval):
        return [node.start, node.end]
    if isinstance(node, sympy.MatrixBase):
        return list(node)
    return None


def _approximates(node: Any) -> bool:
    return isinstance(node, sympy.Basic) and any(
        getattr(f, "func", None) is not None and str(f.func) == "approx" for f in sympy.preorder_traversal(node)
    )


def _several(node: Any) -> bool:
    return isinstance(node, (sympy.FiniteSet, sympy.Tuple, sympy.Interval, sympy.Union, sympy.MatrixBase))


def _gold_value(gold_tree: Any, gold: str) -> tuple[Any, str, bool]:
    """`(value, its text, whether the gold is a relation)`: a gold `x = 5` or `x \\in [-2, 7]` (a name, then its
    value) has the value `5` or `[-2, 7]`; any other relation (`x > 3`, `3x + 2y = 6`) is a relation gold."""
    sides = _relation_sides(gold_tree) if gold_tree is not None else None
    if sides and len(sides) == 2 and _is_label(sides[0]):
        return sides[1], _side_texts(gold, 2)[-1], False
    return gold_tree, gold, isinstance(gold_tree, (sympy.Rel, sympy.And))


def _rational_value(node: Any) -> bool:
    """Whether `node` is a number with a rational (or decimal) value once evaluated: `2^{2010}`, `3.2 \\times 10^4`."""
    try:
        value = _evaluate(node)
        return bool(value.is_Rational or value.is_Float)
    except Exception:  # noqa: BLE001
        return False


def _rounded_to(tree: Any) -> Any:
    """The exact side of `exact \\approx decimal` when the decimal is that value rounded (or cut) to its own
    places (`\\sqrt{53} \\approx 7.28`); else `None` (`19 \\approx 20` states no value)."""
    if not (_approximates(tree) and str(getattr(tree, "func", "")) == "approx" and len(tree.args) == 2):
        return None
    exact, rounded = tree.args
    if not getattr(rounded, "is_Float", False) or exact.has(sympy.Float) or _approximates(exact):
        return None
    places = len(str(rounded).rstrip("0").partition(".")[2])
    try:
        error = abs(float(_evaluate(exact)) - float(rounded))
    except (TypeError, ValueError):
        return None
    return exact if error <= 10.0**-places else None


def _as_interval(tree: Any, gold: Any) -> Any:
    """An inequality in one name (`x \\geq 19`, `18 \\le x \\le 20`) as the set it describes, when the gold is an
    interval or a union of intervals; else `None`."""
    if not isinstance(gold, (sympy.Interval, sympy.Union)) or not isinstance(tree, (sympy.Rel, sympy.And)):
        return None
    if isinstance(tree, sympy.Eq) or len(tree.free_symbols) != 1:
        return None
    try:
        return tree.as_set()
    except Exception:  # noqa: BLE001
        return None


def judge_form(answer: str, gold: str, kind: str) -> FormVerdict:
    """The final-form verdict on a prepared answer against its prepared gold (see the module docstring).

    Args:
        answer (`str`): The answer (after `prepare`).
        gold (`str`): The gold answer (after `prepare`).
        kind (`str`): `"math"` or `"number"` (the answer must then be a numeral whatever the gold).

    Returns:
        `FormVerdict`: `(reason, value_sides)`, with `reason=None` for an answer in final form; each of
        `value_sides` must still equal the gold (the caller checks values).
    """
    tree = read_form(answer)
    if tree is None:
        return FormVerdict((UNREADABLE, []))
    exact = _rounded_to(tree)
    if exact is not None:  # `\\sqrt{53} \\approx 7.28`: the exact value is read, its rounding is a remark
        tree, answer = exact, re.split(r"\\approx|\u2248", answer)[0]
    gold_tree = read_form(gold)
    gold_value, gold_text, gold_is_relation = _gold_value(gold_tree, gold)
    sides = None if gold_is_relation else _relation_sides(tree)
    value_text = answer
    if sides is not None:
        # The value read is the last side that is not a bare name; a side that names something (`\\tan A`, `f(-2)`,
        # `QM`) cannot be a value read, and every other side is a value that must equal the gold (`12 + 7 = 19`).
        named = [index for index, side in enumerate(sides) if not _is_label(side)]
        if not named:
            return FormVerdict((FALSE_RELATION, []))
        value_index = named[-1]
        values = [s for i, s in enumerate(sides) if i != value_index and not _names_something(s)]
        values.append(sides[value_index])
        texts = _side_texts(answer, len(sides))
        value_text = texts[value_index] if len(texts) == len(sides) else answer
    elif _as_interval(tree, gold_value) is not None:
        values = [_as_interval(tree, gold_value)]  # x \\geq 19 for [19, \\infty): the same set of values
    elif (isinstance(tree, (sympy.Rel, sympy.And)) or _approximates(tree)) and not gold_is_relation:
        return FormVerdict((OTHER_RELATION, []))
    else:
        values = [tree]
    reason = _judge_value(values[-1], gold_value, kind)
    if reason is None and gold_value is not None and not gold_is_relation and more_computed(value_text, gold_text):
        reason = NOT_FINAL  # more left to compute than the gold, by the answer's own tokens
    return FormVerdict((reason, values))


def _judge_value(value: Any, gold: Any, kind: str) -> str | None:
    gold_numeral = numeral(gold) if gold is not None else None
    if kind == "number" or gold_numeral is not None:
        return None if numeral(value) is not None else NOT_A_NUMBER
    if gold is not None and not _several(gold) and _rational_value(gold):
        # A rational gold written with operations (`3.2 \\times 10^4`, `2^{2010}`, `\\binom{10}{3}`): its value as a
        # numeral, or the gold's own form; any other arithmetic (`4000 \\times 8`, `8^{670}`) is not final.
        return None if numeral(value) is not None or _same(value, gold) else NOT_FINAL
    if gold is not None and _several(value) and not _several(gold):
        return SEVERAL_VALUES
    gold_entries = _entries(gold) if gold is not None else None
    entries = _entries(value)
    infinite = (sympy.oo, -sympy.oo)
    numeric_gold = bool(gold_entries) and all(numeral(e) is not None or e in infinite for e in gold_entries)
    if numeric_gold and entries and not all(numeral(_value_of(e)) is not None or e in infinite for e in entries):
        return NOT_FINAL
    if pending_operations(value) > (pending_operations(gold) if gold is not None else 0):
        return NOT_FINAL
    if gold is None:
        return None
    if value.has(sympy.Float) and not gold.has(sympy.Float):
        gold_value = _evaluate(gold)
        if getattr(gold_value, "is_number", False) and not gold_value.is_rational:
            return NOT_FINAL  # a decimal approximation of an exact irrational gold
    if _polynomial(gold):
        if _expanded(gold) and not _expanded(value):
            return NOT_FINAL
        if factor_count(value) < factor_count(gold):
            return NOT_FINAL
    if uncancelled_fractions(value) > uncancelled_fractions(gold):
        return NOT_FINAL
    return None


def evaluate(node: Any) -> Any:
    """`node` as SymPy's automatic evaluation would have built it (to compare one side of a relation by value)."""
    return _evaluate(node)


def gold_numeral(gold: str) -> sympy.Rational | None:
    """The exact value of a prepared gold answer that is a numeral (or `x = ` a numeral), else `None`."""
    tree = read_form(gold)
    sides = _relation_sides(tree) if tree is not None else None
    return numeral(sides[-1] if sides else tree)
