"""The pattern model the planner works on, independent of any query parser.

Kolchinsky & Schuster (PVLDB 11(11), 2018), §2.1: a *simple* pattern is one n-ary operator
(SEQ or AND) over primitive events ``T_i e_i``, at most one unary operator (NOT or KL) per
event, pairwise conditions ``c_i,j`` and unary filters ``c_i,i`` in a CNF ``WHERE``, and a
window ``W``. Here:

* :class:`Component` is a positive event ``T e`` (``kleene=True`` for ``KL(T e)``, i.e. the
  SASE+ ``T+ e[]``: one or more events, every non-empty subsequence under
  skip-till-any-match).
* :class:`Negation` is ``NOT(T e)`` at a position of a SEQ: ``position = p`` sits between
  positive components ``p-1`` and ``p`` (0 = leading, ``n`` = trailing). Its window follows
  SEMANTICS.md ("Negation windows").
* :class:`Predicate` is a pairwise condition ``c_i,j`` with a callable and a prior
  selectivity; :class:`Filter` a unary one. On a Kleene variable a condition must hold for
  every selected event (the [KS] KL operator has no iteration predicates, research C3).
* ``sequence=True`` is SEQ: positive components in listed order (strictly increasing sequence
  numbers, SEMANTICS.md "Event order"); ``sequence=False`` is AND, optionally with a partial
  order ``before`` (pairs ``(i, j)``: every event of ``i`` precedes every event of ``j``),
  which is what SEQ operands become inside a nested AND (§4, see :mod:`tests.plan.nested`).
* The window is inclusive: ``max(ts) - min(ts) <= window`` over all selected events
  (SEMANTICS.md "Windows are inclusive").

A match binds every component to a tuple of events (one event, or the selected events of a
Kleene component in sequence order).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from situflow.events import EventBatch
from situflow.plan.errors import PatternError


@dataclass(frozen=True, slots=True, eq=False)
class Event:
    """One primitive event: its type, event time, position in the ordered stream, attributes.

    ``seq`` is the sequence number of SEMANTICS.md (Kafka offset or line number); a match's
    events are ordered by it. Events compare by identity; their ``seq`` identifies them.
    """

    type: str
    ts: float
    seq: int
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        return self.attrs[name]

    def __repr__(self) -> str:
        return f"{self.type}{self.seq}@{self.ts}"


def events_from_batch(batch: EventBatch, start: int = 0) -> list[Event]:
    """The events of a columnar batch (the operator API's unit), in batch order.

    ``seq`` comes from the batch; a match's ``bindings()`` report sequence numbers, which the
    operator maps back to event ids. Missing types read as the empty string.
    """
    rows = range(start, len(batch))
    types = batch.types
    return [
        Event(
            "" if types is None or types[i] is None else str(types[i]),
            batch.ts[i].item(),
            int(batch.seq[i]),
            {name: column[i] for name, column in batch.columns.items()},
        )
        for i in rows
    ]


@dataclass(frozen=True, slots=True)
class Component:
    """A positive pattern event ``type var``; ``kleene`` makes it ``KL(type var)``."""

    var: str
    type: str
    kleene: bool = False

    def describe(self) -> str:
        return f"{self.type}+ {self.var}[]" if self.kleene else f"{self.type} {self.var}"


@dataclass(frozen=True, slots=True)
class Negation:
    """``NOT(type var)`` before positive component ``position`` (``n`` = after the last)."""

    var: str
    type: str
    position: int

    def describe(self) -> str:
        return f"~({self.type} {self.var})"


@dataclass(frozen=True, slots=True)
class Predicate:
    """A pairwise condition ``fn(event_of_left, event_of_right)`` with a prior selectivity.

    ``selectivity`` is the value the planner uses until :mod:`situflow.plan.stats` has
    measured one; ``name`` keys the measured value (unique within a pattern).
    """

    left: str
    right: str
    fn: Callable[[Event, Event], bool]
    selectivity: float = 1.0
    name: str = ""


@dataclass(frozen=True, slots=True)
class Filter:
    """A unary condition ``fn(event)`` on one variable (``c_i,i`` of [KS] §2.1)."""

    var: str
    fn: Callable[[Event], bool]
    selectivity: float = 1.0
    name: str = ""


@dataclass(frozen=True)
class Pattern:
    """A simple SEQ or AND pattern; validated on construction (see the module docstring)."""

    components: tuple[Component, ...]
    window: float
    predicates: tuple[Predicate, ...] = ()
    filters: tuple[Filter, ...] = ()
    negations: tuple[Negation, ...] = ()
    sequence: bool = True
    before: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        _validate(self)
        # Give every condition a stable name so statistics can be keyed by it.
        named = tuple(
            p if p.name else _renamed(p, f"{p.left}~{p.right}#{k}") for k, p in enumerate(self.predicates)
        )
        object.__setattr__(self, "predicates", named)
        named_filters = tuple(
            f if f.name else _renamed(f, f"{f.var}#{k}") for k, f in enumerate(self.filters)
        )
        object.__setattr__(self, "filters", named_filters)

    @property
    def size(self) -> int:
        return len(self.components)

    def index(self, var: str) -> int:
        """Position of a positive variable; ``-1 - k`` for the k-th negated one."""
        for i, comp in enumerate(self.components):
            if comp.var == var:
                return i
        for k, neg in enumerate(self.negations):
            if neg.var == var:
                return -1 - k
        raise PatternError(f"unknown variable '{var}'")

    def order_pairs(self) -> tuple[tuple[int, int], ...]:
        """The stated precedences: the chain ``(i, i+1)`` of a SEQ, the ``before`` of an AND."""
        if self.sequence:
            return tuple((i, i + 1) for i in range(self.size - 1))
        return self.before

    def precedence(self) -> frozenset[tuple[int, int]]:
        """All pairs ``(i, j)`` where component ``i`` must precede ``j`` (transitively closed)."""
        n = self.size
        if self.sequence:
            return frozenset((i, j) for i in range(n) for j in range(i + 1, n))
        closure = set(self.before)
        changed = True
        while changed:
            changed = False
            for a, b in list(closure):
                for c, d in list(closure):
                    if b == c and (a, d) not in closure:
                        closure.add((a, d))
                        changed = True
        return frozenset(closure)

    def filters_of(self, var: str) -> tuple[Filter, ...]:
        return tuple(f for f in self.filters if f.var == var)

    def types(self) -> frozenset[str]:
        """Every event type the pattern reads (positive and negated)."""
        return frozenset(c.type for c in self.components) | {n.type for n in self.negations}

    def describe(self) -> str:
        parts: list[str] = []
        for i, comp in enumerate(self.components):
            parts.extend(n.describe() for n in self.negations if n.position == i)
            parts.append(comp.describe())
        parts.extend(n.describe() for n in self.negations if n.position == self.size)
        op = "SEQ" if self.sequence else "AND"
        return f"{op}({', '.join(parts)}) WITHIN {self.window:g}"


def _renamed(cond: Any, name: str) -> Any:
    return type(cond)(**{**{s: getattr(cond, s) for s in cond.__slots__}, "name": name})


def _validate(p: Pattern) -> None:
    if not p.components:
        raise PatternError("a pattern needs at least one positive event")
    if not p.window >= 0:
        # A zero window is meaningful: every event of a match shares one timestamp.
        raise PatternError(f"the window must not be negative, got {p.window}")
    names = [c.var for c in p.components] + [n.var for n in p.negations]
    duplicates = sorted({v for v in names if names.count(v) > 1})
    if duplicates:
        raise PatternError(f"variables bound twice: {', '.join(duplicates)}")
    if p.negations and not p.sequence:
        raise PatternError("negation is only defined inside SEQ (Kolchinsky §4, SASE+ §3.1)")
    if p.before and p.sequence:
        raise PatternError("'before' pairs are for AND patterns; SEQ orders all components")
    n = p.size
    for i, j in p.before:
        if not (0 <= i < n and 0 <= j < n) or i == j:
            raise PatternError(f"bad precedence pair ({i}, {j})")
    for neg in p.negations:
        if not 0 <= neg.position <= n:
            raise PatternError(f"negation '{neg.var}' at position {neg.position} of {n}")
    kleene = {c.var for c in p.components if c.kleene}
    negated = {neg.var for neg in p.negations}
    known = set(names)
    for pred in p.predicates:
        for var in (pred.left, pred.right):
            if var not in known:
                raise PatternError(f"predicate on unknown variable '{var}'")
        if pred.left == pred.right:
            raise PatternError(f"pairwise predicate on one variable '{pred.left}': use a Filter")
        touched = {pred.left, pred.right}
        if touched & negated and touched & kleene:
            raise PatternError("a negated event cannot be compared with a Kleene variable")
        if touched <= negated:
            raise PatternError("a predicate between two negated events is meaningless")
    for flt in p.filters:
        if flt.var not in known:
            raise PatternError(f"filter on unknown variable '{flt.var}'")
    if any(i == j for i, j in p.precedence()):
        raise PatternError("the 'before' pairs form a cycle")
