"""Arrow IPC events: many events per Kafka message, the fast path between services.

A message is one Arrow IPC *stream* (schema, record batches, end marker) and carries the header
``content-type: application/vnd.apache.arrow.stream``; messages without it are JSON. Each row is
one event, each column one attribute, with the same names as in the JSON format.

The event-time column follows the one event-time rule (:mod:`situflow.codecs.event_time`): it
is returned as int64 ticks of the stream's time unit; Arrow ``timestamp`` columns, like ISO-8601
strings, become ticks since the epoch, rounded down (a column without a time zone counts as
UTC). A missing column, or a row without a time, is an :class:`InputError` for the message, and
so is a batch that lacks a field of the stream's expected schema or has it with another type.
Extra columns are kept: producers may send more attributes than a query uses, as in JSON.

Attribute types are not this codec's to decide (SEMANTICS.md: they come from the queries). A
column whose values share no Arrow type (a number in one event and text in another, an integer
beyond 64 bits, a list beside a number) travels as each value's JSON text, marked with
:data:`JSON_TEXT` in its field metadata, and :func:`unify` turns the columns of several batches
that disagree into such columns too: whichever event comes first, no value is refused or
changed here, and every reader gets the values back with :func:`values_of`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from situflow.codecs.errors import InputError
from situflow.codecs.event_time import DEFAULT_TIME_FIELD, time_column

CONTENT_TYPE = "application/vnd.apache.arrow.stream"
CONTENT_TYPE_HEADER = "content-type"
#: Kafka headers to send with every Arrow message.
HEADERS: list[tuple[str, bytes]] = [(CONTENT_TYPE_HEADER, CONTENT_TYPE.encode())]

#: Field metadata of a column that holds each value's JSON text (module doc).
JSON_TEXT = {b"situflow.encoding": b"json"}
BUILD_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError)


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
    time_unit: float = 1.0,
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
    merged = _normalise_time(merged, time_field, time_unit)
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
    """A RecordBatch of event dicts. Every attribute any event has is a column, null where an
    event lacks it; types are inferred per column, and a column whose values share no Arrow type
    holds JSON text (module doc), as do JSON objects. With ``schema``, the events must fit it."""
    if schema is not None:
        try:
            return pa.RecordBatch.from_pylist(list(events), schema=schema)
        except BUILD_ERRORS as exc:
            raise InputError(f"events do not fit the Arrow schema: {exc}") from None
    names = dict.fromkeys(name for event in events for name in event)
    fields, arrays = [], []
    for name in names:
        values = [event.get(name) for event in events]
        try:
            array = array_of(values)
            fields.append(pa.field(name, array.type))
        except BUILD_ERRORS:
            array = _json_text(values)
            fields.append(pa.field(name, pa.string(), metadata=JSON_TEXT))
        arrays.append(array)
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def array_of(values: Sequence[Any]) -> pa.Array:
    """The Arrow array of plain values, or one of :data:`BUILD_ERRORS` where they share no
    Arrow type that keeps every value as it is: Arrow would make ``true`` a 1 beside floats,
    and give every object of a column the keys of all (:func:`has_struct`)."""
    array = pa.array(values)
    kind = array.type
    if has_struct(kind) or ((pa.types.is_floating(kind) or pa.types.is_integer(kind))
                            and any(isinstance(v, bool) for v in values)):
        raise pa.ArrowTypeError(f"values of several types: {kind}")
    return array


def has_struct(kind: pa.DataType) -> bool:
    """Whether values of ``kind`` hold JSON objects: Arrow gives every object of a column every
    key any of them has (null where absent), so objects are kept as JSON text instead."""
    if pa.types.is_struct(kind):
        return True
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return has_struct(kind.value_type)
    return False


def is_json_text(field: pa.Field) -> bool:
    return bool(field.metadata) and field.metadata.get(b"situflow.encoding") == b"json"


def values_of(table: pa.Table | pa.RecordBatch, name: str) -> list[Any]:
    """The values of column ``name`` as plain Python (JSON text decoded)."""
    values: list[Any] = table.column(name).to_pylist()
    if is_json_text(table.schema.field(name)):
        return [None if v is None else json.loads(v) for v in values]
    return values


def unify(tables: Sequence[pa.Table]) -> list[pa.Table]:
    """``tables`` with one schema, so that they concatenate: a column is promoted where Arrow
    can (an integer column beside a float one), and held as JSON text where the tables' types
    of it share no Arrow type (module doc). Columns a table lacks are left to concatenation
    (``promote_options="permissive"`` fills them with nulls)."""
    kinds: dict[str, list[pa.Field]] = {}
    for table in tables:
        for field in table.schema:
            kinds.setdefault(field.name, []).append(field)
    textual = {name for name, fields in kinds.items() if _conflict(fields)}
    if not textual:
        return list(tables)
    return [_as_json_text(table, textual) for table in tables]


def concat(tables: Sequence[pa.Table]) -> pa.Table:
    """The rows of ``tables`` in order, in one table of unified columns (:func:`unify`)."""
    return pa.concat_tables(unify(tables), promote_options="permissive")


def events_from_batch(batch: pa.RecordBatch | pa.Table) -> list[dict[str, Any]]:
    """The rows of ``batch`` as event dicts, the shape the JSON codec returns."""
    rows: list[dict[str, Any]] = batch.to_pylist()
    textual = [f.name for f in batch.schema if is_json_text(f)]
    for row in rows:
        for name in textual:
            if row[name] is not None:
                row[name] = json.loads(row[name])
    return rows


def _conflict(fields: list[pa.Field]) -> bool:
    if len({f.type for f in fields}) == 1:
        return any(is_json_text(f) for f in fields) and not all(is_json_text(f) for f in fields)
    if any(is_json_text(f) for f in fields):
        return True
    try:
        pa.unify_schemas([pa.schema([f.remove_metadata()]) for f in fields],
                         promote_options="permissive")
    except BUILD_ERRORS:
        return True
    return False


def _as_json_text(table: pa.Table, names: set[str]) -> pa.Table:
    for name in names:
        index = table.schema.get_field_index(name)
        if index < 0 or is_json_text(table.schema.field(index)):
            continue
        field = pa.field(name, pa.string(), metadata=JSON_TEXT)
        table = table.set_column(index, field, _json_text(table.column(index).to_pylist()))
    return table


def _json_text(values: Sequence[Any]) -> pa.Array:
    return pa.array([None if v is None else json.dumps(v, default=str) for v in values],
                    pa.string())


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=schema)


def _normalise_time(batch: pa.RecordBatch, time_field: str, time_unit: float) -> pa.RecordBatch:
    index = batch.schema.get_field_index(time_field)
    if index < 0:
        raise InputError(f"missing event-time field {time_field!r}")
    column = batch.column(index)
    if is_json_text(batch.schema.field(index)):
        column = pa.array(values_of(batch, time_field))
    times, bad = time_column(column, time_unit, time_field)
    if bad:
        row = min(bad)
        raise InputError(f"row {row}: {bad[row]}" + (f" (and {len(bad) - 1} more rows)"
                                                       if len(bad) > 1 else ""))
    field = pa.field(time_field, pa.int64(), nullable=False)
    return batch.set_column(index, field, pa.array(times, pa.int64()))
