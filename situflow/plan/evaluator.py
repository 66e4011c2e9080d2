"""What both evaluation mechanisms share: compiled checks, negation, emission.

Both mechanisms implement skip-till-any-match (Kolchinsky & Schuster §2, the paper's default
strategy): a match is any choice of distinct events — one per component, a non-empty subset
per Kleene component — such that

* every event has its component's type and passes its filters,
* every pairwise condition holds (on a Kleene component: for each of its events),
* the precedence of SEQ (strictly increasing sequence numbers) or of the AND's ``before``
  pairs holds between all events of the ordered components,
* ``max(ts) - min(ts) <= W`` (inclusive window, SEMANTICS.md),
* no negated event lies in its interval (SEMANTICS.md "Negation windows"): strictly between
  the last event of component ``p-1`` and the first of ``p``; for a leading negation in
  ``[last.t - W, first)``; for a trailing one in ``(last, first.t + W]``.

A *partial match* is ``(binding, lo, hi)``: per component the bound events (``()`` while
unbound) and the smallest and largest timestamp so far. Every partial match is created
exactly once, when the last of its events arrives — either by extending an older partial
match with the arriving event or, right after creation, by "catching up" with buffered older
events. That invariant makes both mechanisms duplicate-free for any plan, and it is why a
partial match whose ``lo`` is older than ``now - W`` can be dropped: it can only grow with
events that arrive later.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from situflow.errors import InputError
from situflow.plan.pattern import Event, Pattern
from situflow.plan.plans import is_trailing

Binding = tuple[tuple[Event, ...], ...]
Partial = tuple[Binding, float, float]
Check = Callable[[Event, Event], bool]


@dataclass(frozen=True)
class PlanMatch:
    """A full match: each positive variable with its events (in sequence order)."""

    vars: tuple[str, ...]
    events: Binding

    def key(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """``(variable, event sequence numbers)`` per component: the match's identity."""
        return tuple((v, tuple(e.seq for e in evs)) for v, evs in zip(self.vars, self.events, strict=True))

    def bindings(self) -> dict[str, list[int]]:
        return {v: [e.seq for e in evs] for v, evs in zip(self.vars, self.events, strict=True)}


class Compiled:
    """The pattern's conditions, grouped for the joins a plan performs."""

    def __init__(self, pattern: Pattern) -> None:
        self.pattern = pattern
        self.n = pattern.size
        comps = pattern.components
        self.filters: list[list[Callable[[Event], bool]]] = [
            [f.fn for f in pattern.filters_of(c.var)] for c in comps
        ]
        pairs: dict[tuple[int, int], list[Check]] = {}
        for pred in pattern.predicates:
            i, j = pattern.index(pred.left), pattern.index(pred.right)
            if i < 0 or j < 0:
                continue
            pairs.setdefault((i, j), []).append(pred.fn)
            pairs.setdefault((j, i), []).append(_flipped(pred.fn))
        precedence = pattern.precedence()
        for i, j in precedence:
            pairs.setdefault((i, j), []).append(_before)
            pairs.setdefault((j, i), []).append(_after)
        for i in range(self.n):
            for j in range(self.n):
                unordered = (i, j) not in precedence and (j, i) not in precedence
                if i != j and comps[i].type == comps[j].type and unordered:
                    # Two components of one type may not select the same event.
                    pairs.setdefault((i, j), []).append(_distinct)
        self._pairs = pairs
        self._join_cache: dict[tuple[int, int], list[tuple[int, int, list[Check]]]] = {}
        self.negations = [_CompiledNegation(pattern, k) for k in range(len(pattern.negations))]

    def accepts(self, i: int, event: Event) -> bool:
        return event.type == self.pattern.components[i].type and all(f(event) for f in self.filters[i])

    def join_checks(self, left: int, right: int) -> list[tuple[int, int, list[Check]]]:
        """The checks between components in bit mask ``left`` and those in ``right``."""
        found = self._join_cache.get((left, right))
        if found is None:
            found = [
                (i, j, self._pairs[i, j])
                for i in range(self.n)
                if left >> i & 1
                for j in range(self.n)
                if right >> j & 1 and (i, j) in self._pairs
            ]
            self._join_cache[left, right] = found
        return found


def _flipped(fn: Check) -> Check:
    def flipped(x: Event, y: Event) -> bool:
        return fn(y, x)

    return flipped


def _before(x: Event, y: Event) -> bool:
    return x.seq < y.seq


def _after(x: Event, y: Event) -> bool:
    return x.seq > y.seq


def _distinct(x: Event, y: Event) -> bool:
    return x is not y


def joinable(a: Binding, b: Binding, checks: list[tuple[int, int, list[Check]]]) -> bool:
    for i, j, fns in checks:
        for x in a[i]:
            for y in b[j]:
                for fn in fns:
                    if not fn(x, y):
                        return False
    return True


def merge(a: Binding, b: Binding) -> Binding:
    return tuple(x or y for x, y in zip(a, b, strict=True))


def subsets(candidates: list[Event]) -> Iterator[tuple[Event, ...]]:
    """Every subset (including the empty one) of ``candidates``, kept in their order."""
    for size in range(len(candidates) + 1):
        yield from itertools.combinations(candidates, size)


