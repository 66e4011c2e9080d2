"""The lightweight index (thesis §3.2.1): per row group of a segment, the count, the seq and
time spans and min/max/sum/non-null count per attribute, kept in a sidecar next to the segment
and read without reading rows."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from situflow.archive import (
    ARCHIVE_SEQ,
    AttrStats,
    SegmentLog,
    SegmentPolicy,
    build_blocks,
    open_archive,
    partition_dir,
    segment_name,
)
from situflow.archive.blocks import sidecar_name
from tests.archive.archives import write_partition
from tests.profiles import scaled

TOPIC = "cars.ordered"


#: An attribute without values in a block (a segment whose column is all null has none).
NO_VALUES = AttrStats(None, None, None, 0)


def expected_stats(rows: list[dict[str, Any]], attribute: str) -> AttrStats:
    """The brute-force aggregates of one attribute over a block's rows."""
    values = [r[attribute] for r in rows if r.get(attribute) is not None]
    if not values:
        return NO_VALUES
    total = sum(values) if not isinstance(values[0], str) else None
    return AttrStats(min(values), max(values), total, len(values))


events = st.lists(st.fixed_dictionaries({
    "dt": st.integers(0, 3),  # 0: a duplicate timestamp
    "speed": st.none() | st.integers(-1000, 1000),
    "load": st.floats(-1e6, 1e6, allow_nan=False),
    "road": st.none() | st.sampled_from(["a1", "b2", "c3"]),
}), min_size=1, max_size=40)


def timed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ts, result = 100, []
    for row in rows:
        ts += row["dt"]
        result.append({"ts": ts, "speed": row["speed"], "load": row["load"], "road": row["road"]})
    return result


