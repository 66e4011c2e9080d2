"""Both evaluation mechanisms on literal streams: the window, negation intervals and Kleene
closure of SEMANTICS.md under skip-till-any-match, with every plan of a small pattern."""

from __future__ import annotations

import pytest

from situflow.errors import InputError
from situflow.events import EventBatch
from situflow.plan import (
    Component,
    CostModel,
    Event,
    Filter,
    Negation,
    Pattern,
    Predicate,
    Statistics,
    choose_plan,
    evaluator_for,
)
from situflow.plan.pattern import events_from_batch
from situflow.plan.plans import OrderPlan, TreePlan
from tests.plan.space import all_orders, all_trees


def stream(text: str) -> list[Event]:
    """``"A@0 B@2 x=1"``-style tokens: type@time, optional ``:x`` attribute, seq = position."""
    events = []
    for seq, token in enumerate(text.split()):
        head, _, x = token.partition(":")
        kind, _, ts = head.partition("@")
        events.append(Event(kind, float(ts), seq, {"x": int(x or 0)}))
    return events


def every_plan(pattern: Pattern):
    """Every order and every tree over the pattern's components, under both mechanisms."""
    for order in all_orders(pattern.size):
        for mechanism in ("order", "tree"):
            yield evaluator_for(OrderPlan(pattern, order, 0.0, "test"), mechanism)
    for tree in all_trees(range(pattern.size)):
        yield evaluator_for(TreePlan(pattern, tree, 0.0, "test"), "tree")


def bindings(matches) -> list[dict[str, list[int]]]:
    return sorted((m.bindings() for m in matches), key=lambda b: sorted(b.items()))


def run_all(pattern: Pattern, events: list[Event]) -> list[dict[str, list[int]]]:
    results = []
    for evaluator in every_plan(pattern):
        out = [m for e in events for m in evaluator.push(e)] + evaluator.flush()
        results.append(bindings(out))
    assert all(r == results[0] for r in results)
    return results[0]


AB = (Component("a", "A"), Component("b", "B"))


def test_the_window_is_inclusive():
    pattern = Pattern(AB, 5.0)
    assert run_all(pattern, stream("A@0 B@5 B@6")) == [{"a": [0], "b": [1]}]


def test_skip_till_any_match_pairs_every_a_with_every_later_b():
    pattern = Pattern(AB, 10.0)
    found = run_all(pattern, stream("A@0 A@1 B@2 B@2"))
    assert found == [
        {"a": [0], "b": [2]},
        {"a": [0], "b": [3]},
        {"a": [1], "b": [2]},
        {"a": [1], "b": [3]},
    ]


def test_duplicate_timestamps_are_ordered_by_sequence_number():
    pattern = Pattern(AB, 1.0)
    assert run_all(pattern, stream("B@3 A@3 B@3")) == [{"a": [1], "b": [2]}]


def test_middle_negation_forbids_a_matching_event_strictly_between():
    same = Predicate("n", "a", lambda n, a: n["x"] == a["x"])
    pattern = Pattern(AB, 10.0, (same,), negations=(Negation("n", "N", 1),))
    assert run_all(pattern, stream("A@0:1 A@1:2 N@2:2 B@3")) == [{"a": [0], "b": [3]}]


def test_leading_negation_looks_back_to_last_minus_w_inclusive():
    pattern = Pattern(AB, 5.0, negations=(Negation("n", "N", 0),))
    # last.t - W = 0 for (a@3, b@5): the N at 0 is inside; for (a@3, b@6) it is not.
    assert run_all(pattern, stream("N@0 A@3 B@5 B@6")) == [{"a": [1], "b": [3]}]


