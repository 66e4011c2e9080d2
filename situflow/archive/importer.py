"""``situflow archive import``: historical events that never went through Kafka, written into
the archive as the archiver would have written them, so that queries run over them offline.

The events are read exactly as ``situflow run`` reads them (JSON lines through
:mod:`situflow.io.jsonl`; Parquet row by row through the same event-time rule), so each keeps
the seq ``situflow run`` gives it (its 0-based line or row number) as its input seq
(``_situflow_seq``) and its Kafka-offset column (``_situflow_offset``): result bindings of an
offline query then name the events ``situflow run`` names. Events without a readable time are
reported with their line numbers, like ``situflow run``, never dropped silently (``strict``:
the import stops at the first, writing nothing).

Order: K-slack releases a partition's events by (time, input order), so the import sorts
stably by time. ``situflow run`` instead rejects an event earlier than one before it in the
file; on a time-ordered file both see the same events in the same order. With ``key_fields``
an event goes to partition ``crc32(key) mod partitions`` (:func:`key_text`: stable across
runs and machines); without, to partition 0.

Importing into a stream that exists appends. Its settings must be the same, and so must
``partitions``, so that a key stays in its partition (the archive keeps no count: an import
with fewer partitions than the archive has is caught, one with more is not). Each partition's
rows continue its archive seq, and input seqs continue after the largest already archived. An
import whose earliest event in a partition is earlier than that partition's latest is refused
(K-slack would have dropped it as late; import the history into a new stream instead).

Files are written by :func:`situflow.archive.writer.write_segment` on a local archive, and
whole by write-then-rename on other file systems (:mod:`situflow.archive.location`).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from situflow.archive.blocks import sidecar_bytes, sidecar_name, table_blocks
from situflow.archive.format import (
    ARCHIVE_OFFSET,
    ARCHIVE_SEQ,
    BLOCK_ROWS,
    META_KEY,
    ArchiveError,
    SegmentMeta,
    segment_name,
)
from situflow.archive.location import PARTITION_PREFIX, Archive, open_archive
from situflow.archive.secondary import key_groups
from situflow.archive.stream import StreamSettings, ordered_topic
from situflow.archive.writer import write_segment
from situflow.codecs import arrow_events
from situflow.codecs.event_time import time_column
from situflow.errors import InputError
from situflow.events import EventBatch, plain
from situflow.io.jsonl import Fields, read_blocks
from situflow.kslack.positions import SEQ_FIELD

#: Rows per segment file of an import.
SEGMENT_ROWS = 1_000_000


@dataclass
class ImportReport:
    """What an import wrote: ``rows`` events of ``stream`` into ``topic``, per partition the
    archive seqs ``(first, next)`` and the segment files; ``rejected`` the events it could not
    read (with their line numbers), in line order."""

    stream: str
    topic: str
    rows: int = 0
    partitions: dict[int, tuple[int, int]] = field(default_factory=dict)
    segments: list[str] = field(default_factory=list)
    rejected: list[InputError] = field(default_factory=list)


def import_events(path: str | Path, archive_uri: str | Archive, stream: str, *,
                  time_field: str = "ts", time_unit: float = 1.0,
                  key_fields: Sequence[str] = (), type_field: str = "type",
                  id_field: str = "id", partitions: int = 1, strict: bool = False,
                  segment_rows: int = SEGMENT_ROWS, block_rows: int = BLOCK_ROWS
                  ) -> ImportReport:
    """Import the events of ``path`` (JSON lines, or Parquet by its ``.parquet`` suffix) into
    stream ``stream`` of the archive at ``archive_uri`` (module doc)."""
    if partitions < 1:
        raise ArchiveError(f"partitions must be at least 1, got {partitions}")
    settings = StreamSettings(stream, time_field, time_unit, type_field, tuple(key_fields),
                              id_field)
    archive = archive_uri if isinstance(archive_uri, Archive) else open_archive(archive_uri)
    topic = ordered_topic(stream)
    existing = _existing(archive, topic, settings, partitions)
    fields = Fields(time_field, type_field, id_field, time_unit)
    try:
        events, rejected = (_parquet_events(Path(path), fields)
                            if str(path).endswith(".parquet") else _jsonl_events(Path(path), fields))
    except OSError as exc:
        raise ArchiveError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if rejected and strict:
        raise rejected[0]
    first_input = max((s.meta.last_offset + 1 for p in existing
                       for s in archive.segments(topic, p)), default=0)
    by_partition = _partitioned(_k_slack_order(events, time_field, first_input), key_fields,
                                partitions)
    for partition, rows in by_partition.items():
        if partition in existing and rows.num_rows:
            _refuse_earlier(archive, existing[partition], rows.column(time_field)[0].as_py(),
                            path)
    archive.write_settings(topic, settings)
    report = ImportReport(stream, topic, rejected=rejected)
    for partition, rows in by_partition.items():
        first_seq = existing[partition].next_seq if partition in existing else 0
        report.partitions[partition] = (first_seq, first_seq + rows.num_rows)
        for start in range(0, rows.num_rows, segment_rows):
            chunk = rows.slice(start, segment_rows)
            seqs = pa.array(np.arange(first_seq + start, first_seq + start + chunk.num_rows))
            report.segments.append(_write(archive, topic, partition,
                                          chunk.append_column(ARCHIVE_SEQ, seqs), time_field,
                                          block_rows))
        report.rows += rows.num_rows
    return report


def _k_slack_order(events: pa.Table, time_field: str, first_input: int) -> pa.Table:
    """``events`` as K-slack releases them, by time and then input order, with input seqs
    (and offsets) continuing after ``first_input``."""
    seq = pa.array(events.column(SEQ_FIELD).to_numpy() + first_input, pa.int64())
    order = pa.array(np.lexsort((seq.to_numpy(), events.column(time_field).to_numpy())))
    return events.drop_columns([SEQ_FIELD]).take(order) \
        .append_column(SEQ_FIELD, seq.take(order)).append_column(ARCHIVE_OFFSET, seq.take(order))


def _refuse_earlier(archive: Archive, last: SegmentMeta, earliest: int, path: str | Path
                    ) -> None:
    """Refuse events before the end of a partition's archive (module doc)."""
    if last.max_ts is not None and earliest < last.max_ts:
        directory = archive.path(last.topic, f"{PARTITION_PREFIX}{last.partition}")
        raise ArchiveError(
            f"{directory}: the archive ends at time {last.max_ts} (seq {last.next_seq - 1}) but "
            f"{path} has events from time {earliest}: an import appends only later events; "
            "import this history into a new stream")