class _CompiledNegation:
    def __init__(self, pattern: Pattern, k: int) -> None:
        neg = pattern.negations[k]
        self.type = neg.type
        self.position = neg.position
        self.trailing = is_trailing(pattern, k)
        self.leading = neg.position == 0
        self.n = pattern.size
        self.window = pattern.window
        self.filters = [f.fn for f in pattern.filters_of(neg.var)]
        self.preds: list[tuple[int, Check]] = []
        for pred in pattern.predicates:
            if pred.left == neg.var:
                self.preds.append((pattern.index(pred.right), pred.fn))
            elif pred.right == neg.var:
                self.preds.append((pattern.index(pred.left), _flipped(pred.fn)))

    def accepts(self, event: Event) -> bool:
        return event.type == self.type and all(f(event) for f in self.filters)

    def relates(self, x: Event, binding: Binding) -> bool:
        """Whether ``x`` satisfies this negation's conditions with the bound events."""
        return all(fn(x, y) for i, fn in self.preds for y in binding[i])

    def deadline(self, binding: Binding) -> float:
        return binding[0][0].ts + self.window

    def forbids(self, x: Event, binding: Binding) -> bool:
        """Whether the (accepted) negated event ``x`` falls in the interval and relates."""
        if self.leading:
            first, last = binding[0][0], binding[self.n - 1][-1]
            inside = x.seq < first.seq and x.ts >= last.ts - self.window
        elif self.trailing:
            first, last = binding[0][0], binding[self.n - 1][-1]
            inside = x.seq > last.seq and x.ts <= first.ts + self.window
        else:
            inside = binding[self.position - 1][-1].seq < x.seq < binding[self.position][0].seq
        return inside and self.relates(x, binding)


class Evaluator(ABC):
    """Buffers, negation and emission common to the lazy NFA and the ZStream tree.

    ``push(event)`` takes events in stream order (non-decreasing ``ts``, increasing ``seq``)
    and returns the matches completed by it; ``flush()`` ends a bounded input and returns the
    matches still waiting on a trailing negation. Matches waiting on a trailing negation are
    emitted once event time passes ``first.t + W`` (SEMANTICS.md).
    """

    def __init__(self, pattern: Pattern) -> None:
        self.pattern = pattern
        self.compiled = Compiled(pattern)
        self.vars = tuple(c.var for c in pattern.components)
        self.window = pattern.window
        self.now = float("-inf")
        self._last_seq = -1 << 62
        negs = self.compiled.negations
        self._neg_buffers: list[deque[Event]] = [deque() for _ in negs]
        self._trailing = [k for k, neg in enumerate(negs) if neg.trailing]
        self._pending: list[tuple[float, Binding]] = []

    def push_many(self, events: Iterable[Event]) -> list[PlanMatch]:
        out: list[PlanMatch] = []
        for event in events:
            out.extend(self.push(event))
        return out

    def push(self, event: Event) -> list[PlanMatch]:
        if event.ts < self.now or event.seq <= self._last_seq:
            raise InputError(
                f"event {event.seq} at {event.ts} arrives after event {self._last_seq} at "
                f"{self.now}; plans need the ordered stream (route the input through K-slack)",
                position=event.seq,
            )
        self._last_seq = event.seq
        out: list[PlanMatch] = []
        self.now = event.ts
        self._release(event.ts, out)
        horizon = event.ts - self.window
        for k, neg in enumerate(self.compiled.negations):
            buffer = self._neg_buffers[k]
            while buffer and buffer[0].ts < horizon:
                buffer.popleft()
            if neg.accepts(event):
                buffer.append(event)
                if neg.trailing:
                    self._pending = [p for p in self._pending if not neg.forbids(event, p[1])]
        self._positive(event, out)
        return out

    def advance_to(self, watermark: float) -> list[PlanMatch]:
        """Event time has reached ``watermark`` without events: release what waited for it."""
        out: list[PlanMatch] = []
        self._release(watermark, out)
        return out

    def flush(self) -> list[PlanMatch]:
        out = [PlanMatch(self.vars, binding) for _, binding in self._pending]
        self._pending = []
        return out

    def _release(self, now: float, out: list[PlanMatch]) -> None:
        if self._pending:
            keep = []
            for deadline, binding in self._pending:
                if deadline < now:
                    out.append(PlanMatch(self.vars, binding))
                else:
                    keep.append((deadline, binding))
            self._pending = keep

    def _negations_clear(self, ks: Iterable[int], binding: Binding) -> bool:
        for k in ks:
            neg = self.compiled.negations[k]
            if any(neg.forbids(x, binding) for x in self._neg_buffers[k]):
                return False
        return True

    def _complete(self, binding: Binding, out: list[PlanMatch]) -> None:
        """A full positive match. It was created by the event with the largest sequence
        number in it, so no event after it has arrived: a trailing negation can only be
        violated later, and the match waits until ``first.t + W``."""
        if self._trailing:
            deadline = self.compiled.negations[self._trailing[0]].deadline(binding)
            self._pending.append((deadline, binding))
        else:
            out.append(PlanMatch(self.vars, binding))

    @abstractmethod
    def _positive(self, event: Event, out: list[PlanMatch]) -> None:
        """Process a positive event: extend partial matches, append full ones to ``out``."""

    def state_size(self) -> int:
        """Live partial matches and buffered events (for memory accounting)."""
        return len(self._pending) + sum(len(b) for b in self._neg_buffers)
