"""The columnar pre-pass of the NFA^b runtime and the backtracking baseline (SASE+ §3.1, §5.2).

:func:`prepare` computes, column-wise over a batch, what depends on one event alone: the
begin/take conditions that read only the current event (with the event type), negation
candidates, partition keys and the attribute rows that per-run conjuncts read, for every event
or for those a selector picks (:func:`live_events`: the events that can change a run). The
per-run transition function that reads it is :func:`situflow.nfa.transitions.moves`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from situflow.events import EventBatch
from situflow.nfa.compiler.automaton import Automaton
from situflow.nfa.kernel.texts import factorize_objects

# The key of an event that lacks a partition attribute: it belongs to no partition (its
# equivalence tests are false), but still breaks strict contiguity.
MISSING = object()


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
    """Per-event facts of the events of a batch the event loop visits, as Python lists;
    ``positions`` are their indices in the batch."""

    begin: list[list[bool]]  # per component
    take: list[list[bool] | None]  # per component (None for singletons)
    negative: list[list[bool]]  # per negated component
    relevant: list[bool]  # whether any state could select the event, or it could negate
    opens: list[bool]  # whether the event could start a run or be a negation candidate
    keys: list[Any]
    rows: list[tuple[Any, ...]]  # per event, its attributes in the automaton's layout
    ts: list[int]
    seq: list[int]
    ids: list[Any]
    positions: list[int]

    def row(self, j: int) -> tuple[Any, ...]:
        return self.rows[j]


# Picks the events the loop must visit, given per event whether it opens (begins a run or is a
# negation candidate) and whether any state could select it.
Selector = Callable[[np.ndarray, np.ndarray], np.ndarray]


class Masks(NamedTuple):
    """Per event of a batch: the edges that may select it (:func:`edge_masks`), whether it
    opens a run or is a negation candidate, and whether any state could select it or it could
    negate."""

    begin: list[np.ndarray]
    take: list[np.ndarray | None]
    negative: list[np.ndarray]
    opens: np.ndarray
    relevant: np.ndarray


def masks(a: Automaton, batch: EventBatch) -> Masks:
    begin, take, negative = edge_masks(a, batch)
    opens = begin[0].copy()
    for m in negative:
        opens |= m
    relevant = opens.copy()
    for m in (*begin[1:], *(t for t in take if t is not None)):
        relevant |= m
    return Masks(begin, take, negative, opens, relevant)


def prepare(a: Automaton, batch: EventBatch, select: Selector | None = None) -> Prepared:
    """The per-event facts of ``batch``, of every event or of those ``select`` picks."""
    n = len(batch)
    begin, take, negative, opens, relevant = masks(a, batch)
    if select is None:
        positions = list(range(n))
    else:
        index = select(opens, relevant)
        positions = index.tolist()
        if len(index) < n:
            batch = batch.take(index)
            begin = [m[index] for m in begin]
            take = [None if m is None else m[index] for m in take]
            negative = [m[index] for m in negative]
            opens, relevant = opens[index], relevant[index]
    return Prepared(
        begin=[m.tolist() for m in begin],
        take=[m.tolist() if m is not None else None for m in take],
        negative=[m.tolist() for m in negative],
        relevant=relevant.tolist(),
        opens=opens.tolist(),
        keys=partition_keys(a, batch, len(batch)),
        rows=(list(zip(*(batch.column(x).tolist() for x in a.attributes), strict=True))
              if a.attributes else [()] * len(batch)),
        ts=batch.ts.tolist(),
        seq=batch.seq.tolist(),
        ids=batch.ids.tolist(),
        positions=positions,
    )


def live_events(a: Automaton, batch: EventBatch, opens: np.ndarray, relevant: np.ndarray,
                codes: np.ndarray, carried_start: np.ndarray | None) -> np.ndarray:
    """The indices of the events that can change a run: those that open one, and those of a
    partition with a run alive at their time that a run could select (any event of such a
    partition under the contiguity strategies, where it ends the runs it does not extend).

    A run is alive at ``t`` only while its newest member started at most ``w`` before ``t``
    (§5.3), and members start at events that open a run, in this batch or (``carried_start``:
    the newest start per partition code, see :func:`partition_codes`) before it. Every other
    event leaves the runs as they are, so the event loop need not see it: one pass over the
    batch in numpy instead of one Python step per event (§5.2.1 evaluates runs per event;
    without runs there is nothing to do).
    """
    # Under the skip strategies only events a state can select or that open a run matter.
    pool = (np.arange(len(batch)) if a.selection.contiguous
            else np.flatnonzero(opens | relevant))
    n = len(pool)
    order = pool[np.argsort(codes[pool], kind="stable")]
    grouped = codes[order]
    ts = batch.ts[order]
    first = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    group_start = np.repeat(first, np.diff(np.r_[first, n]))
    # The newest opening event of the same partition at or before each event.
    opener = np.maximum.accumulate(np.where(opens[order], np.arange(n), -1))
    alive = (opener >= group_start) & (ts - ts[np.maximum(opener, 0)] <= a.window)
    if carried_start is not None:
        start = carried_start[grouped]
        alive |= ~np.isnan(start) & (ts - start <= a.window)
    alive |= opens[order]
    alive &= grouped >= 0
    return np.sort(order[alive])


def partition_codes(a: Automaton, batch: EventBatch, carried: dict[Any, int]
                    ) -> tuple[np.ndarray, list[Any], np.ndarray | None]:
    """A code per event for its partition key (-1: no key), the key of each code and, per
    code, the ``carried`` start (NaN: none), or None if nothing is carried."""
    attrs = a.partition_attributes
    column = batch.column(attrs[0]) if len(attrs) == 1 else None
    if column is not None and (column.dtype.kind in "iub" or (
            column.dtype.kind == "f" and not np.isnan(column).any())):
        values, codes = _distinct(column)
        if not carried:
            return codes, values.tolist(), None
        start = np.full(len(values), np.nan)
        found = np.searchsorted(values, list(carried))
        for i, (key, t) in zip(found.tolist(), carried.items(), strict=True):
            if i < len(values) and values[i] == key:
                start[i] = t
        return codes, values.tolist(), start
    index: dict[Any, int] = {MISSING: -1}
    for key in carried:
        index[key] = len(index) - 1
    if column is not None and column.dtype.kind == "O":
        # Texts (symbols, ids): the distinct objects first, then each one's key once.
        objects, inverse = factorize_objects(column)
        found = np.fromiter((index.setdefault(_key(x), len(index) - 1) for x in objects),
                            dtype=np.int64, count=len(objects))
        codes = found[inverse]
    else:
        keys = partition_keys(a, batch, len(batch))
        codes = np.fromiter((index.setdefault(k, len(index) - 1) for k in keys),
                            dtype=np.int64, count=len(batch))
    del index[MISSING]
    if not carried:
        return codes, list(index), None
    start = np.full(len(index), np.nan)
    start[:len(carried)] = list(carried.values())
    return codes, list(index), start


def _distinct(column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct values of a numeric column and each value's index among them; a
    table lookup instead of a sort when the values are integers in a range not much wider
    than the column (stock symbols, car ids)."""
    if column.dtype.kind in "iu" and len(column):
        low, high = int(column.min()), int(column.max())
        if high - low <= 4 * len(column):
            offset = column - low
            present = np.zeros(high - low + 1, dtype=bool)
            present[offset] = True
            rank = np.cumsum(present) - 1
            return np.flatnonzero(present).astype(column.dtype) + low, rank[offset]
    values, codes = np.unique(column, return_inverse=True)
    return values, codes.reshape(-1)


