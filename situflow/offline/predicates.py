"""Necessary single-attribute range conditions of a symbol's predicate (thesis §3.4.4, step 1).

An index answers a range query on one attribute, so each symbol is reduced to the range
conditions every event it matches must satisfy. The reduction keeps a *superset* of the
symbol's events, which is all pruning needs:

1. negation normal form first: NOT is pushed down to the atoms, flipping comparisons
   (research AT-14: replacing an atom under NOT by ``true`` would turn the superset into a
   subset);
2. an atom ``attr op literal`` (either side) becomes a union of :class:`Range` on ``attr``;
   every other atom (arithmetic on two attributes, references to other variables, ``PREV``,
   aggregates, calls, a negated non-range atom) is unknown, i.e. ``true``, except that
   ``attr = other`` inherits the ranges the caller knows ``other`` (another variable's
   attribute) to lie in (``known``: constant propagation);
3. AND keeps every conjunct's conditions, intersecting those on the same attribute; OR keeps,
   per attribute constrained on *both* sides, the union of the two sides' ranges (each side
   implies its own, so the disjunction implies the union), and nothing else.

A negated comparison holds where the attribute is missing (SEMANTICS.md: comparisons with a
missing value are false, so their negation is true), which no range expresses: it becomes a
range only for attributes the caller declares ``present`` in every event (for example a
column without nulls in the archive), and ``true`` otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import Any

from situflow.archive.ranges import Condition, Range
from situflow.lang import ast
from situflow.lang.compile import literal_value

#: Per attribute the union of ranges every matching event satisfies; ``{}`` is ``true``.
Ranges = dict[str, tuple[Range, ...]]

_MIRRORED = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "=": "=", "!=": "!="}
_NEGATED = {"<": ">=", ">": "<=", "<=": ">", ">=": "<", "=": "!=", "!=": "="}


def necessary_conditions(expr: ast.Node, attribute_of: Callable[[ast.Node], str | None], *,
                         present: Container[str] = frozenset(),
                         known: Callable[[ast.Node], tuple[Range, ...] | None] = lambda node: None,
                         ) -> tuple[Condition, ...]:
    """The conditions, one per attribute and sorted by it, that every event satisfying
    ``expr`` satisfies; ``()`` when nothing is known (the symbol gets no index).

    ``attribute_of(node)`` names the attribute when ``node`` reads the symbol's current event
    (the language adapter decides: ``a.price``, ``price``, ``a[i].price``), else None.
    ``present`` names the attributes no event lacks (module doc). ``known(node)``, for a
    reference to another variable's attribute, gives the ranges its value lies in whenever a
    match exists (that variable's own necessary conditions), else None: ``B.beat = A.beat``
    then inherits ``A.beat = 2232`` (constant propagation, research §3.3 [OURS]).

    >>> price = ast.Ref("a", "price")
    >>> expr = ast.Binary("and", ast.Binary(">", price, ast.Literal(10)),
    ...                   ast.Binary(">", price, ast.Call("prev", (price,))))
    >>> [condition] = necessary_conditions(expr, lambda n: n.name if n == price else None)
    >>> condition.attribute, condition.contains(10), condition.contains(10.5)
    ('price', False, True)
    """
    ranges = _Analysis(attribute_of, present, known).conditions(expr, negated=False)
    return tuple(Condition(attribute, ranges[attribute]) for attribute in sorted(ranges))


@dataclass(frozen=True)
class _Analysis:
    attribute_of: Callable[[ast.Node], str | None]
    present: Container[str]
    known: Callable[[ast.Node], tuple[Range, ...] | None]

    def conditions(self, expr: ast.Node, *, negated: bool) -> Ranges:
        """The conditions of ``expr`` (of ``NOT expr`` when ``negated``), in negation normal
        form."""
        if isinstance(expr, ast.Unary) and expr.op == "not":
            return self.conditions(expr.operand, negated=not negated)
        if isinstance(expr, ast.Binary) and expr.op in ast.LOGICAL:
            left = self.conditions(expr.left, negated=negated)
            right = self.conditions(expr.right, negated=negated)
            # De Morgan: under NOT, AND becomes OR and OR becomes AND.
            is_and = (expr.op == "and") != negated
            return conjunction(left, right) if is_and else disjunction(left, right)
        if isinstance(expr, ast.Binary) and expr.op in ast.COMPARISONS:
            return self.comparison(expr, negated=negated)
        return {}

    def comparison(self, expr: ast.Binary, *, negated: bool) -> Ranges:
        op = expr.op
        attribute, other = self.attribute_of(expr.left), expr.right
        if attribute is None:
            attribute, other, op = self.attribute_of(expr.right), expr.left, _MIRRORED[op]
        if attribute is None:
            return {}
        value = _constant(other)
        if value is None:
            inherited = self.known(other) if op == "=" and not negated else None
            if inherited is None:
                return {}
            return {attribute: tuple(Range(attribute, r.low, r.high, r.low_closed, r.high_closed)
                                     for r in inherited)}
        if negated:
            if attribute not in self.present:
                return {}
            op = _NEGATED[op]
        return {attribute: _atom_ranges(attribute, op, value)}


def _constant(node: ast.Node) -> Any:
    """The value of a number or string literal (units converted as the compilers do), else
    None; a boolean literal is not a range bound (the indexes hold numbers and strings)."""
    if isinstance(node, ast.Unary) and node.op == "-":
        inner = _constant(node.operand)
        return -inner if isinstance(inner, int | float) else None
    if not isinstance(node, ast.Literal) or isinstance(node.value, bool):
        return None
    return literal_value(node)


def _atom_ranges(attribute: str, op: str, value: Any) -> tuple[Range, ...]:
    if op == "=":
        return (Range(attribute, value, value),)
    if op == "!=":
        return (Range(attribute, high=value, high_closed=False),
                Range(attribute, low=value, low_closed=False))
    if op in ("<", "<="):
        return (Range(attribute, high=value, high_closed=op == "<="),)
    return (Range(attribute, low=value, low_closed=op == ">="),)


def conjunction(left: Ranges, right: Ranges) -> Ranges:
    """The conditions of ``left AND right``."""
    merged = dict(left)
    for attribute, ranges in right.items():
        merged[attribute] = _intersect(merged[attribute], ranges) if attribute in merged else ranges
    return merged


def disjunction(left: Ranges, right: Ranges) -> Ranges:
    """The conditions of ``left OR right``: per attribute both constrain, the union."""
    return {attribute: _union(left[attribute] + right[attribute])
            for attribute in left.keys() & right.keys()}


def _intersect(left: tuple[Range, ...], right: tuple[Range, ...]) -> tuple[Range, ...]:
    """(∪ left) ∩ (∪ right) as a union of pairwise intersections; ``()`` when empty."""
    pieces = (_intersect_pair(a, b) for a in left for b in right)
    return _union(tuple(piece for piece in pieces if piece is not None))


def _intersect_pair(a: Range, b: Range) -> Range | None:
    try:
        low, low_closed = _tighter(a.low, a.low_closed, b.low, b.low_closed, lower=True)
        high, high_closed = _tighter(a.high, a.high_closed, b.high, b.high_closed, lower=False)
        if low is not None and high is not None and (
                low > high or (low == high and not (low_closed and high_closed))):
            return None
    except TypeError:
        # A string bound against a number bound: no value satisfies both comparisons, but
        # keeping one side is still a superset, and the conservative answer.
        return a
    return Range(a.attribute, low, high, low_closed, high_closed)


def _tighter(x: Any, x_closed: bool, y: Any, y_closed: bool, *, lower: bool) -> tuple[Any, bool]:
    """The stricter of two lower (or upper) bounds; None is unbounded."""
    if x is None:
        return y, y_closed
    if y is None or x == y:
        return x, x_closed and (y is None or y_closed)
    return (x, x_closed) if (x > y) == lower else (y, y_closed)


def _union(ranges: tuple[Range, ...]) -> tuple[Range, ...]:
    """The ranges sorted by lower bound, overlapping ones joined; unchanged when their bounds
    do not compare (strings and numbers on one attribute)."""
    try:
        ordered = sorted(ranges, key=_lower_key)
        joined: list[Range] = []
        for current in ordered:
            if joined and _touch(joined[-1], current):
                joined[-1] = _join(joined[-1], current)
            else:
                joined.append(current)
    except TypeError:
        return ranges
    return tuple(joined)


def _lower_key(r: Range) -> tuple[bool, Any, bool]:
    # Unbounded first; at equal bounds the closed one (the wider) first.
    return (r.low is not None, r.low if r.low is not None else 0, not r.low_closed)


def _touch(a: Range, b: Range) -> bool:
    """Whether ``b`` (starting at or after ``a``) overlaps or adjoins ``a``, so that their union
    is one range."""
    if a.high is None or b.low is None:
        return True
    return b.low < a.high or (b.low == a.high and (a.high_closed or b.low_closed))


def _join(a: Range, b: Range) -> Range:
    if a.high is None or b.high is None:
        return Range(a.attribute, a.low, None, a.low_closed, True)
    if b.high > a.high or (b.high == a.high and b.high_closed):
        return Range(a.attribute, a.low, b.high, a.low_closed, b.high_closed)
    return a
