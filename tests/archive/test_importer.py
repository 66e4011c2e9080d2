"""``situflow archive import``: events read as ``situflow run`` reads them, archived in the order
K-slack releases them, each with the seq ``situflow run`` gives it."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from situflow.archive import (
    ARCHIVE_OFFSET,
    ARCHIVE_SEQ,
    Archive,
    ArchiveError,
    check_topic,
    open_archive,
)
from situflow.archive.importer import import_events
from situflow.archive.secondary import build_index, key_text
from situflow.codecs.arrow_events import values_of
from situflow.errors import InputError
from situflow.events import EventBatch
from situflow.io.jsonl import Fields, read_blocks
from situflow.kslack.positions import SEQ_FIELD
from tests.profiles import scaled

TOPIC = "cars.ordered"


def jsonl(path: Path, events: list[Any]) -> Path:
    path.write_text("".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in events))
    return path


def replayed(archive: Archive, partition: int = 0) -> list[tuple[Any, ...]]:
    """The events of a partition as the offline replay builds them (contract: from_arrow of
    the rows without the archive's columns, with the input seq), as (seq, id, record)."""
    table = archive.read(TOPIC, partition)
    batch = EventBatch.from_arrow(table.drop_columns([SEQ_FIELD, ARCHIVE_SEQ, ARCHIVE_OFFSET]),
                                  seq=table.column(SEQ_FIELD).to_numpy())
    return [(int(batch.seq[i]), batch.ids[i], batch.record(i)) for i in range(len(batch))]


def run_reads(path: Path) -> list[tuple[Any, ...]]:
    """The events ``situflow run`` reads from ``path``, by (time, seq)."""
    events = []
    for block in read_blocks(path, Fields(), read_ahead=0):
        batch = block.batch
        events += [(int(batch.seq[i]), batch.ids[i], batch.record(i)) for i in range(len(batch))]
    return sorted(events, key=lambda e: (e[2]["ts"], e[0]))


values = st.none() | st.integers(-3, 3) | st.floats(-2, 2, allow_nan=False) | \
    st.sampled_from(["x", "y"]) | st.just({"nested": [1]})
events = st.lists(st.fixed_dictionaries(
    {"ts": st.integers(0, 6), "type": st.sampled_from(["A", "B"]), "car": st.sampled_from(
        ["c1", "c2"])}, optional={"speed": values, "id": st.sampled_from(["e1", "e2"])}),
    min_size=1, max_size=25)


@settings(max_examples=scaled(1))
@given(events)
def test_an_import_holds_the_events_situflow_run_reads_in_k_slack_order(
    tmp_path_factory: Any, rows: list[dict[str, Any]]
) -> None:
    root = tmp_path_factory.mktemp("archive")
    path = jsonl(root / "events.jsonl", rows)
    report = import_events(path, str(root / "archive"), "cars", block_rows=4, segment_rows=7)
    archive = open_archive(root / "archive")
    assert report.rows == len(rows) and report.partitions == {0: (0, len(rows))}
    assert replayed(archive) == run_reads(path)
    table = archive.read(TOPIC, 0)
    assert table.column(ARCHIVE_SEQ).to_pylist() == list(range(len(rows)))
    assert table.column(ARCHIVE_OFFSET).to_pylist() == table.column(SEQ_FIELD).to_pylist()
    assert check_topic(archive, TOPIC) == []


def test_a_json_lines_file_and_the_same_events_in_parquet_give_the_same_archive(
    tmp_path: Path
) -> None:
    rows = [{"ts": t, "type": "AB"[t % 2], "speed": t * 1.5, "car": f"c{t % 3}"}
            for t in (5, 3, 3, 9, 1, 7, 7, 2)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "events.parquet")
    for name in ("events.jsonl", "events.parquet"):
        source = jsonl(tmp_path / name, rows) if name.endswith(".jsonl") else tmp_path / name
        import_events(source, str(tmp_path / name.replace(".", "-")), "cars", partitions=2,
                      key_fields=("car",), block_rows=3)
    from_json, from_parquet = (open_archive(tmp_path / n) for n in ("events-jsonl",
                                                                    "events-parquet"))
    for partition in (0, 1):
        assert from_json.read(TOPIC, partition).equals(from_parquet.read(TOPIC, partition))
        assert from_json.blocks(TOPIC, partition) == from_parquet.blocks(TOPIC, partition)


def test_keys_go_to_one_partition_each_by_a_stable_hash(tmp_path: Path) -> None:
    rows = [{"ts": t, "car": f"c{t % 5}", "lane": t % 2} for t in range(40)]
    report = import_events(jsonl(tmp_path / "e.jsonl", rows), str(tmp_path / "a"), "cars",
                           key_fields=("car", "lane"), partitions=3)
    archive = open_archive(tmp_path / "a")
    seen = {}
    for partition in archive.partitions(TOPIC):
        for row in archive.read(TOPIC, partition).to_pylist():
            key = key_text([row["car"], row["lane"]])
            assert seen.setdefault(key, partition) == partition
    assert sum(last - first for first, last in report.partitions.values()) == 40
    # The same partition on every machine and run: not Python's salted hash.
    assert all(partition == zlib.crc32(key.encode()) % 3 for key, partition in seen.items())


def test_events_without_a_time_are_reported_by_line_and_strict_stops(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "e.jsonl", [{"ts": 1}, {"x": 1}, "{oops", {"ts": "soon"}, {"ts": 2}])
    report = import_events(path, str(tmp_path / "a"), "cars")
    assert [e.position for e in report.rejected] == [2, 3, 4]
    assert report.rows == 2
    with pytest.raises(InputError) as error:
        import_events(path, str(tmp_path / "b"), "cars", strict=True)
    assert error.value.position == 2
    assert open_archive(tmp_path / "b").topics() == []


def test_an_import_into_an_existing_stream_appends_later_events_only(tmp_path: Path) -> None:
    uri = str(tmp_path / "a")
    import_events(jsonl(tmp_path / "1.jsonl", [{"ts": t} for t in (1, 2, 3)]), uri, "cars")
    report = import_events(jsonl(tmp_path / "2.jsonl", [{"ts": t} for t in (3, 5)]), uri, "cars")
    assert report.partitions == {0: (3, 5)}
    table = open_archive(uri).read(TOPIC, 0)
    assert table.column(SEQ_FIELD).to_pylist() == [0, 1, 2, 3, 4]  # seqs never repeat
    assert table.column("ts").to_pylist() == [1, 2, 3, 3, 5]
    with pytest.raises(ArchiveError, match=r"ends at time 5 \(seq 4\) .* from time 4"):
        import_events(jsonl(tmp_path / "3.jsonl", [{"ts": 4}]), uri, "cars")
    with pytest.raises(ArchiveError, match=r"exists with time_unit 1\.0 \(not 0\.001\)"):
        import_events(tmp_path / "2.jsonl", uri, "cars", time_unit=0.001)
    assert open_archive(uri).read(TOPIC, 0).num_rows == 5


def test_an_import_writes_whole_files_on_a_file_system_without_links() -> None:
    archive = Archive(pafs._MockFileSystem(), "archive", "mock:///archive")
    source = Path(__file__).parent / "import-events.jsonl"
    rows = [{"ts": t, "v": t} for t in (3, 1, 2)]
    try:
        jsonl(source, rows)
        import_events(source, archive, "cars", block_rows=2)
    finally:
        source.unlink()
    table = archive.read(TOPIC, 0, columns=["v"])
    assert table.column("v").to_pylist() == [1, 2, 3]
    assert [(b.count, b.ts_min, b.ts_max) for b in archive.blocks(TOPIC, 0)] == \
        [(2, 1, 2), (1, 3, 3)]
    assert all(s.indexed for s in archive.segments(TOPIC, 0))
    assert not [i.path for i in archive.fs.get_file_info(pafs.FileSelector("archive", recursive=True))
                if i.base_name.startswith(".")]
    assert np.array_equal(table.column(SEQ_FIELD).to_numpy(), [1, 2, 0])


def test_json_text_beside_numbers_in_another_segment_reads_as_json_values(tmp_path: Path) -> None:
    uri = str(tmp_path / "a")
    import_events(jsonl(tmp_path / "1.jsonl", [{"ts": 1, "x": 1}]), uri, "cars")
    import_events(jsonl(tmp_path / "2.jsonl", [{"ts": 2, "x": {"a": [1]}}, {"ts": 3, "x": "s"}]),
                  uri, "cars")
    archive = open_archive(uri)
    assert check_topic(archive, TOPIC) == []
    assert values_of(archive.read(TOPIC, 0, columns=["x"]), "x") == [1, {"a": [1]}, "s"]
    with pytest.raises(ArchiveError, match=r"'x' .* found .*json in"):
        build_index(archive, TOPIC, "x")


def test_a_file_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    with pytest.raises(ArchiveError, match=r"missing\.jsonl: cannot read"):
        import_events(tmp_path / "missing.jsonl", str(tmp_path / "a"), "cars")
    (tmp_path / "bad.parquet").write_bytes(b"no parquet")
    with pytest.raises(ArchiveError, match=r"bad\.parquet: not a readable Parquet file"):
        import_events(tmp_path / "bad.parquet", str(tmp_path / "a"), "cars")
