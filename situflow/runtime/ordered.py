"""The messages of an ordered partition: events in K-slack's order, each with its input seq.

K-slack (thesis §5.6.1) writes a partition's released events as an Arrow batch, or one JSON
event, whose seq column numbers each event's place in its input; the evaluating services
read them back here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from situflow.codecs import arrow_events
from situflow.codecs.json_events import decode_event
from situflow.errors import InputError
from situflow.events import EventBatch


@dataclass(frozen=True)
class OrderedLayout:
    """Where an ordered event keeps its event time, its partition key and its input seq."""

    time_field: str
    key_fields: tuple[str, ...]
    seq_field: str
    #: Seconds per event-time tick (situflow.codecs.event_time).
    time_unit: float = 1.0


def decode_ordered(value: bytes | None, headers: Iterable[tuple[str, bytes]] | None,
                   layout: OrderedLayout) -> pa.RecordBatch:
    """An ordered message's events with their input seq (an Arrow batch, or a JSON event that
    carries its seq as an attribute); ``InputError`` if it is not such a message."""
    if value is None:
        raise InputError("empty message (null value)")
    if arrow_events.is_arrow(headers):
        batch = arrow_events.decode_batch(value, time_field=layout.time_field,
                                          time_unit=layout.time_unit)
    else:
        batch = arrow_events.batch_from_events(
            [decode_event(value, time_field=layout.time_field, time_unit=layout.time_unit)])
    if layout.seq_field not in batch.schema.names:
        raise InputError(f"an ordered event lacks its {layout.seq_field!r}: not written by "
                         "K-slack")
    return batch


def ordered_events(batch: pa.RecordBatch, layout: OrderedLayout) -> EventBatch:
    """The events of a decoded ordered message, each with its input seq."""
    seq = np.asarray(batch.column(layout.seq_field).to_numpy(), dtype=np.int64)
    return EventBatch.from_arrow(batch.drop_columns([layout.seq_field]),
                                 time_field=layout.time_field, seq=seq)
