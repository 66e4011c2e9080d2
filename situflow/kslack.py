"""K-slack reordering of a stream with bounded disorder ([BSW04]; thesis §5.6.1; SEMANTICS.md).

Per partition, events wait in a min-heap ordered by (event time, arrival). An event is
released once the largest event time seen in its partition exceeds its time by more than the
slack ``K``; releases come out in (time, arrival) order. An event older than the last time
already released in its partition is *late*: it is handed back separately (for the
``<stream>.late`` topic) and never reorders what was released. ``advance_to`` (an idle
timeout's watermark) and ``finish`` (end of input) release what waits.

If no event arrives more than ``K`` behind the largest time seen before it, the released stream
is exactly the in-order stream and no event is late.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np
import pyarrow as pa

from situflow.codecs import arrow_events

E = TypeVar("E")


@dataclass
class _Partition(Generic[E]):
    heap: list[tuple[int, int, E]] = field(default_factory=list)
    max_seen: int | None = None
    released: int | None = None  # time of the last released event


class KSlack(Generic[E]):
    """Reorders items of type ``E`` per partition key by their event time."""

    def __init__(self, slack: int):
        if slack < 0:
            raise ValueError("the slack K must not be negative")
        self.slack = slack
        self._partitions: dict[Hashable, _Partition[E]] = {}
        self._arrivals = 0
        self._buffered = 0

    def push(self, key: Hashable, ts: int, item: E) -> tuple[list[E], list[E]]:
        """Add one item; returns (items released, in order; items that arrived late)."""
        part = self._partitions.get(key)
        if part is None:
            part = self._partitions[key] = _Partition()
        if part.released is not None and ts < part.released:
            return [], [item]
        self._arrivals += 1
        self._buffered += 1
        heapq.heappush(part.heap, (ts, self._arrivals, item))
        if part.max_seen is None or ts > part.max_seen:
            part.max_seen = ts
        return self._release(part, part.max_seen - self.slack), []

    def advance_to(self, watermark: int) -> list[E]:
        """Release, in every partition, what is more than ``K`` older than ``watermark``."""
        return [e for part in self._partitions.values()
                for e in self._release(part, watermark - self.slack)]

    def finish(self) -> list[E]:
        """End of input: release everything, partition by partition."""
        return [e for part in self._partitions.values() for e in self._release(part, None)]

    def _release(self, part: _Partition[E], bound: int | None) -> list[E]:
        out = []
        heap = part.heap
        while heap and (bound is None or heap[0][0] < bound):
            ts, _, item = heapq.heappop(heap)
            part.released = ts
            out.append(item)
        self._buffered -= len(out)
        return out

    @property
    def buffered(self) -> int:
        """Items waiting in all partitions (a gauge for the metrics endpoint)."""
        return self._buffered

    def snapshot(self, encode: Any = lambda item: item) -> dict[str, Any]:
        """Plain data; ``encode`` turns an item into JSON-able data."""
        return {
            "slack": self.slack,
            "arrivals": self._arrivals,
            "partitions": [[key, p.max_seen, p.released,
                            [[ts, n, encode(item)] for ts, n, item in p.heap]]
                           for key, p in self._partitions.items()],
        }

    @classmethod
    def restore(cls, state: dict[str, Any], decode: Any = lambda data: data) -> KSlack[Any]:
        ks: KSlack[Any] = cls(state["slack"])
        ks._arrivals = state["arrivals"]
        for key, max_seen, released, heap in state["partitions"]:
            hashable = tuple(key) if isinstance(key, list) else key
            ks._partitions[hashable] = _Partition(
                [(ts, n, decode(item)) for ts, n, item in heap], max_seen, released)
            heapq.heapify(ks._partitions[hashable].heap)
            ks._buffered += len(heap)
        return ks


class ColumnarKSlack:
    """The same K-slack as :class:`KSlack` for one partition, over Arrow tables of events.

    Pushing a batch gives the events :class:`KSlack` would release while pushing its rows one
    by one (in the same order) and the late rows, without a per-row Python step:

    * the largest time seen, ``runmax``, is a running maximum over the rows; late rows cannot
      raise it (a late time lies below what was released, which lies below it), so they need
      not be told apart first, and the release bound after row ``i`` is ``runmax[i] - K``;
    * a waiting event is released at the first row whose bound exceeds its time (the bound
      never decreases), so one ``searchsorted`` finds every event's release step;
    * row ``i`` is late if its time is below the last time released before it, the largest
      time released at an earlier step; a late row's own time never raises that maximum;
    * what one batch releases comes out in (time, arrival) order: an event released at a later
      step has a time no smaller than every earlier release, or it would have been late.

    Rows still waiting are kept as a table in arrival order. Schemas of successive batches may
    differ: missing columns become null, types widen where Arrow can, and a column whose types
    share no Arrow type is held as JSON text (:func:`situflow.codecs.arrow_events.unify`), so no
    event's values decide how the next are stored.
    """

    def __init__(self, slack: int, time_field: str = "ts"):
        if slack < 0:
            raise ValueError("the slack K must not be negative")
        self.slack = slack
        self.time_field = time_field
        self.max_seen: int | None = None
        self.released: int | None = None
        self.pending: pa.Table | None = None

    @property
    def buffered(self) -> int:
        return 0 if self.pending is None else self.pending.num_rows

    def push(self, batch: pa.Table) -> tuple[pa.Table, pa.Table]:
        """Add ``batch`` (rows in arrival order); returns (released, in order; late rows)."""
        table = batch if self.pending is None else arrow_events.concat([self.pending, batch])
        waiting = self.buffered
        times = np.asarray(table.column(self.time_field).to_numpy(), dtype=np.int64)
        new = times[waiting:]
        if not len(new):
            return table.slice(0, 0), table.slice(0, 0)
        runmax = np.maximum.accumulate(new)
        if self.max_seen is not None:
            runmax = np.maximum(runmax, self.max_seen)
        bound = runmax - self.slack
        # Release step of every row: the first new row whose bound exceeds its time (waiting
        # rows can go at step 0, a new row at its own step at the earliest).
        arrival = np.arange(len(times))
        step = np.searchsorted(bound, times, side="right")
        step = np.maximum(step, arrival - waiting)
        floor = np.iinfo(np.int64).min if self.released is None else self.released
        best = np.full(len(new) + 1, floor, dtype=np.int64)  # best[s + 1]: max time of step s
        going = step < len(new)
        np.maximum.at(best, step[going] + 1, times[going])
        released_before = np.maximum.accumulate(best)[:-1]  # before row i: steps < i
        late = np.zeros(len(times), dtype=bool)
        late[waiting:] = new < released_before
        out = going & ~late
        order = np.lexsort((arrival[out], times[out]))
        released = table.take(pa.array(arrival[out][order]))
        stay = ~going & ~late
        # One chunk: a chunk per pushed batch would make every later push slower.
        self.pending = table.filter(pa.array(stay)).combine_chunks() if stay.any() else None
        self.max_seen = int(runmax[-1])
        if released.num_rows:
            self.released = int(times[out][order][-1])
        return released, table.filter(pa.array(late))

    def finish(self) -> pa.Table | None:
        """Release everything waiting (end of input, or an idle timeout), in order."""
        pending, self.pending = self.pending, None
        if pending is None:
            return None
        times = np.asarray(pending.column(self.time_field).to_numpy(), dtype=np.int64)
        order = np.lexsort((np.arange(len(times)), times))
        self.released = int(times[order[-1]])
        return pending.take(pa.array(order))

    def snapshot(self) -> dict[str, Any]:
        rows = [] if self.pending is None else arrow_events.events_from_batch(self.pending)
        return {"slack": self.slack, "time_field": self.time_field, "max_seen": self.max_seen,
                "released": self.released, "pending": rows}

    @classmethod
    def restore(cls, state: dict[str, Any]) -> ColumnarKSlack:
        ks = cls(state["slack"], state["time_field"])
        ks.max_seen, ks.released = state["max_seen"], state["released"]
        rows = state["pending"]
        if rows:
            ks.pending = pa.Table.from_batches([arrow_events.batch_from_events(rows)])
        return ks
