"""The CONSUME policy: the paper's non-overlap output format (SASE+ §2, §5.2.1; SEMANTICS.md)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from situflow.errors import ValidationError
from situflow.nfa.kernel import loop
from situflow.nfa.operator import NfaOperator
from tests.nfa.harness import QUERY3, Harness, across_loops, feed, figure3, match, nfa_operator
from tests.nfa.reference import Reference
from tests.nfa.test_properties import _nfa_keys, _records, queries, streams
from tests.profiles import scaled


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


def test_the_compiled_loop_runs_consume_and_gives_s11():
    h = Harness.for_query(QUERY3 + " CONSUME")
    assert loop.Tables.build(h.compiled.automaton) is not None
    events = [{**e, "symbol": 1} for e in figure3()]
    op = NfaOperator(h.compiled.automaton, h.compiled.name, h.compiled.query_id)
    results = feed(op, events, batch=3)
    assert [(m.bindings, m.emitted_at) for m in results] == [(match([3, 4], 6), 6)]


@settings(max_examples=scaled(10), suppress_health_check=[HealthCheck.too_slow])
@given(queries(compiled=True), streams(longest=14), st.integers(1, 8), st.data())
def test_compiled_consume_gives_the_python_loop_and_the_definition(text, events, size, data):
    """CONSUME in the compiled loop, at any batch size, with snapshots taken by one loop and
    restored into the other (the state moves between the loops), equals the Python loop and
    the brute-force definition."""
    h = Harness.for_query(text + " CONSUME")
    records = _records(events)
    python = [m.to_dict() for m in feed(nfa_operator(h, False), records)]
    assert [m.to_dict() for m in feed(nfa_operator(h, True), records, size)] == python, text
    query = h.compiled.ast
    window = query.within.seconds if query.within is not None else float("inf")
    expected = Counter(Reference(query, window).matches(events))
    assert _nfa_keys(h.run(records, batch=size), query) == expected, text
    cut = data.draw(st.integers(0, len(records)))
    first_loop = data.draw(st.booleans())
    assert across_loops(h, records, size, cut, first_loop) == python, text

