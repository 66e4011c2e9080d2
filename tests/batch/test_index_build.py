"""The secondary indexes as the Spark job builds them (thesis §3.4.1; research AT-17): every
index row points at the archived event it was made from, the per-key seq is dense, a range
query equals a filter over the archive, and a build after new segments equals a fresh one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from batch.index_build import build_indexes, index_files, index_listing, read_index
from situflow.archive import ARCHIVE_SEQ, open_archive
from situflow.archive.format import ArchiveError
from situflow.archive.ranges import Condition, Range
from situflow.archive.secondary import SecondaryIndex, read_manifest
from tests.archive.archives import write_partition, write_stream

TOPIC = "sensors.ordered"


def events(start: int, n: int, partition: int) -> list[dict[str, Any]]:
    """Readings of three devices with repeated times; ``level`` is missing now and then."""
    rows = []
    for i in range(start, start + n):
        row: dict[str, Any] = {"ts": i // 3, "device": f"d{(i * 7 + partition) % 3}",
                               "temp": float((i * 37 + partition) % 50),
                               "zone": "abc"[(i * 5) % 3]}
        if i % 4:
            row["level"] = (i * 11) % 9
        rows.append(row)
    return rows


def write_archive(root: Path, segments: int = 3) -> None:
    write_stream(root, TOPIC, key_fields=("device",))
    for partition in (0, 1):
        chunks = [events(i * 10, 10, partition) for i in range(segments)]
        write_partition(root, TOPIC, partition, chunks, block_rows=4)


def index_rows(root: Path, attribute: str) -> pa.Table:
    return read_index(open_archive(root), TOPIC, attribute)


def archive_rows(root: Path, partition: int) -> list[dict[str, Any]]:
    archive = open_archive(root)
    return archive.read_blocks(TOPIC, partition, archive.blocks(TOPIC, partition)).to_pylist()


@pytest.mark.parametrize("attribute", ["temp", "zone", "level"])
def test_at17_every_index_row_points_at_its_event(spark, tmp_path, attribute):
    write_archive(tmp_path)
    build_indexes(spark, str(tmp_path), TOPIC, [attribute])
    index = index_rows(tmp_path, attribute)
    archived = {p: archive_rows(tmp_path, p) for p in (0, 1)}
    with_value = sum(r.get(attribute) is not None for rows in archived.values() for r in rows)
    assert index.num_rows == with_value  # every event with a value, once
    blocks = {p: open_archive(tmp_path).blocks(TOPIC, p) for p in (0, 1)}
    for row in index.to_pylist():
        event = archived[row["partition"]][row["seq"]]
        assert event[ARCHIVE_SEQ] == row["seq"]
        assert event["ts"] == row["ts"]
        assert event[attribute] == row["value"]
        assert json.loads(row["key"]) == [event["device"]]
        block = next(b for b in blocks[row["partition"]] if b.seq_min <= row["seq"] <= b.seq_max)
        assert (row["segment"], row["row_group"]) == (block.segment, block.row_group)


def test_at17_key_seq_is_dense_per_key_and_partition(spark, tmp_path):
    write_archive(tmp_path)
    build_indexes(spark, str(tmp_path), TOPIC, ["temp"])  # temp is never missing
    index = index_rows(tmp_path, "temp").to_pylist()
    for partition in (0, 1):
        expected: dict[str, int] = {}
        for event in archive_rows(tmp_path, partition):
            key = json.dumps([event["device"]])
            row = next(r for r in index if r["partition"] == partition and r["seq"] == event[ARCHIVE_SEQ])
            assert (row["key"], row["key_seq"]) == (key, expected.get(key, 0))
            expected[key] = expected.get(key, 0) + 1


def test_index_files_are_sorted_by_value(spark, tmp_path):
    write_archive(tmp_path)
    build_indexes(spark, str(tmp_path), TOPIC, ["temp", "zone"])
    for attribute in ("temp", "zone"):
        for path in index_files(open_archive(tmp_path), TOPIC, attribute):
            values = pq.read_table(path)
            assert values.column("value").to_pylist() == sorted(values.column("value").to_pylist())


def test_at17_range_query_equals_a_filter_over_the_archive(spark, tmp_path):
    write_archive(tmp_path)
    build_indexes(spark, str(tmp_path), TOPIC, ["temp"])
    index = SecondaryIndex.open(open_archive(tmp_path), TOPIC, "temp")
    assert index is not None
    condition = Condition("temp", (Range("temp", 10, 20), Range("temp", low=45, low_closed=False)))
    found = index.lookup(condition)
    expected = sorted((p, r[ARCHIVE_SEQ]) for p in (0, 1) for r in archive_rows(tmp_path, p)
                      if condition.contains(r["temp"]))
    assert sorted(zip(found.column("partition").to_pylist(), found.column("seq").to_pylist(),
                      strict=True)) == expected


def test_a_build_after_new_segments_equals_a_fresh_build(spark, tmp_path):
    incremental, fresh = tmp_path / "incremental", tmp_path / "fresh"
    write_archive(incremental, segments=2)
    assert build_indexes(spark, str(incremental), TOPIC, ["temp", "level"])["temp"] == 40
    for partition in (0, 1):
        write_partition(incremental, TOPIC, partition, [events(20, 10, partition)], block_rows=4,
                        first_seq=20)
    assert build_indexes(spark, str(incremental), TOPIC, ["temp", "level"])["temp"] == 20
    assert build_indexes(spark, str(incremental), TOPIC, ["temp"]) == {"temp": 0}
    write_archive(fresh)
    build_indexes(spark, str(fresh), TOPIC, ["temp", "level"])
    columns = ["value", "seq", "ts", "partition", "segment", "row_group", "key", "key_seq"]
    for attribute in ("temp", "level"):
        def rows(root: Path, name: str = attribute) -> list[tuple[Any, ...]]:
            table = index_rows(root, name).select(columns)
            return sorted(zip(*(table.column(c).to_pylist() for c in columns), strict=True))
        assert rows(incremental) == rows(fresh)
        manifest = read_manifest(open_archive(incremental), TOPIC, attribute)
        assert manifest is not None
        assert manifest["covered"] == {"0": 30, "1": 30}
        assert manifest["rows"] == index_rows(incremental, attribute).num_rows


def test_index_list_shows_what_is_covered(spark, tmp_path):
    write_archive(tmp_path, segments=2)
    build_indexes(spark, str(tmp_path), TOPIC, ["zone"])
    write_partition(tmp_path, TOPIC, 0, [events(20, 10, 0)], block_rows=4, first_seq=20)
    line = next(line for line in index_listing(str(tmp_path)).splitlines() if " zone " in line)
    assert "string" in line and line.endswith("1 segment behind")
    build_indexes(spark, str(tmp_path), TOPIC, ["zone"])
    line = next(line for line in index_listing(str(tmp_path)).splitlines() if " zone " in line)
    assert line.endswith("current")


def test_an_attribute_the_archive_lacks_is_an_error(spark, tmp_path):
    write_archive(tmp_path)
    with pytest.raises(ArchiveError, match="'pressure'"):
        build_indexes(spark, str(tmp_path), TOPIC, ["temp", "pressure"])


def test_values_of_mixed_segments_read_as_numbers(spark, tmp_path):
    """An attribute written as integers in one segment and floats in another indexes as
    float64 (JSON numbers have one type)."""
    write_stream(tmp_path, TOPIC)
    write_partition(tmp_path, TOPIC, 0, [[{"ts": 1, "v": 1}, {"ts": 2, "v": 2}],
                                         [{"ts": 3, "v": 2.5}]], block_rows=4)
    build_indexes(spark, str(tmp_path), TOPIC, ["v"])
    index = index_rows(tmp_path, "v")
    assert index.schema.field("value").type == pa.float64()
    assert pc.sum(index.column("value")).as_py() == 5.5
    assert index.column("key").null_count == 3
    assert index.column("key_seq").to_pylist() == index.column("seq").to_pylist()


def test_the_index_commands(spark, tmp_path, capsys):
    from situflow.cli import main

    write_archive(tmp_path)
    assert main(["index", "build", "--archive", tmp_path.as_uri(), "--topic", TOPIC,
                 "--attributes", "temp,zone"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{TOPIC}/temp: 60 new index rows",
                                                    f"{TOPIC}/zone: 60 new index rows"]
    assert main(["index", "list", "--archive", str(tmp_path)]) == 0
    listing = capsys.readouterr().out
    assert " temp " in listing and " zone " in listing
    assert main(["index", "build", "--archive", str(tmp_path), "--topic", TOPIC,
                 "--attributes", "nope"]) == 1
    assert "'nope'" in capsys.readouterr().err


def test_calibrate_and_blocks_commands(tmp_path, capsys):
    from situflow.cli import main
    from situflow.offline.cost import CostWeights

    write_archive(tmp_path)
    for sidecar in tmp_path.rglob("*.blocks.json"):
        sidecar.unlink()
    assert main(["index", "blocks", "--archive", str(tmp_path), "--topic", TOPIC]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 6  # 2 partitions x 3 segments
    assert main(["index", "calibrate", "--archive", str(tmp_path), "--topic", TOPIC,
                 "--budget", "0.2"]) == 0
    assert capsys.readouterr().out.startswith("cost weights: primary page ")
    archive = open_archive(tmp_path)
    assert CostWeights.load(archive.fs, archive.root) != CostWeights.load(archive.fs, "/nowhere")
