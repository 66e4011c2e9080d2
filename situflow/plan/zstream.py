"""ZSTREAM and ZSTREAM-ORD (Kolchinsky & Schuster §2.3, §6.1; Mei & Madden [36]).

ZStream "creates an evaluation tree by iterating over all possible tree topologies for a
given sequence of leaves": the leaves keep the pattern's order and only the bracketing is
chosen (Catalan ``C_{n-1}`` topologies, :func:`tests.plan.space.topologies`). Because a
subtree's cost depends only on its leaf interval, the search is the interval dynamic program
``best(i, j) = min_k best(i, k) + best(k+1, j) + term(i..j)``, ``O(n³)``. It cannot reorder
leaves, so it misses plans such as ``((A, C), B)`` of Figure 2(c) (K-5).

ZSTREAM-ORD first orders the leaves with GREEDY, then runs the same search.
"""

from __future__ import annotations

from situflow.plan.cost import CostInputs, CostModel, Terms
from situflow.plan.generator import tree_plan
from situflow.plan.greedy import greedy_order
from situflow.plan.pattern import Pattern
from situflow.plan.plans import Join, Leaf, Node, TreePlan
from situflow.plan.stats import Statistics

NAME = "ZSTREAM"
ORD_NAME = "ZSTREAM-ORD"


def best_bracketing(leaves: tuple[int, ...], terms: Terms) -> Node:
    """The cheapest tree whose leaves, read left to right, are ``leaves``."""
    n = len(leaves)
    masks = [[0] * n for _ in range(n)]
    for i in range(n):
        acc = 0
        for j in range(i, n):
            acc |= 1 << leaves[j]
            masks[i][j] = acc
    best = [[0.0] * n for _ in range(n)]
    cut = [[0] * n for _ in range(n)]
    for i in range(n):
        best[i][i] = terms.leaf(leaves[i])
    for width in range(1, n):
        for i in range(n - width):
            j = i + width
            best[i][j] = float("inf")
            for k in range(i, j):
                value = best[i][k] + best[k + 1][j] + terms.join(masks[i][k], masks[k + 1][j])
                # The first split stands until a cheaper one: costs can overflow to inf
                # (a huge window), and a cut left unset would not bracket i..j.
                if value < best[i][j] or k == i:
                    best[i][j], cut[i][j] = value, k
    return _build(leaves, cut, 0, n - 1)


def _build(leaves: tuple[int, ...], cut: list[list[int]], i: int, j: int) -> Node:
    if i == j:
        return Leaf(leaves[i])
    k = cut[i][j]
    return Join(_build(leaves, cut, i, k), _build(leaves, cut, k + 1, j))


def generate(pattern: Pattern, stats: Statistics, cost_model: CostModel) -> TreePlan:
    inputs = CostInputs.build(pattern, stats)
    root = best_bracketing(tuple(range(pattern.size)), Terms(inputs, cost_model))
    return tree_plan(pattern, inputs, cost_model, root, NAME)


def generate_ordered(pattern: Pattern, stats: Statistics, cost_model: CostModel) -> TreePlan:
    inputs = CostInputs.build(pattern, stats)
    terms = Terms(inputs, cost_model)
    root = best_bracketing(greedy_order(terms), terms)
    return tree_plan(pattern, inputs, cost_model, root, ORD_NAME)
