"""Judge: what one answer states and whether the policy computed it, against the gold and the question (run in the
grader's worker processes; `equality` compares the values).

1. **One value, every member agreeing.** A derivation in the box is read to its last clause (`\\sqrt{100-x}=9
   \\Rightarrow x=19` reads `x=19`); an equality chain is read to its last member, a first member that names the
   asked quantity is a label (`P(\\text{win}) = \\frac56`, `k_{\\max}=\\frac12`, `\\int_0^1 x^2 f(x)\\,dx = ...`),
   and every other member must equal the value read (`\\frac{2\\times3+4}{2+3}=\\dots=2` is paid, `2+2=5` is not).
   Earlier clauses of a derivation must hold for the value read where they can be checked.
2. **A numeral gold asks for a numeral** (an integer, a decimal, a fraction in lowest terms, a mixed number): the
   grader could finish any arithmetic left in the answer (`\\boxed{5+2}` is not 7).
3. **Restatement is judged against the question** (`restates_question`). An answer that is, up to notation (the
   order of sums and products, brackets, `\\frac` against `/`, the text as written) or up to SymPy's automatic
   evaluation, an expression the question itself states is refused, unless it is written as the gold is (a "which of
   these" question). A numeral is never a restatement. Any other closed form equal to the gold is paid (factored or
   expanded, `\\binom{4020}{3015}^2` for `\\binom{4020}{1005}^2`); an integral, sum, product, limit, derivative or
   determinant left in the answer is no closed form.
4. **Every gold is read** (`read_gold`): alternatives joined by `OR` or "or", `\\pm`, a label on the left, a unit
   after a number, `\\approx` a decimal.

Length: about 640 lines: reading the gold, reading the answer (derivations, chains, labels, sums written out) and the
verdict are one judgement, and each reading needs the others' conventions.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import sympy

from codapo_trl.rewards.equality import (
    APPROXIMATE,
    COLLECTION,
    MAX_QUESTION_CHARS,
    PAIR,
    RELATION,
    SCALAR,
    TUPLE,
    Value,
    _Context,
    _evaluated_key,
    _exact,
    _has_float,
    _key,
    _numeric,
    _read_members,
    _typed,
    _within,
    _written_ulp,
    _zero,
    evaluate,
    numeral,
    same_value,
    written_out_sum,
)
from codapo_trl.rewards.form_reading import prepare, read_form


__all__ = [
    "FALSE_RELATION",
    "NOT_A_NUMBER",
    "NOT_CLOSED",
    "OTHER_RELATION",
    "OTHER_TYPE",
    "RESTATED",
    "SEVERAL_VALUES",
    "UNREADABLE",
    "judge",
    "read_gold",
    "restates_question",
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
_MAX_QUESTION_PIECES = 64
_MAX_PIECE_CHARS = 400
_MAX_QUESTION_KEYS = 4_000

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


@functools.lru_cache(maxsize=256)
def _pieces(question: str) -> tuple[str, ...]:
    """The maths a question writes (its `$...$`, `\\(...\\)` and `\\[...\\]` spans, and plain arithmetic such as
    `12 + 7`), cut at relations and commas: each piece is an expression the question states."""
    text = question[-MAX_QUESTION_CHARS:]
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
    return tuple(pieces[:_MAX_QUESTION_PIECES])


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
_LEADING_APPROX_RE = re.compile(r"^\s*(?:\\displaystyle\s*)?(?:\\approx|≈)\s*")
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
        approximate = _LEADING_APPROX_RE.match(part) is not None
        part = _LEADING_APPROX_RE.sub("", part)
        prepared, _ = prepare(part)
        value = _read_members(prepared) if prepared else None
        if value is None:
            continue
        if approximate and value.kind == SCALAR and _has_float(value.node):
            values.append(Value(APPROXIMATE, value.node, (value.node,), prepared))  # `\\approx 2.2056`: a rounding
            continue
        if _approximates(value.node) and str(getattr(value.node, "func", "")) == "approx":
            exact, decimal = value.node.args  # `\\sum_{i=2}^{2026}\\sqrt{\\frac{i}{i-1}} \\approx 2028.939...`
            values.append(_typed(exact, str(exact)))
            written = re.split(r"\\approx|≈", prepared)[-1]
            values.append(Value(APPROXIMATE, decimal, (decimal,), written.strip()))  # its rounding, as written
            continue
        if value.kind == RELATION and isinstance(value.node, sympy.Eq) and _names_quantity(value.node.lhs):
            if _is_label(value.node.lhs):
                values.append(value)  # `y = 2x + 3`: the equation (`2x - y + 3 = 0` is the same line)...
            value = _typed(value.node.rhs, _top_level_split(prepared, _EQUALS_RE)[-1])  # ...and its value
        unit = _UNIT_AFTER_NUMBER_RE.fullmatch(prepared)
        if unit is not None and value.kind == SCALAR:
            number = read_form(unit.group(1))  # `7 m`, `48 km/h`: a unit written after the number, as datasets do
            if number is not None:
                values.append(Value(SCALAR, number, (number,)))
        if value.kind == COLLECTION and len(value.items) > 1 and _OR_RE.search(part):
            labels = {item.lhs for item in value.items if isinstance(item, sympy.Eq) and _is_label(item.lhs)}
            one_letter = len(labels) == 1 and all(isinstance(item, sympy.Eq) for item in value.items)
            for item in value.items:  # `2 \\text{ or } 3`: either one; `x = 2 \\text{ or } x = 3`: also `2`
                values.append(_typed(item, str(item)))
                if one_letter:
                    values.append(_typed(item.rhs, str(item.rhs)))  # not for `x = 2 \\text{ or } y = 3`
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
    """`text` cut at the `separators` that stand outside every bracket (`{}`, `()`, `[]`; `\\{` and `\\}` are not
    brackets), in one scan."""
    parts, depth, start, scanned = [], 0, 0, 0
    for match in separators.finditer(text):
        depth += _depth_change(text, scanned, match.start())
        scanned = match.start()
        if depth == 0:
            parts.append(text[start : match.start()])
            start = match.end()
    parts.append(text[start:])
    return parts


def _depth_change(text: str, begin: int, end: int) -> int:
    """How much deeper in brackets `text[end]` stands than `text[begin]`."""
    change = 0
    index = begin
    while index < end:
        char = text[index]
        if char == "\\" and index + 1 < end and text[index + 1] in "{}":
            index += 2
            continue
        if char in "{([":
            change += 1
        elif char in "})]":
            change -= 1
        index += 1
    return change


_EQUALS_RE = re.compile(r"(?<![<>!:\\])=(?!=)")
_COMMA_RE = re.compile(r",")
_PROSE_RE = re.compile(r"(?<![\\\w])[^\W\d_]{3,}\s+[^\W\d_]{2,}\s+[^\W\d_]{2,}")  # three words of prose
_OR_SIGN_RE = re.compile(r"\\(?:lor|vee)(?![A-Za-z])")
_SET_BUILDER_RE = re.compile(r"\\\{\s*[A-Za-z]\s*(?:\\in\s*\\mathbb\s*\{?R\}?\s*)?(?:\\mid|\||:)\s*(.+?)\s*\\\}")
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


def _named_rounding(node: Any) -> Value | None:
    """`\\lim_{n\\to\\infty}\\sqrt[n]{A_n} \\approx 2.20557`: a name of the quantity, then its rounding; the value
    read is the decimal (which stands for an exact gold only where the question asks for a decimal)."""
    if str(getattr(node, "func", "")) != "approx" or len(node.args) != 2:
        return None
    name, rounded = node.args
    if not getattr(rounded, "is_Float", False) or not _names_quantity(name):
        return None
    return Value(SCALAR, rounded, (rounded,), sympy.sstr(rounded, full_prec=False))


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
    last = _OR_SIGN_RE.sub(r" \\text{ or } ", clauses[-1])
    builder = _SET_BUILDER_RE.fullmatch(last.strip())
    if builder is not None:
        last = builder.group(1)  # `\\{x \\mid x<1 \\text{ or } x>2\\}`: the condition on the one letter
    if _NEGATED_RE.search(last):
        return Reading(None, reason=OTHER_RELATION)  # `x \not= 19`, `x \neq 19` state no value
    raw_members = [m for m in _top_level_split(last.replace(":=", "="), _EQUALS_RE) if not _DOTS_RE.match(m)]
    named = None
    if len(raw_members) > 1 and not gold_is_relation and len(_top_level_split(last, _COMMA_RE)) == 1:
        # A chain: each member is read on its own, so that a name written in words on the left (`\\mathbb
        # E(\\text{число клеток}) = ...`, `P(\\text{win}) = ...`) is a label, not words inside the value.
        first_prepared, first_problem = prepare(raw_members[0])
        first_node = read_form(first_prepared) if first_problem is None and first_prepared else None
        words = (first_node is None and re.search(r"[^\W\d_]", raw_members[0]) is not None) or bool(
            _PROSE_RE.search(raw_members[0])
        )
        if words or _names_quantity(first_node):  # "the only value of $x$ is $x = 5$", `\\int_0^1 f = ...`
            named, last = raw_members[0], "=".join(raw_members[1:])
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
    label = named is None and (
        not first_text.strip()  # `\\operatorname{lcm} = 90`: a name in words, dropped by `prepare`
        or (first is None and re.search(r"[A-Za-z]", first_text) is not None)
        or (first is not None and _names_quantity(first))
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


_PLUS_RE = re.compile(r"\+")
_MAX_WRITTEN_TERMS = 16
_APPROX_SIGN_RE = re.compile(r"\\approx(?![A-Za-z])|≈")


def _read_written_out_sum(answer: str, golds: tuple[Value, ...]) -> Reading | None:
    """The reading of a sum written out with dots (`1 + 4 + \\cdots + 10000`) as the gold's own sum, where the gold
    is a sum over one index and the written terms are its first and last terms (`written_out_sum`); else `None`.
    Written at the end of a chain, the chain's other members must equal it (a first member naming the quantity is
    a label), and a rounding written after it (`\\approx 2028{,}94`) must be the sum's at its own last place."""
    sums = [g for g in golds if g.kind == SCALAR and isinstance(g.node, sympy.Sum)]
    prepared, problem = prepare(answer) if sums else ("", "no sum gold")
    if problem is not None or not prepared:
        return None
    members = _top_level_split(prepared, _EQUALS_RE)
    written, *rounding = _APPROX_SIGN_RE.split(members[-1])
    if len(rounding) > 1:
        return None
    pieces = _top_level_split(written, _PLUS_RE)
    if len(pieces) > _MAX_WRITTEN_TERMS or len(members) > 4:
        return None
    terms = [None if _DOTS_RE.match(piece) else _member(piece) for piece in pieces]
    named = [_member(m) for m in members[:-1]]
    if named and (named[0] is None or _names_quantity(named[0])):
        named = named[1:]  # `S = ...`, `\\sum_{k=1}^{n} ... = ...`: the first member names the sum
    if any(node is None for node in named):
        return None
    for gold in sums:
        if not written_out_sum(terms, gold.node):
            continue
        if rounding:
            decimal = _member(rounding[0])
            if not (
                numeral(decimal) is not None
                and (_has_float(decimal) or decimal.is_Integer)
                and _within(decimal, gold.node, _written_ulp(rounding[0]))
            ):
                return None
        return Reading(gold, tuple(_typed(node, str(node)) for node in named), written, raw=written)
    return None


