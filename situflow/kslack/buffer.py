"""One input partition's K-slack state: the reorder buffer, the events released but not sent,
the JSON events not yet pushed and, for an unpartitioned stream, the batcher."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from situflow.codecs import arrow_events
from situflow.kslack.batches import Batch, Batcher
from situflow.kslack.late import LateRows
from situflow.kslack.positions import table_of
from situflow.kslack.reorder import ColumnarKSlack
from situflow.tpstream.split.batches import EventSlicer


@dataclass
class PartitionBuffer:
    """One input partition: its K-slack buffer over tables of events with their input seq."""

    kslack: ColumnarKSlack
    last_input: float = field(default_factory=time.monotonic)  # for the idle timeout
    # Released, not yet sent (unpartitioned: the open batch); in the snapshot, so a restart
    # sends what it holds.
    outbox: list[pa.Table] = field(default_factory=list)
    # JSON events not yet pushed, each with its source message: pushing one row at a time
    # would cost as much as a batch. Never in a snapshot: it is pushed before every one.
    inbox: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)
    sent_at: float = field(default_factory=time.monotonic)  # when the outbox was last sent
    batcher: Batcher | None = None  # of an unpartitioned stream

    @classmethod
    def fresh(cls, slack: int, time_field: str, batch_events: int | None = None,
              batch_span: int | None = None) -> PartitionBuffer:
        """An empty buffer; with ``batch_events`` one of an unpartitioned stream, whose batches
        end after that many events or ``batch_span`` event time (default: the slack)."""
        batcher = None if batch_events is None else Batcher(
            EventSlicer(batch_events, slack if batch_span is None else batch_span))
        return cls(ColumnarKSlack(slack, time_field), batcher=batcher)

    @classmethod
    def restore(cls, snapshot: dict[str, Any]) -> PartitionBuffer:
        """From :meth:`snapshot`'s value; the batch settings are the snapshot's, so a restarted
        service cuts as before, whatever its environment says."""
        outbox = [table_of(snapshot["outbox"])] if snapshot["outbox"] else []
        batcher = None
        if snapshot.get("batcher") is not None:
            state = snapshot["batcher"]
            ready = [Batch(b["seq"], b["registry_before"], b["registry"], table_of(b["events"]))
                     for b in state["ready"]]
            batcher = Batcher(EventSlicer(**state["slicer"]), state["next_seq"],
                              state["position"], state["registry"], ready)
        return cls(ColumnarKSlack.restore(snapshot["kslack"]), outbox=outbox, batcher=batcher)

    @classmethod
    def of(cls, snapshot: dict[str, Any] | None, slack: int, time_field: str,
           batch_events: int | None = None, batch_span: int | None = None) -> PartitionBuffer:
        """:meth:`restore` ``snapshot``, or (None) a :meth:`fresh` buffer."""
        if snapshot is not None:
            return cls.restore(snapshot)
        return cls.fresh(slack, time_field, batch_events, batch_span)

    def snapshot(self) -> dict[str, Any]:
        outbox = [row for table in self.outbox for row in arrow_events.events_from_batch(table)]
        batcher = self.batcher
        return {"kslack": self.kslack.snapshot(), "outbox": outbox,
                "batcher": None if batcher is None else {
                    "slicer": dataclasses.asdict(batcher.slicer), "next_seq": batcher.next_seq,
                    "position": batcher.position, "registry": batcher.registry,
                    "ready": [{"seq": b.seq, "registry_before": b.registry_before,
                               "registry": b.registry,
                               "events": arrow_events.events_from_batch(b.events)}
                              for b in batcher.ready]}}

    @property
    def outgoing(self) -> int:
        return sum(table.num_rows for table in self.outbox)

    @property
    def unsent(self) -> list[Any]:
        """What waits to be sent: the released events (unpartitioned: the ready batches)."""
        return self.outbox if self.batcher is None else self.batcher.ready

    @property
    def waiting(self) -> bool:
        """Whether events wait for input that may not come: in the K-slack buffer, or in the
        open batch of an unpartitioned stream."""
        return bool(self.kslack.buffered or (self.batcher is not None and self.outbox))

    def take_outbox(self, now: float) -> pa.Table | None:
        """The released events to send, in release order, as one table (None: none yet); the
        outbox empties and its linger clock restarts at ``now``."""
        released, self.outbox = self.outbox, []
        self.sent_at = now
        return arrow_events.concat(released).combine_chunks() if released else None

    def needs_tick(self, now: float, linger: float, idle_timeout: float) -> bool:
        """Whether a tick has work: events released or not yet pushed have waited ``linger``
        seconds, or events wait in a partition without input for ``idle_timeout`` seconds."""
        lingering = bool(self.unsent or self.inbox) and now - self.sent_at >= linger
        return lingering or (self.waiting and now - self.last_input >= idle_timeout)

    def push(self, table: pa.Table, registry_read: int = 0) -> pa.Table:
        """Push events into the K-slack buffer; returns the late rows."""
        released, late = self.kslack.push(table)
        if released.num_rows:
            self.release(released, registry_read)
        return late

    def push_late(self, table: pa.Table, registry_read: int, time_field: str, slack: int
                  ) -> LateRows | None:
        """:meth:`push`; the late rows, with the released time they are late against (None:
        none was late)."""
        before = self.kslack.released
        too_late = self.push(table, registry_read)
        if not too_late.num_rows:
            return None
        return LateRows(too_late, time_field, before, self.kslack.released, slack)

    def release(self, released: pa.Table, registry_read: int = 0) -> None:
        """Released events wait in the outbox (unpartitioned: sliced into batches, which count
        ``registry_read`` records)."""
        if self.batcher is None:
            self.outbox.append(released)
        else:
            self.batcher.slice(self.outbox, released, self.kslack.time_field, registry_read)

    def flush(self, registry_read: int = 0) -> None:
        """Release everything waiting and end the open batch (an idle timeout)."""
        flushed = self.kslack.finish()
        if flushed is not None:
            self.release(flushed, registry_read)
        if self.batcher is not None:
            self.batcher.slicer.close()
            self.batcher.end_batch(self.outbox, registry_read)

