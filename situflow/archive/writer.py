"""Writing one segment durably and atomically: a temporary file, fsynced, hard-linked to its
name (which fails if the name exists), then the directory fsynced."""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from situflow.archive.format import META_KEY, ROW_GROUP_ROWS, SegmentMeta, segment_name


@dataclass(frozen=True)
class Segment:
    """A segment this process wrote, and its size in bytes."""

    meta: SegmentMeta
    path: Path
    size: int


def write_segment(directory: Path, table: pa.Table, meta: SegmentMeta) -> Segment:
    """Write ``table`` as the segment named by ``meta.first_seq``, durably and atomically.

    Raises ``FileExistsError`` (writing nothing) if that segment exists: a file is never
    replaced, so two writers of the same seq cannot both succeed (:mod:`situflow.archive.log`).
    So the archive needs a file system with hard links: any local one, or NFS.
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / segment_name(meta.first_seq)
    temporary = directory / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    table = table.replace_schema_metadata({META_KEY: json.dumps(asdict(meta))})
    try:
        with temporary.open("wb") as file:
            pq.write_table(table, file, row_group_size=ROW_GROUP_ROWS, compression="zstd")
            file.flush()
            os.fsync(file.fileno())
        os.link(temporary, path)  # unlike rename, fails if the name exists
    finally:
        temporary.unlink(missing_ok=True)
    _fsync_dir(directory)  # the name must be durable before a checkpoint counts on it
    return Segment(meta, path, path.stat().st_size)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
