"""What K-slack takes in: one message's events, decoded and checked, or why they cannot be."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import pyarrow as pa

from situflow.codecs import arrow_events
from situflow.codecs.errors import InputError
from situflow.codecs.json_events import decode_event
from situflow.event_types import arrow_key_problem, key_problem
from situflow.kslack.positions import input_seq, json_table

#: What a JSON event came in: to its source message, Kafka's in the service.
Source = TypeVar("Source")


def decode_input(value: bytes | None, headers: Any, time_field: str, time_unit: float,
                 key_fields: Iterable[str]) -> dict[str, Any] | pa.RecordBatch:
    """A JSON message's event, or an Arrow message's events (by ``headers``), with their
    partition attributes checked; raises InputError with the reason for the dead-letter topic.

    >>> decode_input(b'{"ts": 3, "car": "a"}', None, "ts", 1.0, ["car"])
    {'ts': 3, 'car': 'a'}
    """
    if value is None:
        raise InputError("empty message (null value)")
    if not arrow_events.is_arrow(headers):
        record = decode_event(bytes(value), time_field=time_field, time_unit=time_unit)
        check_partition_key(key_fields, record, lambda name: key_problem(name, record[name]))
        return record
    batch = arrow_events.decode_batch(bytes(value), time_field=time_field, time_unit=time_unit)
    check_partition_key(key_fields, batch.schema.names,
                        lambda name: arrow_key_problem(name, batch))
    return batch


def check_partition_key(key_fields: Iterable[str], names: Any,
                        problem: Callable[[str], str | None]) -> None:
    """Raise InputError when a key field is not among ``names``, or ``problem(name)`` says its
    value is no single value (the typing rule, :mod:`situflow.event_types`): downstream
    state is split by them."""
    for name in key_fields:
        if name not in names:
            raise InputError(f"missing partition attribute {name!r}")
        reason = problem(name)
        if reason is not None:
            raise InputError(reason)


def inbox_table(entries: Sequence[tuple[Source, dict[str, Any]]],
                offset: Callable[[Source], int]) -> tuple[pa.Table, dict[int, Source]]:
    """JSON events that waited together, each with its source message (at ``offset(source)``),
    as one table with their seq, and their sources by seq (a late event's goes on unchanged).

    >>> table, sources = inbox_table([("m3", {"ts": 5}), ("m4", {"ts": 1})], lambda m: int(m[1]))
    >>> table.column("ts").to_pylist(), sources == {3 << 20: "m3", 4 << 20: "m4"}
    ([5, 1], True)
    """
    table = json_table([record for _, record in entries], [offset(s) for s, _ in entries])
    return table, {input_seq(offset(source)): source for source, _ in entries}
