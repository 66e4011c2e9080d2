"""K-slack reordering of a stream with bounded disorder ([BSW04]; thesis §5.6.1; SEMANTICS.md).

Per partition, events wait ordered by (event time, arrival). An event is released once the
largest event time seen in its partition exceeds its time by more than the slack ``K``; releases
come out in (time, arrival) order. An event older than the last time already released in its
partition is *late*: it is handed back separately (for the ``<stream>.late`` topic) and never
reorders what was released. ``finish`` (end of input, or an idle timeout) releases what waits.

If no event arrives more than ``K`` behind the largest time seen before it, the released stream
is exactly the in-order stream and no event is late.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from situflow.codecs import arrow_events


class ColumnarKSlack:
    """K-slack for one partition, over Arrow tables of events.

    Pushing a batch gives the events the per-event algorithm of the module doc would release
    while pushing its rows one by one (in the same order; ``tests/kslack/reference.py`` is that
    algorithm, the oracle of the tests) and the late rows, without a per-row Python step:

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


def late_by(ts: int, before: int | None, after: int | None, slack: int) -> str:
    """How late event time ``ts`` is, against the released time it came after: the one
    before the push if it was late already then, else the one the push reached.

    >>> late_by(12, None, 19, 5)
    '7 before the released time 19 (slack 5)'
    """
    against = before if before is not None and ts < before else after
    return f"{against - ts if against is not None else '?'} before the released time " \
           f"{against} (slack {slack})"
