"""Situation batches and their merge on the worked example of thesis §5.6.3 (AT-14) and its
cases of Alg. 5.5: a batch is derived on its own, the merge gives sequential derivation.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from situflow.errors import InputError
from situflow.tpstream.split.batches import EventSlicer, SituationBatch, derive_batch
from situflow.tpstream.split.merger import BatchMerger
from situflow.tpstream.split.records import FINISHED, RUNNING, STARTED
from tests.profiles import scaled
from tests.tpstream.harness import query
from tests.tpstream.test_split import batches, derive

AT14 = "FROM S DEFINE A AS a = 1, B AS b = 1 PATTERN A before B WITHIN 1 hours RETURN count(A) AS n"


def events_of(a: set[int], b: set[int], until: int, **values: dict[int, float]):
    """Events at t = 1..until; ``a``/``b`` 1 at the given times; optional attributes."""
    return [{"ts": t, "a": int(t in a), "b": int(t in b),
             **{name: column.get(t, 0) for name, column in values.items()}}
            for t in range(1, until + 1)]


def situation_batches(q, events, size):
    """The situation batches of ``events`` in batches of ``size``, through JSON."""
    return [SituationBatch.from_dict(json.loads(json.dumps(derive_batch(q, s, b).to_dict())))
            for s, b in enumerate(batches(events, size))]


def merged(q, batches_, order):
    """The records of a merger given the batches in ``order``, as JSON objects."""
    merger = BatchMerger(q)
    out = []
    for s in order:
        out += merger.push(batches_[s])
    return [json.loads(json.dumps(r.to_dict(q.name))) for r in out]


def intervals(records):
    """Finished situations as (name, ts, te), in the order they end."""
    return [(r["situation"], r["ts"], r["te"]) for r in records if r["kind"] == FINISHED]


def test_at14_worked_example_batches_then_merge():
    """A true at t=2,3,7, B at t=4,5; batches of 4: sb1 = {A1=[2,4), B1 from 4 (cross-batch
    candidate)}, sb2 = {A2=[7,8), B2=[5,6)}; merged A=[2,4), B=[4,6), A=[7,8)."""
    q = query(AT14)
    events = events_of({2, 3, 7}, {4, 5}, 8)
    sb1, sb2 = situation_batches(q, events, 4)
    assert intervals(r.to_dict("q") for r in sb1.records) == [("A", 2, 4)]
    # B1 is still ongoing after e4, the last event of b1: the tail holds it, from t=4.
    assert sb1.tail["keys"] == [None]
    assert sb1.tail["open_"] == [[False, True]] and sb1.tail["start_ts"][0][1] == 4
    assert intervals(r.to_dict("q") for r in sb2.records) == [("B", 5, 6), ("A", 7, 8)]
    # B2 starts with e5, the first event of b2: the head holds its run, through e6 that ends it.
    assert sb2.head.ts.tolist() == [5, 6]
    assert sb2.conditions.tolist() == [[False, False], [True, False]]
    for order in ([0, 1], [1, 0]):
        records = merged(q, [sb1, sb2], order)
        assert intervals(records) == [("A", 2, 4), ("B", 4, 6), ("A", 7, 8)]
        assert records == derive(q, events, len(events))


def test_at14_case_ii_a_tail_without_head_ends_at_the_first_event_of_the_next_batch():
    q = query(AT14)
    events = events_of({2, 3, 7}, {4}, 8)
    sb1, sb2 = situation_batches(q, events, 4)
    assert len(sb2.head) == 1  # nothing ongoing after e5
    records = merged(q, [sb1, sb2], [1, 0])
    assert intervals(records) == [("A", 2, 4), ("B", 4, 5), ("A", 7, 8)]
    assert records == derive(q, events, len(events))


def test_at14_case_iii_whole_one_situation_spans_three_batches():
    """B true at t=4..9 in batches of 4: b2 = (e5..e8) lies wholly inside B, whose aggregates
    merge over all three batches."""
    q = query("FROM S DEFINE A AS a = 1, B AS b = 1 PATTERN A before B WITHIN 1 hours "
              "RETURN avg(B.v) AS v, count(B) AS n, first(B.v) AS f, last(B.v) AS l")
    v = {4: 0.1, 5: 0.2, 6: 0.3, 7: 0.4, 8: 0.5, 9: 0.7}
    events = events_of({2}, set(v), 12, v=v)
    sbs = situation_batches(q, events, 4)
    assert sbs[1].head.ts.tolist() == [5, 6, 7, 8]  # the head is the whole batch
    records = merged(q, sbs, [2, 0, 1])
    [b] = [r for r in records if r["situation"] == "B" and r["kind"] == FINISHED]
    assert (b["ts"], b["te"]) == (4, 10)
    assert b["values"] == {"avg(B.v)": (((((0.1 + 0.2) + 0.3) + 0.4) + 0.5) + 0.7) / 6,
                           "count(B)": 6, "first(B.v)": 0.1, "last(B.v)": 0.7}
    assert records == derive(q, events, len(events))


def test_duration_constraints_and_at_least_starts_are_decided_after_the_merge():
    """B (t=4..9) is 6 s long, but 1, 4 and 1 s in the three batches: BETWEEN 5s AND 6s holds
    only for the whole; AT LEAST 3s makes B visible at t=7 (4 + 3), not at t=8 (5 + 3)."""
    events = events_of({1, 2}, set(range(4, 10)), 12)
    between = query("FROM S DEFINE A AS a = 1, B AS b = 1 BETWEEN 5s AND 6s PATTERN A before B "
                    "WITHIN 1 hours RETURN count(B) AS n")
    records = merged(between, situation_batches(between, events, 4), [1, 2, 0])
    assert intervals(records) == [("A", 1, 3), ("B", 4, 10)]
    assert records == derive(between, events, len(events))
    at_least = query("FROM S DEFINE A AS a = 1, B AS b = 1 AT LEAST 3s PATTERN A before B "
                     "WITHIN 1 hours RETURN count(B) AS n")
    records = merged(at_least, situation_batches(at_least, events, 4), [0, 2, 1])
    started = [(r["ts"], r["at"], r["values"]) for r in records
               if r["situation"] == "B" and r["kind"] == STARTED]
    assert started == [(4, 7, {"count(B)": 4})]
    assert records == derive(at_least, events, len(events))


def test_running_aggregates_of_a_situation_from_an_earlier_batch():
    """A low-latency match needs B's aggregates so far where A changes; B began a batch before."""
    q = query("FROM S DEFINE A AS a = 1, B AS b = 1 PATTERN B contains A WITHIN 1 hours "
              "RETURN sum(B.v) AS v")
    events = events_of({6}, set(range(2, 9)), 9, v={t: t for t in range(2, 9)})
    records = merged(q, situation_batches(q, events, 4), [2, 1, 0])
    running = [(r["at"], r["values"]) for r in records if r["kind"] == RUNNING]
    assert running == [(6, {"sum(B.v)": 2.0 + 3 + 4 + 5 + 6}), (7, {"sum(B.v)": 27.0})]
    assert records == derive(q, events, len(events))


