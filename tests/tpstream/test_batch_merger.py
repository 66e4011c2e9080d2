"""Unpartitioned parallel TPStream (thesis §5.6.3/§5.6.5, AT-14's property): situation batches
derived on their own, delivered in any order, merged in sequence, give exactly the sequential
deriver's records, and so the fused operator's matches.

On the random streams of ``test_split`` (several keys, irregular and equal timestamps, missing
and string values, duration bounds, RETURN aggregates of every kind), for any batch size, any
arrival order of the batches, redelivered batches, JSON on the way and a snapshot and restore of
the merger in between.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from situflow.errors import InputError, SequenceError, StateError
from situflow.tpstream.split.batches import SituationBatch, derive_batch
from situflow.tpstream.split.merger import BatchMerger
from tests.profiles import scaled
from tests.tpstream.harness import query, run
from tests.tpstream.test_split import batches, derive, match, results, scenarios

AT14 = "FROM S DEFINE A AS a = 1, B AS b = 1 PATTERN A before B WITHIN 1 hours RETURN count(A) AS n"


def through_json(batch: SituationBatch) -> SituationBatch:
    return SituationBatch.from_dict(json.loads(json.dumps(batch.to_dict())))


@settings(max_examples=scaled(4), suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.data())
def test_merged_batches_are_the_sequential_derivation_and_match_like_the_fused_operator(
        scenario, data):
    text, events = scenario
    q = query(text)
    n = len(events)
    situation_batches = [through_json(derive_batch(q, s, b))
                         for s, b in enumerate(batches(events, data.draw(st.integers(1, n))))]
    arrivals = data.draw(st.permutations(range(len(situation_batches))))
    arrivals += data.draw(st.lists(st.sampled_from(arrivals), max_size=3))  # redeliveries
    restart_at = data.draw(st.integers(0, len(arrivals)))
    merger = BatchMerger(q)
    out = []
    for i, s in enumerate(arrivals):
        if i == restart_at:
            merger = BatchMerger.restore(q, json.loads(json.dumps(merger.snapshot())))
        out += merger.push(situation_batches[s])
    out += merger.finish()
    records = [json.loads(json.dumps(r.to_dict(q.name))) for r in out]
    assert records == derive(q, events, n)
    assert merger.duplicates == len(arrivals) - len(situation_batches)
    assert results(match(q, records, set(), None)) == results(run(q, events))


def at14_batches():
    """AT-14's query over 16 events in batches of 4, and the events."""
    q = query(AT14)
    events = [{"ts": t, "a": int(t % 3 == 0), "b": int(t % 4 == 0)} for t in range(1, 17)]
    return q, [derive_batch(q, s, b) for s, b in enumerate(batches(events, 4))], events


def test_a_batch_that_would_wait_beyond_the_bound_is_refused_with_the_missing_number():
    q, (b0, b1, b2, b3), events = at14_batches()
    merger = BatchMerger(q, max_pending=2)
    assert merger.push(b1) == [] and merger.push(b2) == []
    with pytest.raises(SequenceError, match="situation batch 0 is missing while 2 later batches "
                                            r"\(up to 2\) wait; batch 3 cannot be buffered"):
        merger.push(b3)
    assert (len(merger.pending), merger.waiting_for) == (2, 0)
    # Nothing was lost: once batch 0 has come, the refused batch is taken again.
    out = merger.push(b0) + merger.push(b3)
    assert [json.loads(json.dumps(r.to_dict("q"))) for r in out] == derive(q, events, 16)
    assert (len(merger.pending), merger.waiting_for) == (0, 4)


def test_the_end_of_input_with_a_batch_missing_is_an_error_not_a_silent_loss():
    q, (_, b1, *_), _ = at14_batches()
    merger = BatchMerger(q)
    merger.push(b1)
    with pytest.raises(SequenceError, match="batch 0 is missing"):
        merger.finish()


def test_batches_numbered_against_the_order_of_their_events_are_refused_and_none_is_lost():
    q, (b0, b1, *_), events = at14_batches()
    merger = BatchMerger(q)
    merger.push(replace(b1, seq=0))
    with pytest.raises(SequenceError, match="batch 1 starts at event 0, not after event 7, the "
                                            "last one merged"):
        merger.push(replace(b0, seq=1))
    # Batches 0 and 1 merge, then batch 2 does not follow them: their records come out, the
    # error with the next call.
    merger = BatchMerger(q)
    merger.push(replace(b1, seq=2))
    merger.push(b1)
    out = merger.push(b0)
    assert [json.loads(json.dumps(r.to_dict("q"))) for r in out] == derive(q, events[:8], 8)
    with pytest.raises(SequenceError, match="batch 2 starts at event 4, not after event 7"):
        merger.finish()


def test_a_batch_of_another_query_is_an_input_error_and_a_foreign_snapshot_a_state_error():
    q, (b0, *_), _ = at14_batches()
    other = query(AT14.replace("1 hours", "2 hours"))
    with pytest.raises(InputError, match="derived for another query"):
        BatchMerger(other).push(b0)
    with pytest.raises(StateError, match="another query"):
        BatchMerger.restore(other, BatchMerger(q).snapshot())


@pytest.mark.parametrize("change", [
    lambda b: replace(b, conditions=b.conditions[:1]),
    lambda b: replace(b, tail={**b.tail, "open_": []}),
    lambda b: replace(b, tail={"keys": b.tail["keys"]}),
    lambda b: replace(b, records=[replace(b.records[0], situation="Z")]),
])
def test_a_batch_that_does_not_fit_the_query_is_an_input_error_and_is_not_taken(change):
    q, (b0, *_), _ = at14_batches()
    merger = BatchMerger(q)
    with pytest.raises(InputError, match="situation batch 0 does not fit query 'q'"):
        merger.push(change(b0))
    assert merger.push(b0) and merger.waiting_for == 1


def test_a_head_without_the_partition_attributes_is_an_input_error():
    q = query(AT14.replace("FROM S", "FROM S PARTITION BY k"))
    events = [{"ts": t, "k": 1, "a": 1, "b": 0} for t in range(4)]
    batch = derive_batch(q, 0, batches(events, 4)[0])
    with pytest.raises(InputError, match="partition attributes are not the query's"):
        BatchMerger(q).push(replace(batch, head=replace(batch.head, columns={})))


def test_an_empty_batch_keeps_its_number():
    q, (b0, b1, *_), events = at14_batches()
    empty = derive_batch(q, 1, batches(events, 4)[0].slice(0, 0))
    merger = BatchMerger(q)
    out = merger.push(replace(b1, seq=2)) + merger.push(through_json(empty)) + merger.push(b0)
    assert [json.loads(json.dumps(r.to_dict("q"))) for r in out] == derive(q, events[:8], 8)


def test_a_merger_started_at_a_later_batch_drops_the_earlier_ones_and_derives_from_there():
    """A query registered while the stream runs begins at some batch: merged from there on, its
    records are those of sequential derivation over the events from that batch on."""
    q, (b0, b1, b2, b3), events = at14_batches()
    merger = BatchMerger(q)
    assert merger.push(b3) == [] and merger.push(b1) == []
    out = merger.start_at(2) + merger.push(b2)
    shifted = [{**r, "seq": r["seq"] + 8, "id": None} for r in derive(q, events[8:], 8)]
    assert [{**r.to_dict("q"), "id": None} for r in out] == shifted
    assert (merger.waiting_for, merger.duplicates, merger.push(b0)) == (4, 1, [])
    with pytest.raises(ValueError, match="cannot start at 0"):
        merger.start_at(0)
