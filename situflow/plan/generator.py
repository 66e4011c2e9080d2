"""What every plan generator shares: its signature and how it wraps a result into a plan.

Kolchinsky & Schuster §6.1 compare nine generators; each lives in its own module
(STYLE.md §11) and has the signature ``generate(pattern, stats, cost_model) -> Plan``. They
all cost their result with the same :class:`~situflow.plan.cost.CostModel`, so plan costs
from different generators are comparable (K-13).
"""

from __future__ import annotations

from typing import Protocol

from situflow.plan.cost import CostInputs, CostModel
from situflow.plan.pattern import Pattern
from situflow.plan.plans import Node, OrderPlan, Plan, TreePlan
from situflow.plan.stats import Statistics


class Generator(Protocol):
    def __call__(self, pattern: Pattern, stats: Statistics, cost_model: CostModel) -> Plan: ...


def order_plan(
    pattern: Pattern, inputs: CostInputs, model: CostModel, order: tuple[int, ...], name: str
) -> OrderPlan:
    return OrderPlan(pattern, order, model.order(order, inputs), name)


def tree_plan(pattern: Pattern, inputs: CostInputs, model: CostModel, root: Node, name: str) -> TreePlan:
    return TreePlan(pattern, root, model.tree(root, inputs), name)
