"""The archive's segment format: file names, paths, the metadata of a segment, the roll policy
and how a Kafka message becomes rows (package docstring)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from situflow.codecs import arrow_events
from situflow.errors import InputError, SituflowError

#: Columns the archive adds to every row.
ARCHIVE_SEQ = "_situflow_archive_seq"
ARCHIVE_OFFSET = "_situflow_offset"
#: Parquet key-value metadata key of a segment's :class:`SegmentMeta` (JSON).
META_KEY = "situflow.archive"
SEGMENT_SUFFIX = ".parquet"
#: Rows per Parquet row group, a *block* of the lightweight index (thesis §3.2.1): the unit a
#: reader of the offline path skips by statistics and aggregates without reading rows.
BLOCK_ROWS = 16_384


class ArchiveError(SituflowError):
    """An archive that cannot be read as it is: a truncated or corrupt segment, a gap in the
    seq, an attribute with two types, an attribute or a range without data. The message names
    the files and seq ranges and says what to do."""


@dataclass(frozen=True)
class SegmentPolicy:
    """When the open segment is written: at ``rows`` rows, when a message's first event falls
    in a later event-time bucket of ``span`` units than the segment's first (0: never by time),
    and after ``seconds`` open; ``block_rows`` rows per row group (block)."""

    rows: int = 100_000
    span: int = 3_600_000
    seconds: float = 60.0
    block_rows: int = BLOCK_ROWS

    def bucket(self, ts: int | None) -> int | None:
        """The event-time bucket of ``ts`` (None without a time or a span).

        >>> SegmentPolicy(span=100).bucket(250), SegmentPolicy(span=0).bucket(250)
        (2, None)
        """
        return None if ts is None or self.span <= 0 else ts // self.span


@dataclass(frozen=True)
class SegmentMeta:
    """What a segment holds: rows ``first_seq`` up to (excluding) ``next_seq``, from the
    messages at ``first_offset``..``last_offset``, with event times ``min_ts``..``max_ts``."""

    topic: str
    partition: int
    first_seq: int
    next_seq: int
    first_offset: int
    last_offset: int
    min_ts: int | None = None
    max_ts: int | None = None

    @property
    def rows(self) -> int:
        return self.next_seq - self.first_seq


def segment_name(first_seq: int) -> str:
    """A segment's file name: its first seq, zero-padded so that names sort in seq order.

    >>> segment_name(42)
    '00000000000000000042.parquet'
    """
    return f"{first_seq:020d}{SEGMENT_SUFFIX}"


def partition_dir(root: Path, topic: str, partition: int) -> Path:
    return root / topic / f"partition={partition}"


def segment_paths(directory: Path) -> list[Path]:
    """The segments of one topic partition in seq order (temporary files are not segments)."""
    return sorted(p for p in directory.glob(f"*{SEGMENT_SUFFIX}") if not p.name.startswith("."))


def read_meta(path: Path) -> SegmentMeta:
    metadata = pq.read_schema(path).metadata or {}
    return SegmentMeta(**json.loads(metadata[META_KEY.encode()]))


def decode_rows(value: bytes | None, headers: Any, time_field: str) -> pa.Table | None:
    """A message's events as a table (None if it holds none): an Arrow IPC stream (which must
    have ``time_field``, as every event batch does) or one JSON object.

    >>> decode_rows(b'{"ts": 3, "values": {"n": 1}}', None, "ts").to_pylist()
    [{'ts': 3, 'values': '{"n": 1}'}]
    """
    if value is None:
        raise InputError("empty message (null value)")
    if arrow_events.is_arrow(headers):
        batch = arrow_events.decode_batch(value, time_field=time_field)
        return pa.Table.from_batches([batch]) if batch.num_rows else None
    try:
        event = json.loads(value)
    except ValueError as exc:  # UnicodeDecodeError included
        raise InputError(f"invalid JSON: {exc}") from None
    if not isinstance(event, dict):
        raise InputError(f"expected a JSON object, got {type(event).__name__}")
    # Nested values as JSON text (marked so, as K-slack marks them, so that a reader gets the
    # values back): their shapes vary between results, a Parquet schema cannot.
    nested = {k for k, v in event.items() if isinstance(v, dict | list)}
    flat = {k: json.dumps(v) if k in nested else v for k, v in event.items()}
    batch = arrow_events.batch_from_events([flat])
    schema = pa.schema([f.with_metadata(arrow_events.JSON_TEXT) if f.name in nested else f
                        for f in batch.schema])
    return pa.Table.from_batches([batch]).cast(schema)


def time_column(table: pa.Table, time_field: str) -> pa.ChunkedArray | None:
    """The integer event-time column of ``table`` (None if it has none)."""
    index = table.schema.get_field_index(time_field)
    if index < 0 or not pa.types.is_integer(table.schema.field(index).type):
        return None
    return table.column(index)


def field_kind(field: pa.Field) -> str:
    """:func:`attribute_kind` of a column, "json" for JSON text (values of any JSON type, as
    K-slack and the import hold values that share no Arrow type)."""
    return "json" if arrow_events.is_json_text(field) else attribute_kind(field.type)


def drift(kind: str, other: str) -> bool:
    """Whether an attribute of ``kind`` in one segment and ``other`` in another is schema drift
    (a missing or a JSON-text column combines with any)."""
    return kind != other and not {"null", "json"} & {kind, other}


def attribute_kind(kind: pa.DataType) -> str:
    """The kind of a Parquet column's type; two kinds of one attribute are schema drift
    (integers and floats mix: both are numbers)."""
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        return "number"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "string"
    if pa.types.is_null(kind):
        return "null"
    return str(kind)
