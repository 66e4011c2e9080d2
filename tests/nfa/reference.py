"""Brute-force reference: SASE+ matches straight from their definitions, no automaton.

Every assignment of stream events to the positive components (one event per single component,
one or more in increasing order per Kleene plus) is enumerated and kept if

- each event has its component's type, the ``[attr]``/``PARTITION BY`` attributes are equal
  (and present) on all events, every WHERE conjunct holds (a conjunct with ``v[i]`` for every
  ``i >= 2``), and ``last.t - first.t <= w`` (SEMANTICS.md: inclusive window);
- the selection strategy allows the events left out between two selected ones (§2):
  strict contiguity none, partition contiguity none of the same partition, skip till any match
  all, and skip till next match only those the run could not select at that point: an event
  that would satisfy the take condition of the Kleene component being iterated, or the begin
  condition of the component awaited, may not be skipped. A conjunct belongs to a selection
  when all its identifiers are bound there and were not before (or it iterates with ``v[i]``);
  that is the last-identifier rule of §3.2, stated without an automaton;
- no negated event occurs where SEMANTICS.md forbids it: strictly between its neighbours,
  within ``[last.t - w, first)`` for a leading and ``(last, first.t + w]`` for a trailing one.

``CONSUME`` then keeps, per partition and in the order matches end, only matches starting after
the previous kept one ended; of several ending at the same event, the latest-starting one.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from typing import Any

from situflow.lang import ast
from situflow.lang.compile import compile_scalar
from situflow.lang.sase import (
    Component,
    Equivalence,
    Index,
    KleeneLength,
    KleeneRef,
    SaseQuery,
    Strategy,
    references,
)

NAN = math.nan
MatchKey = tuple[tuple[str, tuple[Any, ...]], ...]
_ITER = (Index.CURRENT, Index.PREVIOUS, Index.PREFIX)


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


class _Env:
    def __init__(self, assign: dict[str, list[dict[str, Any]]], i: int = 0,
                 candidate: dict[str, Any] | None = None):
        self.assign = assign
        self.i = i
        self.candidate = candidate


def _value(event: dict[str, Any], attr: str) -> Any:
    return event.get(attr, NAN)


def _aggregate(name: str, values: list[Any]) -> Any:
    present = [x for x in values if not _missing(x)]
    if name == "count":
        return len(present)
    if not present:
        return NAN
    return {"avg": lambda: sum(present) / len(present), "sum": lambda: sum(present),
            "max": lambda: max(present), "min": lambda: min(present)}[name]()


def _resolve(negated: set[str]) -> Any:
    def resolve(node: ast.Node) -> Any:
        if isinstance(node, ast.Call):
            arg = node.args[0]
            assert isinstance(arg, KleeneRef) and arg.attr is not None
            var, attr, name = arg.var, arg.attr, node.name
            if arg.index is Index.PREFIX:
                return lambda env: _aggregate(
                    name, [_value(e, attr) for e in env.assign[var][: env.i - 1]])
            return lambda env: _aggregate(name, [_value(e, attr) for e in env.assign[var]])
        if isinstance(node, ast.Ref):
            q, attr = node.qualifier, node.name
            if q in negated:
                return lambda env: _value(env.candidate, attr)
            return lambda env: _value(env.assign[q][0], attr)
        if isinstance(node, KleeneLength):
            v = node.var
            return lambda env: len(env.assign[v])
        if isinstance(node, KleeneRef):
            v, a, k = node.var, node.attr, node.k
            assert a is not None
            pick = {
                Index.CONST: lambda env: env.assign[v][k - 1] if len(env.assign[v]) >= k else None,
                Index.CURRENT: lambda env: env.assign[v][env.i - 1],
                Index.PREVIOUS: lambda env: env.assign[v][env.i - 2],
                Index.LAST: lambda env: env.assign[v][-1],
            }[node.index]
            return lambda env: NAN if (e := pick(env)) is None else _value(e, a)
        raise TypeError(type(node).__name__)

    return resolve


class Reference:
    def __init__(self, query: SaseQuery, window: float = math.inf):
        self.query = query
        self.window = window
        self.positives = query.positives
        self.position = {c.var: k for k, c in enumerate(self.positives)}
        self.negated = {c.var for c in query.components if c.negated}
        self.partition = query.partition_attrs()
        resolve = _resolve(self.negated)
        self.conjuncts: list[tuple[ast.Node, Any]] = [
            (c, compile_scalar(c, resolve)) for c in query.conjuncts()
            if not isinstance(c, Equivalence)
        ]

    # --- enumeration --------------------------------------------------------------------------

    def matches(self, events: list[dict[str, Any]]) -> list[MatchKey]:
        found: list[tuple[dict[str, list[dict[str, Any]]], list[int]]] = []
        for assign, seqs in self._assignments(events, 0, 0, {}, []):
            if self._valid(events, assign, seqs):
                found.append(({k: list(v) for k, v in assign.items()}, list(seqs)))
        if self.query.consume:
            found = self._consume(found)
        return [self._key(a) for a, _ in found]

    def _key(self, assign: dict[str, list[dict[str, Any]]]) -> MatchKey:
        return tuple((c.var, tuple(e["id"] for e in assign[c.var])) for c in self.positives)

    def _assignments(self, events: list[dict[str, Any]], k: int, start: int,
                     assign: dict[str, list[dict[str, Any]]],
                     seqs: list[int]) -> Iterator[tuple[dict[str, list[dict[str, Any]]], list[int]]]:
        if k == len(self.positives):
            yield assign, seqs
            return
        c = self.positives[k]
        first_t = events[seqs[0]]["ts"] if seqs else None
        for j in range(start, len(events)):
            if first_t is not None and events[j]["ts"] - first_t > self.window:
                break
            if events[j]["type"] != c.type_name:
                continue
            assign[c.var] = [events[j]]
            seqs.append(j)
            if c.kleene:
                yield from self._kleene(events, k, j + 1, assign, seqs)
            else:
                yield from self._assignments(events, k + 1, j + 1, assign, seqs)
            seqs.pop()
            del assign[c.var]

    def _kleene(self, events: list[dict[str, Any]], k: int, start: int,
                assign: dict[str, list[dict[str, Any]]],
                seqs: list[int]) -> Iterator[tuple[dict[str, list[dict[str, Any]]], list[int]]]:
        c = self.positives[k]
        yield from self._assignments(events, k + 1, start, assign, seqs)
        first_t = events[seqs[0]]["ts"]
        for j in range(start, len(events)):
            if events[j]["ts"] - first_t > self.window:
                break
            if events[j]["type"] != c.type_name:
                continue
            assign[c.var].append(events[j])
            seqs.append(j)
            yield from self._kleene(events, k, j + 1, assign, seqs)
            seqs.pop()
            assign[c.var].pop()

    # --- the match definition -----------------------------------------------------------------

    def _same_partition(self, anchor: dict[str, Any], e: dict[str, Any]) -> bool:
        return all(not _missing(_value(e, a)) and _value(e, a) == _value(anchor, a)
                   for a in self.partition)

    def _holds(self, conjunct: ast.Node, test: Any, assign: dict[str, list[dict[str, Any]]]) -> bool:
        iterating = [r for r in references(conjunct)
                     if isinstance(r, KleeneRef) and r.index in _ITER]
        if iterating:
            var = iterating[0].var
            return all(test(_Env(assign, i)) for i in range(2, len(assign[var]) + 1))
        return bool(test(_Env(assign)))

    def _valid(self, events: list[dict[str, Any]], assign: dict[str, list[dict[str, Any]]],
               seqs: list[int]) -> bool:
        anchor = events[seqs[0]]
        if not all(self._same_partition(anchor, events[j]) for j in seqs):
            return False
        if events[seqs[-1]]["ts"] - anchor["ts"] > self.window:
            return False
        for conjunct, test in self.conjuncts:
            if self._refers_negated(conjunct):
                continue
            if not self._holds(conjunct, test, assign):
                return False
        if not self._strategy_allows(events, assign, seqs):
            return False
        return not self._negated(events, assign, seqs)

    def _refers_negated(self, conjunct: ast.Node) -> bool:
        return any(_var(r) in self.negated for r in references(conjunct))

    def _strategy_allows(self, events: list[dict[str, Any]],
                         assign: dict[str, list[dict[str, Any]]], seqs: list[int]) -> bool:
        strategy = self.query.effective_strategy
        if strategy is Strategy.ANY:
            return True
        anchor = events[seqs[0]]
        owners = [(c, n) for c in self.positives for n in range(1, len(assign[c.var]) + 1)]
        for (left, right), (comp, n) in zip(itertools.pairwise(seqs), owners, strict=False):
            for j in range(left + 1, right):
                e = events[j]
                if strategy is Strategy.STRICT:
                    return False
                if strategy is Strategy.PARTITION:
                    if not self.partition or self._same_partition(anchor, e):
                        return False
                    continue
                # Skip till next match: e is skipped only if the run could not select it.
                k = self.position[comp.var]
                prefix = {c.var: assign[c.var] for c in self.positives[: k + 1]}
                prefix[comp.var] = assign[comp.var][:n]
                if comp.kleene:
                    if self._selectable(anchor, prefix, comp, n + 1, e):
                        return False
                elif k + 1 < len(self.positives) and self._selectable(
                        anchor, prefix, self.positives[k + 1], 1, e):
                    return False
        return True

    def _selectable(self, anchor: dict[str, Any], prefix: dict[str, list[dict[str, Any]]],
                    comp: Component, n: int, e: dict[str, Any]) -> bool:
        """Whether ``e`` can be selected as element ``n`` of ``comp`` after ``prefix``."""
        if e["type"] != comp.type_name or not self._same_partition(anchor, e):
            return False
        trial = dict(prefix)
        trial[comp.var] = [*prefix.get(comp.var, []), e]
        for conjunct, test in self.conjuncts:
            if self._refers_negated(conjunct):
                continue
            now = self._bound(conjunct, comp, n)
            iterating = any(isinstance(r, KleeneRef) and r.index in _ITER and r.var == comp.var
                            for r in references(conjunct))
            if now and (iterating or not self._bound(conjunct, comp, n - 1)):
                env = _Env(trial, n)
                if not test(env):
                    return False
        return True

    def _bound(self, conjunct: ast.Node, comp: Component, n: int) -> bool:
        """Whether every identifier of ``conjunct`` is bound once ``n`` events of ``comp`` are
        selected (and every earlier component is complete)."""
        k = self.position[comp.var]
        for r in references(conjunct):
            var = _var(r)
            p = self.position[var]
            if p < k:
                continue
            if p > k:
                return False
            if isinstance(r, ast.Ref) or (isinstance(r, KleeneRef) and r.index is Index.CONST):
                need = r.k if isinstance(r, KleeneRef) else 1
                if n < need:
                    return False
            elif isinstance(r, KleeneRef) and r.index in _ITER:
                if n < 2:
                    return False
            else:
                return False  # v.LEN, v[v.LEN], v[ ]: bound when the iteration ends
        return True

    def _negated(self, events: list[dict[str, Any]], assign: dict[str, list[dict[str, Any]]],
                 seqs: list[int]) -> bool:
        comps = self.query.components
        first, last = events[seqs[0]], events[seqs[-1]]
        for j, c in enumerate(comps):
            if not c.negated:
                continue
            before = [p for p in comps[:j] if not p.negated]
            after = [p for p in comps[j + 1:] if not p.negated]
            conditions = [test for conj, test in self.conjuncts
                          if any(_var(r) == c.var for r in references(conj))]
            for e in events:
                s = e["seq"]
                if before and s <= assign[before[-1].var][-1]["seq"]:
                    continue
                if after and s >= assign[after[0].var][0]["seq"]:
                    continue
                if not before and e["ts"] < last["ts"] - self.window:
                    continue
                if not after and (s <= last["seq"] or e["ts"] > first["ts"] + self.window):
                    continue
                if e["type"] != c.type_name or not self._same_partition(first, e):
                    continue
                if all(test(_Env(assign, 0, e)) for test in conditions):
                    return True
        return False

    def _consume(self, found: list[tuple[dict[str, list[dict[str, Any]]], list[int]]]
                 ) -> list[tuple[dict[str, list[dict[str, Any]]], list[int]]]:
        by_end: dict[int, list[tuple[dict[str, list[dict[str, Any]]], list[int]]]] = {}
        for f in found:
            by_end.setdefault(f[1][-1], []).append(f)
        barrier: dict[Any, int] = {}
        kept = []
        for end in sorted(by_end):
            groups: dict[Any, list[Any]] = {}
            for a, seqs in by_end[end]:
                anchor = a[self.positives[0].var][0]
                key = tuple(anchor.get(x) for x in self.partition)
                if seqs[0] > barrier.get(key, -1):
                    groups.setdefault(key, []).append((a, seqs))
            for key, group in groups.items():
                best = min(group, key=lambda f: (
                    -f[1][0], len(f[1]),
                    tuple(tuple(e["seq"] for e in f[0][c.var]) for c in self.positives)))
                kept.append(best)
                barrier[key] = end
        return kept


def _var(ref: ast.Node) -> str:
    if isinstance(ref, ast.Ref):
        assert ref.qualifier is not None
        return ref.qualifier
    assert isinstance(ref, KleeneRef | KleeneLength)
    return ref.var
