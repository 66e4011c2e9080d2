"""Windows (SEMANTICS.md: inclusive, last.t - first.t <= w) and pruning (SASE+ §5.3)."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from situflow.cli import main
from situflow.events import EventBatch
from situflow.nfa.backtrack import BacktrackMatcher
from situflow.nfa.operator import NfaOperator
from situflow.nfa.sharedbuffer.buffer import BufferedEvent, BufferNode
from situflow.plan import GENERATORS
from situflow.sase import compile
from tests.nfa.harness import QUERY3, Harness, batches, feed, figure3, match, with_strategy
from tests.nfa.reference import Reference
from tests.nfa.test_planned import planned_queries
from tests.nfa.test_properties import _nfa_keys, _records, queries
from tests.profiles import scaled

R1, R2, R3 = match([1, 2, 3, 4, 5], 6), match([3, 4], 6), match([1, 2, 3, 4, 5, 6, 7], 8)


def test_s14_the_window_is_inclusive():
    at_boundary = [1, 2, 3, 4, 5, 6, 7, 3601]  # t8 - t1 = 1 hour exactly
    assert Harness.for_query(QUERY3).matches(figure3(at_boundary)) == [R1, R2, R3]


def test_s14_r3_is_not_produced_when_it_spans_more_than_the_window():
    beyond = [1, 2, 3, 4, 5, 6, 7, 3602]
    assert Harness.for_query(QUERY3).matches(figure3(beyond)) == [R1, R2]


def stock_stream(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out, ts, price = [], 0, 100
    for i in range(n):
        ts += rng.randint(0, 3)
        price += rng.choice([-1, 0, 1, 1])
        out.append({"id": i, "type": "Stock", "symbol": rng.choice("GM"), "price": price,
                    "volume": rng.randint(500, 1500), "ts": ts})
    return out


def test_s16_nothing_older_than_the_window_stays_in_the_buffer():
    query = with_strategy(QUERY3, "skip_till_any_match").replace("1 hour", "20 seconds")
    h = Harness.for_query(query)
    op = h.compiled.operator()
    window = h.compiled.automaton.window
    peak = 0
    for b in batches(stock_stream(600, 1), 7):
        op.process(b)
        now = int(b.ts[-1])
        assert all(e.ts >= now - window for e in buffered_events(op))
        assert all(now - m.start <= window
                   for p in op.partitions.values() for r in p.runs for m in r.members)
        peak = max(peak, op.stats()["partial_matches"])
    assert peak > 0
    op.advance_to(10**9)
    assert op.stats()["partial_matches"] == 0 and op.partitions == {}


def buffered_events(op: NfaOperator) -> list[BufferedEvent]:
    """Every event the runs and negations still reach (buffer nodes and negation candidates)."""
    seen: dict[int, BufferedEvent] = {}
    for part in op.partitions.values():
        for run in part.runs:
            for m in run.members:
                node: BufferNode | None = m.node
                while node is not None:
                    seen[id(node.event)] = node.event
                    node = node.pred
        for candidates in part.negatives:
            for e in candidates:
                seen[id(e)] = e
    return list(seen.values())


# --- WITHIN 0 (issue #12) ----------------------------------------------------------------------
# Windows are inclusive, so a zero window is meaningful: every event of a match shares one
# timestamp. Every engine path evaluates it alike, on streams where most timestamps repeat.


def zero_window(text: str) -> str:
    """``text`` with its window replaced by (or given) ``WITHIN 0 seconds``."""
    text = re.sub(r" WITHIN \d+ seconds", "", text)
    end = text.index("}") + 1
    return f"{text[:end]} WITHIN 0 seconds{text[end:]}"


@st.composite
def crowded_streams(draw: Any) -> list[dict[str, Any]]:
    """Up to 9 events, most of them sharing a timestamp with their neighbours."""
    events, ts = [], 0
    for i in range(draw(st.integers(0, 9))):
        ts += draw(st.sampled_from([0, 0, 0, 1]))
        event: dict[str, Any] = {"id": i, "seq": i, "ts": ts, "type": draw(st.sampled_from("AABBC")),
                                 "x": draw(st.integers(0, 3))}
        if draw(st.booleans()):
            event["k"] = draw(st.sampled_from("pq"))
        events.append(event)
    return events


@settings(max_examples=scaled(4),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(queries(), crowded_streams())
def test_a_zero_window_matches_events_of_one_timestamp_on_every_nfa_path(text, events):
    text = zero_window(text)
    h = Harness.for_query(text)
    a = h.compiled.automaton
    expected = Counter(Reference(h.compiled.ast, 0).matches(events))
    assert all(len({e["ts"] for e in events if e["id"] in ids}) == 1
               for ids in ({i for _, group in m for i in group} for m in expected))
    records = _records(events)
    for options in ({}, {"merge_runs": False}):
        assert _nfa_keys(h.run(records, **options), h.compiled.ast) == expected, text
    python_loop = feed(h.compiled.operator(compiled=False), records)
    assert _nfa_keys(python_loop, h.compiled.ast) == expected, text
    if not a.negations and not a.consume and events:
        batch = EventBatch.from_records([{k: e.get(k) for k in ("id", "ts", "type", "x", "k")}
                                         for e in records])
        assert Counter(map(str, BacktrackMatcher(a).run(batch))) == \
            Counter(str(m) for m in h.matches(records)), text


@settings(max_examples=scaled(3),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(planned_queries(), crowded_streams(), st.sampled_from(sorted(GENERATORS)),
       st.integers(1, 5))
def test_a_zero_window_gives_every_plan_the_nfa_output(text, events, algorithm, check_every):
    """Issue #12: the planned skip-till-any-match path raised 'the window must be positive'.
    (Re-planning every few events measures rates over a zero window too.)"""
    text = zero_window(text)
    planned = compile(text, plan=algorithm, check_every=check_every)
    assert planned.planned is not None, planned.unplanned_reason
    records = [{**e, "id": f"e{e['id']}"} for e in _records(events)]
    expected = [m.to_dict() for m in feed(compile(text, plan=None).operator(), records)]
    assert [m.to_dict() for m in feed(planned.operator(), records)] == expected, text


def test_a_zero_window_through_the_cli(tmp_path, capsys):
    """Issue #12: ``WITHIN 0 seconds`` on the planned path stopped ``situflow run`` (exit 1)."""
    (tmp_path / "q.sase").write_text(
        "PATTERN SEQ(A a, B b) WHERE skip_till_any_match(a, b) { a.x = b.x } WITHIN 0 seconds")
    times = [("A", 1), ("A", 2), ("B", 2), ("B", 3), ("A", 3), ("B", 3)]
    (tmp_path / "e.jsonl").write_text("".join(
        json.dumps({"id": f"e{i}", "type": t, "ts": ts, "x": 1}) + "\n"
        for i, (t, ts) in enumerate(times)))
    assert main(["run", str(tmp_path / "q.sase"), "--input", str(tmp_path / "e.jsonl")]) == 0
    found = [json.loads(line)["bindings"] for line in capsys.readouterr().out.splitlines()]
    assert found == [{"a": ["e1"], "b": ["e2"]}, {"a": ["e4"], "b": ["e5"]}]


@pytest.mark.parametrize("algorithm", sorted(GENERATORS))
@pytest.mark.parametrize("window", ["1e300 seconds", "9223372036854775807 hours"])
def test_a_window_beyond_64_bit_ticks_works_on_every_plan(algorithm, window):
    """Plan costs overflow to inf with such a window; ZStream's bracketing then recursed without
    end. Every plan still gives the NFA output (the window holds the whole stream)."""
    text = ("PATTERN SEQ(A a, B b, A c, B d) WHERE skip_till_any_match(a, b, c, d) { a.x <= d.x } "
            f"WITHIN {window}")
    events = [{"id": f"e{i}", "type": "AB"[i % 2], "ts": i * 10**15, "x": i % 3} for i in range(8)]
    expected = [m.to_dict() for m in feed(compile(text, plan=None).operator(), events)]
    assert len(expected) == 12
    assert [m.to_dict() for m in feed(compile(text, plan=algorithm).operator(), events)] == expected
