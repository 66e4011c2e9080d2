"""GREEDY (Kolchinsky & Schuster §6.1, after Swami [48]): build the order step by step.

"Selecting at each step the relation which minimizes the value of the cost function": the
next component is the one whose step term (:meth:`~situflow.plan.cost.Terms.order_step`,
the growth of ``Cost_ord`` plus ``α`` times the latency it adds) is smallest; ties go to the
earlier component. ``O(n²)`` cost terms.
"""

from __future__ import annotations

from situflow.plan.cost import CostInputs, CostModel, Terms
from situflow.plan.generator import order_plan
from situflow.plan.pattern import Pattern
from situflow.plan.plans import OrderPlan
from situflow.plan.stats import Statistics

NAME = "GREEDY"


def greedy_order(terms: Terms) -> tuple[int, ...]:
    remaining = list(range(terms.inp.size))
    order: list[int] = []
    prefix = 0
    while remaining:
        best = min(remaining, key=lambda c: (terms.order_step(prefix, c), c))
        remaining.remove(best)
        order.append(best)
        prefix |= 1 << best
    return tuple(order)


def generate(pattern: Pattern, stats: Statistics, cost_model: CostModel) -> OrderPlan:
    inputs = CostInputs.build(pattern, stats)
    order = greedy_order(Terms(inputs, cost_model))
    return order_plan(pattern, inputs, cost_model, order, NAME)
