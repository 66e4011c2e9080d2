"""The unit the readers of :mod:`situflow.io` hand to ``situflow run``: a :class:`Block` of events
with the errors of its bad lines or rows, made from an Arrow table the same way whatever the
format (:func:`table_block`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

# The function call that pyarrow.compute wraps: importing pyarrow.compute builds a wrapper for
# every function it has (30-140 ms of start-up here), of which the readers need one.
from pyarrow._compute import call_function

from situflow.codecs.arrow_events import is_json_text
from situflow.codecs.event_time import time_column
from situflow.errors import InputError
from situflow.events import EventBatch


@dataclass
class Block:
    """The events of one block of lines and the errors of its bad lines."""

    batch: EventBatch
    errors: list[InputError] = field(default_factory=list)
    bytes_read: int = 0


@dataclass(frozen=True)
class Fields:
    time: str = "ts"
    type: str = "type"
    id: str = "id"
    # Seconds per time tick (the stream's time unit), for ISO-8601 event times.
    time_unit: float = 1.0


DEFAULT_FIELDS = Fields()


def table_block(table: pa.Table, seq: np.ndarray, source: str, fields: Fields,
                 size: int) -> Block:
    """A block pyarrow parsed whole: its event times by the one event-time rule
    (:mod:`situflow.codecs.event_time`), lines without one reported, texts dictionary-encoded
    (:func:`encode_texts`)."""
    ticks, bad = time_column(table.column(fields.time), fields.time_unit, fields.time)
    errors = [InputError(reason, source, int(seq[i]) + 1) for i, reason in sorted(bad.items())]
    if bad:
        keep = np.ones(len(ticks), bool)
        keep[list(bad)] = False
        table, ticks, seq = table.filter(pa.array(keep)), ticks[keep], seq[keep]
    if table.schema.field(fields.time).type != pa.int64() or bad:
        # Integer ticks without a rejected line are the column as read (the usual file).
        index = table.schema.get_field_index(fields.time)
        table = table.set_column(index, fields.time, pa.array(ticks, pa.int64()))
    batch = EventBatch.from_arrow(encode_texts(table, fields), time_field=fields.time, type_field=fields.type,
                                  id_field=fields.id, seq=seq)
    return Block(batch, errors, size)


def encode_texts(table: pa.Table, fields: Fields) -> pa.Table:
    """``table`` with its text attributes and types dictionary-encoded, so that the operators
    get one ``str`` per distinct value of a block instead of one per event
    (:func:`situflow.events.text_column`): creating them is cheaper, and the compiled loop
    factorizes texts by object identity (:mod:`situflow.nfa.kernel.texts`)."""
    for i, column in enumerate(table.schema):
        if encodable(column, fields):
            encoded: pa.ChunkedArray = call_function("dictionary_encode", [table.column(i)])
            table = table.set_column(i, pa.field(column.name, encoded.type), encoded)
    return table


def encodable(column: pa.Field, fields: Fields) -> bool:
    """Whether ``column`` is text to dictionary-encode: not the event time (its text is
    ISO-8601, read value by value), not the id (distinct in every row), not JSON text
    (:mod:`situflow.codecs.arrow_events`)."""
    return ((pa.types.is_string(column.type) or pa.types.is_large_string(column.type))
            and column.name not in (fields.time, fields.id) and not is_json_text(column))
