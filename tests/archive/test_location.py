"""Reading an archive wherever it lives (``open_archive``): by blocks and columns only, with the
bytes read counted, and by time range reading only the overlapping row groups."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from situflow.archive import (
    ARCHIVE_SEQ,
    ArchiveError,
    StreamSettings,
    open_archive,
    stream_settings,
)
from situflow.kslack.positions import SEQ_FIELD
from tests.archive.archives import write_partition, write_stream
from tests.profiles import scaled

TOPIC = "cars.ordered"


def stream_of(gaps: list[int]) -> list[dict[str, Any]]:
    """Events with times 0 + the running sum of ``gaps`` (a 0 gap: a duplicate timestamp)."""
    ts, events = 0, []
    for i, gap in enumerate(gaps):
        ts += gap
        events.append({"ts": ts, "speed": i % 7, "road": f"r{i % 3}"})
    return events


def archived(root: Path, gaps: list[int], per_segment: int, block_rows: int
             ) -> list[dict[str, Any]]:
    events = stream_of(gaps)
    write_partition(root, TOPIC, 0, [events[i:i + per_segment]
                                     for i in range(0, len(events), per_segment)], block_rows)
    return events


@settings(max_examples=scaled(1))
@given(st.lists(st.integers(0, 3), min_size=1, max_size=60), st.integers(1, 20),
       st.integers(1, 6), st.integers(-2, 100), st.integers(0, 100))
def test_a_time_range_reads_the_overlapping_blocks_and_gives_the_rows_in_it(
    tmp_path_factory: Any, gaps: list[int], per_segment: int, block_rows: int, lo: int,
    length: int
) -> None:
    root = tmp_path_factory.mktemp("archive")
    events = archived(root, gaps, per_segment, block_rows)
    archive = open_archive(root)
    hi = lo + length
    rows = archive.read(TOPIC, 0, lo, hi, columns=["speed"]).to_pylist()
    expected = [(seq, e["ts"], e["speed"]) for seq, e in enumerate(events) if lo <= e["ts"] <= hi]
    assert [(r[ARCHIVE_SEQ], r["ts"], r["speed"]) for r in rows] == expected
    assert all(set(r) == {ARCHIVE_SEQ, "ts", SEQ_FIELD, "speed"} for r in rows)
    overlapping = [b for b in archive.blocks(TOPIC, 0) if b.ts_max >= lo and b.ts_min <= hi]
    assert sum(b.count for b in overlapping) >= len(expected)
    assert archive.read(TOPIC, 0).num_rows == len(events)
    segments = list(archive.read_segments(TOPIC, 0, lo, hi, columns=["speed"]))
    assert len(segments) <= len(archive.segments(TOPIC, 0))
    assert [r for part in segments for r in part.to_pylist()] == rows


def test_read_blocks_reads_those_row_groups_and_columns_and_counts_their_bytes(
    tmp_path: Path
) -> None:
    paths = write_partition(tmp_path, TOPIC, 0, [stream_of([1] * 10), stream_of([1] * 10)],
                            block_rows=4)
    archive = open_archive(tmp_path)
    blocks = archive.blocks(TOPIC, 0)
    # Blocks of 4, 4 and 2 rows per segment: segment 2's first block, segment 1's second.
    chosen = [blocks[3], blocks[1]]
    table = archive.read_blocks(TOPIC, 0, chosen, ["road"])
    assert table.column(ARCHIVE_SEQ).to_pylist() == [4, 5, 6, 7, 10, 11, 12, 13]
    assert sorted(table.column_names) == sorted([ARCHIVE_SEQ, "ts", SEQ_FIELD, "road"])
    footers = [pq.ParquetFile(p).metadata for p in paths]
    expected = sum(footers[s].row_group(g).column(i).total_compressed_size
                   for s, g in ((1, 0), (0, 1))
                   for i in range(footers[s].num_columns)
                   if footers[s].row_group(g).column(i).path_in_schema in table.column_names)
    assert archive.bytes_read == expected
    before = archive.bytes_read
    archive.read_blocks(TOPIC, 0, chosen, None)
    assert archive.bytes_read - before > expected  # every column costs more


def test_a_footer_is_parsed_once_and_again_when_its_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (path,) = write_partition(tmp_path, TOPIC, 0, [stream_of([1] * 10)], block_rows=4)
    archive = open_archive(tmp_path)
    given: list[bool] = []  # per opening: whether the footer was handed over, not parsed
    parquet_file = pq.ParquetFile

    def spy(source: Any, metadata: Any = None) -> pq.ParquetFile:
        given.append(metadata is not None)
        return parquet_file(source, metadata=metadata)

    monkeypatch.setattr(pq, "ParquetFile", spy)
    for _ in range(3):
        assert archive.parquet_file(str(path)).metadata.num_rows == 10
    assert given == [False, True, True]
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: len(data) // 2])  # truncated in place, as a bad restore would
    with pytest.raises(ArchiveError, match="truncated or corrupt segment"):
        archive.parquet_file(str(path))


def test_an_attribute_no_block_has_is_null_and_no_blocks_read_nothing(tmp_path: Path) -> None:
    write_partition(tmp_path, TOPIC, 0, [stream_of([1] * 5)])
    archive = open_archive(tmp_path)
    table = archive.read_blocks(TOPIC, 0, archive.blocks(TOPIC, 0)[:1], ["speed", "colour"])
    assert table.column("colour").to_pylist() == [None] * 4
    empty = archive.read_blocks(TOPIC, 0, [], ["speed"])
    assert empty.num_rows == 0 and {"speed", "ts", ARCHIVE_SEQ} <= set(empty.column_names)
    assert archive.bytes_read > 0


def test_an_archive_opens_from_a_path_or_a_file_uri_alike(tmp_path: Path) -> None:
    write_partition(tmp_path, TOPIC, 3, [stream_of([1] * 5)])
    by_path, by_uri = open_archive(tmp_path), open_archive(tmp_path.as_uri())
    assert by_path.topics() == by_uri.topics() == [TOPIC]
    assert by_path.partitions(TOPIC) == by_uri.partitions(TOPIC) == [3]
    assert by_path.read(TOPIC, 3) == by_uri.read(TOPIC, 3)
    assert by_uri.uri == tmp_path.as_uri()


def test_stream_settings_are_kept_with_the_topic(tmp_path: Path) -> None:
    with pytest.raises(ArchiveError, match=r"no _stream\.json"):
        stream_settings(tmp_path, TOPIC)
    written = write_stream(tmp_path, TOPIC, time_unit=0.001, key_fields=("car",))
    assert stream_settings(tmp_path, TOPIC) == stream_settings(open_archive(tmp_path), TOPIC) \
        == written == StreamSettings("cars", "ts", 0.001, "type", ("car",), "id")
    assert open_archive(tmp_path).topics() == [TOPIC]


def test_segments_giving_an_attribute_two_types_are_named_when_read_together(
    tmp_path: Path
) -> None:
    write_partition(tmp_path, TOPIC, 0, [[{"ts": 1, "speed": 3}], [{"ts": 2, "speed": 2.5}],
                                         [{"ts": 3, "speed": "fast"}]])
    archive = open_archive(tmp_path)
    blocks = archive.blocks(TOPIC, 0)
    assert archive.read_blocks(TOPIC, 0, blocks[:2], ["speed"]).column("speed").to_pylist() == \
        [3.0, 2.5]  # numbers mix
    with pytest.raises(ArchiveError, match=r"'speed' is int64 in segment 0+\.parquet .* but "
                                           r"string in segment 0+2\.parquet \(seq from 2\)"):
        archive.read_blocks(TOPIC, 0, blocks, ["speed"])


def test_a_uri_no_file_system_serves_is_named() -> None:
    with pytest.raises(ArchiveError, match=r"archive nope://bucket/x: cannot open"):
        open_archive("nope://bucket/x")
