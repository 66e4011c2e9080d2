"""Situation derivation over columnar batches (thesis Alg. 5.1, Defs. 5.1-5.3).

Wraps the compiled loop of :mod:`situflow.tpstream.derive.kernel`: maps partition keys to state
slots, evaluates the conditions vectorized, runs the loop, and computes the RETURN aggregates
of situations (Def 5.1: over the events ``e_i .. e_j``; ``te`` is the time of ``e_{j+1}``).
Aggregates are incremental and mergeable (count, sum, min, max, first, last), so a situation
that spans batches is summarized exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from situflow.errors import InputError
from situflow.events import NEVER, EventBatch, factorize, hashable_key, plain
from situflow.tpstream.derive import kernel as kernels
from situflow.tpstream.query import TIME_FIELD, AggregateRef, TPStreamQuery, condition_mask

NUMERIC = ("min", "max", "sum", "avg")
# Integer partition keys below this bound map to slots through a lookup table.
DIRECT_KEYS = 1 << 22


@dataclass
class Records:
    """The situation records of one batch, as arrays (see :mod:`kernels`)."""

    pos: np.ndarray
    defn: np.ndarray
    kind: np.ndarray
    start: np.ndarray
    feasible: np.ndarray
    first: np.ndarray
    last: np.ndarray
    count: np.ndarray
    sum: np.ndarray
    min: np.ndarray
    max: np.ndarray
    cnt: np.ndarray


class Deriver:
    """Per-(partition, definition) derivation state and its batch loop."""

    # State arrays, one row per partition slot (see _allocate and kernels.derive).
    open_: np.ndarray
    visible: np.ndarray
    start_ts: np.ndarray
    first_pos: np.ndarray
    last_pos: np.ndarray
    count: np.ndarray
    last_visible: np.ndarray
    a_sum: np.ndarray
    a_min: np.ndarray
    a_max: np.ndarray
    a_cnt: np.ndarray
    carried_first: np.ndarray
    carried_last: np.ndarray

    def __init__(self, query: TPStreamQuery, capacity: int = 64,
                 visible_before: int = NEVER):
        self.query = query
        # The start of each definition's last visible situation before the first event: NEVER
        # from a stream's beginning; a batch derived on its own, not knowing its past, assumes
        # the latest time (situation_batches.UNKNOWN_PAST), so no feasibility test fails for lack
        # of it.
        self.visible_before = visible_before
        self.ndef = len(query.definitions)
        self.dmin = np.array([np.nan if d.dmin is None else d.dmin for d in query.definitions])
        self.dmax = np.array([np.nan if d.dmax is None else d.dmax for d in query.definitions])
        # Aggregates the kernel maintains: the numeric ones and counts of an attribute; first/last
        # are looked up by position, count(X) is the situation's event count.
        self.numeric = [i for i, a in enumerate(query.aggregates) if in_kernel(a)]
        self.agg_def = np.array([query.aggregates[i].defn for i in self.numeric], dtype=np.int64)
        self.keys: dict[Any, int] = {}
        self._table = np.full(0, -1, np.int64)
        self.key_list: list[Any] = []
        self.capacity = 0
        self._allocate(capacity)

    def _allocate(self, capacity: int) -> None:
        """Grow the state arrays to ``capacity`` slots, keeping their contents."""
        old, self.capacity = self.capacity, capacity
        shape, nagg = (capacity, self.ndef), (capacity, len(self.numeric))
        fresh = {
            "open_": np.zeros(shape, bool), "visible": np.zeros(shape, bool),
            "start_ts": np.zeros(shape, np.int64), "first_pos": np.full(shape, -1, np.int64),
            "last_pos": np.full(shape, -1, np.int64), "count": np.zeros(shape, np.int64),
            "last_visible": np.full(shape, self.visible_before, np.int64),
            "a_sum": np.zeros(nagg), "a_min": np.zeros(nagg), "a_max": np.zeros(nagg),
            "a_cnt": np.zeros(nagg, np.int64),
            # First and last values of open situations that began in an earlier batch.
            "carried_first": np.full((capacity, len(self.query.aggregates)), None, object),
            "carried_last": np.full((capacity, len(self.query.aggregates)), None, object),
        }
        for name, array in fresh.items():
            if old:
                array[:old] = getattr(self, name)
            setattr(self, name, array)

    def slots(self, batch: EventBatch) -> np.ndarray:
        """The state slot of every event's partition key (new keys get new slots)."""
        attrs = self.query.partition_by
        if not attrs:
            if not self.key_list:
                self._add_key(None)
            return np.zeros(len(batch), np.int64)
        # An event without a partition attribute belongs to the null key (SEMANTICS.md).
        columns = [batch.column(a) for a in attrs]
        keys: list[Any]
        if len(columns) == 1:
            keys_column = columns[0]
            if keys_column.dtype.kind in "iu" and len(keys_column):
                direct = self._direct_slots(keys_column)
                if direct is not None:
                    return direct
            keys, inverse = factorize(keys_column)
        else:
            codes = [factorize(c) for c in columns]
            stacked = np.stack([inv for _, inv in codes], axis=1)
            rows, inverse = np.unique(stacked, axis=0, return_inverse=True)
            keys = [[codes[k][0][r] for k, r in enumerate(row)] for row in rows]
        lookup = np.empty(len(keys), np.int64)
        for i, key in enumerate(keys):
            hashable = hashable_key(key)
            slot = self.keys.get(hashable)
            lookup[i] = self._add_key(key) if slot is None else slot
        return lookup[inverse.ravel()]

    def _direct_slots(self, keys: np.ndarray) -> np.ndarray | None:
        """Small non-negative integer keys index a table of slots directly (no sorting)."""
        low, high = int(keys.min()), int(keys.max())
        if low < 0 or high >= DIRECT_KEYS:
            return None
        if len(self._table) <= high:
            grown = np.full(max(high + 1, 2 * len(self._table)), -1, np.int64)
            grown[: len(self._table)] = self._table
            self._table = grown
        slots = self._table[keys]
        if (slots < 0).any():
            for key in np.unique(keys[slots < 0]).tolist():
                known = self.keys.get(key)  # known after a restore, not yet in the table
                self._table[key] = self._add_key(key) if known is None else known
            slots = self._table[keys]
        return slots

    def _add_key(self, key: Any) -> int:
        slot = len(self.key_list)
        self.keys[hashable_key(key)] = slot
        self.key_list.append(key)
        if slot >= self.capacity:
            self._allocate(max(64, 2 * self.capacity))
        return slot

    def conditions(self, batch: EventBatch) -> np.ndarray:
        """Each definition's condition on each event, shaped (definitions, events)."""
        cond = np.empty((self.ndef, len(batch)), bool)
        for d, definition in enumerate(self.query.definitions):
            cond[d] = condition_mask(definition, batch)
        return cond

    def run(self, batch: EventBatch, codes: np.ndarray, cond: np.ndarray | None = None) -> Records:
        """Derive over one batch (``cond``: its :meth:`conditions`, if already evaluated);
        returns its situation records in stream order."""
        n = len(batch)
        if cond is None:
            cond = self.conditions(batch)
        vals = np.empty((len(self.numeric), n))
        for row, i in enumerate(self.numeric):
            agg = self.query.aggregates[i]
            vals[row] = kernel_values(agg, column(batch, agg.attr or ""))
        self.first_pos.fill(-1)
        self.last_pos.fill(-1)
        size = n * self.ndef
        nagg = len(self.numeric)
        r = Records(
            pos=np.empty(size, np.int64), defn=np.empty(size, np.int64),
            kind=np.empty(size, np.int64), start=np.empty(size, np.int64),
            feasible=np.empty(size, bool), first=np.full(size, -1, np.int64),
            last=np.full(size, -1, np.int64), count=np.zeros(size, np.int64),
            sum=np.empty((nagg, size)), min=np.empty((nagg, size)), max=np.empty((nagg, size)),
            cnt=np.empty((nagg, size), np.int64),
        )
        m = kernels.derive(
            codes, batch.ts, cond, vals, self.agg_def, self.dmin, self.dmax,
            float(self.query.window),
            self.open_, self.visible, self.start_ts, self.first_pos, self.last_pos, self.count,
            self.last_visible, self.a_sum, self.a_min, self.a_max, self.a_cnt,
            r.pos, r.defn, r.kind, r.start, r.feasible, r.first, r.last, r.count,
            r.sum, r.min, r.max, r.cnt,
        )
        return Records(*(a[..., :m] for a in vars(r).values()))

    def carry(self, batch: EventBatch) -> None:
        """At batch end: keep first/last values of open situations for the next batch."""
        if not self.query.aggregates:
            return
        for k, agg in enumerate(self.query.aggregates):
            if agg.func not in ("first", "last") or agg.attr is None:
                continue
            values = column(batch, agg.attr)
            positions = (self.first_pos if agg.func == "first" else self.last_pos)[:, agg.defn]
            target = self.carried_first if agg.func == "first" else self.carried_last
            live = np.flatnonzero(self.open_[:, agg.defn] & (positions >= 0))
            target[live, k] = [plain(v) for v in values[positions[live]]]

    # --- state ----------------------------------------------------------------------------

    STATE_FIELDS = ("open_", "visible", "start_ts", "count", "last_visible", "a_sum", "a_min",
                    "a_max", "a_cnt", "carried_first", "carried_last")

    @property
    def open_situations(self) -> int:
        """How many situations are open over every key: what every deriving operator reports."""
        return int(self.open_[: len(self.key_list)].sum())

    def to_state(self) -> dict[str, Any]:
        return self.rows(np.arange(len(self.key_list)), self.STATE_FIELDS)

    def load_state(self, state: dict[str, Any]) -> None:
        self.set_rows(state, self.STATE_FIELDS)

    def rows(self, slots: np.ndarray, names: tuple[str, ...]) -> dict[str, Any]:
        """The state fields ``names`` of ``slots`` as plain data, with their keys."""
        state: dict[str, Any] = {"keys": [self.key_list[s] for s in slots.tolist()]}
        for name in names:
            state[name] = plain_rows(getattr(self, name)[slots])
        return state

    def set_rows(self, state: dict[str, Any], names: tuple[str, ...]) -> None:
        """Write fields ``names`` of :meth:`rows` data into its keys' slots (new keys added)."""
        slots = np.array([self.slot(key) for key in state["keys"]], np.int64)
        for name in names:
            target = getattr(self, name)
            if len(slots) and target.shape[1]:
                target[slots] = np.array(state[name], dtype=target.dtype).reshape(len(slots), -1)

    def slot(self, key: Any) -> int:
        """The state slot of a partition key (a new key gets one)."""
        found = self.keys.get(hashable_key(key))
        return self._add_key(key) if found is None else found


