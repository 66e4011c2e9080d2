"""DP-B (Kolchinsky & Schuster §6.1, [46]): the optimal bushy tree by dynamic programming.

``Cost_tree`` (§3.2) is a sum over nodes of ``PM(N)``, which depends only on the leaf set of
``N``; the latency term of §5.1 adds, at each join on the path of ``T_n``, the partial
matches of the other side. So the cheapest tree over a set ``S`` joins the cheapest trees of
some split ``S = L ∪ R`` — exact over all ``n!·C_{n-1}`` trees (K-1, K-13) in ``O(3^n)``
terms. Above :data:`MAX_SIZE` it falls back to ZSTREAM-ORD (DP-B took over 50
hours at n = 22 in the paper, K-14).
"""

from __future__ import annotations

from dataclasses import replace

from situflow.plan import zstream
from situflow.plan.cost import CostInputs, CostModel, Terms
from situflow.plan.generator import tree_plan
from situflow.plan.pattern import Pattern
from situflow.plan.plans import Join, Leaf, Node, TreePlan
from situflow.plan.stats import Statistics

NAME = "DP-B"
MAX_SIZE = 12
"""Largest pattern planned exhaustively (3^12 / 2 splits, about a second)."""


def optimal_tree(terms: Terms) -> Node:
    n = terms.inp.size
    full = (1 << n) - 1
    best = [float("inf")] * (full + 1)
    split = [0] * (full + 1)
    for mask in range(1, full + 1):
        low = mask & -mask
        if mask == low:
            best[mask] = terms.leaf(low.bit_length() - 1)
            continue
        # Each unordered split once: the left part holds the lowest member.
        left = (mask - 1) & mask
        while left:
            if left & low:
                right = mask ^ left
                value = best[left] + best[right] + terms.join(left, right)
                if value < best[mask] or not split[mask]:
                    best[mask], split[mask] = value, left
            left = (left - 1) & mask
    return _build(full, split)


def _build(mask: int, split: list[int]) -> Node:
    if mask & (mask - 1) == 0:
        return Leaf(mask.bit_length() - 1)
    left = split[mask]
    return Join(_build(left, split), _build(mask ^ left, split))


def generate(pattern: Pattern, stats: Statistics, cost_model: CostModel) -> TreePlan:
    if pattern.size > MAX_SIZE:
        fallback = zstream.generate_ordered(pattern, stats, cost_model)
        return replace(fallback, algorithm=f"{NAME}→{fallback.algorithm} (n > {MAX_SIZE})")
    inputs = CostInputs.build(pattern, stats)
    root = optimal_tree(Terms(inputs, cost_model))
    return tree_plan(pattern, inputs, cost_model, root, NAME)
