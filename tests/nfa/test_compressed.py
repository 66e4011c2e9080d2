"""Compressed output (SASE+ §4.2): the compiled loop returns each batch's matches as their last
buffer nodes, read out into Match records only when a consumer reads them."""

from __future__ import annotations

from unittest.mock import patch

from situflow.nfa.kernel import loop
from situflow.nfa.kernel.compressed import MatchBatch
from tests.nfa.harness import QUERY3, Harness, batches, figure3, match

R1, R2, R3 = match([1, 2, 3, 4, 5], 6), match([3, 4], 6), match([1, 2, 3, 4, 5, 6, 7], 8)


def _figure3_batch() -> MatchBatch:
    op = Harness.for_query(QUERY3).compiled.operator()
    [batch] = batches([{**e, "symbol": 1} for e in figure3()], None)
    found = op.process(batch)
    assert isinstance(found, MatchBatch)
    return found


def test_counting_the_matches_reads_none_of_them():
    with patch.object(loop, "decompress", side_effect=AssertionError("read")):
        found = _figure3_batch()
        assert len(found) == 3 and found


def test_a_batch_is_the_sequence_of_its_match_records():
    found = _figure3_batch()
    records = list(found)
    assert [m.bindings for m in records] == [R1, R2, R3]
    assert found == records and found[1] == records[1] and found[-2:] == records[-2:]
    assert found + records[:1] == [*records, records[0]]
    assert records[:1] + found == [records[0], *records]
    assert [(m.ts, m.emitted_at, m.key, m.order) for m in found] == [
        (6, 6, 1, (1, 0, 0)), (6, 6, 1, (1, 0, 1)), (8, 8, 1, (1, 0, 0))]
