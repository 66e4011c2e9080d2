"""Input positions: the column K-slack adds to every event it writes to ``<stream>.ordered``.

An event's seq is ``offset << ROW_BITS | row`` (its message's input offset, its row within an
Arrow message, 0 for JSON). With the event time it orders a key's events strictly, so a service
recognises events it has already seen after a redelivery. In an unpartitioned stream the batcher
renumbers it to the event's position in the global order: 0, 1, 2, ... (:mod:`.batches`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from situflow.codecs import arrow_events

SEQ_FIELD = "_situflow_seq"
ROW_BITS = 20


def input_seq(offset: int) -> int:
    """The seq of the first (or only) event of the message at ``offset``.

    >>> input_seq(3)
    3145728
    """
    return offset << ROW_BITS


def arrow_table(batch: pa.RecordBatch, offset: int) -> pa.Table:
    """The events of the Arrow message at ``offset``, with their seq."""
    seq = input_seq(offset) + np.arange(batch.num_rows, dtype=np.int64)
    return pa.Table.from_batches([batch]).append_column(SEQ_FIELD, pa.array(seq))


def json_table(records: list[dict[str, Any]], offsets: list[int]) -> pa.Table:
    """JSON events (one per message, at ``offsets``) as one table with their seq, whatever
    their attributes' types: columns that disagree are held as JSON text
    (:func:`situflow.codecs.arrow_events.unify`)."""
    batch = arrow_events.batch_from_events(records)
    seq = pa.array([input_seq(offset) for offset in offsets], pa.int64())
    return pa.Table.from_batches([batch]).append_column(SEQ_FIELD, seq)


def table_of(rows: list[dict[str, Any]]) -> pa.Table:
    """Events from their snapshot (:func:`situflow.codecs.arrow_events.events_from_batch`)."""
    return pa.Table.from_batches([arrow_events.batch_from_events(rows)])