def batch_table(batch: EventBatch, fields: Fields) -> pa.Table:
    """The Arrow table of ``batch`` from which ``EventBatch.from_arrow`` (with ``seq``) gives it
    back: what the archive stores and the replay reads. Missing numbers (NaN) are nulls,
    values that share no Arrow type JSON text (situflow.codecs.arrow_events)."""
    columns: dict[str, np.ndarray] = {}
    if batch.types is not None:
        columns[fields.type] = batch.types
    if batch.ids.dtype != np.int64 or not np.array_equal(batch.ids, batch.seq):
        columns[fields.id] = batch.ids  # else the id is the seq, as without an id attribute
    columns.update(batch.columns)
    schema = [pa.field(fields.time, pa.int64())]
    arrays = [pa.array(batch.ts, pa.int64())]
    for name, values in columns.items():
        column_field, array = _column(name, values)
        schema.append(column_field)
        arrays.append(array)
    table = pa.Table.from_arrays(arrays, schema=pa.schema(schema))
    return table.append_column(SEQ_FIELD, pa.array(batch.seq, pa.int64()))


def _column(name: str, values: np.ndarray) -> tuple[pa.Field, pa.Array]:
    if values.dtype != object:
        array = pa.array(values, from_pandas=True)  # NaN: a missing number
        return pa.field(name, array.type), array
    try:  # the common case, text (missing as None or NaN), without a value-by-value pass
        text = pa.array(values, from_pandas=True)
        if pa.types.is_string(text.type):
            return pa.field(name, text.type), text
    except arrow_events.BUILD_ERRORS:
        pass
    plain_values = [plain(v) for v in values]
    try:
        array = arrow_events.array_of(plain_values)
        return pa.field(name, array.type), array
    except arrow_events.BUILD_ERRORS:
        text = pa.array([None if v is None else json.dumps(v, default=str) for v in plain_values],
                        pa.string())
        return pa.field(name, pa.string(), metadata=arrow_events.JSON_TEXT), text


def _existing(archive: Archive, topic: str, settings: StreamSettings,
              partitions: int) -> dict[int, SegmentMeta]:
    """Per partition, the last segment of an existing stream (empty for a new one)."""
    before = archive.settings(topic)
    if before is None:
        return {}
    if before != settings:
        differ = [f"{name} {getattr(before, name)!r} (not {getattr(settings, name)!r})"
                  for name in ("time_field", "time_unit", "type_field", "key_fields", "id_field")
                  if getattr(before, name) != getattr(settings, name)]
        raise ArchiveError(f"{archive.path(topic)}: stream {settings.stream!r} exists with "
                           f"{', '.join(differ)}: import with its settings or into a new stream")
    found = archive.partitions(topic)
    if found and found[-1] >= partitions:
        raise ArchiveError(f"{archive.path(topic)}: stream {settings.stream!r} has partition "
                           f"{found[-1]}: import with the partitions of its first import "
                           "(a key must stay in its partition)")
    last = {}
    for partition in found:
        segments = archive.segments(topic, partition)
        if segments:
            last[partition] = segments[-1].meta
    return last


