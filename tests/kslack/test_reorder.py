"""K-slack reordering (SEMANTICS.md; thesis §5.6.1, AT-16 with a time slack)."""

from __future__ import annotations

import json

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from situflow.kslack import ColumnarKSlack
from tests.kslack.reference import KSlack
from tests.profiles import scaled


def feed(ks: KSlack, times: list[int]) -> tuple[list[int], list[int]]:
    """Push every time (as its own item) into partition "p", then finish."""
    released, late = feed_until(ks, times)
    return released + ks.finish(), late


def test_at16a_disorder_within_the_slack_is_repaired():
    assert feed(KSlack(2), [2, 1, 4, 3, 6, 5]) == ([1, 2, 3, 4, 5, 6], [])


def test_at16b_an_event_older_than_what_was_released_is_late():
    # K=1: 3 is released when 5 arrives; 1 then arrives behind it
    assert feed(KSlack(1), [3, 4, 5, 1, 6]) == ([3, 4, 5, 6], [1])


def test_release_needs_the_slack_to_be_exceeded_and_ties_keep_arrival_order():
    ks: KSlack[str] = KSlack(2)
    assert ks.push("p", 5, "a") == ([], [])
    assert ks.push("p", 5, "b") == ([], [])
    assert ks.push("p", 7, "c") == ([], [])  # 7 - 5 = 2 is not more than K
    assert ks.push("p", 8, "d") == (["a", "b"], [])
    assert ks.advance_to(20) == ["c", "d"]


def test_partitions_are_independent():
    ks: KSlack[int] = KSlack(1)
    assert ks.push("x", 10, 10) == ([], [])
    assert ks.push("y", 1, 1) == ([], [])  # not late: y has released nothing
    assert ks.push("x", 12, 12) == ([10], [])
    assert ks.buffered == 2


def test_snapshot_and_restore_continue_exactly():
    ks: KSlack[int] = KSlack(3)
    first, first_late = feed_until(ks, [5, 3, 9, 4])
    restored = KSlack.restore(json.loads(json.dumps(ks.snapshot())))
    rest, late = feed(restored, [8, 12, 7, 20])
    whole, whole_late = feed(KSlack(3), [5, 3, 9, 4, 8, 12, 7, 20])
    assert (first + rest, first_late + late) == (whole, whole_late)


def feed_until(ks: KSlack, times: list[int]) -> tuple[list[int], list[int]]:
    released, late = [], []
    for t in times:
        out, dropped = ks.push("p", t, t)
        released += out
        late += dropped
    return released, late


@settings(max_examples=scaled(2))
@given(st.lists(st.integers(0, 50), max_size=40), st.integers(0, 6), st.randoms())
def test_bounded_disorder_gives_exactly_the_ordered_stream(times, slack, rnd):
    ordered = sorted(times)
    # Disorder each event by at most `slack`: swap only while the bound still holds.
    arrival = list(ordered)
    for i in range(len(arrival) - 1):
        if rnd.random() < 0.5:
            arrival[i], arrival[i + 1] = arrival[i + 1], arrival[i]
            running_max = max(arrival[: i + 1]) if i else arrival[0]
            if running_max - arrival[i + 1] > slack:
                arrival[i], arrival[i + 1] = arrival[i + 1], arrival[i]
    assert all(max(arrival[: k + 1]) - t <= slack for k, t in enumerate(arrival))
    assert feed(KSlack(slack), arrival) == (ordered, [])


@settings(max_examples=scaled(3))
@given(st.integers(0, 4), st.lists(st.integers(0, 30), max_size=40), st.data())
def test_columnar_kslack_releases_and_rejects_what_kslack_does_row_by_row(slack, times, data):
    """Any split of the stream into batches, and a snapshot between batches, give KSlack's
    releases in KSlack's order and the same late events."""
    reference: KSlack[int] = KSlack(slack)
    want_released, want_late = [], []
    for n, t in enumerate(times):
        out, dropped = reference.push("p", t, n)
        want_released += out
        want_late += dropped
    ks = ColumnarKSlack(slack)
    released: list[int] = []
    late: list[int] = []
    start = 0
    while start < len(times):
        stop = data.draw(st.integers(start + 1, len(times)))
        batch = pa.table({"ts": times[start:stop], "n": list(range(start, stop))})
        out, rejected = ks.push(batch)
        released += out.column("n").to_pylist()
        late += rejected.column("n").to_pylist()
        ks = ColumnarKSlack.restore(json.loads(json.dumps(ks.snapshot())))
        start = stop
    assert released == want_released
    assert late == want_late
    rest = ks.finish()
    assert ([] if rest is None else rest.column("n").to_pylist()) == reference.finish()
