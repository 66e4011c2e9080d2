"""Statistics measured online (Kolchinsky & Schuster §5) and adaptive re-planning that never
changes the result set."""

from __future__ import annotations

import random

import pytest

from situflow.plan import (
    AdaptiveEvaluator,
    Component,
    Event,
    Filter,
    Pattern,
    Predicate,
    Statistics,
    StatisticsCollector,
    choose_plan,
    drifted,
    evaluator_for,
)


def same_x(a: Event, b: Event) -> bool:
    return a["x"] == b["x"]


PATTERN = Pattern(
    (Component("a", "A"), Component("b", "B"), Component("c", "C")),
    4.0,
    (Predicate("a", "c", same_x, 0.5),),
    (Filter("b", lambda b: b["x"] < 1, 0.9),),
)


def skewed(n: int, weights: dict[str, float], seed: int, start: int = 0) -> list[Event]:
    rng = random.Random(seed)
    kinds, probs = zip(*weights.items(), strict=True)
    return [
        Event(rng.choices(kinds, probs)[0], float(start + i) / 10, start + i, {"x": rng.randrange(4)})
        for i in range(n)
    ]


def test_rates_are_events_per_time_unit_over_the_horizon():
    collector = StatisticsCollector(PATTERN, horizon=100.0)
    for i in range(1000):  # one event per 0.1 time units, types A, A, B, C, ...
        collector.observe(Event("AABC"[i % 4], i / 10, i, {"x": i % 4}))
    stats = collector.snapshot()
    assert stats.rate("A") == pytest.approx(5.0, rel=0.02)
    assert stats.rate("B") == pytest.approx(2.5, rel=0.02)
    assert stats.rate("C") == pytest.approx(2.5, rel=0.02)


def test_selectivities_are_sampled_from_recent_pairs_and_filters():
    collector = StatisticsCollector(PATTERN, horizon=100.0)
    for event in skewed(4000, {"A": 1, "B": 1, "C": 1}, seed=1):
        collector.observe(event)
    stats = collector.snapshot()
    assert stats.selectivities["a~c#0"] == pytest.approx(0.25, abs=0.05)
    assert stats.selectivities["b#0"] == pytest.approx(0.25, abs=0.05)


def test_drift_is_a_relative_change_beyond_the_threshold():
    base = Statistics({"A": 10.0, "B": 1.0}, {"p": 0.5})
    assert not drifted(base, Statistics({"A": 14.0, "B": 1.0}, {"p": 0.5}), 0.5)
    assert drifted(base, Statistics({"A": 16.0, "B": 1.0}, {"p": 0.5}), 0.5)
    assert drifted(base, Statistics({"A": 10.0, "B": 0.0}, {"p": 0.5}), 0.5)
    assert drifted(base, Statistics({"A": 10.0, "B": 1.0}, {"p": 0.1}), 0.5)


def test_the_plan_follows_the_rates_when_they_drift_and_results_do_not_change():
    first = skewed(600, {"A": 20, "B": 5, "C": 1}, seed=2)
    second = skewed(600, {"A": 1, "B": 5, "C": 20}, seed=3, start=600)
    events = first + second
    adaptive = AdaptiveEvaluator(PATTERN, "DP-LD", check_every=100, horizon=20.0)
    found = []
    orders = []
    for event in events:
        found.extend(adaptive.push(event))
        orders.append(adaptive.plan.order)
    found.extend(adaptive.flush())
    assert adaptive.replans >= 2
    assert orders[500][0] == 2  # C is rarest first
    assert orders[-1][0] == 0  # then A
    # The static plans are checked against the brute-force definition in test_properties.
    static = evaluator_for(choose_plan(PATTERN, Statistics(), "TRIVIAL"))
    expected = sorted(m.key() for m in static.push_many(events))
    assert expected
    assert sorted(m.key() for m in found) == expected
