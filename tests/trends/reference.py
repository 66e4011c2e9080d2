"""Brute-force reference of COGRA's trend semantics: enumerate every trend, then aggregate.

Written straight from the paper's definitions (Poppe et al., SIGMOD 2019), sharing nothing
with the executor but the parser:

- Definition 2.4 (skip-till-any-match): trends of ``E``, ``SEQ`` and ``P+`` built recursively;
- Definition 2.6 (skip-till-next-match): for each consecutive pair (e_{m-1}, e_m) of a trend,
  no event strictly between them is adjacent to e_{m-1} (Definition 3.2, constraints 1–5);
- Definition 2.8 (contiguous): every event of the sub-stream between the trend's first and
  last event is in the trend;
- Definition 2.9: predicates, grouping (partitions by ``[attrs]`` and GROUP-BY) and windows
  ``[k·slide, k·slide + size)`` (SEMANTICS.md);
- Appendix C: ``OR`` is the union of the trends of its sides, ``SEQ(P*, Q) = SEQ(P+, Q) OR
  Q``, ``LENGTH(A) >= m`` unrolls ``A+`` to ``SEQ(A, ..., A, A+)``, and ``SEQ(P, NOT N, Q)``
  matches ``s1 : s2`` when no ``N`` event lies between ``s1``'s last and ``s2``'s first
  event; that transition is then not an adjacency for skip-till-next-match either;
- Appendix C, conjunction (situflow's reading of GRETA): a match of ``P1 AND P2`` is a pair
  of trends, one of each side, each judged by the semantics on its own, in one partition and
  window; it is aggregated over the bindings of both trends.

Stream order is the list order (events are given sorted by time, ties in sequence order). A
trend is a tuple of (event index, variable) bindings, and the trends of a pattern are a set;
while it is built, every occurrence of a variable in the rewritten pattern is its own leaf.
Exponential by design: tiny inputs only.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from situflow.lang import ast
from situflow.lang.cogra import (
    Aggregate,
    AndPattern,
    CograQuery,
    Equivalence,
    KleeneLength,
    KleenePattern,
    NegatedPattern,
    NextRef,
    OrPattern,
    SeqPattern,
    TypePattern,
    parse,
)
from situflow.lang.compile import compile_scalar

Trend = tuple[tuple[int, Any], ...]


def evaluate(text: str, events: list[dict[str, Any]], type_field: str = "type") -> list[dict]:
    """The results ``situflow run`` must print for ``text`` on ``events`` (dicts with ``ts``)."""
    return _Query(parse(text), events, type_field).results()


def trends(text: str, events: list[dict[str, Any]], type_field: str = "type") -> list[Trend]:
    """Every match of the query's pattern, semantics and predicates, ignoring windows: a
    trend, or for ``P1 AND P2`` the bindings of a pair of trends."""
    query = _Query(parse(text), events, type_field)
    return [m for members in query.partitions().values() for m in query.matches(members)]


class _Query:
    """Definition 2.9 over the matches of the pattern: one trend of each side of ``AND``."""

    def __init__(self, query: CograQuery, events: list[dict[str, Any]], type_field: str):
        self.q = query
        self.events = events
        sides = query.pattern.items if isinstance(query.pattern, AndPattern) else (query.pattern,)
        self.sides = [_Reference(replace(query, pattern=side), events, type_field)
                      for side in sides]
        self.equivalence = [a for c in query.where if isinstance(c, Equivalence) for a in c.attrs]
        self.type_of = {v: t for ref in self.sides
                        for v, t in zip(ref.var_of, ref.type_of, strict=True)}

    def matches(self, members: list[int]) -> list[Trend]:
        per_side = [list(dict.fromkeys(tuple((i, ref.var_of[leaf]) for i, leaf in t)
                                       for t in ref.partition_trends(members)))
                    for ref in self.sides]
        return [tuple(b for t in combo for b in t) for combo in itertools.product(*per_side)]

    def relevant(self, i: int) -> bool:
        """Whether event ``i`` can take a position of the pattern."""
        return any(ref.eligible(i, leaf) for ref in self.sides for leaf in range(len(ref.var_of)))

    def partitions(self) -> dict[tuple[Any, ...], list[int]]:
        attrs = list(dict.fromkeys(self.equivalence + list(self.q.group_by)))
        parts: dict[tuple[Any, ...], list[int]] = {}
        for i, e in enumerate(self.events):
            parts.setdefault(tuple(e.get(a) for a in attrs), []).append(i)
        return parts

    def results(self) -> list[dict]:
        size = _ticks(self.q.within)
        slide = _ticks(self.q.slide) if self.q.slide else size
        group_of = {i: tuple(e.get(g) for g in self.q.group_by) for i, e in enumerate(self.events)}
        found = [t for members in self.partitions().values() for t in self.matches(members)]
        last = max((e["ts"] for e in self.events), default=-1)
        rows = []
        k = 0
        while k * slide <= last:
            lo, hi = k * slide, k * slide + size
            groups = sorted({group_of[i] for i, e in enumerate(self.events)
                             if lo <= e["ts"] < hi and self.relevant(i)}, key=_group_order)
            for g in groups:
                inside = [t for t in found if group_of[t[0][0]] == g
                          and all(lo <= self.events[i]["ts"] < hi for i, _ in t)]
                rows.append({
                    "group": None if not g else g[0] if len(g) == 1 else list(g),
                    "window_start": lo, "window_end": hi,
                    "values": self.aggregate(inside, dict(zip(self.q.group_by, g, strict=True))),
                })
            k += 1
        return rows

    def aggregate(self, found: list[Trend], group: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for item in self.q.returns:
            if isinstance(item, ast.Ref):
                out[item.name] = group[item.name]
                continue
            assert isinstance(item, Aggregate)
            label = item.to_text()
            if item.variable is None:
                out[label] = len(found)
                continue
            names = ({item.variable} if item.variable in self.type_of else
                     {v for v, t in self.type_of.items() if t == item.variable})
            bound = [[i for i, v in t if v in names] for t in found]
            if item.func == "COUNT":
                out[label] = sum(len(b) for b in bound)
                continue
            raw = [self.events[i].get(item.attr or "") for b in bound for i in b]
            flat: list[float] = [x for x in raw if isinstance(x, int | float) and not math.isnan(x)]
            if item.func == "SUM":
                out[label] = sum(flat)
            elif item.func == "MIN":
                out[label] = min(flat) if flat else None
            elif item.func == "MAX":
                out[label] = max(flat) if flat else None
            else:
                count = sum(len(b) for b in bound)
                out[label] = sum(flat) / count if count else None
        return out


class _Reference:
    """The trends of one pattern without AND (Definitions 2.4, 2.6, 2.8, Appendix C)."""

    def __init__(self, query: CograQuery, events: list[dict[str, Any]], type_field: str):
        self.q = query
        self.events = events
        self.type_field = type_field
        # Local predicates see (event, None); adjacent ones (earlier event, later event).
        self.local: dict[str, list[Callable[[Any], Any]]] = {}
        self.adjacent: list[tuple[str, str, Callable[[Any], Any]]] = []
        self.lengths: dict[str, int] = {}
        for c in query.where:
            if isinstance(c, Equivalence):
                continue
            if isinstance(c, ast.Binary) and isinstance(c.left, KleeneLength):
                assert isinstance(c.right, ast.Literal) and isinstance(c.right.value, int)
                self.lengths[c.left.var] = c.right.value + (c.op == ">")
                continue
            nxt = [n.variable for n in c.walk() if isinstance(n, NextRef)]
            cur = [n.qualifier for n in c.walk() if isinstance(n, ast.Ref) and n.qualifier]
            fn = compile_scalar(c, _pair_resolver)
            if nxt:
                self.adjacent.append((cur[0], nxt[0], fn))
            else:
                self.local.setdefault(cur[0], []).append(fn)
        # Leaves of the rewritten pattern: each occurrence is its own automaton state.
        self.var_of: list[str] = []
        self.type_of: list[str] = []
        self.negated = {n.inner.variable: n.inner.type_name for n in query.pattern.walk()
                        if isinstance(n, NegatedPattern)}
        alternatives = [self._number(t) for t in self._expand(query.pattern) if t is not None]
        self.tree = alternatives[0] if len(alternatives) == 1 else ("OR", alternatives)
        self.follow = self._follow_pairs(self.tree)[2]

    # --- pattern ------------------------------------------------------------------------

    def _expand(self, node: ast.Node) -> list[Any]:
        """Appendix C: a starred item may be left out of its SEQ (``SEQ(P*, Q) = SEQ(P+, Q) OR
        Q``), and ``LENGTH(A) >= m`` turns ``A+`` into ``SEQ(A, ..., A, A+)``. ``None`` is the
        empty pattern."""
        if isinstance(node, TypePattern):
            return [("E", node.variable, node.type_name)]
        if isinstance(node, OrPattern):
            return [t for item in node.items for t in self._expand(item)]
        if isinstance(node, NegatedPattern):
            return [("NOT", node.inner.variable)]
        if isinstance(node, SeqPattern):
            out: list[Any] = [[]]
            for item in node.items:
                out = [done + ([t] if t is not None else []) for done in out
                       for t in self._expand(item)]
            return [self._sequence(s) for s in out]
        assert isinstance(node, KleenePattern)
        if node.op == "?":  # SEQ(P1?, P2) = SEQ(P1, P2) OR P2; the empty pattern once
            return [t for t in self._expand(node.inner) if t is not None] + [None]
        if isinstance(node.inner, TypePattern) and node.inner.variable in self.lengths:
            leaf = ("E", node.inner.variable, node.inner.type_name)
            m = self.lengths[node.inner.variable]
            return [("SEQ", [leaf] * (m - 1) + [("PLUS", leaf)], [None] * (m - 1)) if m > 1
                    else ("PLUS", leaf)]
        inner = [t for t in self._expand(node.inner) if t is not None]
        body = inner[0] if len(inner) == 1 else ("OR", inner)
        return [("PLUS", body)] + ([None] if node.op == "*" else [])

    @staticmethod
    def _sequence(items: list[Any]) -> Any:
        """("SEQ", items, guards): guards[k] is the variable negated between items k and k+1."""
        positive = [t for t in items if t[0] != "NOT"]
        guards: list[str | None] = [None] * max(len(positive) - 1, 0)
        k = -1
        for t in items:
            if t[0] == "NOT":
                guards[k] = t[1]
            else:
                k += 1
        if not positive:
            return None
        return positive[0] if len(positive) == 1 else ("SEQ", positive, guards)

    def _number(self, tree: Any) -> Any:
        if tree[0] == "E":
            self.var_of.append(tree[1])
            self.type_of.append(tree[2])
            return ("E", len(self.var_of) - 1)
        if tree[0] == "PLUS":
            return ("PLUS", self._number(tree[1]))
        if tree[0] == "SEQ":
            return ("SEQ", [self._number(t) for t in tree[1]], tree[2])
        return (tree[0], [self._number(t) for t in tree[1]])

    def _follow_pairs(self, tree: Any) -> tuple[set[int], set[int], set[tuple[int, int, Any]]]:
        """(first, last, consecutive leaf pairs with the variable negated between them)."""
        if tree[0] == "E":
            return {tree[1]}, {tree[1]}, set()
        if tree[0] == "PLUS":
            first, last, pairs = self._follow_pairs(tree[1])
            return first, last, pairs | {(a, b, None) for a in last for b in first}
        parts = [self._follow_pairs(t) for t in tree[1]]
        pairs = set().union(*(p[2] for p in parts))
        if tree[0] == "OR":
            return (set().union(*(p[0] for p in parts)), set().union(*(p[1] for p in parts)),
                    pairs)
        for ((_, last, _), (first, _, _)), guard in zip(itertools.pairwise(parts), tree[2],
                                                        strict=True):
            pairs |= {(a, b, guard) for a in last for b in first}
        return parts[0][0], parts[-1][1], pairs

    def negated_between(self, variable: str | None, i: int, j: int, members: list[int]) -> bool:
        """Whether an event of the negated ``variable`` lies strictly between i and j."""
        if variable is None:
            return False
        return any(i < k < j and self.matches(k, self.negated[variable], variable)
                   for k in members)

    def matches(self, i: int, type_name: str, variable: str) -> bool:
        e = self.events[i]
        if e.get(self.type_field) != type_name:
            return False
        env = {k: v for k, v in e.items() if k != self.type_field}
        return all(bool(f((env, None))) for f in self.local.get(variable, []))

    def eligible(self, i: int, leaf: int) -> bool:
        return self.matches(i, self.type_of[leaf], self.var_of[leaf])

    def theta(self, i: int, p: int, j: int, q: int) -> bool:
        a = {k: v for k, v in self.events[i].items() if k != self.type_field}
        b = {k: v for k, v in self.events[j].items() if k != self.type_field}
        pair = (self.var_of[p], self.var_of[q])
        return all(bool(fn((a, b))) for x, y, fn in self.adjacent if (x, y) == pair)

    def any_trends(self, tree: Any, members: list[int]) -> list[Trend]:
        """Definition 2.4, recursively over the pattern; bindings are (event, leaf)."""
        # Trends form a set: (A+)+ splits one trend in several ways but matches it once.
        if tree[0] == "E":
            return [((i, tree[1]),) for i in members if self.eligible(i, tree[1])]
        if tree[0] == "OR":
            return [t for item in tree[1] for t in self.any_trends(item, members)]
        if tree[0] == "SEQ":
            out = self.any_trends(tree[1][0], members)
            for item, guard in zip(tree[1][1:], tree[2], strict=True):
                right = self.any_trends(item, members)
                out = list(dict.fromkeys(
                    a + b for a in out for b in right if a[-1][0] < b[0][0]
                    and not self.negated_between(guard, a[-1][0], b[0][0], members)))
            return out
        base = self.any_trends(tree[1], members)
        found = dict.fromkeys(base)
        frontier = list(base)
        while frontier:
            frontier = [t for t in dict.fromkeys(a + b for a in frontier for b in base
                                                 if a[-1][0] < b[0][0]) if t not in found]
            found.update(dict.fromkeys(frontier))
        return list(found)

    # --- semantics ----------------------------------------------------------------------

    def adjacent_any(self, i: int, p: int, j: int, members: list[int]) -> bool:
        """Definition 3.2 (1)-(4) for event j after (i, p), with no negated event between
        them on a guarded transition; (5) holds for events in between."""
        return any(a == p and self.eligible(j, q) and self.theta(i, p, j, q)
                   and not self.negated_between(guard, i, j, members)
                   for a, q, guard in self.follow)

    def partition_trends(self, members: list[int]) -> list[Trend]:
        found = [t for t in self.any_trends(self.tree, members)
                 if all(self.theta(i, p, j, q) for (i, p), (j, q) in itertools.pairwise(t))]
        if self.q.semantics == "skip-till-next-match":
            found = [t for t in found if all(
                not any(self.adjacent_any(i, p, k, members) for k in members if i < k < j)
                for (i, p), (j, _) in itertools.pairwise(t))]
        elif self.q.semantics == "contiguous":
            stream = [k for k in members if self.in_stream(k)]
            found = [t for t in found
                     if {k for k in stream if t[0][0] < k < t[-1][0]} <= {i for i, _ in t}]
        return found

    def in_stream(self, k: int) -> bool:
        """Local predicates filter the stream; events of other types stay (SEMANTICS.md)."""
        kind = self.events[k].get(self.type_field)
        if kind not in self.type_of and kind not in self.negated.values():
            return True
        return any(self.eligible(k, leaf) for leaf in range(len(self.var_of))) or any(
            self.matches(k, t, v) for v, t in self.negated.items())


def _group_order(group: tuple[Any, ...]) -> list[tuple[int, Any]]:
    return [(0, 0) if v is None else (2, v) if isinstance(v, int | float) else (3, str(v))
            for v in group]


def _pair_resolver(node: ast.Node) -> Callable[[Any], Any]:
    if isinstance(node, NextRef):
        name = node.name
        return lambda env: env[1].get(name)
    assert isinstance(node, ast.Ref)
    name = node.name
    return lambda env: env[0].get(name)


def _ticks(length: Any) -> int:
    value = length.value
    if isinstance(value, ast.Duration):
        return int(value.seconds)
    return int(value.value)
