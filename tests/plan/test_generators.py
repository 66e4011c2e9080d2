"""The plan generators of Kolchinsky & Schuster §6.1: research K-2, K-5, K-6, K-10, K-12, K-13
and the DP cap of K-14 (timings are benchmarks, in bench/plans.py)."""

from __future__ import annotations

import math
from itertools import combinations, pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from situflow.plan import (
    GENERATORS,
    ORDER_GENERATORS,
    TREE_GENERATORS,
    Component,
    CostInputs,
    CostModel,
    Event,
    Join,
    Leaf,
    Pattern,
    Predicate,
    Statistics,
    choose_plan,
    dp_bushy,
    dp_left_deep,
    iterative,
)
from situflow.plan.cost import cost_lat_ord, cost_lat_tree
from tests.plan.space import all_orders, all_trees
from tests.profiles import scaled

A, B, C, D = 0, 1, 2, 3


def same_vehicle(a: Event, b: Event) -> bool:
    return a["vehicle"] == b["vehicle"]


def same_x(a: Event, b: Event) -> bool:
    return a["x"] == b["x"]


def four_cameras() -> tuple[Pattern, Statistics]:
    """K-2: AND(A a, B b, C c, D d), one vehicle (sel 0.1 per pair), camera D ten times rarer."""
    comps = tuple(Component(v, v.upper()) for v in "abcd")
    preds = tuple(Predicate(x, y, same_vehicle, 0.1) for x, y in combinations("abcd", 2))
    pattern = Pattern(comps, 1.0, preds, sequence=False)
    return pattern, Statistics({"A": 10.0, "B": 10.0, "C": 10.0, "D": 1.0})


def test_k2_trivial_keeps_the_pattern_order():
    pattern, stats = four_cameras()
    plan = choose_plan(pattern, stats, "TRIVIAL")
    assert plan.order == (A, B, C, D)
    assert plan.cost == pytest.approx(21.001)


@pytest.mark.parametrize("name", ["EFREQ", "GREEDY", "II-RANDOM", "II-GREEDY", "DP-LD"])
def test_k2_cost_aware_orders_start_with_the_rare_camera(name):
    pattern, stats = four_cameras()
    plan = choose_plan(pattern, stats, name)
    assert plan.order[0] == D
    assert plan.cost == pytest.approx(2.101)


def figure_2(sequence: bool) -> tuple[Pattern, Statistics]:
    """K-5: (A, B, C) with a restrictive a.x = c.x and W·r = 10 for every type."""
    comps = (Component("a", "A"), Component("b", "B"), Component("c", "C"))
    if sequence:
        preds: tuple[Predicate, ...] = (Predicate("a", "c", same_x, 0.01),)
    else:  # the research file's selectivities, order conditions included
        preds = (
            Predicate("a", "b", same_x, 0.5),
            Predicate("b", "c", same_x, 0.5),
            Predicate("a", "c", same_x, 0.005),
        )
    pattern = Pattern(comps, 1.0, preds, sequence=sequence)
    return pattern, Statistics({"A": 10.0, "B": 10.0, "C": 10.0})


@pytest.mark.parametrize("sequence", [False, True])
def test_k5_dp_b_joins_a_and_c_first_and_zstream_cannot(sequence):
    pattern, stats = figure_2(sequence)
    best = choose_plan(pattern, stats, "DP-B")
    assert isinstance(best.root, Join)
    assert {frozenset(best.root.left.leaves), frozenset(best.root.right.leaves)} == {
        frozenset({A, C}),
        frozenset({B}),
    }
    zs = choose_plan(pattern, stats, "ZSTREAM")
    assert zs.order == (A, B, C)
    assert zs.cost > best.cost
    if not sequence:
        assert best.cost == pytest.approx(31.75)
        assert zs.cost == pytest.approx(81.25)


def test_k6_kleene_component_is_postponed_and_restored():
    comps = (Component("a", "A"), Component("b", "B", kleene=True), Component("c", "C"))
    pattern = Pattern(comps, 10.0, sequence=False)
    stats = Statistics({"A": 5.0, "B": 5.0, "C": 5.0})
    assert CostInputs.build(pattern, stats).rates[B] == pytest.approx(2**50 / 10)
    for name in ("EFREQ", "GREEDY", "II-RANDOM", "II-GREEDY", "DP-LD"):
        plan = choose_plan(pattern, stats, name)
        assert plan.order[-1] == B, name
        assert "B+ b[]" in plan.describe()
    for name in ("ZSTREAM-ORD", "DP-B"):
        plan = choose_plan(pattern, stats, name)
        assert isinstance(plan.root, Join)
        assert Leaf(B) in (plan.root.left, plan.root.right), name
        assert plan.pattern.components[B].kleene


@st.composite
def cost_cases(draw, max_size: int):
    n = draw(st.integers(2, max_size))
    types = [f"T{i}" for i in range(n)]
    comps = tuple(Component(f"v{i}", t, draw(st.integers(0, 5)) == 0) for i, t in enumerate(types))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), max_size=n, unique=True))
    sel = st.sampled_from((0.002, 0.01, 0.1, 0.3, 0.88))
    preds = tuple(Predicate(f"v{i}", f"v{j}", same_x, draw(sel)) for i, j in chosen)
    pattern = Pattern(comps, draw(st.sampled_from((0.5, 1.0, 2.0))), preds, sequence=draw(st.booleans()))
    rates = {t: draw(st.sampled_from((0.2, 1.0, 3.0, 10.0, 45.0))) for t in types}
    model = CostModel(
        alpha=draw(st.sampled_from((0.0, 0.5, 1.0))), strategy=draw(st.sampled_from(("any", "next")))
    )
    return pattern, Statistics(rates), model


