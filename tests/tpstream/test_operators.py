"""What every TPStream operator shares: ``stats()`` gauges that agree across the fused and the
split paths, and snapshots in the one envelope of :mod:`situflow.snapshot`, refused by another
query and by another operator kind."""

import json

import pytest

from situflow.errors import StateError
from situflow.tpstream.fused import TPStreamOperator
from situflow.tpstream.split.batches import BatchDeriver, derive_batch
from situflow.tpstream.split.deriver import SituationDeriver
from situflow.tpstream.split.halves import as_batch_deriver, as_batch_matcher, as_deriver, as_matcher
from situflow.tpstream.split.matcher import SituationMatcher
from situflow.tpstream.split.merger import BatchMatcher, BatchMerger
from tests.tpstream.harness import batch_of, query

TEXT = """FROM S PARTITION BY k
DEFINE A AS x = 1, B AS y = 1
PATTERN A overlaps B
WITHIN 100 seconds
RETURN count(B) AS n"""

# Two keys; A runs over 1..4, B over 2..6 and again from 8 on, key 2 has A open at the end.
EVENTS = [{"ts": t, "k": k, "x": int(1 <= t < 4 or (k == 2 and t >= 7)), "y": int(2 <= t < 6 or t >= 8)}
          for t in range(10) for k in (1, 2)]

OPERATORS = [TPStreamOperator, SituationDeriver, SituationMatcher, BatchDeriver, BatchMatcher,
             BatchMerger]


def fed():
    """Each operator after the whole stream, fed as its path feeds it."""
    q = query(TEXT)
    batch = batch_of(EVENTS, 0, len(EVENTS))
    fused, deriver, matcher = TPStreamOperator(q), SituationDeriver(q), SituationMatcher(q)
    fused.process(batch)
    matcher.process(deriver.process(batch))
    batches = [derive_batch(q, s, batch_of(EVENTS, s * 6, (s + 1) * 6)) for s in range(4)]
    batch_matcher = BatchMatcher(q)
    for b in reversed(batches[1:]):  # they wait for batch 0
        batch_matcher.process(b, starts=False)
    batch_matcher.process(batches[0], starts=True)
    return q, fused, deriver, matcher, batch_matcher


def test_the_paths_agree_on_the_open_and_buffered_situations():
    _, fused, deriver, matcher, batch_matcher = fed()
    open_now = fused.stats()["open_situations"]
    assert open_now == 3  # key 1's B, key 2's A and B
    assert [op.stats()["open_situations"] for op in (deriver, matcher, batch_matcher)] == \
        [open_now] * 3
    buffered = fused.stats()["buffered_situations"]
    assert buffered == 4  # A and B of each key
    assert [op.stats()["buffered_situations"] for op in (matcher, batch_matcher)] == [buffered] * 2
    assert batch_matcher.stats()["pending_batches"] == 0


def test_a_stateless_batch_deriver_reports_nothing_open():
    assert BatchDeriver(query(TEXT)).stats() == {"open_situations": 0}


@pytest.mark.parametrize("operator", OPERATORS, ids=lambda c: c.__name__)
def test_a_snapshot_restores_its_own_kind_for_its_own_query_only(operator):
    q = query(TEXT)
    snapshot = json.loads(json.dumps(operator(q).snapshot()))
    assert operator.restore(q, snapshot).snapshot() == snapshot
    other = query(TEXT.replace("100 seconds", "99 seconds"))
    with pytest.raises(StateError, match="belongs to another query or format"):
        operator.restore(other, snapshot)
    stranger = next(op for op in OPERATORS if op is not operator)
    with pytest.raises(StateError, match="belongs to another query or format"):
        stranger.restore(q, snapshot)


@pytest.mark.parametrize("half, operator", [
    (as_deriver, SituationDeriver), (as_matcher, SituationMatcher),
    (as_batch_deriver, BatchDeriver), (as_batch_matcher, BatchMatcher),
])
def test_a_half_is_the_same_query_bound_to_its_operator(half, operator):
    q = query(TEXT)
    bound = half(q)
    assert (bound.query_id, bound.partition_by, bound.describe()) == \
        (q.query_id, q.partition_by, q.describe())
    assert isinstance(bound.operator(), operator)
    assert isinstance(bound.restore(bound.operator().snapshot()), operator)
    assert isinstance(q.operator(), TPStreamOperator)
