"""DP-LD (Kolchinsky & Schuster §6.1, Selinger et al. [46]): the optimal order by dynamic programming.

The order cost is a sum of step terms that depend only on the *set* already bound and the
component added (:meth:`~situflow.plan.cost.Terms.order_step`: ``PM(k)`` of §3.1, ``W·m[k]``
of §5.2, and the latency of §5.1 all have that form), so the cheapest order of a set ``S``
ends with the ``c`` minimising ``best(S - c) + step(S - c, c)``. This is exact over all
``n!`` orders (K-13) in ``O(2^n · n)`` terms. Above :data:`MAX_SIZE` components it falls
back to II-GREEDY (the paper: exhaustive methods are impractical for long
patterns, K-14).
"""

from __future__ import annotations

from dataclasses import replace

from situflow.plan import iterative
from situflow.plan.cost import CostInputs, CostModel, Terms
from situflow.plan.generator import order_plan
from situflow.plan.pattern import Pattern
from situflow.plan.plans import OrderPlan
from situflow.plan.stats import Statistics

NAME = "DP-LD"
MAX_SIZE = 14
"""Largest pattern planned exhaustively (2^14 · 14 terms, well under a second)."""


def optimal_order(terms: Terms) -> tuple[int, ...]:
    n = terms.inp.size
    full = (1 << n) - 1
    best = [0.0] + [float("inf")] * full
    last = [-1] * (full + 1)
    for mask in range(1, full + 1):
        rest = mask
        while rest:
            bit = rest & -rest
            rest ^= bit
            c = bit.bit_length() - 1
            value = best[mask ^ bit] + terms.order_step(mask ^ bit, c)
            if value < best[mask] or last[mask] < 0:
                best[mask], last[mask] = value, c
    order: list[int] = []
    mask = full
    while mask:
        order.append(last[mask])
        mask ^= 1 << last[mask]
    return tuple(reversed(order))


def generate(pattern: Pattern, stats: Statistics, cost_model: CostModel) -> OrderPlan:
    if pattern.size > MAX_SIZE:
        fallback = iterative.generate_greedy(pattern, stats, cost_model)
        return replace(fallback, algorithm=f"{NAME}→{fallback.algorithm} (n > {MAX_SIZE})")
    inputs = CostInputs.build(pattern, stats)
    order = optimal_order(Terms(inputs, cost_model))
    return order_plan(pattern, inputs, cost_model, order, NAME)
