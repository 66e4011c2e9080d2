"""Event selection strategies on the paper's running example (SASE+ §2, §4.1, Figure 3).

Query 3 over the Figure 3 stream: R1 = [e1..e5] e6, R2 = [e3 e4] e6, R3 = [e1..e7] e8.
"""

from __future__ import annotations

import pytest

from tests.nfa.harness import QUERY3, Harness, figure3, match, with_strategy

R1, R2, R3 = match([1, 2, 3, 4, 5], 6), match([3, 4], 6), match([1, 2, 3, 4, 5, 6, 7], 8)


def test_s1_skip_till_next_match_gives_exactly_r1_r2_r3():
    results = Harness.for_query(QUERY3).run(figure3())
    assert [m.bindings for m in results] == [R1, R2, R3]
    # R1 and R2 are emitted by e6, R3 by e8; the partition key is the symbol.
    assert [(m.emitted_at, m.ts, m.key) for m in results] == [(6, 6, "GOOG"), (6, 6, "GOOG"),
                                                               (8, 8, "GOOG")]


def test_s1_e6_belongs_to_two_matches_under_skip_till_next_match():
    # SEMANTICS.md: events are not consumed by default (the Kolchinsky "at most one match" reading
    # is the separate CONSUME policy).
    results = Harness.for_query(QUERY3).matches(figure3())
    assert sum("e6" in m["b"] for m in results) == 2


@pytest.mark.parametrize("strategy", ["partition_contiguity", "strict_contiguity"])
def test_s9_contiguity_gives_r1_and_r3_but_not_r2(strategy):
    # The e3-run must select or fail at e5 (same partition), so R2 never completes.
    assert Harness.for_query(with_strategy(QUERY3, strategy)).matches(figure3()) == [R1, R3]


def test_s10_skip_till_any_match_gives_all_68_subsequences():
    results = Harness.for_query(with_strategy(QUERY3, "skip_till_any_match")).matches(figure3())
    assert len(results) == 68
    assert len({(tuple(m["a"]), m["b"][0]) for m in results}) == 68
    assert sum(m["b"] == ["e6"] for m in results) == 18
    assert sum(m["b"] == ["e8"] for m in results) == 50
    for example in ([1], [3], [1, 3]):
        assert match(example, 6) in results
    for example in ([1], [1, 6, 7], [1, 2, 3, 4, 5, 6, 7]):
        assert match(example, 8) in results


def test_partition_contiguity_is_contiguity_within_the_symbol():
    # A MSFT event between GOOG events breaks strict contiguity, not partition contiguity.
    events = figure3()
    events.insert(5, {"id": "m", "type": "Stock", "symbol": "MSFT", "price": 1, "volume": 1,
                      "ts": 5})
    partition = Harness.for_query(with_strategy(QUERY3, "partition_contiguity"))
    strict = Harness.for_query(with_strategy(QUERY3, "strict_contiguity"))
    assert partition.matches(events) == [R1, R3]
    assert strict.matches(events) == []


def test_an_event_of_another_type_is_skipped_only_by_the_skip_strategies():
    events = figure3()
    events.insert(5, {"id": "x", "type": "News", "symbol": "GOOG", "ts": 5})
    assert Harness.for_query(QUERY3).matches(events) == [R1, R2, R3]
    contiguous = Harness.for_query(with_strategy(QUERY3, "partition_contiguity"))
    assert contiguous.matches(events) == []


def test_without_a_strategy_function_skip_till_any_match_applies():
    h = Harness.for_query("PATTERN SEQ(Stock a, Stock b) WHERE a.price < b.price")
    assert h.compiled.canonical().startswith(
        "PATTERN SEQ(Stock a, Stock b) WHERE skip_till_any_match(a, b)")
    events = figure3()[:3]
    assert h.matches(events) == [{"a": ["e1"], "b": ["e2"]}, {"a": ["e1"], "b": ["e3"]}]
