"""Whether a plan can beat NFA^b (``situflow.plan.choice``): tests per window, and the
decision that keeps NFA^b unless a plan saves more than a given factor of them."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings

from situflow.plan import (
    Component,
    Event,
    Filter,
    Pattern,
    Predicate,
    Statistics,
    StatisticsCollector,
)
from situflow.plan.choice import decide, work_ord, work_tree
from situflow.plan.cost import CostInputs, cost_ord, cost_tree
from situflow.plan.plans import left_deep
from tests.plan.space import all_trees
from tests.plan.strategies import patterns, statistics
from tests.profiles import scaled


def same_k(a: Event, b: Event) -> bool:
    return a["k"] == b["k"]


def test_an_order_tests_every_event_and_each_steps_partial_matches_with_its_events():
    pattern = Pattern((Component("a", "A"), Component("b", "B")), 10.0)
    inp = CostInputs.build(pattern, Statistics({"A": 2.0, "B": 0.5}))
    # 25 events tested once each; 20 a's start partial matches; each meets the window's
    # 5 b's (order: 1/2 pass).
    assert work_ord((0, 1), inp) == pytest.approx(25 + 20 + 20 * 5)
    # The other order: 5 b's, each meets 20 a's.
    assert work_ord((1, 0), inp) == pytest.approx(25 + 5 + 5 * 20)


@settings(max_examples=scaled(40))
@given(patterns(max_size=4), statistics())
def test_tests_are_never_fewer_than_the_partial_matches_they_make(pattern, stats):
    inp = CostInputs.build(pattern, stats)
    for order in itertools.permutations(range(pattern.size)):
        assert work_ord(order, inp) >= cost_ord(order, inp) * (1 - 1e-9)
    for tree in all_trees(range(pattern.size)):
        assert work_tree(tree, inp) >= cost_tree(tree, inp) * (1 - 1e-9)


@settings(max_examples=scaled(40))
@given(patterns(max_size=4), statistics())
def test_a_left_deep_tree_tests_what_its_order_does_plus_buffering_the_later_leaves(
        pattern, stats):
    inp = CostInputs.build(pattern, stats)
    for order in itertools.permutations(range(pattern.size)):
        leaves = sum(inp.window * inp.rates[i] * inp.sel[i][i] for i in order[1:])
        assert work_tree(left_deep(order), inp) == pytest.approx(work_ord(order, inp) + leaves)


def six_types(rates: tuple[float, ...]) -> tuple[Pattern, Statistics]:
    types = "ABCDEF"
    pattern = Pattern(tuple(Component(t.lower(), t) for t in types), 60.0,
                      (Predicate("a", "c", same_k, 0.05), Predicate("d", "f", same_k, 0.05)))
    return pattern, Statistics(dict(zip(types, rates, strict=True)))


def test_rates_falling_along_the_pattern_make_a_plan_win():
    pattern, stats = six_types((0.34, 0.26, 0.18, 0.12, 0.07, 0.03))
    decision = decide(pattern, stats, ("DP-B", "DP-LD"))
    assert decision.plan is not None
    assert decision.order_work > 3 * decision.plan_work
    assert decision.describe().startswith(f"plan {decision.algorithm}: pattern order")


def test_one_type_at_one_rate_keeps_nfa():
    pattern = Pattern((Component("a", "S"), Component("b", "S"), Component("c", "S")), 100.0,
                      (Predicate("a", "b", same_k, 0.5), Predicate("a", "c", same_k, 0.5)))
    decision = decide(pattern, Statistics({"S": 0.2}), ("DP-B", "DP-LD"))
    assert decision.plan is None
    assert decision.describe().startswith("NFA^b: pattern order")


def test_a_plan_must_save_more_than_the_advantage():
    pattern, stats = six_types((0.34, 0.26, 0.18, 0.12, 0.07, 0.03))
    saving = decide(pattern, stats, ("DP-B",)).order_work / decide(pattern, stats,
                                                                   ("DP-B",)).plan_work
    assert decide(pattern, stats, ("DP-B",), advantage=saving * 0.99).plan is not None
    assert decide(pattern, stats, ("DP-B",), advantage=saving * 1.01).plan is None
    assert decide(pattern, stats, ("DP-B",), advantage=math.inf).plan is None


def test_the_candidate_with_fewer_tests_is_chosen_and_the_first_breaks_ties():
    pattern, stats = six_types((0.25, 0.25, 0.25, 0.10, 0.10, 0.05))
    inp = CostInputs.build(pattern, stats)
    both = decide(pattern, stats, ("DP-B", "DP-LD"), advantage=0.0)
    alone = [decide(pattern, stats, (name,), advantage=0.0) for name in ("DP-B", "DP-LD")]
    assert both.plan_work == min(d.plan_work for d in alone)
    assert both.order_work == pytest.approx(work_ord(tuple(range(6)), inp))
    same = decide(pattern, stats, ("DP-B", "DP-B"), advantage=0.0)
    assert same.algorithm == "DP-B"


def test_a_rare_filter_that_never_passed_is_estimated_small_but_not_zero():
    pattern = Pattern((Component("a", "A"),), 10.0, (), (Filter("a", lambda e: e["x"] > 9),))
    collector = StatisticsCollector(pattern, horizon=100.0, stride=1, decay=1.0)
    for seq in range(9):
        collector.observe(Event("A", float(seq), seq, {"x": 0}))
    # Nine failed trials and the prior (1.0) as one more.
    assert collector.snapshot().selectivities["a#0"] == pytest.approx(1 / 10)