def _names_quantity(node: Any) -> bool:
    """A first member that names the quantity asked rather than stating a value: a name (`_is_label`), or an
    expression holding an operation not carried out or a function left undefined (`\\int_0^1 x^2 f(x)\\,dx`,
    `\\lim_{n\\to\\infty} P_n`): the value read is what follows it."""
    from sympy.core.function import AppliedUndef

    if node is None or not isinstance(node, sympy.Basic) or _approximates(node):
        return False  # `\\pi_1 \\approx \\pi_0 = ...` states a bound, it names nothing
    return _is_label(node) or node.has(*_NOT_CARRIED_OUT) or bool(node.atoms(AppliedUndef))


def _member(text: str) -> Any:
    """The tree of one member of a chain (a `\\pm` in it read as both values), or `None`."""
    if not text.strip():
        return None
    if re.search(r"\\(?:pm|mp)(?![A-Za-z])", text):
        value = _read_members(text.strip())
        return None if value is None else value.node
    return read_form(text.strip())


def _uncheckable(member: Any, value: Any) -> bool:
    """Whether a member of a chain is written in names of quantities the value does not have (`\\pi_0 \\cdot C(N, 1)`
    in `\\pi_1 = \\pi_0 \\cdot C(N, 1) = \\frac{N}{2^N}`: an undefined function, a subscripted name), so that nothing
    can tell whether it equals the value; such a member cannot change the value read. A plain letter is not such a
    name, and a relation or an approximation never is."""
    from sympy.core.function import AppliedUndef

    if not isinstance(member, sympy.Expr) or not isinstance(value, sympy.Basic):
        return False  # a relation (`\\pi_1 \\le \\pi_0`) or an approximation is checked, and refused
    if _approximates(member):
        return False
    constants = {sympy.Symbol("i"): sympy.I, sympy.Symbol("e"): sympy.E}  # `e^{i\\pi}+2` is a number
    evaluated = evaluate(member.xreplace(constants))
    if not isinstance(evaluated, sympy.Basic):
        return False
    extra = evaluated.free_symbols - value.free_symbols
    # A name of a quantity (`C(N, 1)`, `\\pi_0`) cannot be checked; a plain letter is a variable whose value the
    # member would have to state (`\\sqrt{k^2} - k + 4`, `2y`), so it is checked, and refused.
    return bool(evaluated.atoms(AppliedUndef)) or (bool(extra) and all("_" in s.name for s in extra))


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
    readings = {gold_is_relation: _read_answer(answer, gold_is_relation, letters)}
    if any(g.kind == RELATION for g in golds) and not gold_is_relation:
        readings[True] = _read_answer(answer, True, letters)  # `2x - y + 1 = 0` for `y = 2x + 1`: an equation
    first = readings[gold_is_relation]
    if first.value is None and first.reason == UNREADABLE:
        first = _read_written_out_sum(answer, golds) or first
        readings[gold_is_relation] = first
    if first.value is None and (True not in readings or readings[True].value is None):
        return False, first.reason, "", gold_text
    verdict_reason: str | None = None
    answer_text = ""
    for gold_value in golds:
        reading = readings.get(gold_value.kind == RELATION, first)
        if reading.value is None:
            verdict_reason = verdict_reason or reading.reason
            continue
        value = reading.value
        answer_text = answer_text or sympy.sstr(value.node, full_prec=False)[:200]
        if value.kind == SCALAR and _approximates(value.node):
            exact = _rounded_to(value.node)
            named = _named_rounding(value.node)
            if exact is None and named is None:
                verdict_reason = verdict_reason or OTHER_RELATION
                continue
            value = Value(SCALAR, exact, (exact,)) if exact is not None else named
        gold_prepared = gold_value.text or prepare(_ALTERNATIVES_RE.split(gold)[0])[0] or gold
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
    return bool(answer) and answer != _squeezed(context.gold_text) and answer in _squeezed_pieces(context.question)


