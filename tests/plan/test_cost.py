"""The cost models of Kolchinsky & Schuster (§3.1, §3.2, §4, §5.1, §5.2): research K-1…K-5,
K-10, K-11, with the numbers worked out in the research file."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from situflow.plan.cost import (
    CostInputs,
    CostModel,
    Terms,
    cost_bj,
    cost_lat_ord,
    cost_lat_tree,
    cost_ldj,
    cost_next_ord,
    cost_ord,
    cost_tree,
    kleene_rate,
)
from situflow.plan.plans import Join, Leaf, Node
from tests.plan.space import all_orders, all_trees, topologies, tree_plan_count
from tests.profiles import scaled

A, B, C, D = 0, 1, 2, 3


def uniform(rates, sel, window=1.0, last=None) -> CostInputs:
    n = len(rates)
    matrix = tuple(tuple(1.0 if i == j else sel for j in range(n)) for i in range(n))
    return CostInputs(tuple(rates), matrix, window, n - 1 if last is None else last)


def mask_of(nodes) -> int:
    return sum(1 << i for i in nodes)


# K-1 (§1): the tree-plan space has n!·C_{n-1} = (2n-2)!/(n-1)! members.
@pytest.mark.parametrize(("n", "count"), [(3, 12), (4, 120), (5, 1680), (7, 665280)])
def test_k1_tree_plan_count(n, count):
    assert tree_plan_count(n) == count
    if n <= 5:
        trees = list(all_trees(range(n)))
        assert len(trees) == count
        assert len(set(trees)) == count


def test_k1_zstream_space_is_catalan():
    assert [len(list(topologies(range(n)))) for n in range(1, 7)] == [1, 1, 2, 5, 14, 42]


# K-2 (§1, §3.1): four cameras, r_A = r_B = r_C = 10, r_D = 1, W = 1, every sel = 0.1.
FOUR_CAMERAS = uniform([10, 10, 10, 1], 0.1)


def test_k2_four_cameras_cost_ord():
    assert cost_ord((D, A, B, C), FOUR_CAMERAS) == pytest.approx(2.101)
    assert cost_ord((A, B, C, D), FOUR_CAMERAS) == pytest.approx(21.001)


def test_k2_the_optimum_starts_with_the_rare_camera_and_all_d_first_orders_tie():
    costs = {o: cost_ord(o, FOUR_CAMERAS) for o in all_orders(4)}
    best = min(costs.values())
    assert {o for o, c in costs.items() if math.isclose(c, best)} == {o for o in costs if o[0] == D}


# K-3 (Theorem 1): Cost_LDJ with |R_i| = W·r_i and f = sel equals Cost_ord, for every order.
@settings(max_examples=scaled(0.6))
@given(
    st.integers(2, 5).flatmap(
        lambda n: st.tuples(
            st.lists(st.floats(0.1, 50), min_size=n, max_size=n),
            st.lists(st.floats(0.001, 1), min_size=n * n, max_size=n * n),
            st.floats(0.1, 20),
        )
    )
)
def test_k3_order_cost_equals_left_deep_join_cost(case):
    rates, flat, window = case
    inp = _symmetric(rates, flat, window)
    sizes = [window * r for r in rates]
    for order in all_orders(len(rates)):
        assert cost_ldj(order, sizes, inp.sel) == pytest.approx(cost_ord(order, inp), rel=1e-9)


# K-4 (Theorem 2): Cost_tree equals Cost_BJ under the same substitution, for every tree.
@settings(max_examples=scaled(0.4))
@given(
    st.integers(2, 4).flatmap(
        lambda n: st.tuples(
            st.lists(st.floats(0.1, 50), min_size=n, max_size=n),
            st.lists(st.floats(0.001, 1), min_size=n * n, max_size=n * n),
            st.floats(0.1, 20),
        )
    )
)
def test_k4_tree_cost_equals_bushy_join_cost(case):
    rates, flat, window = case
    inp = _symmetric(rates, flat, window)
    sizes = [window * r for r in rates]
    for tree in all_trees(range(len(rates))):
        assert cost_bj(tree, sizes, inp.sel) == pytest.approx(cost_tree(tree, inp), rel=1e-9)


def _symmetric(rates, flat, window, unary=False) -> CostInputs:
    n = len(rates)
    sel = [[1.0] * n for _ in range(n)]
    for i, j in itertools.combinations(range(n), 2):
        sel[i][j] = sel[j][i] = flat[i * n + j]
    if unary:
        for i in range(n):
            sel[i][i] = flat[i * n + i]
    return CostInputs(tuple(rates), tuple(map(tuple, sel)), window, n - 1)


# K-5 (§2.3, Figure 2): SEQ(A,B,C) WHERE a.x = c.x; W·r = 10; sel_AB = sel_BC = 0.5,
# sel_AC = 0.5·0.01.
FIGURE_2 = CostInputs(
    (10.0, 10.0, 10.0),
    ((1.0, 0.5, 0.005), (0.5, 1.0, 0.5), (0.005, 0.5, 1.0)),
    1.0,
    2,
)


def test_k5_figure_2_tree_costs():
    assert cost_tree(Join(Join(Leaf(A), Leaf(B)), Leaf(C)), FIGURE_2) == pytest.approx(81.25)
    assert cost_tree(Join(Leaf(A), Join(Leaf(B), Leaf(C))), FIGURE_2) == pytest.approx(81.25)
    assert cost_tree(Join(Join(Leaf(A), Leaf(C)), Leaf(B)), FIGURE_2) == pytest.approx(31.75)


# §4 Kleene closure: r'_B = 2^(r_B·W)/W; the paper's example has 5 ev/s and W = 10 s.
def test_kleene_rate_of_the_paper_example():
    assert kleene_rate(5, 10) == pytest.approx(2**50 / 10)
    assert kleene_rate(5, 10) == pytest.approx(1.1259e14, rel=1e-4)


# K-10 (§5.1): latency of SEQ(A,B,C,D) plans.
def test_k10_order_latency():
    inp = uniform([10, 10, 10, 1], 0.1, window=2.0)
    assert cost_lat_ord((D, A, B, C), inp) == pytest.approx(2.0 * (10 + 10 + 10))
    assert cost_lat_ord((A, B, C, D), inp) == 0.0
    assert CostModel(alpha=0.0).order((D, A, B, C), inp) == cost_ord((D, A, B, C), inp)
    combined = CostModel(alpha=0.5).order((D, A, B, C), inp)
    assert combined == pytest.approx(cost_ord((D, A, B, C), inp) + 0.5 * 60.0)


def test_k10_tree_latency_sums_the_siblings_on_the_path_of_the_last_event():
    inp = uniform([10, 10, 10, 1], 0.1, window=1.0)
    tree = Join(Join(Leaf(D), Leaf(A)), Join(Leaf(B), Leaf(C)))
    # Path of D: leaf D (sibling A), node (D,A) (sibling (B,C)); the root is excluded.
    pm_a = 10.0
    pm_bc = 10.0 * 10.0 * 0.1
    assert cost_lat_tree(tree, inp) == pytest.approx(pm_a + pm_bc)
    assert cost_lat_tree(Join(Join(Leaf(A), Leaf(B)), Leaf(D)), inp) == pytest.approx(10.0)


# K-11 (§5.2): skip-till-next-match, r = (5, 2, 8), no predicates, W = 1.
def test_k11_next_match_cost():
    inp = uniform([5, 2, 8], 1.0)
    assert cost_next_ord((0, 1, 2), inp) == pytest.approx(5 + 2 + 2)
    assert CostModel(strategy="next").order((0, 1, 2), inp) == pytest.approx(9.0)


# The set-based terms used by the dynamic programs add up to the same costs.
@settings(max_examples=scaled(0.4))
@given(
    st.integers(1, 4).flatmap(
        lambda n: st.tuples(
            st.lists(st.floats(0.1, 20), min_size=n, max_size=n),
            st.lists(st.floats(0.01, 1), min_size=n * n, max_size=n * n),
            st.floats(0.5, 5),
            st.sampled_from([0.0, 0.5, 2.0]),
            st.sampled_from(["any", "next"]),
        )
    )
)
def test_dynamic_programming_terms_sum_to_the_cost_functions(case):
    rates, flat, window, alpha, strategy = case
    inp = _symmetric(rates, flat, window, unary=True)
    model = CostModel(alpha=alpha, strategy=strategy)
    terms = Terms(inp, model)
    for order in all_orders(len(rates)):
        total, prefix = 0.0, 0
        for c in order:
            total += terms.order_step(prefix, c)
            prefix |= 1 << c
        assert total == pytest.approx(model.order(order, inp), rel=1e-9)
    for tree in all_trees(range(len(rates))):
        assert _tree_terms(tree, terms) == pytest.approx(model.tree(tree, inp), rel=1e-9)


def _tree_terms(node: Node, terms: Terms) -> float:
    if isinstance(node, Leaf):
        return terms.leaf(node.index)
    left, right = mask_of(node.left.leaves), mask_of(node.right.leaves)
    return _tree_terms(node.left, terms) + _tree_terms(node.right, terms) + terms.join(left, right)