@pytest.mark.parametrize("change, reason", [
    (lambda d: d.pop("head"), "KeyError"),
    (lambda d: d["head"].update(ts=["x"]), "ValueError"),
    (lambda d: d["head"]["columns"].update(v=["<M8[s]", []]), "dtype"),
    (lambda d: d.update(records=[["started"]]), "8 fields"),
    (lambda d: d.update(tail=[]), "tail lacks its keys"),
    (lambda d: d.update(seq="1"), "seq must be an integer"),
])
def test_a_malformed_batch_is_an_input_error(change, reason):
    q = query(AT14)
    value = json.loads(json.dumps(derive_batch(q, 0, batches(events_of({1}, {2}, 4), 4)[0])
                                  .to_dict()))
    change(value)
    with pytest.raises(InputError, match=reason):
        SituationBatch.from_dict(value)


def slice_all(slicer: EventSlicer, times: list[int], pieces: list[int]) -> list[int]:
    """The positions in ``times`` where batches end, feeding it in ``pieces`` (split points)."""
    ends, done = [], 0
    for stop in [*sorted(set(pieces)), len(times)]:
        ends += [done + c for c in slicer.cuts(np.array(times[done:stop], np.int64))]
        done = stop
    return ends


@settings(max_examples=scaled(3))
@given(st.lists(st.integers(0, 5), min_size=1, max_size=60), st.integers(1, 8), st.integers(0, 6),
       st.data())
def test_the_batcher_cuts_the_same_batches_however_the_stream_comes(gaps, size, span, data):
    """Cuts depend on the events only (a restarted batcher, fed the replay in other pieces,
    numbers the same batches), and every batch keeps to its size and span."""
    times = np.cumsum(gaps).tolist()
    pieces = data.draw(st.lists(st.integers(0, len(times)), max_size=6))
    ends = slice_all(EventSlicer(size, span), times, pieces)
    assert ends == slice_all(EventSlicer(size, span), times, [])
    for start, stop in zip([0, *ends], [*ends, len(times)], strict=True):
        batch = times[start:stop]
        assert 0 < len(batch) <= size and batch[-1] - batch[0] <= span
    for end in ends:  # each cut was needed: the batch was full or the next event too late
        first = times[max([0, *(e for e in ends if e < end)])]
        assert end - max([0, *(e for e in ends if e < end)]) == size or times[end] - first > span
