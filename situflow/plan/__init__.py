"""Cost-based evaluation plans for sequence patterns (Kolchinsky & Schuster, PVLDB 2018).

The planner works on a parser-independent :class:`Pattern`; the SASE+ front end builds one
from a validated query. Statistics come from :class:`StatisticsCollector` (measured on the
stream) or are given; a generator from :data:`GENERATORS` picks the plan, whose
``describe()`` is what ``situflow check`` prints; :func:`evaluator_for` runs it:

>>> pattern = Pattern((Component("a", "A"), Component("b", "B")), window=10.0)
>>> plan = choose_plan(pattern, Statistics({"A": 5.0, "B": 1.0}), "DP-LD", CostModel())
>>> print(plan.describe())
plan DP-LD (order-based, lazy NFA), cost 260
  pattern: SEQ(A a, B b) WITHIN 10
  order:   B b → A a
>>> evaluator = evaluator_for(plan)
>>> stream = [Event("A", 0, 0), Event("A", 4, 1), Event("B", 9, 2), Event("B", 12, 3)]
>>> [m.bindings() for event in stream for m in evaluator.push(event)]
[{'a': [0], 'b': [2]}, {'a': [1], 'b': [2]}, {'a': [1], 'b': [3]}]

or :class:`AdaptiveEvaluator`, which measures the statistics itself and re-plans on drift
without changing the result set. Modules: :mod:`~situflow.plan.pattern` (model),
:mod:`~situflow.plan.stats`, :mod:`~situflow.plan.cost` (§3, §5 formulas), one module per
generator (:data:`GENERATORS`), :mod:`~situflow.plan.order_eval` and
:mod:`~situflow.plan.tree_eval` (the two mechanisms, skip-till-any-match),
:mod:`~situflow.plan.choice` (whether a plan can beat NFA^b, which the SASE+ default asks).
§4's SEQ→AND rewrite and nested patterns, which no language reaches, are test references in ``tests/plan/``.
"""

from situflow.plan.adaptive import AdaptiveEvaluator, evaluator_for
from situflow.plan.cost import CostInputs, CostModel
from situflow.plan.errors import PatternError
from situflow.plan.evaluator import PlanMatch
from situflow.plan.order_eval import OrderEvaluator
from situflow.plan.pattern import Component, Event, Filter, Negation, Pattern, Predicate
from situflow.plan.plans import Join, Leaf, OrderPlan, Plan, TreePlan
from situflow.plan.registry import (
    GENERATORS,
    ORDER_GENERATORS,
    TREE_GENERATORS,
    choose_plan,
)
from situflow.plan.stats import Statistics, StatisticsCollector, drifted
from situflow.plan.tree_eval import TreeEvaluator

__all__ = [
    "GENERATORS",
    "ORDER_GENERATORS",
    "TREE_GENERATORS",
    "AdaptiveEvaluator",
    "Component",
    "CostInputs",
    "CostModel",
    "Event",
    "Filter",
    "Join",
    "Leaf",
    "Negation",
    "OrderEvaluator",
    "OrderPlan",
    "Pattern",
    "PatternError",
    "Plan",
    "PlanMatch",
    "Predicate",
    "Statistics",
    "StatisticsCollector",
    "TreeEvaluator",
    "TreePlan",
    "choose_plan",
    "drifted",
    "evaluator_for",
]