def _close_or_below(a: float, b: float) -> bool:
    return a <= b or math.isclose(a, b, rel_tol=1e-9)


@settings(max_examples=scaled(0.3))
@given(cost_cases(max_size=7))
def test_k13_dp_ld_is_optimal_among_all_orders(case):
    pattern, stats, model = case
    inputs = CostInputs.build(pattern, stats)
    best = choose_plan(pattern, stats, "DP-LD", model).cost
    assert all(_close_or_below(best, model.order(o, inputs)) for o in all_orders(pattern.size))
    for name in ORDER_GENERATORS:
        assert _close_or_below(best, choose_plan(pattern, stats, name, model).cost), name


@settings(max_examples=scaled(0.25))
@given(cost_cases(max_size=5))
def test_k13_dp_b_is_optimal_among_all_trees(case):
    pattern, stats, model = case
    inputs = CostInputs.build(pattern, stats)
    best = choose_plan(pattern, stats, "DP-B", model).cost
    assert all(_close_or_below(best, model.tree(t, inputs)) for t in all_trees(range(pattern.size)))
    for name in TREE_GENERATORS:
        assert _close_or_below(best, choose_plan(pattern, stats, name, model).cost), name


def test_k13_dp_b_is_optimal_among_all_trees_of_six_leaves():
    comps = tuple(Component(f"v{i}", f"T{i}") for i in range(6))
    pairs = ((0, 3, 0.002), (1, 4, 0.3), (2, 5, 0.05), (0, 5, 0.88), (3, 4, 0.01))
    preds = tuple(Predicate(f"v{i}", f"v{j}", same_x, s) for i, j, s in pairs)
    pattern = Pattern(comps, 2.0, preds)
    stats = Statistics({f"T{i}": r for i, r in enumerate((45.0, 1.0, 12.0, 3.0, 30.0, 7.0))})
    inputs = CostInputs.build(pattern, stats)
    model = CostModel(alpha=0.5)
    best = choose_plan(pattern, stats, "DP-B", model).cost
    assert min(model.tree(t, inputs) for t in all_trees(range(6))) == pytest.approx(best)


@settings(max_examples=scaled(0.3))
@given(cost_cases(max_size=5))
def test_k10_a_larger_alpha_never_raises_the_latency_of_the_optimal_plan(case):
    pattern, stats, _ = case
    inputs = CostInputs.build(pattern, stats)
    order_latency, tree_latency = [], []
    for alpha in (0.0, 0.5, 1.0, 4.0):
        model = CostModel(alpha=alpha)
        order_latency.append(cost_lat_ord(choose_plan(pattern, stats, "DP-LD", model).order, inputs))
        tree_latency.append(cost_lat_tree(choose_plan(pattern, stats, "DP-B", model).root, inputs))
    for series in (order_latency, tree_latency):
        assert all(_close_or_below(b, a) for a, b in pairwise(series))


def test_k12_ii_moves_are_swaps_and_cycles_only():
    order = (0, 1, 2, 3, 4)
    neighbours = list(iterative.moves(order))
    assert len(neighbours) == 10 + 2 * 10  # C(5,2) swaps + two shifts per C(5,3) triples
    for other in neighbours:
        moved = [i for i in range(5) if other[i] != order[i]]
        assert len(moved) in (2, 3)
        assert sorted(other) == list(order)


@settings(max_examples=scaled(0.3))
@given(cost_cases(max_size=7))
def test_k12_ii_stops_at_a_local_minimum_and_ii_greedy_beats_greedy(case):
    pattern, stats, model = case
    inputs = CostInputs.build(pattern, stats)
    for name in ("II-RANDOM", "II-GREEDY"):
        plan = choose_plan(pattern, stats, name, model)
        assert all(_close_or_below(plan.cost, model.order(o, inputs)) for o in iterative.moves(plan.order))
    greedy = choose_plan(pattern, stats, "GREEDY", model).cost
    assert _close_or_below(choose_plan(pattern, stats, "II-GREEDY", model).cost, greedy)


def long_pattern(n: int) -> tuple[Pattern, Statistics]:
    comps = tuple(Component(f"v{i}", f"T{i}") for i in range(n))
    preds = tuple(Predicate(f"v{i}", f"v{i + 1}", same_x, 0.1) for i in range(n - 1))
    rates = {f"T{i}": 1.0 + (7 * i) % 11 for i in range(n)}
    return Pattern(comps, 1.0, preds), Statistics(rates)


def test_k14_dp_is_capped_and_falls_back_to_heuristics():
    pattern, stats = long_pattern(dp_left_deep.MAX_SIZE + 1)
    plan = choose_plan(pattern, stats, "DP-LD")
    assert plan.algorithm.startswith("DP-LD→II-GREEDY")
    assert sorted(plan.order) == list(range(pattern.size))
    pattern, stats = long_pattern(dp_bushy.MAX_SIZE + 1)
    tree = choose_plan(pattern, stats, "DP-B")
    assert tree.algorithm.startswith("DP-B→ZSTREAM-ORD")
    assert sorted(tree.root.leaves) == list(range(pattern.size))


def test_every_generator_is_registered_under_its_paper_name():
    assert list(GENERATORS) == [
        "TRIVIAL", "EFREQ", "GREEDY", "II-RANDOM", "II-GREEDY", "DP-LD",
        "ZSTREAM", "ZSTREAM-ORD", "DP-B",
    ]  # fmt: skip


def test_describe_names_the_algorithm_the_plan_and_its_cost():
    pattern, stats = four_cameras()
    text = choose_plan(pattern, stats, "DP-LD").describe()
    assert text.splitlines()[0] == "plan DP-LD (order-based, lazy NFA), cost 2.101"
    assert "order:   D d → " in text
