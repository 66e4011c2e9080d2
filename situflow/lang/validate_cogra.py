"""Validation of a COGRA query (SIGMOD 2019 §2–§3, Appendix C; SEMANTICS.md), before analysis.

It checks what the tree alone decides: variables bound once, negations between two non-empty
sub-patterns of a SEQ, ``AND`` only at the top, predicates on one variable or on two adjacent
events (§2.1, §3.2), typed and free of the event-type field, RETURN items that name grouping
attributes or bound variables, and windows that are whole positive tick counts. What needs the
automaton (an ambiguous pattern, conflicting negation guards, ``NEXT(Y)`` never after ``X``) is
refused by the pattern analyzer and the predicate classifier in :mod:`situflow.trends`.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import replace

from situflow.lang import ast
from situflow.lang.cogra import (
    Aggregate,
    AndPattern,
    CograQuery,
    Equivalence,
    KleeneLength,
    NegatedPattern,
    NextRef,
    OrPattern,
    SeqPattern,
    TypePattern,
    WindowLength,
)
from situflow.lang.cogra_sugar import alternatives, minimal_lengths, nullable
from situflow.lang.compile import literal_value
from situflow.lang.validate import Type, check_condition, error

# Window lengths in ticks: window ends (k·SLIDE + WITHIN) stay inside 64-bit event times.
MAX_TICKS = 2**62
# The operator keeps a slot per window an event belongs to (WITHIN / SLIDE rounded up).
MAX_WINDOWS_PER_EVENT = 100_000


def validate(query: CograQuery, type_field: str = "type", time_unit: float = 1.0) -> None:
    """Raise the first ``ValidationError`` of ``query``; ``type_field`` is invisible to its
    predicates, and windows are counted in ticks of ``time_unit`` seconds."""
    for node in query.pattern.walk():
        if isinstance(node, AndPattern) and node is not query.pattern:
            raise error(node, "AND joins whole patterns: P1 AND P2 matches a pair of trends, "
                              "which has no single first or last event for SEQ, + or OR to "
                              "connect; write the conjunction as the whole PATTERN")
    if not isinstance(query.pattern, AndPattern):
        _Automaton(query, type_field, time_unit).check()
        return
    # Each side of a conjunction is a query of its own, with the predicates on its variables.
    sides = query.pattern.items
    check_bindings(query.pattern)
    bound = [{name for n in side.walk() if isinstance(n, TypePattern)
              for name in (n.variable, n.type_name)} for side in sides]
    where = split_where(query, sides)
    for k, side in enumerate(sides):
        elsewhere = set().union(*(b for j, b in enumerate(bound) if j != k))
        _Automaton(replace(query, pattern=side, where=tuple(where[k])), type_field, time_unit,
                   elsewhere).check()


def split_where(query: CograQuery, sides: tuple[ast.Node, ...]) -> list[list[ast.Node]]:
    """The WHERE conjuncts of each side of a conjunction: ``[attrs]`` go to every side, a
    predicate to the side that binds its variables."""
    side_of = {n.variable: k for k, side in enumerate(sides) for n in side.walk()
               if isinstance(n, TypePattern)}
    parts: list[list[ast.Node]] = [[] for _ in sides]
    for conjunct in query.where:
        if isinstance(conjunct, Equivalence):
            for part in parts:
                part.append(conjunct)
            continue
        refs = [(n, n.qualifier if isinstance(n, ast.Ref)
                 else n.var if isinstance(n, KleeneLength) else n.variable)
                for n in conjunct.walk() if isinstance(n, ast.Ref | NextRef | KleeneLength)]
        for node, name in refs:
            if name is not None and name not in side_of:
                raise error(node, f"unknown pattern variable {name}; the pattern binds "
                                  f"{', '.join(side_of)}")
        owners = {side_of[name] for _, name in refs if name is not None}
        if len(owners) > 1:
            names = sorted({name for _, name in refs if name is not None})
            raise error(conjunct, f"this predicate relates {' and '.join(names)}, which are on "
                                  "different sides of AND; a conjunction pairs independent "
                                  "trends, so a predicate stays within one side")
        # A predicate without variables goes to the first side, which reports it.
        parts[owners.pop() if owners else 0].append(conjunct)
    return parts


def check_bindings(node: ast.Node) -> set[str]:
    """The variables ``node`` binds; a variable is bound once, except across OR branches."""
    if isinstance(node, TypePattern):
        return {node.variable}
    if isinstance(node, OrPattern):
        return set().union(*(check_bindings(item) for item in node.items))
    bound: set[str] = set()
    for child in node.children():
        inner = check_bindings(child)
        twice = bound & inner
        if twice:
            name = min(twice)
            where = next(n for n in child.walk()
                         if isinstance(n, TypePattern) and n.variable == name)
            assert isinstance(where, TypePattern)
            raise error(where, f"variable {name} is bound twice; give each occurrence its own "
                               f"name, as in {where.type_name} {name}1 and "
                               f"{where.type_name} {name}2")
        bound |= inner
    return bound


def negation_indexes(pattern: ast.Node) -> dict[str, int]:
    """Check that negations sit inside SEQ between two sub-patterns that cannot be empty; each
    gets an index by its variable, in the order they appear."""
    found: dict[str, int] = {}
    allowed: set[int] = set()
    for node in pattern.walk():
        if not isinstance(node, SeqPattern):
            continue
        items = node.items
        for k, item in enumerate(items):
            if not isinstance(item, NegatedPattern):
                continue
            inside = 0 < k < len(items) - 1
            if not inside or any(isinstance(items[j], NegatedPattern) or nullable(items[j])
                                 for j in (k - 1, k + 1)):
                raise error(item, "NOT needs a sub-pattern on each side that cannot be empty, "
                                  "as in SEQ(A+, NOT C, B)")
            allowed.add(id(item))
            found.setdefault(item.inner.variable, len(found))
    for node in pattern.walk():
        if isinstance(node, NegatedPattern) and id(node) not in allowed:
            raise error(node, "NOT is allowed only between two items of SEQ(...)")
    return found


def variables_in(expr: ast.Node) -> tuple[set[str], set[str]]:
    """The variables ``expr`` reads of the current event (``X.a``) and of the next
    (``NEXT(Y).b``)."""
    current = {n.qualifier for n in expr.walk() if isinstance(n, ast.Ref) and n.qualifier}
    following = {n.variable for n in expr.walk() if isinstance(n, NextRef)}
    return current, following


def adjacent_sides(conjunct: ast.Node) -> tuple[str, ast.Node, ast.Node, str, str]:
    """An adjacent predicate as ``(op, prev_expr, next_expr, X, Y)``: ``prev_expr`` reads the
    ``X`` event, ``next_expr`` the ``NEXT(Y)`` event after it, and ``prev_expr op next_expr``."""
    if not isinstance(conjunct, ast.Binary) or conjunct.op not in ast.COMPARISONS:
        raise error(conjunct, "a predicate with NEXT(...) must compare the two adjacent events, "
                              "as in S.price > NEXT(S).price; join several with AND")
    left_cur, left_next = variables_in(conjunct.left)
    right_cur, right_next = variables_in(conjunct.right)
    if left_next and not left_cur and right_cur and not right_next:
        op, prev_expr, next_expr = _FLIP[conjunct.op], conjunct.right, conjunct.left
        cur, nxt = right_cur, left_next
    elif right_next and not right_cur and left_cur and not left_next:
        op, prev_expr, next_expr = conjunct.op, conjunct.left, conjunct.right
        cur, nxt = left_cur, right_next
    else:
        raise error(conjunct, "an adjacent predicate compares one variable's attributes on one "
                              "side with NEXT(...) attributes on the other, as in "
                              "L.cpu < NEXT(L).cpu")
    if len(cur) > 1 or len(nxt) > 1:
        raise error(conjunct, "an adjacent predicate relates one variable to one NEXT(...)")
    return op, prev_expr, next_expr, cur.pop(), nxt.pop()


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}


def window_ticks(length: WindowLength, time_unit: float) -> float:
    """A window length in ticks of ``time_unit`` seconds (NaN for a non-number)."""
    value = length.value
    if isinstance(value, ast.Duration):
        return value.seconds / time_unit
    assert isinstance(value, ast.Literal)
    raw = literal_value(value)
    return float(raw) if isinstance(raw, int | float) else math.nan


class _Automaton:
    """The checks of one pattern without AND; ``elsewhere`` are the variables and types that
    other sides of a conjunction bind."""

    def __init__(self, query: CograQuery, type_field: str, time_unit: float,
                 elsewhere: Collection[str] = ()):
        self.query = query
        self.type_field = type_field
        self.time_unit = time_unit
        self.elsewhere = elsewhere

    def check(self) -> None:
        q = self.query
        lengths = minimal_lengths(q)
        check_bindings(q.pattern)
        negated = negation_indexes(q.pattern)
        found = [a for a in alternatives(q.pattern, lengths) if a is not None]
        if not found:
            raise error(q.pattern, "this pattern only matches the empty trend; use + instead "
                                   "of *")
        # Variables and types in the order the pattern analyzer numbers their positions.
        bound = [n for a in found for n in _bound_patterns(a)]
        variables = list(dict.fromkeys(n.variable for n in bound))
        types = {n.type_name for n in bound}
        self._check_predicates(variables, negated)
        self._check_returns(variables, types, negated)
        self._check_windows()

    def _check_predicates(self, variables: list[str], negated: dict[str, int]) -> None:
        known = list(dict.fromkeys([*variables, *negated]))
        for conjunct in self.query.where:
            if isinstance(conjunct, Equivalence):
                continue
            check_condition(conjunct, lambda node: self._typeof(node, known))
            if any(isinstance(n, KleeneLength) for n in conjunct.walk()):
                continue  # a minimal length, read by the Appendix C rewrite
            current, following = variables_in(conjunct)
            if not following:
                if not current:
                    raise error(conjunct, "a predicate must compare an attribute of a pattern "
                                          "variable, as in S.price > 10")
                if len(current) > 1:
                    raise error(conjunct, "predicates on non-adjacent events are not supported "
                                          f"(COGRA §2.1); {' and '.join(sorted(current))} are "
                                          "compared here. Use NEXT(X).attr for adjacent events")
                continue
            if (current | following) & negated.keys():
                raise error(conjunct, "a negated variable binds no event of the trend, so it "
                                      "cannot be compared with NEXT(...)")
            adjacent_sides(conjunct)

    def _typeof(self, node: ast.Node, variables: list[str]) -> Type:
        if isinstance(node, ast.Ref):
            if node.qualifier is None:
                example = f"{variables[0]}.{node.name}"
                raise error(node, f"qualify '{node.name}' with a pattern variable (as in "
                                  f"{example}), or quote it ('{node.name}') if it is a constant")
            if node.qualifier not in variables:
                raise error(node, f"unknown pattern variable {node.qualifier}; the pattern binds "
                                  f"{', '.join(variables)}")
            self._check_visible(node, node.name)
            return Type.ANY
        if isinstance(node, NextRef):
            if node.variable not in variables:
                raise error(node, f"unknown pattern variable {node.variable} in NEXT(...); the "
                                  f"pattern binds {', '.join(variables)}")
            self._check_visible(node, node.name)
            return Type.ANY
        if isinstance(node, KleeneLength):
            return Type.NUMBER
        raise error(node, "expected an attribute, a constant or NEXT(X).attr")

    def _check_visible(self, node: ast.Node, name: str) -> None:
        if name == self.type_field:
            raise error(node, f"'{name}' is the event type field and is not visible to "
                              "predicates (SEMANTICS.md); rename the attribute or choose another "
                              "type field")

    def _check_returns(self, variables: list[str], types: set[str],
                       negated: dict[str, int]) -> None:
        q = self.query
        for item in q.returns:
            if isinstance(item, ast.Ref):
                if item.name not in q.group_by:
                    raise error(item, f"RETURN can list only GROUP-BY attributes; '{item.name}' "
                                      "is not one (aggregate it, as in MAX(S.attr))")
                continue
            assert isinstance(item, Aggregate)
            if item.variable is None:
                continue
            if item.variable in negated:
                raise error(item, f"{item.variable} is negated: it binds no event of a trend")
            # A variable names its positions; a type name not used as a variable names all of
            # its positions.
            if (item.variable not in variables and item.variable not in types
                    and item.variable not in self.elsewhere):
                raise error(item, f"unknown pattern variable {item.variable}; the pattern binds "
                                  f"{', '.join(variables)}")

    def _check_windows(self) -> None:
        q = self.query
        size = self._check_ticks(q.within, "WITHIN")
        slide = size if q.slide is None else self._check_ticks(q.slide, "SLIDE")
        if -(-size // slide) > MAX_WINDOWS_PER_EVENT:
            raise error(q.slide or q.within,
                        f"WITHIN / SLIDE puts every event in {-(-size // slide):,} windows; at "
                        f"most {MAX_WINDOWS_PER_EVENT:,} are kept per event: use a longer SLIDE")

    def _check_ticks(self, length: WindowLength, clause: str) -> int:
        ticks = window_ticks(length, self.time_unit)
        if ticks > MAX_TICKS:
            raise error(length, f"{clause} exceeds 2^62 time units ({self.time_unit:g} s each), "
                                "beyond the range of 64-bit event times")
        if not (ticks >= 1 and abs(ticks - round(ticks)) < 1e-9):
            raise error(length, f"{clause} must be a whole positive number of time units "
                                f"({self.time_unit:g} s each)")
        return round(ticks)


def _bound_patterns(node: ast.Node) -> list[TypePattern]:
    """The type patterns that bind events, left to right (negated ones bind none)."""
    if isinstance(node, TypePattern):
        return [node]
    if isinstance(node, NegatedPattern):
        return []
    return [t for child in node.children() for t in _bound_patterns(child)]
