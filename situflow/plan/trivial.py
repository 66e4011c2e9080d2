"""TRIVIAL (Kolchinsky & Schuster §6.1): the pattern's own order, as SASE and Cayuga use."""

from __future__ import annotations

from situflow.plan.cost import CostInputs, CostModel
from situflow.plan.generator import order_plan
from situflow.plan.pattern import Pattern
from situflow.plan.plans import OrderPlan
from situflow.plan.stats import Statistics

NAME = "TRIVIAL"


def generate(pattern: Pattern, stats: Statistics, cost_model: CostModel) -> OrderPlan:
    inputs = CostInputs.build(pattern, stats)
    return order_plan(pattern, inputs, cost_model, tuple(range(pattern.size)), NAME)
