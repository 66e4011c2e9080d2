"""How the K-slack service (:mod:`workers.kslack`) takes a message into its partition's buffer
(:class:`situflow.kslack.PartitionBuffer`): a JSON event waits in the inbox, to be pushed with
the others as one table; an Arrow batch is pushed at once, after the inbox, to keep arrival
order. The late rows a push finds go to ``<stream>.late``, messages that do not decode to
``<stream>.dlq`` (:mod:`workers.kslack_output`).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from situflow.codecs.errors import InputError
from situflow.kslack import arrow_table, decode_input
from situflow.kslack.buffer import PartitionBuffer
from situflow.kslack.intake import inbox_table
from topics.catalog import StreamSpec
from topics.registry import RegistryProgress
from workers.failures import TEST_RAISE_ENV
from workers.kslack_output import SERVICE, KSlackOutput
from workers.metrics import ServiceMetrics


class KSlackIntake:
    """The input of one stream; each method returns the deliveries of what went to the late
    and dead-letter topics (released events wait in the outbox), which the checkpoint waits
    for (:mod:`workers.partitions`). ``raise_on``: :data:`workers.failures.TEST_RAISE_ENV`."""

    def __init__(self, output: KSlackOutput, metrics: ServiceMetrics, stream: StreamSpec,
                 slack: int, registry: RegistryProgress, raise_on: bytes | None = None) -> None:
        self.output, self.metrics, self.stream, self.slack = output, metrics, stream, slack
        self.registry, self.raise_on = registry, raise_on

    async def take_in(self, buffer: PartitionBuffer, event: Any) -> list[Any]:
        """Decode a message: a JSON event waits in the inbox, an Arrow batch is pushed (after
        the inbox, to keep arrival order)."""
        stream = self.stream
        try:
            decoded = decode_input(event.value, event.message.headers, stream.time_field,
                                   stream.time_unit, stream.key_fields)
        except InputError as error:
            return [await self.output.dead_letter(event, error.reason)]
        if isinstance(decoded, dict):
            buffer.inbox.append((event, decoded))
            self.metrics.events_in(SERVICE, stream.name).inc()
            return []
        self.metrics.events_in(SERVICE, stream.name).inc(decoded.num_rows)
        return [*await self.push_inbox(buffer),
                *await self.push(buffer, arrow_table(decoded, event.message.offset), {}, event)]

    async def push_inbox(self, buffer: PartitionBuffer) -> list[Any]:
        """Push the waiting JSON events as one table."""
        entries, buffer.inbox = buffer.inbox, []
        if not entries:
            return []
        raise_on = self.raise_on
        if raise_on is not None and any(raise_on in event.value for event, _ in entries):
            raise RuntimeError(f"{TEST_RAISE_ENV}: a bug while pushing the inbox")
        return await self.push(buffer, *inbox_table(entries, lambda event: event.message.offset))

    async def push(self, buffer: PartitionBuffer, table: pa.Table, sources: dict[int, Any],
                   arrow_message: Any = None) -> list[Any]:
        """Push ``table`` into the K-slack buffer; its late rows go to ``<stream>.late`` (JSON
        events' messages from ``sources`` by seq, or ``arrow_message``'s rows)."""
        late = buffer.push_late(table, self.registry.records, self.stream.time_field,
                                self.slack)
        return [] if late is None else await self.output.late_events(late, sources,
                                                                     arrow_message)