def test_trailing_negation_waits_until_first_plus_w_then_emits():
    pattern = Pattern(AB, 5.0, negations=(Negation("n", "N", 2),))
    for evaluator in every_plan(pattern):
        assert evaluator.push_many(stream("A@0 B@2")) == []
        assert evaluator.push(Event("X", 5.0, 2)) == []  # 5 = first.t + W: still waiting
        emitted = evaluator.push(Event("X", 6.0, 3))
        assert bindings(emitted) == [{"a": [0], "b": [1]}]


def test_trailing_negation_at_the_deadline_cancels_the_match():
    pattern = Pattern(AB, 5.0, negations=(Negation("n", "N", 2),))
    assert run_all(pattern, stream("A@0 B@2 N@5 A@6 B@7")) == [{"a": [3], "b": [4]}]


def test_flush_emits_matches_waiting_on_a_trailing_negation():
    pattern = Pattern(AB, 5.0, negations=(Negation("n", "N", 2),))
    for evaluator in every_plan(pattern):
        evaluator.push_many(stream("A@0 B@2"))
        assert bindings(evaluator.flush()) == [{"a": [0], "b": [1]}]
        assert evaluator.flush() == []


def test_kleene_component_takes_every_non_empty_subsequence():
    comps = (Component("a", "A"), Component("b", "B", kleene=True), Component("c", "C"))
    pattern = Pattern(comps, 10.0)
    found = run_all(pattern, stream("A@0 B@1 B@2 C@3 B@4"))
    assert [m["b"] for m in found] == [[1], [1, 2], [2]]


def test_conditions_on_a_kleene_component_hold_for_each_of_its_events():
    comps = (Component("a", "A"), Component("b", "B", kleene=True))
    bigger = Predicate("a", "b", lambda a, b: b["x"] > a["x"])
    pattern = Pattern(comps, 10.0, (bigger,), (Filter("b", lambda b: b["x"] < 9),))
    found = run_all(pattern, stream("A@0:1 B@1:2 B@2:0 B@3:3 B@4:9"))
    assert [m["b"] for m in found] == [[1], [1, 3], [3]]


def test_and_pattern_binds_same_type_components_to_distinct_events():
    comps = (Component("p", "A"), Component("q", "A"))
    pattern = Pattern(comps, 10.0, sequence=False)
    assert run_all(pattern, stream("A@0 A@1")) == [{"p": [0], "q": [1]}, {"p": [1], "q": [0]}]


@pytest.mark.parametrize("name", ["TRIVIAL", "DP-LD", "ZSTREAM", "DP-B"])
def test_state_stays_bounded_by_the_window(name):
    comps = (Component("a", "A"), Component("b", "B"), Component("c", "C"))
    same = Predicate("a", "c", lambda a, c: a["x"] == c["x"])
    pattern = Pattern(comps, 3.0, (same,))
    plan = choose_plan(pattern, Statistics({"A": 1, "B": 1, "C": 1}), name, CostModel())
    evaluator = evaluator_for(plan)
    sizes = []
    for i in range(3000):
        evaluator.push(Event("ABC"[i % 3], float(i), i, {"x": i % 4}))
        sizes.append(evaluator.state_size())
    assert max(sizes[1000:]) == max(sizes[:1000])


def test_columnar_batches_feed_the_evaluators():
    batch = EventBatch.from_records([{"type": t, "ts": i, "x": i % 2} for i, t in enumerate("ABAB")])
    events = events_from_batch(batch)
    assert [(e.type, e.ts, e.seq, e["x"]) for e in events][:2] == [("A", 0, 0, 0), ("B", 1, 1, 1)]
    assert run_all(Pattern(AB, 1.0), events) == [{"a": [0], "b": [1]}, {"a": [2], "b": [3]}]


def test_events_out_of_order_are_refused_with_a_reason():
    evaluator = evaluator_for(choose_plan(Pattern(AB, 5.0), Statistics(), "DP-B"))
    evaluator.push(Event("A", 3.0, 0))
    with pytest.raises(InputError, match="route the input through K-slack"):
        evaluator.push(Event("B", 2.0, 1))
