"""Small archives written the way the archiver writes them, for the archive's tests (and any
test that needs an indexed archive on disk)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from situflow.archive import (
    ARCHIVE_OFFSET,
    ARCHIVE_SEQ,
    SegmentMeta,
    StreamSettings,
    open_archive,
    partition_dir,
    write_segment,
)
from situflow.kslack.positions import SEQ_FIELD


def write_partition(root: Path, topic: str, partition: int,
                    segments: Sequence[Sequence[dict[str, Any]]], block_rows: int = 4,
                    first_seq: int = 0) -> list[Path]:
    """Write ``segments`` (each a list of events with ``ts``) as consecutive segments from
    ``first_seq``; each row's input seq is its archive seq (one row per message)."""
    paths, seq = [], first_seq
    for events in segments:
        table = pa.Table.from_pylist(list(events))
        seqs = pa.array(range(seq, seq + len(events)), pa.int64())
        table = table.append_column(SEQ_FIELD, seqs).append_column(ARCHIVE_SEQ, seqs) \
            .append_column(ARCHIVE_OFFSET, seqs)
        times = [e["ts"] for e in events]
        meta = SegmentMeta(topic, partition, seq, seq + len(events), seq, seq + len(events) - 1,
                           min(times), max(times))
        paths.append(write_segment(partition_dir(root, topic, partition), table, meta,
                                   block_rows=block_rows).path)
        seq += len(events)
    return paths


def write_stream(root: Path, topic: str, **fields: Any) -> StreamSettings:
    settings = StreamSettings(topic.removesuffix(".ordered"), **fields)
    open_archive(root).write_settings(topic, settings)
    return settings
