"""What the K-slack service (:mod:`workers.kslack`) writes to Kafka, with its headers and
metrics: released events to ``<stream>.ordered`` as Arrow messages (an unpartitioned stream's
numbered batches with their registry counts), late events to ``<stream>.late`` and messages
that cannot be taken in or whose processing fails to ``<stream>.dlq``, each with the
dead-letter headers saying why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import faust
import pyarrow as pa

from situflow.codecs import arrow_events
from situflow.kslack.batches import Batch
from situflow.kslack.buffer import PartitionBuffer
from situflow.kslack.late import LateRows
from topics.catalog import (
    BATCH_REGISTRY_BEFORE_HEADER,
    BATCH_REGISTRY_HEADER,
    BATCH_SEQ_HEADER,
    StreamSpec,
    stream_topics,
)
from workers.app import dlq_headers
from workers.failures import Failure, describe
from workers.metrics import ServiceMetrics

SERVICE = "kslack"


def batch_headers(batch: Batch) -> list[tuple[str, bytes]]:
    """An unpartitioned stream's ordered batch: Arrow, its number and the registry counts."""
    return [*arrow_events.HEADERS, (BATCH_SEQ_HEADER, str(batch.seq).encode()),
            (BATCH_REGISTRY_HEADER, str(batch.registry).encode()),
            (BATCH_REGISTRY_BEFORE_HEADER, str(batch.registry_before).encode())]


async def send_arrow(topic: Any, events: pa.Table | pa.RecordBatch, partition: int,
                     headers: Sequence[tuple[str, bytes]], key: bytes | None = None) -> Any:
    """One Arrow message of ``events`` (a table: its first batch); the delivery."""
    batch = events.to_batches()[0] if isinstance(events, pa.Table) else events
    return await topic.send(key=key, value=arrow_events.encode_batch(batch),
                            partition=partition, headers=headers)


class KSlackOutput:
    """The ordered, late and dead-letter topics of one stream; each method returns the
    deliveries, which the checkpoint waits for (:mod:`workers.partitions`)."""

    def __init__(self, app: faust.App, metrics: ServiceMetrics, stream: StreamSpec) -> None:
        self.input_name, self.ordered_name, self.late_name, self.dlq_name = (
            spec.name for spec in stream_topics(stream))
        self.ordered, self.late, self.dlq = (
            app.topic(name, key_serializer="raw", value_serializer="raw")
            for name in (self.ordered_name, self.late_name, self.dlq_name))
        self.metrics, self.partitions = metrics, stream.partitions

    async def dead_letter(self, event: Any, reason: str, error: BaseException | None = None
                          ) -> Any:
        """The message, unchanged, to ``<stream>.dlq`` with why."""
        self.metrics.dlq(SERVICE, self.dlq_name).inc()
        return await self.dlq.send(key=event.key, value=event.value,
                                   headers=dlq_headers(event.message, reason, error))

    async def poisoned(self, event: Any, failure: Failure) -> None:
        """A message found to fail while it was processed (workers.failures): to the DLQ."""
        self.metrics.processing_errors(SERVICE, self.input_name, "").inc()
        await self.dead_letter(event, f"processing failed: {describe(failure.exception)}",
                               failure.exception)

    async def late_events(self, rows: LateRows, sources: dict[int, Any],
                          arrow_message: Any = None) -> list[Any]:
        """Late rows to ``<stream>.late``, to their input's partition: a JSON event's message
        unchanged (``sources`` by seq), an Arrow message's rows as one Arrow message; each
        with the dead-letter headers, whose reason says how late against which released
        time."""
        self.metrics.late(SERVICE, self.late_name).inc(rows.rows.num_rows)
        if arrow_message is not None:
            batch, reason = rows.as_batch()
            message = arrow_message.message
            return [await send_arrow(self.late, batch, message.partition,
                                     [*arrow_events.HEADERS, *dlq_headers(message, reason)],
                                     key=arrow_message.key)]
        return [await self.late.send(key=e.key, value=e.value, partition=e.message.partition,
                                     headers=dlq_headers(e.message, reason))
                for e, reason in ((sources[seq], reason) for seq, reason in rows.per_event())]

    async def released(self, partition: int, buffer: PartitionBuffer, now: float) -> list[Any]:
        """The outbox, in release order, as one Arrow message to the same partition number
        (its linger clock restarts at ``now``); unpartitioned: the ready batches, each to
        partition ``seq mod partitions``."""
        metrics, name = self.metrics, self.ordered_name
        if buffer.batcher is None:
            table = buffer.take_outbox(now)
            if table is None:
                return []
            deliveries = [await send_arrow(self.ordered, table, partition, arrow_events.HEADERS)]
            metrics.messages_out(SERVICE, name).inc()
            metrics.events_out(SERVICE, name).inc(table.num_rows)
            return deliveries
        ready, buffer.batcher.ready = buffer.batcher.ready, []
        deliveries = []
        for batch in ready:
            deliveries.append(await send_arrow(self.ordered, batch.events,
                                               batch.seq % self.partitions, batch_headers(batch)))
            metrics.events_out(SERVICE, name).inc(batch.events.num_rows)
        metrics.messages_out(SERVICE, name).inc(len(ready))
        return deliveries
