"""The batcher of an unpartitioned stream (thesis §5.6.3): K-slack's released events, in their
global order, numbered and cut into consecutive batches 0, 1, 2, ...

Each released event's seq (:data:`~situflow.kslack.positions.SEQ_FIELD`) becomes its position in
the global order. Where a batch ends is :class:`~situflow.tpstream.split.batches.EventSlicer`'s
rule, which reads only the released events: a replay from a checkpoint cuts and numbers the same
batches. An idle flush also ends the open batch; that cut, the one decision taken by the clock,
must be checkpointed before its batch is sent. Each batch carries how many query registry records
the service had read at its cut and at the cut before: a query registered in between begins at
this batch, for every deriver alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from situflow.codecs import arrow_events
from situflow.kslack.positions import SEQ_FIELD
from situflow.tpstream.split.batches import EventSlicer


@dataclass
class Batch:
    """A batch cut but maybe not sent yet: its number, the registry records read at its cut
    and at the cut before, its events."""

    seq: int
    registry_before: int
    registry: int
    events: pa.Table


@dataclass
class Batcher:
    """Where the batcher cuts, what it numbers next, the batches cut but not sent. The open
    batch's events are held by the caller (the partition's outbox), so that they are in its
    snapshot."""

    slicer: EventSlicer
    next_seq: int = 0
    position: int = 0  # of the next released event in the global order
    registry: int = -1  # registry records read at the last cut (-1: no cut yet)
    ready: list[Batch] = field(default_factory=list)

    def slice(self, open_batch: list[pa.Table], released: pa.Table, time_field: str,
              registry_read: int) -> None:
        """Number ``released`` events by their global position and cut them into batches:
        complete batches become ready, the rest is appended to ``open_batch``."""
        start = self.position
        self.position += released.num_rows
        positions = pa.array(np.arange(start, self.position, dtype=np.int64))
        released = released.set_column(released.schema.get_field_index(SEQ_FIELD), SEQ_FIELD,
                                       positions)
        times = np.asarray(released.column(time_field).to_numpy(), dtype=np.int64)
        done = 0
        for cut in self.slicer.cuts(times):
            if cut > done:
                open_batch.append(released.slice(done, cut - done))
            self.end_batch(open_batch, registry_read)
            done = cut
        if done < released.num_rows:
            open_batch.append(released.slice(done))

    def end_batch(self, open_batch: list[pa.Table], registry_read: int) -> None:
        """The open batch, if it has events, gets the next number and is ready to send;
        ``open_batch`` is emptied."""
        if not open_batch:
            return
        events = arrow_events.concat(open_batch).combine_chunks()
        open_batch.clear()
        self.ready.append(Batch(self.next_seq, self.registry, registry_read, events))
        self.next_seq += 1
        self.registry = registry_read