def _jsonl_events(path: Path, fields: Fields) -> tuple[pa.Table, list[InputError]]:
    tables, errors = [], []
    for block in read_blocks(path, fields, read_ahead=0):
        errors += block.errors
        if len(block.batch):
            tables.append(batch_table(block.batch, fields))
    return _events(tables, fields), sorted(errors, key=lambda e: e.position or 0)


def _parquet_events(path: Path, fields: Fields) -> tuple[pa.Table, list[InputError]]:
    """A Parquet file's rows as events, row ``i`` with seq ``i`` (as line ``i`` of JSON lines
    would have), times by the one event-time rule."""
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ArchiveError(f"{path}: not a readable Parquet file ({exc})") from None
    if fields.time not in table.column_names:
        raise ArchiveError(f"{path}: no event-time column {fields.time!r}")
    seq = np.arange(table.num_rows, dtype=np.int64)
    ticks, bad = time_column(table.column(fields.time), fields.time_unit, fields.time)
    errors = [InputError(reason, str(path), i + 1) for i, reason in sorted(bad.items())]
    keep = np.ones(table.num_rows, bool)
    keep[list(bad)] = False
    table = table.filter(pa.array(keep))
    table = table.set_column(table.schema.get_field_index(fields.time), fields.time,
                             pa.array(ticks[keep], pa.int64()))
    batch = EventBatch.from_arrow(table, time_field=fields.time, type_field=fields.type,
                                  id_field=fields.id, seq=seq[keep])
    return _events([batch_table(batch, fields)], fields), errors


def _events(tables: list[pa.Table], fields: Fields) -> pa.Table:
    if not tables:
        return pa.table({fields.time: pa.array([], pa.int64()),
                         SEQ_FIELD: pa.array([], pa.int64())})
    return arrow_events.concat(tables)


def _partitioned(events: pa.Table, key_fields: Sequence[str], partitions: int
                 ) -> dict[int, pa.Table]:
    if not key_fields or partitions == 1:
        return {0: events}
    missing = [k for k in key_fields if k not in events.column_names]
    if missing:
        raise ArchiveError(f"no event has the key attribute(s) {', '.join(missing)}")
    texts, inverse = key_groups(events, key_fields)
    of_key = np.array([zlib.crc32(t.encode()) % partitions for t in texts], np.int64)
    target = of_key[inverse]
    return {p: events.filter(pa.array(target == p)) for p in range(partitions)}


def _write(archive: Archive, topic: str, partition: int, rows: pa.Table, time_field: str,
           block_rows: int) -> str:
    """Write one segment of ``rows`` (and its sidecar); its path."""
    offsets = pc.min_max(rows.column(ARCHIVE_OFFSET))
    seqs, times = rows.column(ARCHIVE_SEQ), rows.column(time_field)
    meta = SegmentMeta(topic, partition, seqs[0].as_py(), seqs[-1].as_py() + 1,
                       offsets["min"].as_py(), offsets["max"].as_py(), times[0].as_py(),
                       times[-1].as_py())
    directory = archive.path(topic, f"{PARTITION_PREFIX}{partition}")
    if isinstance(archive.fs, pafs.LocalFileSystem):
        try:
            return str(write_segment(Path(directory), rows, meta, block_rows=block_rows,
                                     time_field=time_field).path)
        except FileExistsError:
            raise ArchiveError(f"{directory}/{segment_name(meta.first_seq)} exists: another "
                               "import or the archiver wrote this stream meanwhile") from None
    sink = pa.BufferOutputStream()
    pq.write_table(rows.replace_schema_metadata({META_KEY: json.dumps(asdict(meta))}), sink,
                   row_group_size=block_rows, compression="zstd")
    data = sink.getvalue()
    footer = pq.ParquetFile(pa.BufferReader(data)).metadata
    counts = [footer.row_group(i).num_rows for i in range(footer.num_row_groups)]
    name = segment_name(meta.first_seq)
    archive.write_file(f"{directory}/{name}", data.to_pybytes())
    archive.write_file(f"{directory}/{sidecar_name(name)}", sidecar_bytes(
        meta, time_field, table_blocks(rows, meta, name, counts, time_field)))
    return f"{directory}/{name}"
