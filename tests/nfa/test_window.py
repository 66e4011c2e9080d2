"""Windows (SEMANTICS.md: inclusive, last.t - first.t <= w) and pruning (SASE+ §5.3)."""

from __future__ import annotations

import random

from tests.nfa.harness import QUERY3, Harness, batches, figure3, match, with_strategy

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
        assert all(e.ts >= now - window for e in op.buffered_events())
        assert all(now - m.start <= window
                   for p in op.partitions.values() for r in p.runs for m in r.members)
        peak = max(peak, op.live_partial_matches())
    assert peak > 0
    op.advance_to(10**9)
    assert op.live_partial_matches() == 0 and op.partitions == {}