def table_of(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(timed(rows))


@settings(max_examples=scaled(1))
@given(events, st.integers(1, 7), st.integers(1, 5))
def test_every_block_holds_the_aggregates_of_its_rows(
    tmp_path_factory: Any, rows: list[dict[str, Any]], block_rows: int, per_segment: int
) -> None:
    root = tmp_path_factory.mktemp("archive")
    stream = timed(rows)
    segments = [stream[i:i + per_segment * block_rows]
                for i in range(0, len(stream), per_segment * block_rows)]
    write_partition(root, TOPIC, 0, segments, block_rows=block_rows)
    archive = open_archive(root)
    blocks = archive.blocks(TOPIC, 0)
    assert all(s.indexed for s in archive.segments(TOPIC, 0))
    assert [b.seq_min for b in blocks] == [sum(b.count for b in blocks[:i])
                                           for i in range(len(blocks))]
    assert all(b.seq_max - b.seq_min + 1 == b.count <= block_rows for b in blocks)
    for block in blocks:
        inside = stream[block.seq_min:block.seq_max + 1]
        assert (block.ts_min, block.ts_max) == (inside[0]["ts"], inside[-1]["ts"])
        for attribute in ("speed", "road", "ts"):
            assert block.stats.get(attribute, NO_VALUES) == expected_stats(inside, attribute)
        load = block.stats["load"]
        assert (load.min, load.max, load.count) == (min(r["load"] for r in inside),
                                                    max(r["load"] for r in inside), len(inside))
        assert load.sum is not None and math.isclose(load.sum, sum(r["load"] for r in inside),
                                                     rel_tol=1e-9, abs_tol=1e-6)


def test_reading_blocks_reads_the_sidecars_not_the_segments(tmp_path: Path) -> None:
    paths = write_partition(tmp_path, TOPIC, 0, [timed([{"dt": 1, "speed": 1, "load": 0.5,
                                                         "road": "a1"}] * 6)], block_rows=4)
    assert (paths[0].parent / sidecar_name(paths[0].name)).exists()
    paths[0].write_bytes(b"not parquet")  # a reader that opened the segment would fail
    blocks = open_archive(tmp_path).blocks(TOPIC, 0)
    assert [(b.row_group, b.count, b.seq_min, b.seq_max) for b in blocks] == \
        [(0, 4, 0, 3), (1, 2, 4, 5)]


def test_a_segment_without_a_sidecar_is_indexed_by_a_scan_and_build_blocks_writes_it(
    tmp_path: Path
) -> None:
    paths = write_partition(tmp_path, TOPIC, 0, [timed([{"dt": 0, "speed": s, "load": 1.0,
                                                         "road": None} for s in range(9)])])
    sidecar = paths[0].parent / sidecar_name(paths[0].name)
    with_sidecar = open_archive(tmp_path).blocks(TOPIC, 0)
    sidecar.unlink()
    archive = open_archive(tmp_path)
    assert archive.blocks(TOPIC, 0) == with_sidecar
    assert [s.indexed for s in archive.segments(TOPIC, 0)] == [False]
    assert build_blocks(archive, TOPIC) == [archive.path(TOPIC, "partition=0", sidecar.name)]
    assert sidecar.exists() and build_blocks(open_archive(tmp_path), TOPIC) == []
    assert open_archive(tmp_path).blocks(TOPIC, 0) == with_sidecar


def test_the_archiver_writes_row_groups_of_block_rows_and_a_sidecar_per_segment(
    tmp_path: Path
) -> None:
    log = SegmentLog(partition_dir(tmp_path, TOPIC, 0), TOPIC, 0,
                     SegmentPolicy(rows=10, block_rows=3))
    for offset in range(10):
        log.add(offset, table_of([{"dt": 1, "speed": offset, "load": 0.0, "road": "a1"}]),
                offset, now=0)
    segment = partition_dir(tmp_path, TOPIC, 0) / segment_name(0)
    assert pq.ParquetFile(segment).metadata.num_row_groups == 4
    assert [b.count for b in open_archive(tmp_path).blocks(TOPIC, 0)] == [3, 3, 3, 1]


def test_a_crash_between_a_segment_and_its_sidecar_loses_no_block_index(tmp_path: Path) -> None:
    policy = SegmentPolicy(rows=4, block_rows=2)
    log = SegmentLog(partition_dir(tmp_path, TOPIC, 0), TOPIC, 0, policy)
    for offset in range(4):
        log.add(offset, table_of([{"dt": 1, "speed": offset, "load": 0.0, "road": "a1"}]),
                offset, now=0)
    sidecar = partition_dir(tmp_path, TOPIC, 0) / sidecar_name(segment_name(0))
    sidecar.unlink()  # the crash: the segment is linked, its sidecar not yet written
    restarted = SegmentLog(partition_dir(tmp_path, TOPIC, 0), TOPIC, 0, policy)
    restarted.add(0, table_of([{"dt": 1, "speed": 0, "load": 0.0, "road": "a1"}]), 0, now=0)
    assert sidecar.exists()  # written when the restarted log adopted the segment
    assert [s.indexed for s in open_archive(tmp_path).segments(TOPIC, 0)] == [True]


def test_a_topic_without_event_times_gets_no_sidecar(tmp_path: Path) -> None:
    log = SegmentLog(partition_dir(tmp_path, "results", 0), "results", 0, SegmentPolicy())
    log.add(0, table_of([{"dt": 1, "speed": 1, "load": 0.0, "road": "a"}]).drop_columns(["ts"]),
            0, now=0)
    log.flush()
    directory = partition_dir(tmp_path, "results", 0)
    assert [p.name for p in directory.iterdir()] == [segment_name(0)]
    assert ARCHIVE_SEQ in pq.read_schema(directory / segment_name(0)).names


def test_integer_sums_beyond_int64_stay_exact(tmp_path: Path) -> None:
    big = 2**62
    write_partition(tmp_path, TOPIC, 0, [[{"ts": t, "speed": big} for t in range(3)]])
    stats = open_archive(tmp_path).blocks(TOPIC, 0)[0].stats["speed"]
    assert (stats.sum, stats.count) == (3 * big, 3)


def test_a_topic_where_some_rows_lack_a_time_gets_no_sidecar_and_the_writer_goes_on(
    tmp_path: Path
) -> None:
    log = SegmentLog(partition_dir(tmp_path, "results", 0), "results", 0, SegmentPolicy(rows=2))
    log.add(0, pa.Table.from_pylist([{"ts": 1, "id": "r1"}, {"ts": None, "id": "r2"}]), 0, now=0)
    directory = partition_dir(tmp_path, "results", 0)
    assert [p.name for p in directory.iterdir()] == [segment_name(0)]
    restarted = SegmentLog(directory, "results", 0, SegmentPolicy(rows=2))
    restarted.add(0, pa.Table.from_pylist([{"ts": 1, "id": "r1"}]), 0, now=0)  # adopts it
    assert [p.name for p in directory.iterdir()] == [segment_name(0)]
