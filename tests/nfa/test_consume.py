"""The CONSUME policy: the paper's non-overlap output format (SASE+ §2, §5.2.1; SEMANTICS.md)."""

from __future__ import annotations

import pytest

from situflow.errors import ValidationError
from tests.nfa.harness import QUERY3, Harness, figure3, match


def test_s11_one_match_per_partition_and_later_runs_are_pruned():
    results = Harness.for_query(QUERY3 + " CONSUME").run(figure3())
    # R1 and R2 complete at e6; the latest-starting one (R2) is kept and every other run of
    # the partition is dropped, so R3 is not output.
    assert [(m.bindings, m.emitted_at) for m in results] == [(match([3, 4], 6), 6)]


def test_after_a_match_the_next_one_starts_after_it():
    events = figure3() + [dict(e, id=f"f{i + 1}", ts=e["ts"] + 10) for i, e in
                          enumerate(figure3())]
    results = Harness.for_query(QUERY3 + " CONSUME").matches(events)
    assert results == [match([3, 4], 6), {"a": ["f3", "f4"], "b": ["f6"]}]


def test_consume_with_a_trailing_negation_is_an_error():
    with pytest.raises(ValidationError, match="CONSUME cannot be combined"):
        Harness.for_query("PATTERN SEQ(A a, ~(B b)) WHERE skip_till_next_match(a, b) { } "
                          "WITHIN 5 seconds CONSUME")
