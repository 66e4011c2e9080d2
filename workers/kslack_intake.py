"""How the K-slack service (:mod:`workers.kslack`) takes a message into its partition's buffer
(:class:`situflow.kslack.PartitionBuffer`): a JSON event waits in the inbox, to be pushed with
the others as one table; an Arrow batch is pushed at once, after the inbox, to keep arrival
order. The late rows a push finds go to ``<stream>.late``, messages that do not decode to
``<stream>.dlq`` (:mod:`workers.kslack_output`).

A bundle (:mod:`workers.bundles`) is taken in record by record in offset order, as its records
would be one at a time, but a JSON record is decoded by :func:`decode_json`, the same event or
reason as :func:`situflow.kslack.decode_input` at a tenth of its cost, and waits in the inbox
beside a view of its record instead of a Faust event.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec
import pyarrow as pa

from situflow.codecs import arrow_events
from situflow.codecs.errors import InputError
from situflow.codecs.event_time import INT64_MAX, INT64_MIN
from situflow.codecs.json_events import DEFAULT_MAX_BYTES
from situflow.kslack import arrow_table, decode_input
from situflow.kslack.buffer import PartitionBuffer
from situflow.kslack.intake import inbox_table
from topics.catalog import StreamSpec
from topics.registry import RegistryProgress
from workers.bundles import BundledEvent, records_of
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
        records = records_of(event)
        if records is not None:
            return await self.take_in_bundle(buffer, event, records)
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

    async def take_in_bundle(self, buffer: PartitionBuffer, bundle: Any,
                             records: Sequence[Any]) -> list[Any]:
        """A bundle's records in offset order: JSON events to the inbox, each beside a view of
        its record (which a late event or the dead-letter topic takes as it came), an Arrow
        record as one message (:meth:`take_in`)."""
        stream = self.stream
        time_field, time_unit, key_fields = stream.time_field, stream.time_unit, stream.key_fields
        deliveries: list[Any] = []
        inbox = buffer.inbox
        events = 0
        for record in records:
            view = BundledEvent(bundle, record)
            if record.headers and arrow_events.is_arrow(record.headers):
                deliveries += await self.take_in(buffer, view)
                inbox = buffer.inbox  # the push before the Arrow batch started a new one
                continue
            try:
                decoded = decode_json(record.value, time_field, time_unit, key_fields)
            except InputError as error:
                deliveries.append(await self.output.dead_letter(view, error.reason))
                continue
            inbox.append((view, decoded))
            events += 1
        self.metrics.events_in(SERVICE, stream.name).inc(events)
        return deliveries

    async def push_inbox(self, buffer: PartitionBuffer) -> list[Any]:
        """Push the waiting JSON events as one table."""
        entries, buffer.inbox = buffer.inbox, []
        if not entries:
            return []
        raise_on = self.raise_on
        if raise_on is not None and any(raise_on in event.value for event, _ in entries):
            raise RuntimeError(f"{TEST_RAISE_ENV}: a bug while pushing the inbox")
        return await self.push(buffer, *inbox_table(entries, _offset))

    async def push(self, buffer: PartitionBuffer, table: pa.Table, sources: dict[int, Any],
                   arrow_message: Any = None) -> list[Any]:
        """Push ``table`` into the K-slack buffer; its late rows go to ``<stream>.late`` (JSON
        events' messages from ``sources`` by seq, or ``arrow_message``'s rows)."""
        late = buffer.push_late(table, self.registry.records, self.stream.time_field,
                                self.slack)
        return [] if late is None else await self.output.late_events(late, sources,
                                                                     arrow_message)


_DECODER = msgspec.json.Decoder()


def decode_json(value: bytes | None, time_field: str, time_unit: float,
                key_fields: Iterable[str]) -> dict[str, Any]:
    """:func:`situflow.kslack.decode_input` of a JSON message: the same event, or InputError
    with the same reason (``tests/workers/test_bundles.py`` checks both on generated
    messages). msgspec decodes a message without escapes (a ``\\u`` escape may be an unpaired
    surrogate, which the reference rejects) to the values the standard library's ``json``
    gives; an integer time and text or 64-bit integer keys are taken as they are, and
    everything else goes the reference way, for its value or its reason."""
    if value is None or b"\\u" in value or len(value) > DEFAULT_MAX_BYTES:
        return _reference(value, time_field, time_unit, key_fields)
    try:
        record = _DECODER.decode(value)
    except (msgspec.DecodeError, UnicodeDecodeError):  # invalid UTF-8 raises the latter
        return _reference(value, time_field, time_unit, key_fields)
    if type(record) is not dict:
        return _reference(value, time_field, time_unit, key_fields)
    ts = record.get(time_field)
    if type(ts) is not int or not INT64_MIN <= ts <= INT64_MAX:
        return _reference(value, time_field, time_unit, key_fields)
    for name in key_fields:
        key = record.get(name)
        if type(key) is not str and (type(key) is not int or not INT64_MIN <= key <= INT64_MAX):
            return _reference(value, time_field, time_unit, key_fields)
    return record


def _reference(value: bytes | None, time_field: str, time_unit: float,
               key_fields: Iterable[str]) -> dict[str, Any]:
    decoded = decode_input(value, None, time_field, time_unit, key_fields)
    assert isinstance(decoded, dict)  # no Arrow headers: one JSON event
    return decoded


def _offset(source: Any) -> int:
    """The input offset of an inbox entry's source: a bundle's record or a Faust event."""
    return source.offset if isinstance(source, BundledEvent) else source.message.offset
