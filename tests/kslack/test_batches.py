"""K-slack's partition buffer and the batcher of an unpartitioned stream (thesis §5.6.3):
numbering in the global order, cuts, registry counts, idle flushes and snapshots."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from situflow.kslack import (
    SEQ_FIELD,
    ColumnarKSlack,
    arrow_table,
    input_seq,
    json_table,
)
from situflow.kslack.batches import Batcher
from situflow.kslack.buffer import PartitionBuffer
from situflow.tpstream.split.batches import EventSlicer


def events(times: list[int], offset: int = 0) -> pa.Table:
    """Events of one Arrow message at ``offset``, with their input seq."""
    return arrow_table(pa.RecordBatch.from_pylist([{"ts": t, "k": "a"} for t in times]), offset)


def unpartitioned(slack: int = 0, size: int = 3, span: int = 100) -> PartitionBuffer:
    return PartitionBuffer(ColumnarKSlack(slack), batcher=Batcher(EventSlicer(size, span)))


def batches(buffer: PartitionBuffer) -> list[tuple[int, int, int, list[int], list[int]]]:
    """(number, registry before, registry, times, seqs) of each ready batch."""
    assert buffer.batcher is not None
    return [(b.seq, b.registry_before, b.registry, b.events.column("ts").to_pylist(),
             b.events.column(SEQ_FIELD).to_pylist()) for b in buffer.batcher.ready]


def test_input_positions_are_offset_and_row() -> None:
    assert events([5, 6], offset=3).column(SEQ_FIELD).to_pylist() == [input_seq(3),
                                                                       input_seq(3) + 1]
    table = json_table([{"ts": 1}, {"ts": 2}], [7, 9])
    assert table.column(SEQ_FIELD).to_pylist() == [input_seq(7), input_seq(9)]


def test_a_partitioned_stream_releases_to_the_outbox() -> None:
    buffer = PartitionBuffer(ColumnarKSlack(1))
    late = buffer.push(events([3, 1, 5, 0]))
    assert late.column("ts").to_pylist() == [0]
    assert [t.column("ts").to_pylist() for t in buffer.outbox] == [[1, 3]]
    assert (buffer.outgoing, buffer.waiting) == (2, True)


def test_released_events_are_numbered_in_the_global_order_and_cut_by_size() -> None:
    buffer = unpartitioned(size=3)
    buffer.push(events([1, 2, 3, 4]), registry_read=2)
    buffer.push(events([5, 6, 7], offset=1), registry_read=5)
    buffer.push(events([8], offset=2), registry_read=6)
    # K=0 releases all but the latest time. A full batch is cut when the next event comes:
    # [1 2 3] when 4 is released (registry 5), [4 5 6] when 7 is (6); 7 is open, 8 waits.
    assert batches(buffer) == [(0, -1, 5, [1, 2, 3], [0, 1, 2]),
                               (1, 5, 6, [4, 5, 6], [3, 4, 5])]
    assert buffer.waiting


def test_a_batch_ends_before_an_event_past_its_span() -> None:
    buffer = unpartitioned(size=10, span=5)
    buffer.push(events([1, 3, 7, 8, 20]))
    assert batches(buffer) == [(0, -1, 0, [1, 3], [0, 1])]
    assert [t.column("ts").to_pylist() for t in buffer.outbox] == [[7, 8]]  # the open batch


def test_an_idle_flush_releases_everything_and_ends_the_open_batch() -> None:
    buffer = unpartitioned(size=10)
    buffer.push(events([1, 2]))
    buffer.flush(registry_read=4)
    assert batches(buffer) == [(0, -1, 4, [1, 2], [0, 1])]
    assert not buffer.waiting
    buffer.push(events([3, 4], offset=1))
    buffer.flush(registry_read=4)
    assert batches(buffer)[1] == (1, 4, 4, [3, 4], [2, 3])


@pytest.mark.parametrize("cut", [1, 2, 3, 4])
def test_a_snapshot_anywhere_continues_with_the_same_batches(cut: int) -> None:
    pushes = [[4, 1, 2], [6, 5], [9, 7, 8], [12, 10]]
    whole = unpartitioned(slack=1, size=2)
    for offset, times in enumerate(pushes):
        whole.push(events(times, offset))
    whole.flush()
    first = unpartitioned(slack=1, size=2)
    for offset, times in enumerate(pushes[:cut]):
        first.push(events(times, offset))
    snapshot = json.loads(json.dumps(first.snapshot()))
    restored = PartitionBuffer.restore(snapshot)
    for offset, times in enumerate(pushes[cut:], start=cut):
        restored.push(events(times, offset))
    restored.flush()
    assert batches(first) + batches(restored)[len(batches(first)):] == batches(whole)


# (case, partitioned, pushed times, inbox entries, sent at, last input, needs a tick at 10)
TICKS = [
    ("nothing waits", True, [], 0, 0.0, 0.0, False),
    ("released events lingered", True, [1, 2], 0, 9.0, 10.0, True),
    ("released events not yet lingering", True, [1, 2], 0, 9.999, 10.0, False),
    ("JSON events not yet pushed lingered", True, [], 1, 9.0, 10.0, True),
    ("events wait in an idle partition", True, [1], 0, 10.0, 4.0, True),
    ("events wait, input came lately", True, [1], 0, 10.0, 6.0, False),
    ("an open batch waits in an idle partition", False, [1, 2], 0, 10.0, 4.0, True),
    ("an open batch is not sent when it lingers", False, [1, 2], 0, 9.0, 10.0, False),
]


@pytest.mark.parametrize(("partitioned", "times", "inbox", "sent_at", "last_input", "tick"),
                         [c[1:] for c in TICKS], ids=[c[0] for c in TICKS])
def test_needs_tick(partitioned: bool, times: list[int], inbox: int, sent_at: float,
                    last_input: float, tick: bool) -> None:
    buffer = PartitionBuffer(ColumnarKSlack(0)) if partitioned else unpartitioned(size=10)
    if times:
        buffer.push(events(times))
    buffer.inbox = [(None, {"ts": 0})] * inbox
    buffer.sent_at, buffer.last_input = sent_at, last_input
    assert buffer.needs_tick(10.0, linger=0.005, idle_timeout=5.0) is tick
