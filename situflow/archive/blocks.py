"""The lightweight index of the archive (thesis §3.2.1): per block, aggregates kept where a reader
finds them without reading rows.

A *block* is one Parquet row group of a segment (:attr:`SegmentPolicy.block_rows` rows). Its
entry holds what ChronicleDB keeps per child reference of the TAB+-tree (the count, the covered
period and min/max/sum per attribute) plus the block's archive seq span, which a count window and
the secondary index's pointers need. Parquet footer statistics lack the sum and the non-null
count a mean needs, so the entries live in a *sidecar* next to each segment, as SMAs do [Moe98]:

    <root>/<topic>/partition=<p>/<first seq>.blocks.json

It holds the segment's :class:`SegmentMeta` too, so listing an archive reads only sidecars. The
writer creates it right after the segment; a segment without one (a crash in between, or a
segment older than the lightweight index) is indexed by a scan of its row groups when read, and
:func:`~situflow.archive.location.build_blocks` writes the missing sidecars.

Statistics cover every integer and floating-point attribute (min, max, sum, non-null count) and
every string attribute (min, max, non-null count; no sum), except the archive's own
``_situflow_*`` columns, whose spans are the block's seq span. Integer sums are exact (Python
integers in JSON, also beyond int64); floating-point sums follow IEEE addition and are NaN when
a value is.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from situflow.archive.format import SEGMENT_SUFFIX, ArchiveError, SegmentMeta

SIDECAR_SUFFIX = ".blocks.json"
SIDECAR_FORMAT = 1
#: Columns the archive adds; their spans are the block's own (seq), so they get no statistics.
INTERNAL_PREFIX = "_situflow_"


@dataclass(frozen=True)
class AttrStats:
    """One attribute's aggregates over a block: ``count`` non-null values, their ``min`` and
    ``max`` and, for numbers, their ``sum`` (None when no value, and for strings)."""

    min: Any
    max: Any
    sum: int | float | None
    count: int


@dataclass(frozen=True)
class Block:
    """One row group of a segment: ``count`` rows with archive seqs ``seq_min``..``seq_max``
    (dense) and event times ``ts_min``..``ts_max``, and each attribute's :class:`AttrStats`."""

    segment: str
    row_group: int
    count: int
    seq_min: int
    seq_max: int
    ts_min: int
    ts_max: int
    stats: dict[str, AttrStats] = field(default_factory=dict, hash=False)

    def to_json(self) -> dict[str, Any]:
        return {"row_group": self.row_group, "count": self.count,
                "seq": [self.seq_min, self.seq_max], "ts": [self.ts_min, self.ts_max],
                "stats": {name: [s.min, s.max, s.sum, s.count] for name, s in self.stats.items()}}

    @classmethod
    def from_json(cls, segment: str, entry: dict[str, Any]) -> Block:
        (seq_min, seq_max), (ts_min, ts_max) = entry["seq"], entry["ts"]
        return cls(segment, entry["row_group"], entry["count"], seq_min, seq_max, ts_min, ts_max,
                   {name: AttrStats(*values) for name, values in entry["stats"].items()})


def sidecar_name(segment: str) -> str:
    """The sidecar of segment file ``segment``.

    >>> sidecar_name("00000000000000000042.parquet")
    '00000000000000000042.blocks.json'
    """
    return segment.removesuffix(SEGMENT_SUFFIX) + SIDECAR_SUFFIX


def table_blocks(table: pa.Table, meta: SegmentMeta, segment: str, row_counts: list[int],
                 time_field: str) -> list[Block]:
    """The blocks of segment ``meta`` holding ``table`` in row groups of ``row_counts`` rows
    (the seq is dense: a block's seq span follows from the rows before it)."""
    blocks, start = [], 0
    for row_group, rows in enumerate(row_counts):
        blocks.append(_block(table.slice(start, rows), segment, row_group,
                             meta.first_seq + start, time_field))
        start += rows
    return blocks


def file_blocks(parquet: pq.ParquetFile, meta: SegmentMeta, segment: str,
                time_field: str) -> list[Block]:
    """The blocks of a segment without a sidecar, by a scan of its row groups."""
    blocks, start = [], meta.first_seq
    for row_group in range(parquet.metadata.num_row_groups):
        blocks.append(_block(parquet.read_row_group(row_group), segment, row_group, start,
                             time_field))
        start += blocks[-1].count
    return blocks


def sidecar_bytes(meta: SegmentMeta, time_field: str, blocks: list[Block]) -> bytes:
    return json.dumps({"format": SIDECAR_FORMAT, "meta": asdict(meta), "time_field": time_field,
                       "blocks": [b.to_json() for b in blocks]}).encode()


def parse_sidecar(data: bytes, segment: str, where: str) -> tuple[SegmentMeta, list[Block]]:
    """A sidecar's segment meta and blocks; ``ArchiveError`` naming ``where`` if unreadable."""
    try:
        document = json.loads(data)
        if document.get("format") != SIDECAR_FORMAT:
            raise ValueError(f"format {document.get('format')!r}, expected {SIDECAR_FORMAT}")
        return (SegmentMeta(**document["meta"]),
                [Block.from_json(segment, entry) for entry in document["blocks"]])
    except (ValueError, KeyError, TypeError) as exc:
        raise ArchiveError(f"{where}: unreadable block index ({exc}); delete it and run "
                           "`situflow index blocks` to rebuild it") from None


def _block(rows: pa.Table, segment: str, row_group: int, seq_min: int,
           time_field: str) -> Block:
    if time_field not in rows.column_names or not pa.types.is_integer(
            rows.schema.field(time_field).type):
        raise ArchiveError(f"segment {segment}: no integer event time {time_field!r}: only "
                           "timed topics have a lightweight index")
    times = pc.min_max(rows.column(time_field))
    if times["min"].as_py() is None:
        raise ArchiveError(f"segment {segment}, row group {row_group}: rows without an event "
                           f"time {time_field!r}")
    stats = {name: _stats(rows.column(name)) for name in rows.column_names
             if not name.startswith(INTERNAL_PREFIX)}
    return Block(segment, row_group, rows.num_rows, seq_min, seq_min + rows.num_rows - 1,
                 times["min"].as_py(), times["max"].as_py(),
                 {name: s for name, s in stats.items() if s is not None})


def _stats(column: pa.ChunkedArray) -> AttrStats | None:
    kind = column.type
    numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind)
    if not (numeric or pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        return None
    count = pc.count(column).as_py()
    extremes = pc.min_max(column)
    total = pc.sum(column).as_py() if numeric and count else None
    if pa.types.is_integer(kind) and count and max(
            abs(extremes["min"].as_py()), abs(extremes["max"].as_py())) * count >= 2**63:
        total = sum(v for v in column.to_pylist() if v is not None)  # int64 would overflow
    return AttrStats(extremes["min"].as_py(), extremes["max"].as_py(), total, count)