@functools.lru_cache(maxsize=256)
def _squeezed_pieces(question: str) -> frozenset[str]:
    return frozenset(_squeezed(piece) for piece in _pieces(question))


_ASKS_REDUCTION_RE = re.compile(
    r"lowest[\s-]+terms|simplest|simplif|reduce|reduction|irreducible|irréductible|irreductible|common\s+fraction"
    r"|relatively\s+prime|co-?prime|common\s+(?:factor|divisor)|\bgcd\b|\\gcd|cancel|smallest\s+(?:possible\s+)?denominator"
    r"|несократим|сократ|упрост|взаимно\s+прост|最简|约分|互质|互素|既約|約分|irreduzível|vereinfach|gekürzt|kürze|teilerfremd",
    re.IGNORECASE,
)  # "common fraction" is MATH's way of asking for a fraction in lowest terms


def _unreduced_fraction(value: Value, gold_number: sympy.Rational | None, context: _Context) -> bool:
    """Whether `value` is a quotient of integers not in lowest terms (`\\frac{34}{100}`) answering a fraction gold
    (`\\frac{17}{50}`), judged against a question: the policy computed the ratio and left only its reduction, which
    changes no value. Without the question nothing can tell it from a fraction the question hands back (`\\frac68`
    for "Simplify $\\frac68$"), an integer gold (`\\frac{38}{2}` for 19) leaves a division undone, and a question
    that asks for the reduction (`_ASKS_REDUCTION_RE`: "in lowest terms", "simplify", ...) is not answered by it."""
    return (
        bool(context.question)
        and _ASKS_REDUCTION_RE.search(context.question) is None
        and gold_number is not None
        and gold_number.q != 1
        and value.kind == SCALAR
        and numeral(value.node, lowest_terms=False) is not None
    )


