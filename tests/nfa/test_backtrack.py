"""S-15 (SASE+ §5.2.3, Figure 7): the backtrack baseline finds the same matches as the NFA^b,
re-reading buffered events where the NFA^b reads each event once."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, assume, given, settings

from situflow.events import EventBatch
from situflow.nfa.backtrack import BacktrackMatcher
from tests.nfa.harness import QUERY3, Harness, figure3, with_strategy
from tests.nfa.test_properties import _records, queries, streams
from tests.profiles import scaled


def test_s15_backtracking_re_reads_events_the_nfa_reads_once():
    h = Harness.for_query(with_strategy(QUERY3, "skip_till_any_match"))
    matcher = BacktrackMatcher(h.compiled.automaton)
    found = matcher.run(EventBatch.from_records(figure3()))
    assert Counter(map(str, found)) == Counter(map(str, h.matches(figure3())))
    assert matcher.reads > len(figure3())


@settings(max_examples=scaled(2), suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.filter_too_much])
@given(queries(), streams())
def test_s15_backtracking_and_the_nfa_agree(text, events):
    h = Harness.for_query(text)
    a = h.compiled.automaton
    assume(not a.negations and not a.consume and events)
    records = _records(events)
    expected = Counter(str(m) for m in h.matches(records))
    batch = EventBatch.from_records([{k: e.get(k) for k in ("id", "ts", "type", "x", "k")}
                                     for e in records])
    assert Counter(map(str, BacktrackMatcher(a).run(batch))) == expected
