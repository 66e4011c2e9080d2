"""Property tests: every generator's plan, under both mechanisms, finds exactly the matches
of the skip-till-any-match definition (brute force in :mod:`tests.plan.reference`), each
once; switching plans in the middle of a stream changes nothing (Kolchinsky & Schuster §4, §5;
SEMANTICS.md "a plan never changes the result set")."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from situflow.plan import (
    GENERATORS,
    AdaptiveEvaluator,
    CostModel,
    OrderEvaluator,
    OrderPlan,
    Pattern,
    Statistics,
    TreeEvaluator,
    TreePlan,
    evaluator_for,
)
from situflow.plan.evaluator import PlanMatch
from tests.plan import reference
from tests.plan.space import all_orders, all_trees
from tests.plan.strategies import patterns, statistics, streams
from tests.profiles import scaled

FAST = settings(max_examples=scaled(4), suppress_health_check=[HealthCheck.too_slow])


def keys(matches: list[PlanMatch]) -> list:
    return sorted(m.key() for m in matches)


def run(evaluator, events) -> list:
    out = []
    for event in events:
        out.extend(evaluator.push(event))
    out.extend(evaluator.flush())
    return keys(out)


@FAST
@given(patterns(), streams(), statistics())
def test_every_plan_under_both_mechanisms_equals_the_definition(pattern: Pattern, events, stats):
    expected = sorted(reference.matches(pattern, events))
    for name, generate in GENERATORS.items():
        plan = generate(pattern, stats, CostModel())
        for mechanism in ("order", "tree"):
            found = run(evaluator_for(plan, mechanism), events)
            assert found == expected, (name, mechanism, plan.describe())


@FAST
@given(patterns(), streams(), statistics(), statistics(), st.data())
def test_switching_plans_mid_stream_keeps_the_result_set(pattern, events, before, after, data):
    names = sorted(GENERATORS)
    first = data.draw(st.sampled_from(names))
    second = data.draw(st.sampled_from(names))
    cut = data.draw(st.integers(0, len(events)))
    adaptive = AdaptiveEvaluator(pattern, first, stats=before, check_every=10**9)
    found = []
    for event in events[:cut]:
        found.extend(adaptive.push(event))
    adaptive.switch_to(GENERATORS[second](pattern, after, CostModel()))
    for event in events[cut:]:
        found.extend(adaptive.push(event))
    found.extend(adaptive.flush())
    assert keys(found) == sorted(reference.matches(pattern, events))


@settings(max_examples=scaled(0.8), suppress_health_check=[HealthCheck.too_slow])
@given(patterns(), streams())
def test_every_order_and_every_tree_equals_the_definition(pattern: Pattern, events):
    if pattern.size > 4:
        return
    expected = sorted(reference.matches(pattern, events))
    for order in all_orders(pattern.size):
        assert run(OrderEvaluator(OrderPlan(pattern, order, 0.0, "any")), events) == expected
    for tree in all_trees(range(pattern.size)):
        assert run(TreeEvaluator(TreePlan(pattern, tree, 0.0, "any")), events) == expected


@FAST
@given(patterns(), streams(), st.data())
def test_batches_of_any_size_give_the_same_matches(pattern: Pattern, events, data):
    plan = GENERATORS["DP-B"](pattern, Statistics(), CostModel())
    evaluator = evaluator_for(plan)
    found = []
    rest = list(events)
    while rest:
        size = data.draw(st.integers(1, 4))
        found.extend(evaluator.push_many(rest[:size]))
        rest = rest[size:]
    found.extend(evaluator.flush())
    assert keys(found) == sorted(reference.matches(pattern, events))


@FAST
@given(patterns(), streams(), statistics(), st.data())
def test_snapshot_and_restore_mid_stream_keeps_the_result_set(pattern, events, stats, data):
    cut = data.draw(st.integers(0, len(events)))
    name = data.draw(st.sampled_from(sorted(GENERATORS)))
    first = AdaptiveEvaluator(pattern, name, stats=stats, check_every=10**9)
    found = first.push_many(events[:cut])
    state = json.loads(json.dumps(first.snapshot()))
    second = AdaptiveEvaluator.restore(pattern, state, name, check_every=10**9)
    found += second.push_many(events[cut:]) + second.flush()
    assert keys(found) == sorted(reference.matches(pattern, events))