def _judge_against(value: Value, reading: Reading, gold: Value, kind: str, context: _Context) -> str | None:
    """`None` when `value` is paid for `gold`; else the reason (`""` for a plain wrong value)."""
    if value.kind == RELATION and gold.kind == SCALAR:
        return OTHER_RELATION
    gold_number = numeral(gold.node) if gold.kind == SCALAR else None
    if kind == "number" or (kind != "value" and gold_number is not None):
        if value.kind != SCALAR:
            return SEVERAL_VALUES if value.kind in (COLLECTION, TUPLE, PAIR) else OTHER_TYPE
        if numeral(value.node) is None and not _unreduced_fraction(value, gold_number, context):
            return NOT_A_NUMBER
    if value.kind in (COLLECTION, TUPLE, PAIR) and gold.kind == SCALAR:
        return SEVERAL_VALUES
    if _left_to_carry_out(value.node) and not _left_to_carry_out(gold.node):
        return NOT_CLOSED
    if not same_value(value, gold, context):
        return ""
    for other in reading.others:
        if not _uncheckable(other.node, value.node) and not same_value(other, value):
            return FALSE_RELATION
    if reading.clauses and not _clauses_hold(reading.clauses, value):
        return FALSE_RELATION
    if kind != "value" and context.question and restates_question(value.node, gold.node, context.question):
        return RESTATED
    if kind != "value" and context.question and _restates_text(reading.raw, context):
        return RESTATED
    return None
