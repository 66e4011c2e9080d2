"""The archiver's segment log: dense seq in topic order, segment rolls, and exactly one copy of
every row in the files across crashes and competing writers (situflow/archive/log.py module doc).

Crashes are data here, as in bytewax's recovery tests: a "crash" is a new :class:`SegmentLog`
restored from the last checkpoint's snapshot that is fed again from the committed offset, while
the files the old one wrote stay on disk. The real ``kill -9`` runs in
tests/integration/test_archiver.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from situflow.archive import (
    ARCHIVE_OFFSET,
    ARCHIVE_SEQ,
    SegmentLog,
    SegmentMeta,
    SegmentPolicy,
    decode_rows,
    partition_dir,
    read_archive,
    read_meta,
    segment_name,
    segment_paths,
    write_segment,
)
from situflow.archive.blocks import sidecar_name
from situflow.codecs.arrow_events import is_json_text
from situflow.errors import InputError, StateError

TOPIC, PARTITION = "cars.ordered", 1
#: Ten messages of two events each: message ``o`` holds events ``(o, 0)`` and ``(o, 1)``.
MESSAGES = [(offset, [{"ts": 10 * offset + row, "msg": offset, "row": row} for row in (0, 1)])
            for offset in range(10)]


def table(events: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(events)


def new_log(root: Path, policy: SegmentPolicy, snapshot: dict[str, int] | None = None
            ) -> SegmentLog:
    return SegmentLog(partition_dir(root, TOPIC, PARTITION), TOPIC, PARTITION, policy,
                      **(snapshot or {}))


def feed(log: SegmentLog, offsets: range) -> list[int]:
    """Add the messages at ``offsets``; the sizes of the segments written meanwhile."""
    return [s.meta.rows for o in offsets for s in log.add(o, table(MESSAGES[o][1]), o, now=0)]


def archived(root: Path) -> list[tuple[int, int, int, int]]:
    """(seq, offset, message, row) of every archived row, in file order."""
    rows = read_archive(root, TOPIC, PARTITION).to_pylist()
    return [(r[ARCHIVE_SEQ], r[ARCHIVE_OFFSET], r["msg"], r["row"]) for r in rows]


def every_event_once() -> list[tuple[int, int, int, int]]:
    return [(2 * o + row, o, o, row) for o, _ in MESSAGES for row in (0, 1)]


def test_segment_names_sort_in_seq_order() -> None:
    seqs = [0, 9, 10, 1_000_000_000_000, 42]
    assert sorted(map(segment_name, seqs)) == [segment_name(s) for s in sorted(seqs)]


def test_rows_are_numbered_densely_in_topic_order_across_segments(tmp_path: Path) -> None:
    log = new_log(tmp_path, SegmentPolicy(rows=5))
    assert feed(log, range(10)) == [6, 6, 6]  # a segment holds whole messages
    assert log.open_rows == 2
    assert log.flush()[0].meta == SegmentMeta(TOPIC, PARTITION, 18, 20, 9, 9, 90, 91)
    assert archived(tmp_path) == every_event_once()
    assert [p.name for p in segment_paths(partition_dir(tmp_path, TOPIC, PARTITION))] == \
        [segment_name(s) for s in (0, 6, 12, 18)]
    assert log.snapshot() == {"next_seq": 20, "offset": 9}


def test_a_message_whose_first_event_is_in_a_later_time_bucket_starts_a_segment(
    tmp_path: Path
) -> None:
    log = new_log(tmp_path, SegmentPolicy(span=10))
    times = [[1, 2], [5], [12], [8], [25]]  # 8 is earlier than 12: it stays with it
    written = [s.meta for o, ts in enumerate(times)
               for s in log.add(o, table([{"ts": t} for t in ts]), o, now=0)]
    written += [s.meta for s in log.flush()]
    assert [(m.first_seq, m.next_seq, m.min_ts, m.max_ts) for m in written] == \
        [(0, 3, 1, 5), (3, 5, 8, 12), (5, 6, 25, 25)]


def test_attributes_that_cannot_share_a_schema_start_a_segment(tmp_path: Path) -> None:
    log = new_log(tmp_path, SegmentPolicy())
    events = [{"ts": 1, "x": 1}, {"ts": 2, "x": 2, "y": "a"}, {"ts": 3, "y": None},
              {"ts": 4, "x": "text"}]
    written = [s for o, e in enumerate(events) for s in log.add(o, table([e]), o, now=0)]
    written += log.flush()
    assert [s.meta.rows for s in written] == [3, 1]
    first = pq.read_table(segment_paths(partition_dir(tmp_path, TOPIC, PARTITION))[0]).to_pylist()
    assert [(r["x"], r["y"]) for r in first] == [(1, None), (2, "a"), (None, None)]


def test_a_segment_open_too_long_is_written_by_expire(tmp_path: Path) -> None:
    log = new_log(tmp_path, SegmentPolicy(seconds=10))
    log.add(0, table(MESSAGES[0][1]), 0, now=100.0)
    assert not log.expired(now=109.0) and log.expire(now=109.0) == []
    assert [s.meta.rows for s in log.expire(now=110.0)] == [2]
    assert not log.expired(now=1000.0)


def test_messages_are_done_only_once_their_rows_are_in_a_written_segment(tmp_path: Path) -> None:
    log = new_log(tmp_path, SegmentPolicy(rows=4))
    feed(log, range(1))
    assert log.take_done() == []
    log.add(1, None, "dead letter")  # no rows: waits behind the open segment's messages
    feed(log, range(2, 3))
    assert log.take_done() == [0, "dead letter", 2]
    log.add(3, None, "alone")  # nothing open: archived as it is
    log.add(2, table(MESSAGES[2][1]), "redelivered")  # already archived: skipped
    assert log.take_done() == ["alone", "redelivered"]
    assert log.snapshot() == {"next_seq": 4, "offset": 3}


def test_a_crash_between_writing_a_segment_and_the_checkpoint_archives_nothing_twice(
    tmp_path: Path
) -> None:
    log = new_log(tmp_path, SegmentPolicy(rows=5))
    feed(log, range(3))  # segment 0 (offsets 0-2)
    checkpoint, committed = log.snapshot(), 3
    feed(log, range(3, 6))  # segment 6 (offsets 3-5), not checkpointed: then the crash

    restarted = new_log(tmp_path, SegmentPolicy(rows=5), checkpoint)
    assert feed(restarted, range(committed, 10)) == [6]  # adopts segment 6, writes segment 12
    restarted.flush()
    assert archived(tmp_path) == every_event_once()
    assert len(restarted.take_done()) == 10 - committed


def test_two_writers_of_one_partition_leave_one_chain_of_segments(tmp_path: Path) -> None:
    """A worker that lost the partition (A) keeps writing while its new owner (B) replays: each
    adopts the segment the other linked first, whatever their segment boundaries."""
    a = new_log(tmp_path, SegmentPolicy(rows=5))
    feed(a, range(3))
    checkpoint = a.snapshot()
    b = new_log(tmp_path, SegmentPolicy(rows=7), checkpoint)
    feed(b, range(3, 6))  # open, 6 rows
    assert feed(a, range(3, 6)) == [6]  # A links seq 6 first
    assert feed(b, range(6, 7)) == [2]  # B's seq 6 is taken: adopts it, writes only message 6
    assert feed(a, range(6, 10)) == [6]  # A adopts B's seq 12, skips message 6
    feed(b, range(7, 10))
    b.flush()
    assert archived(tmp_path) == every_event_once()
    assert b.snapshot() == a.snapshot() == {"next_seq": 20, "offset": 9}


def test_an_archive_of_another_topic_is_refused_with_what_to_do(tmp_path: Path) -> None:
    directory = partition_dir(tmp_path, TOPIC, PARTITION)
    write_segment(directory, table([{"ts": 1}]), SegmentMeta("other", PARTITION, 0, 1, 0, 0))
    with pytest.raises(StateError, match="point SITUFLOW_ARCHIVE_DIR elsewhere"):
        feed(new_log(tmp_path, SegmentPolicy()), range(1))


def test_a_segment_file_is_never_replaced(tmp_path: Path) -> None:
    meta = SegmentMeta(TOPIC, PARTITION, 0, 1, 0, 0)
    written = write_segment(tmp_path, table([{"ts": 1}]), meta)
    with pytest.raises(FileExistsError):
        write_segment(tmp_path, table([{"ts": 2}]), meta)
    assert read_meta(written.path) == meta
    # No temporary file left: the segment and its block index only.
    assert sorted(p.name for p in tmp_path.iterdir()) == [sidecar_name(segment_name(0)),
                                                          segment_name(0)]


@pytest.mark.parametrize(("value", "headers", "expected"), [
    (b'{"ts": 1, "bindings": {"a": [3]}, "x": null}', None,
     [{"ts": 1, "bindings": '{"a": [3]}', "x": None}]),
    (b'{"id": "r1"}', None, [{"id": "r1"}]),  # results may lack an event time
])
def test_json_messages_decode_to_one_row_with_nested_values_as_text(
    value: bytes, headers: Any, expected: list[dict[str, Any]]
) -> None:
    rows = decode_rows(value, headers, "ts")
    assert rows is not None and rows.to_pylist() == expected
    assert [is_json_text(f) for f in rows.schema] == [f in ("bindings",) for f in rows.schema.names]


@pytest.mark.parametrize(("value", "reason"), [
    (None, "empty message"), (b"{nope", "invalid JSON"), (b"[1]", "expected a JSON object"),
    (b"\xff", "invalid JSON"),
])
def test_undecodable_messages_are_input_errors(value: bytes | None, reason: str) -> None:
    with pytest.raises(InputError, match=reason):
        decode_rows(value, None, "ts")
