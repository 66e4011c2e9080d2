"""EFREQ (Kolchinsky & Schuster §6.1): ascending arrival frequency (PB-CED, Lazy NFA).

Rates are those after the §4 Kleene rewrite (``r'_i = 2^(r_i·W)/W``), so a Kleene component
is postponed as the paper intends; ties keep the pattern order.
"""

from __future__ import annotations

from situflow.plan.cost import CostInputs, CostModel
from situflow.plan.generator import order_plan
from situflow.plan.pattern import Pattern
from situflow.plan.plans import OrderPlan
from situflow.plan.stats import Statistics

NAME = "EFREQ"


def generate(pattern: Pattern, stats: Statistics, cost_model: CostModel) -> OrderPlan:
    inputs = CostInputs.build(pattern, stats)
    order = tuple(sorted(range(pattern.size), key=lambda i: (inputs.rates[i], i)))
    return order_plan(pattern, inputs, cost_model, order, NAME)
