"""Edge evaluation shared by the NFA^b runtime and the backtracking baseline (§3.1, §5.2).

:func:`prepare` computes, column-wise over a batch, what depends on one event alone: the
begin/take conditions that read only the current event (with the event type), negation
candidates, partition keys and the attribute rows that per-run conjuncts read.
:func:`moves` then evaluates the edges of one run's state on one event, with the Step 6 proceed
and the selection strategy's ignore rule: it is the single definition of a transition.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from situflow.events import EventBatch
from situflow.nfa.automaton import Automaton, StateKind

# The key of an event that lacks a partition attribute: it belongs to no partition (its
# equivalence tests are false), but still breaks strict contiguity.
MISSING = object()


class Env:
    """What compiled conjuncts read: ``v`` (a run's V) and ``row`` (the current event)."""

    __slots__ = ("row", "v")

    def __init__(self) -> None:
        self.v: tuple[Any, ...] = ()
        self.row: tuple[Any, ...] = ()

    def holds(self, tests: tuple[Callable[[Any], Any], ...], v: tuple[Any, ...]) -> bool:
        if not tests:
            return True
        self.v = v
        for f in tests:  # noqa: SIM110 - a plain loop: this is the innermost call of the runtime
            if not f(self):
                return False
        return True


class _Columns:
    """Attribute columns of a batch for vectorized conjuncts, fetched once each."""

    def __init__(self, batch: EventBatch):
        self.batch = batch
        self.cache: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        found = self.cache.get(name)
        if found is None:
            found = self.cache[name] = self.batch.column(name)
        return found


@dataclass
class Prepared:
    """Per-event facts of a batch, as Python lists for the event loop."""

    begin: list[list[bool]]  # per component
    take: list[list[bool] | None]  # per component (None for singletons)
    negative: list[list[bool]]  # per negated component
    relevant: list[bool]  # whether any state could select the event, or it could negate
    opens: list[bool]  # whether the event could start a run or be a negation candidate
    keys: list[Any]
    rows: list[list[Any]]  # per attribute of the automaton's layout
    ts: list[int]
    seq: list[int]
    ids: list[Any]

    def row(self, j: int) -> tuple[Any, ...]:
        return tuple(col[j] for col in self.rows)


def prepare(a: Automaton, batch: EventBatch) -> Prepared:
    n = len(batch)
    begin, take, negative = edge_masks(a, batch)
    opens = begin[0].copy()
    for m in negative:
        opens |= m
    relevant = opens.copy()
    for m in (*begin[1:], *(t for t in take if t is not None)):
        relevant |= m
    return Prepared(
        begin=[m.tolist() for m in begin],
        take=[m.tolist() if m is not None else None for m in take],
        negative=[m.tolist() for m in negative],
        relevant=relevant.tolist(),
        opens=opens.tolist(),
        keys=partition_keys(a, batch, n),
        rows=[batch.column(attr).tolist() for attr in a.attributes],
        ts=batch.ts.tolist(),
        seq=batch.seq.tolist(),
        ids=batch.ids.tolist(),
    )


def edge_masks(a: Automaton, batch: EventBatch
               ) -> tuple[list[np.ndarray], list[np.ndarray | None], list[np.ndarray]]:
    """Per component the events its begin and take edges may select, judged by the event
    type and the conjuncts on the event alone, and per negation its candidates."""
    n = len(batch)
    cols = _Columns(batch)
    types = batch.types

    def mask(event_type: str, vector: tuple[Callable[[Any], Any], ...]) -> np.ndarray:
        if types is None:
            return np.zeros(n, dtype=bool)
        out = np.asarray(types == event_type, dtype=bool)
        for test in vector:
            if not out.any():
                break
            out = out & np.broadcast_to(np.asarray(test(cols), dtype=bool), (n,))
        return out

    begin = [mask(c.begin.event_type, c.begin.vector) for c in a.components]
    take = [mask(c.take.event_type, c.take.vector) if c.take else None for c in a.components]
    negative = [mask(g.type_name, g.vector) for g in a.negations]
    return begin, take, negative


def partition_keys(a: Automaton, batch: EventBatch, n: int) -> list[Any]:
    """Each event's partition key (``None`` unpartitioned, :data:`MISSING` without one)."""
    attrs = a.partition_attributes
    if not attrs:
        return [None] * n
    if len(attrs) == 1:
        column = batch.column(attrs[0])
        single: list[Any] = column.tolist()
        if column.dtype.kind == "f":
            for j in np.flatnonzero(np.isnan(column)).tolist():
                single[j] = MISSING
        elif column.dtype.kind == "O":
            single = [MISSING if k is None or (isinstance(k, float) and math.isnan(k)) else k
                      for k in single]
        return single
    columns = [batch.column(x).tolist() for x in attrs]
    keys: list[Any] = []
    for j in range(n):
        values = tuple(col[j] for col in columns)
        if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in values):
            keys.append(MISSING)
        else:
            keys.append(values[0] if len(values) == 1 else values)
    return keys


def moves(a: Automaton, state: int, v: tuple[Any, ...], j: int, p: Prepared,
          env: Env) -> tuple[bool, bool, bool]:
    """(select, proceed, ignore) for a run in ``state`` with values ``v`` reading event ``j``
    (``env.row`` is that event). ``select`` is the begin edge at a singleton or ``p[1]`` state
    and the take edge at ``p[i]``; ``proceed`` means proceed and begin the next component."""
    st = a.states[state]
    comp = a.components[st.component]
    if st.kind is StateKind.BEGIN:
        began = p.begin[comp.index][j] and env.holds(comp.begin.scalar, v)
        return began, False, a.selection.ignores(began)
    take_mask = p.take[comp.index]
    assert comp.take is not None and take_mask is not None
    length = v[comp.length_slot] + 1
    takes = take_mask[j] and env.holds(comp.take.scalar, v) and all(
        f(env) for k, f in comp.take.guarded if k == length
    )
    proceeds = False
    if not comp.last:
        # Step 6: proceed only if the event begins the next component. The paper's opportunistic
        # move (take and ignore both false) always ends in a dead run, so it is not made.
        nxt = a.components[comp.index + 1]
        proceeds = p.begin[nxt.index][j] and env.holds(comp.proceed, v) and env.holds(
            nxt.begin.scalar, v)
    return takes, proceeds, a.selection.ignores(takes)
