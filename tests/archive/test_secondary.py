"""Secondary indexes (thesis §3.4.1): (value, seq, t) triples sorted by value, with the
event's place in the archive and, under PARTITION BY, its dense position within its key."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from situflow.archive import ARCHIVE_SEQ, ArchiveError, Block, open_archive
from situflow.archive.ranges import Condition, Range
from situflow.archive.secondary import (
    SecondaryIndex,
    build_index,
    index_dir,
    key_text,
    list_indexes,
    read_manifest,
)
from tests.archive.archives import write_partition, write_stream
from tests.profiles import scaled

TOPIC = "cars.ordered"

event = st.fixed_dictionaries({
    "dt": st.integers(0, 2),
    "car": st.sampled_from(["c1", "c2", "c3"]),
    "speed": st.none() | st.integers(-5, 5) | st.floats(-5, 5, allow_nan=False),
    "road": st.none() | st.sampled_from(["a", "b", "c"]),
})
#: Per partition, its segments' events.
archives = st.lists(st.lists(st.lists(event, min_size=1, max_size=8), min_size=1, max_size=3),
                    min_size=1, max_size=2)
bound = st.none() | st.integers(-6, 6)
ranges = st.builds(lambda lo, hi, lc, hc: Range("speed", lo, hi, lc, hc), bound, bound,
                   st.booleans(), st.booleans())


def write(root: Path, partitions: list[list[list[dict[str, Any]]]],
          first: dict[int, tuple[int, int]] | None = None) -> dict[int, list[dict[str, Any]]]:
    """Archive ``partitions`` (after ``first``: per partition, the seq and time it ends at);
    the events of each partition by seq, with their times."""
    events = {}
    for partition, segments in enumerate(partitions):
        seq, ts = (first or {}).get(partition, (0, 0))
        timed = []
        for segment in segments:
            rows = []
            for e in segment:
                ts += e["dt"]
                rows.append({"ts": ts, "car": e["car"], "speed": e["speed"], "road": e["road"]})
            timed.append(rows)
        write_partition(root, TOPIC, partition, timed, block_rows=3, first_seq=seq)
        events[partition] = [e for segment in timed for e in segment]
    return events


def check_at17(root: Path, events: dict[int, list[dict[str, Any]]], keyed: bool) -> None:
    """AT-17: every index row agrees with the archive, key_seq is dense per key, and range
    lookups sorted by seq equal a filter over the archive."""
    archive = open_archive(root)
    index = SecondaryIndex.open(archive, TOPIC, "speed")
    assert index is not None and index.kind == "number"
    rows = index.lookup(Condition("speed", (Range("speed"),))).to_pylist()
    expected_keys: dict[tuple[int, str | None], int] = defaultdict(int)
    key_seq = {}
    for partition, stream in events.items():
        for seq, e in enumerate(stream):
            key = key_text([e["car"]]) if keyed else None
            key_seq[partition, seq] = expected_keys[partition, key] if keyed else seq
            expected_keys[partition, key] += 1
    blocks = {p: archive.blocks(TOPIC, p) for p in events}
    read: dict[Block, pa.Table] = {}
    assert sorted((r["partition"], r["seq"]) for r in rows) == \
        [(p, s) for p, stream in events.items() for s, e in enumerate(stream)
         if e["speed"] is not None]
    for r in rows:
        e = events[r["partition"]][r["seq"]]
        assert (r["ts"], r["value"]) == (e["ts"], float(e["speed"]))
        assert r["key"] == (key_text([e["car"]]) if keyed else None)
        assert r["key_seq"] == key_seq[r["partition"], r["seq"]]
        block = next(b for b in blocks[r["partition"]] if b.seq_min <= r["seq"] <= b.seq_max)
        assert (r["segment"], r["row_group"]) == (block.segment, block.row_group)
        if block not in read:
            read[block] = archive.read_blocks(TOPIC, r["partition"], [block], ["speed"])
        row = read[block].slice(r["seq"] - block.seq_min, 1).to_pylist()[0]
        assert (row[ARCHIVE_SEQ], row["ts"]) == (r["seq"], r["ts"])
    ordered = [(r["partition"], r["key"], r["key_seq"]) for r in rows]
    assert ordered == sorted(ordered, key=lambda o: (o[0], o[1] or "", o[2]))
    assert index.estimate(Condition("speed", (Range("speed"),))) == len(rows) == index.rows


def as_a_bare_build_writes_it(root: Path) -> None:
    """The manifest as a build that lists file names only writes it: no sizes, histograms
    or key counts."""
    archive = open_archive(root)
    manifest = read_manifest(archive, TOPIC, "speed")
    assert manifest is not None
    manifest["files"] = [f["name"] for f in manifest["files"]]
    del manifest["key_next"]
    archive.write_file(f"{index_dir(archive, TOPIC, 'speed')}/_manifest.json",
                       json.dumps(manifest).encode())


@settings(max_examples=scaled(0.5))
@given(archives, archives, st.booleans(), st.lists(ranges, min_size=1, max_size=2),
       st.booleans())
def test_at17_an_index_built_incrementally_agrees_with_the_archive(
    tmp_path_factory: Any, before: list[Any], after: list[Any], keyed: bool,
    wanted: list[Range], spark_manifest: bool
) -> None:
    root = tmp_path_factory.mktemp("archive")
    write_stream(root, TOPIC, key_fields=("car",) if keyed else ())
    events = write(root, before)
    keys = ("car",) if keyed else ()
    first = build_index(open_archive(root), TOPIC, "speed", key_fields=keys)
    check_at17(root, events, keyed)
    if spark_manifest:
        as_a_bare_build_writes_it(root)
        check_at17(root, events, keyed)
    more = write(root, after, {p: (len(s), s[-1]["ts"]) for p, s in events.items()})
    new_segments = sum(len(segments) for segments in after)
    assert list_indexes(open_archive(root))[0]["status"] == \
        f"{new_segments} segment{'' if new_segments == 1 else 's'} behind"
    second = build_index(open_archive(root), TOPIC, "speed", key_fields=keys)
    manifest = read_manifest(open_archive(root), TOPIC, "speed")
    assert manifest is not None and manifest["builds"] == 2
    for partition, stream in more.items():
        events[partition] = events.get(partition, []) + stream
    assert set(first.files).isdisjoint(second.files)
    check_at17(root, events, keyed)
    assert list_indexes(open_archive(root))[0]["status"] == "current"
    index = SecondaryIndex.open(open_archive(root), TOPIC, "speed")
    assert index is not None
    condition = Condition("speed", tuple(wanted))
    found = index.lookup(condition).sort_by([("partition", "ascending"), ("seq", "ascending")])
    assert [(r["partition"], r["seq"]) for r in found.to_pylist()] == \
        [(p, s) for p, stream in events.items() for s, e in enumerate(stream)
         if condition.contains(e["speed"])]


@pytest.mark.parametrize(("values", "reason"), [
    ([True, False], r"found bool in .*0+\.parquet"),
    (['{"lat": 1}', "a"], "holds nested values"),
])
def test_booleans_and_nested_values_are_not_indexed(
    tmp_path: Path, values: list[Any], reason: str
) -> None:
    write_partition(tmp_path, TOPIC, 0, [[{"ts": i, "speed": v} for i, v in enumerate(values)]])
    with pytest.raises(ArchiveError, match=f"'speed'.*{reason}|{reason}.*'speed'"):
        build_index(open_archive(tmp_path), TOPIC, "speed")


def test_an_attribute_the_archive_lacks_is_named(tmp_path: Path) -> None:
    write_partition(tmp_path, TOPIC, 0, [[{"ts": 1, "speed": 1}]])
    with pytest.raises(ArchiveError, match="no segment has attribute 'colour'"):
        build_index(open_archive(tmp_path), TOPIC, "colour")


def test_integers_beyond_2_53_round_but_lookups_still_find_them(tmp_path: Path) -> None:
    big = 2**53 + 1  # float64 holds 2**53 and 2**53 + 2, not this
    write_partition(tmp_path, TOPIC, 0, [[{"ts": 1, "speed": big}, {"ts": 2, "speed": 1}]])
    build_index(open_archive(tmp_path), TOPIC, "speed")
    index = SecondaryIndex.open(open_archive(tmp_path), TOPIC, "speed")
    assert index is not None
    for wanted in (Range("speed", low=big), Range("speed", high=big, high_closed=False),
                   Range("speed", big, big)):
        seqs = index.lookup(Condition("speed", (wanted,))).column("seq").to_pylist()
        assert 0 in seqs or not wanted.contains(big)


def test_a_range_lookup_reads_only_the_index_row_groups_that_overlap_it(tmp_path: Path) -> None:
    write_partition(tmp_path, TOPIC, 0, [[{"ts": i, "speed": i % 1000, "road": f"r{i % 3}"}
                                          for i in range(30_000)]], block_rows=10_000)
    archive = open_archive(tmp_path)
    build_index(archive, TOPIC, "speed")
    build_index(archive, TOPIC, "road")
    index = SecondaryIndex.open(archive, TOPIC, "speed")
    assert index is not None and index.rows == 30_000
    narrow = Condition("speed", (Range("speed", 10, 12),))
    assert index.lookup(narrow).num_rows == 90
    assert 0 < index.bytes_read < index.bytes / 2
    assert 45 <= index.estimate(narrow) <= 180
    wide = Condition("speed", (Range("speed", high=499), Range("speed", low=900)))
    assert abs(index.estimate(wide) - 18_000) <= 18_000 * 0.05
    strings = SecondaryIndex.open(archive, TOPIC, "road")
    assert strings is not None and strings.kind == "string"
    assert strings.lookup(Condition("road", (Range("road", "r1", "r1"),))).num_rows == 10_000
    assert strings.lookup(Condition("road", (Range("road", low=5),))).num_rows == 0
    assert [(r["attribute"], r["kind"], r["rows"], r["status"]) for r in list_indexes(archive)] \
        == [("road", "string", 30_000, "current"), ("speed", "number", 30_000, "current")]


@pytest.mark.parametrize("spikes", [1, 3, 20])
def test_a_rare_tail_is_estimated_within_a_factor_of_two(tmp_path: Path, spikes: int) -> None:
    """Selective predicates ask for a tail: an equi-depth bucket (1/64 of the rows, from the
    98th percentile to the maximum) would put thousands of rows above 200 here."""
    n = 200_000
    speeds = [60 + (i * 7919) % 40 for i in range(n)]
    for k in range(spikes):
        speeds[k * (n // spikes)] = 250
    write_partition(tmp_path, TOPIC, 0, [[{"ts": i, "speed": s} for i, s in enumerate(speeds)]],
                    block_rows=50_000)
    archive = open_archive(tmp_path)
    build_index(archive, TOPIC, "speed")
    index = SecondaryIndex.open(archive, TOPIC, "speed")
    assert index is not None
    for wanted in (Range("speed", low=200), Range("speed", high=60, high_closed=False)):
        found = index.lookup(Condition("speed", (wanted,))).num_rows
        assert found / 2 <= index.estimate(Condition("speed", (wanted,))) <= max(2 * found, 2)
    assert index.estimate(Condition("speed", (Range("speed"),))) == n
