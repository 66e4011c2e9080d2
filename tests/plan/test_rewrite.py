"""The §4 rewrites of Kolchinsky & Schuster: SEQ → AND (K-7), negation placement (K-8),
nested patterns through DNF (K-9)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings

from situflow.plan import (
    Component,
    CostInputs,
    CostModel,
    Event,
    Negation,
    OrderEvaluator,
    Pattern,
    Statistics,
    TreeEvaluator,
    choose_plan,
    evaluator_for,
)
from situflow.plan.plans import Join, OrderPlan, TreePlan
from tests.plan import reference
from tests.plan.nested import And, Or, Seq, UnionEvaluator, plan_disjuncts, to_dnf
from tests.plan.rewrite import seq_to_and
from tests.plan.space import all_orders, all_trees
from tests.plan.strategies import patterns, statistics, streams
from tests.profiles import scaled


def run(evaluator, events):
    out = [m for e in events for m in evaluator.push(e)] + evaluator.flush()
    return sorted(m.key() for m in out)


@settings(max_examples=scaled(1.5))
@given(patterns(), streams(), statistics())
def test_k7_seq_becomes_and_with_n_minus_1_order_conditions(pattern, events, stats):
    if pattern.negations or not pattern.sequence:
        return
    rewritten = seq_to_and(pattern)
    assert not rewritten.sequence
    added = rewritten.predicates[len(pattern.predicates) :]
    assert [(p.left, p.right) for p in added] == [
        (a.var, b.var) for a, b in itertools.pairwise(pattern.components)
    ]
    assert sorted(reference.matches(rewritten, events)) == sorted(reference.matches(pattern, events))
    plan = choose_plan(rewritten, stats, "DP-B")
    assert run(evaluator_for(plan), events) == sorted(reference.matches(pattern, events))
    original, converted = CostInputs.build(pattern, stats), CostInputs.build(rewritten, stats)
    model = CostModel()
    for order in all_orders(pattern.size):
        assert model.order(order, original) == pytest.approx(model.order(order, converted))


NOT_B = Pattern(
    (Component("a", "A"), Component("c", "C"), Component("d", "D")),
    10.0,
    negations=(Negation("b", "B", 1),),
)


@pytest.mark.parametrize("order", list(all_orders(3)))
def test_k8_negation_is_checked_right_after_the_later_of_a_and_c(order):
    plan = OrderPlan(NOT_B, order, 0.0, "test")
    later = max(order.index(0), order.index(1))
    assert plan.negation_steps() == (later + 1,)
    checked_after = NOT_B.components[order[later]].describe()
    assert f"~(B b): checked after {checked_after}" in plan.describe()


def test_k8_tree_plans_put_the_nseq_check_on_the_lowest_node_covering_a_and_c():
    for tree in all_trees(range(3)):
        node = TreePlan(NOT_B, tree, 0.0, "test").negation_nodes()[0]
        assert {0, 1} <= set(node.leaves)
        if isinstance(node, Join):
            assert not {0, 1} <= set(node.left.leaves)
            assert not {0, 1} <= set(node.right.leaves)


def test_k8_a_partial_match_with_a_b_between_a_and_c_is_rejected_before_d_arrives():
    stream = [Event("A", 1, 0), Event("B", 2, 1), Event("C", 3, 2), Event("A", 4, 3)]
    stream.append(Event("C", 5, 4))
    evaluator = OrderEvaluator(OrderPlan(NOT_B, (0, 1, 2), 0.0, "test"))
    for event in stream:
        evaluator.push(event)
    # States: 1 = {a}, 2 = {a, c}. Only (a@4, c@5) passes the negation check; (a@1, c@3)
    # and (a@1, c@5) have b@2 between them.
    assert evaluator.partial_counts() == (0, 2, 1)
    assert [m.key() for m in evaluator.push(Event("D", 6, 5))] == [(("a", (3,)), ("c", (4,)), ("d", (5,)))]


def test_k9_and_of_or_becomes_two_conjunctive_patterns():
    a, b, c, d = (Component(v, v.upper()) for v in "abcd")
    conjuncts = to_dnf(And((a, b, Or((c, d)))), 5.0)
    assert [tuple(x.var for x in p.components) for p in conjuncts] == [
        ("a", "b", "c"),
        ("a", "b", "d"),
    ]
    assert all(not p.sequence and not p.before for p in conjuncts)


def test_k9_union_of_the_conjunct_plans_equals_the_union_of_their_matches():
    a, b, c, d = (Component(v, v.upper()) for v in "abcd")
    expr = Seq((a, Or((And((b, c)), d))))
    conjuncts = to_dnf(expr, 3.0)
    assert [p.before for p in conjuncts] == [((0, 1), (0, 2)), ((0, 1),)]
    types = "ABCDABDC"
    events = [Event(t, float(i), i) for i, t in enumerate(types)]
    stats = Statistics({"A": 1.0, "B": 5.0, "C": 2.0, "D": 0.5})
    for name in ("DP-LD", "DP-B"):
        plans = plan_disjuncts(conjuncts, stats, name)
        union = UnionEvaluator([evaluator_for(p) for p in plans])
        found = run(union, events)
        expected = sorted(k for p in conjuncts for k in reference.matches(p, events))
        assert found == expected
        assert len(found) == len(set(found))


def test_tree_and_order_mechanisms_accept_each_others_plans():
    pattern = NOT_B
    stats = Statistics({"A": 1.0, "B": 1.0, "C": 1.0, "D": 1.0})
    tree = choose_plan(pattern, stats, "DP-B")
    order = choose_plan(pattern, stats, "DP-LD")
    assert isinstance(OrderEvaluator(tree), OrderEvaluator)
    assert isinstance(TreeEvaluator(order), TreeEvaluator)