def edge_masks(a: Automaton, batch: EventBatch
               ) -> tuple[list[np.ndarray], list[np.ndarray | None], list[np.ndarray]]:
    """Per component the events its begin and take edges may select, judged by the event
    type and the conjuncts on the event alone, and per negation its candidates."""
    n = len(batch)
    cols = _Columns(batch)
    types = batch.types
    typed: dict[str, np.ndarray] = {}  # type tests, shared by the components of a type

    def mask(event_type: str, vector: tuple[Callable[[Any], Any], ...]) -> np.ndarray:
        if types is None:
            return np.zeros(n, dtype=bool)
        out = typed.get(event_type)
        if out is None:
            out = typed[event_type] = np.asarray(types == event_type, dtype=bool)
        for test in vector:
            if not out.any():
                break
            out = out & np.broadcast_to(np.asarray(test(cols), dtype=bool), (n,))
        return out

    begin = [mask(c.begin.event_type, c.begin.vector) for c in a.components]
    take = [mask(c.take.event_type, c.take.vector) if c.take else None for c in a.components]
    negative = [mask(g.type_name, g.vector) for g in a.negations]
    return begin, take, negative


def _key(x: Any) -> Any:
    """The partition key of a value of an object column."""
    return MISSING if x is None or (isinstance(x, float) and math.isnan(x)) else x


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
            single = [_key(k) for k in single]
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
