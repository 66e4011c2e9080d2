"""Arrow IPC events: many events per Kafka message, the fast path between services.

A message is one Arrow IPC *stream* (schema, record batches, end marker) and carries the header
``content-type: application/vnd.apache.arrow.stream``; messages without it are JSON. Each row is
one event, each column one attribute, with the same names as in the JSON format.

The event-time column follows the JSON rules (:mod:`situflow.codecs.json_events`): it is
returned as int64; integer columns keep the producer's unit; Arrow ``timestamp`` columns, like
ISO-8601 strings, become epoch **milliseconds**, rounded down (a column without a time zone
counts as UTC). A missing, null-holding or otherwise typed time column is an :class:`InputError`,
and so is a batch that lacks a field of the stream's expected schema or has it with another type.
Extra columns are kept: producers may send more attributes than a query uses, as in JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from situflow.codecs.errors import InputError
from situflow.codecs.json_events import DEFAULT_TIME_FIELD

CONTENT_TYPE = "application/vnd.apache.arrow.stream"
CONTENT_TYPE_HEADER = "content-type"
#: Kafka headers to send with every Arrow message.
HEADERS: list[tuple[str, bytes]] = [(CONTENT_TYPE_HEADER, CONTENT_TYPE.encode())]

_MS_PER_UNIT = {"s": None, "ms": 1, "us": 1_000, "ns": 1_000_000}


def is_arrow(headers: Iterable[tuple[str, bytes]] | None) -> bool:
    """Whether Kafka message headers declare an Arrow IPC stream (parameters are ignored)."""
    for key, value in headers or ():
        if key.lower() == CONTENT_TYPE_HEADER and value:
            media_type = value.split(b";", 1)[0].strip().decode("ascii", "replace").lower()
            return media_type == CONTENT_TYPE
    return False


def encode_batch(batch: pa.RecordBatch) -> bytes:
    """One Arrow IPC stream holding ``batch`` (schema included, so every message stands alone)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue())


def decode_batch(
    data: bytes,
    *,
    time_field: str = DEFAULT_TIME_FIELD,
    schema: pa.Schema | None = None,
) -> pa.RecordBatch:
    """Decode one message into a single RecordBatch with an int64 ``time_field`` column.

    ``schema`` is the stream's expected schema, if the catalog declares one; it is checked after
    the time column is normalised, so it should give that column as int64.
    """
    try:
        reader = pa.ipc.open_stream(data)
        batches = list(reader)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"invalid Arrow IPC stream: {exc}") from None
    if len(batches) == 1:
        merged = batches[0]
    else:  # a producer may split its rows; services work on one batch per message
        merged = pa.Table.from_batches(batches, schema=reader.schema).combine_chunks()
        merged = merged.to_batches()[0] if merged.num_rows else _empty(reader.schema)
    merged = _normalise_time(merged, time_field)
    if schema is not None:
        check_schema(merged.schema, schema)
    return merged


def check_schema(actual: pa.Schema, expected: pa.Schema) -> None:
    """Raise :class:`InputError` unless every expected field is present with the same type."""
    for field in expected:
        index = actual.get_field_index(field.name)
        if index < 0:
            raise InputError(f"Arrow batch lacks field {field.name!r} ({field.type})")
        got = actual.field(index).type
        if got != field.type:
            raise InputError(f"Arrow field {field.name!r} has type {got}, expected {field.type}")


def batch_from_events(
    events: Sequence[Mapping[str, Any]], schema: pa.Schema | None = None
) -> pa.RecordBatch:
    """A RecordBatch of event dicts (types inferred unless ``schema`` is given). Every
    attribute any event has is a column, null where an event lacks it."""
    try:
        if schema is None:
            names = dict.fromkeys(name for event in events for name in event)
            return pa.RecordBatch.from_pydict({n: [e.get(n) for e in events] for n in names})
        return pa.RecordBatch.from_pylist(list(events), schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InputError(f"events do not fit the Arrow schema: {exc}") from None


def events_from_batch(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    """The rows of ``batch`` as event dicts, the shape the JSON codec returns."""
    rows: list[dict[str, Any]] = batch.to_pylist()
    return rows


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=schema)


def _normalise_time(batch: pa.RecordBatch, time_field: str) -> pa.RecordBatch:
    index = batch.schema.get_field_index(time_field)
    if index < 0:
        raise InputError(f"missing event-time field {time_field!r}")
    column = batch.column(index)
    if column.null_count:
        raise InputError(f"event-time field {time_field!r} holds {column.null_count} null(s)")
    kind = column.type
    if pa.types.is_integer(kind):
        try:
            times = column.cast(pa.int64())
        except pa.ArrowInvalid:
            raise InputError(f"event-time field {time_field!r} is out of the int64 range") from None
    elif pa.types.is_timestamp(kind):
        raw = column.cast(pa.int64()).to_numpy()
        per_ms = _MS_PER_UNIT[kind.unit]
        times = pa.array(raw * 1_000 if per_ms is None else np.floor_divide(raw, per_ms))
    else:
        raise InputError(
            f"event-time field {time_field!r} must be an integer or timestamp column, got {kind}"
        )
    field = pa.field(time_field, pa.int64(), nullable=False)
    return batch.set_column(index, field, times)
