"""Reading the archive: every row of one topic partition, in seq order."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from situflow.archive.format import ARCHIVE_OFFSET, ARCHIVE_SEQ, partition_dir, segment_paths


def read_archive(root: Path, topic: str, partition: int) -> pa.Table:
    """Every archived row of one topic partition, in seq order (attributes missing from a
    segment are null; raises ``pyarrow.ArrowTypeError`` if segments give one two types)."""
    tables = [pq.read_table(path) for path in segment_paths(partition_dir(root, topic, partition))]
    if not tables:
        return pa.table({ARCHIVE_SEQ: pa.array([], pa.int64()),
                         ARCHIVE_OFFSET: pa.array([], pa.int64())})
    return pa.concat_tables(tables, promote_options="default")
