"""Writing one segment durably and atomically: a temporary file, fsynced, hard-linked to its
name (which fails if the name exists), then the directory fsynced; then its block index
(:mod:`situflow.archive.blocks`), by write-then-rename (a crash before it leaves a segment
without one, which readers index by a scan and the archiver writes when it adopts the segment).
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from situflow.archive.blocks import Block, file_blocks, sidecar_bytes, sidecar_name, table_blocks
from situflow.archive.format import (
    BLOCK_ROWS,
    META_KEY,
    SegmentMeta,
    read_meta,
    segment_name,
    time_column,
)


@dataclass(frozen=True)
class Segment:
    """A segment this process wrote, and its size in bytes."""

    meta: SegmentMeta
    path: Path
    size: int


def write_segment(directory: Path, table: pa.Table, meta: SegmentMeta, *,
                  block_rows: int = BLOCK_ROWS, time_field: str = "ts") -> Segment:
    """Write ``table`` as the segment named by ``meta.first_seq``, durably and atomically.

    Raises ``FileExistsError`` (writing nothing) if that segment exists: a file is never
    replaced, so two writers of the same seq cannot both succeed (:mod:`situflow.archive.log`).
    So the archive needs a file system with hard links: any local one, or NFS. Row groups
    hold ``block_rows`` rows; a table whose rows all have an integer ``time_field`` gets a
    block index.
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / segment_name(meta.first_seq)
    temporary = directory / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    table = table.replace_schema_metadata({META_KEY: json.dumps(asdict(meta))})
    try:
        with temporary.open("wb") as file:
            pq.write_table(table, file, row_group_size=block_rows, compression="zstd")
            file.flush()
            os.fsync(file.fileno())
        row_counts = [group.num_rows for group in _row_groups(temporary)]
        os.link(temporary, path)  # unlike rename, fails if the name exists
    finally:
        temporary.unlink(missing_ok=True)
    if _timed(table, time_field):
        write_sidecar(directory, meta, time_field,
                      table_blocks(table, meta, path.name, row_counts, time_field))
    _fsync_dir(directory)  # the names must be durable before a checkpoint counts on them
    return Segment(meta, path, path.stat().st_size)


def write_sidecar(directory: Path, meta: SegmentMeta, time_field: str,
                  blocks: list[Block]) -> None:
    """Write (or replace with the same content) the block index of ``meta``'s segment."""
    path = directory / sidecar_name(segment_name(meta.first_seq))
    temporary = directory / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with temporary.open("wb") as file:
            file.write(sidecar_bytes(meta, time_field, blocks))
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def ensure_sidecar(path: Path, time_field: str) -> bool:
    """Write the block index of the segment at ``path`` if it has none and has an integer
    ``time_field`` (by a scan of its row groups); whether it wrote one."""
    if (path.parent / sidecar_name(path.name)).exists():
        return False
    parquet = pq.ParquetFile(path)
    if not _timed(parquet.read(columns=[time_field]) if time_field in parquet.schema_arrow.names
                  else parquet.schema_arrow.empty_table(), time_field):
        return False
    meta = read_meta(path)
    write_sidecar(path.parent, meta, time_field, file_blocks(parquet, meta, path.name, time_field))
    return True


def _timed(table: pa.Table, time_field: str) -> bool:
    """Whether every row of ``table`` has an integer event time: only then do its blocks have
    a time span (a topic of results without one gets no block index; its writer must not
    fail on it)."""
    times = time_column(table, time_field)
    return times is not None and not times.null_count


def _row_groups(path: Path) -> list[pq.RowGroupMetaData]:
    metadata = pq.read_metadata(path)
    return [metadata.row_group(i) for i in range(metadata.num_row_groups)]


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