def in_kernel(agg: AggregateRef) -> bool:
    """Whether the kernel keeps ``agg``'s running sum, min, max and count of values."""
    return agg.func in NUMERIC or (agg.func == "count" and agg.attr is not None)


def kernel_values(agg: AggregateRef, values: np.ndarray) -> np.ndarray:
    """The values the kernel accumulates for ``agg`` (NaN: skipped, not counted).

    ``count(X.attr)`` counts the events of X where ``attr`` is present, SQL's ``COUNT(col)``
    (SEMANTICS.md, "Event time and types"): 1 where present, whatever its type, else NaN.
    """
    if agg.func == "count":
        return np.where(present(values), 1.0, np.nan)
    if values.dtype.kind not in "biuf":
        raise InputError(f"attribute '{agg.attr}' must be numeric for min/max/sum/avg")
    return values.astype(np.float64, copy=False)


def present(values: np.ndarray) -> np.ndarray:
    """Whether each value is present: columns hold null and absent values as NaN or None."""
    if values.dtype.kind == "f":
        return ~np.isnan(values)
    if values.dtype.kind == "O":
        return np.fromiter((not (v is None or (isinstance(v, float) and v != v)) for v in values),
                           bool, len(values))
    return np.ones(len(values), bool)


def column(batch: EventBatch, attr: str) -> np.ndarray:
    """The column a query attribute reads; ``ts`` is the event time."""
    return batch.ts if attr == TIME_FIELD else batch.column(attr)


def plain_rows(array: np.ndarray) -> list[list[Any]]:
    """A 2-d state array as rows of JSON-able scalars (:func:`situflow.events.plain` of each
    value), whole columns at a time where the dtype allows: a checkpoint holds every key."""
    if array.dtype.kind not in "biuf":
        return [[plain(v) for v in row] for row in array.tolist()]
    rows: list[list[Any]] = array.tolist()
    if array.dtype.kind == "f":
        nan_rows, nan_cols = np.nonzero(np.isnan(array))
        for r, c in zip(nan_rows.tolist(), nan_cols.tolist(), strict=True):
            rows[r][c] = None
    return rows
