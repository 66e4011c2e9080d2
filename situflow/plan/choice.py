"""Whether a cost-based plan can beat evaluating the pattern in its own order.

Kolchinsky & Schuster cost a plan by the partial matches it holds (§3.1 ``Cost_ord``, §3.2
``Cost_tree``). What the evaluators of :mod:`~situflow.plan.order_eval` and
:mod:`~situflow.plan.tree_eval` spend is closer to their *tests*: every event pushed is tested
against the filters of every component of its type (``Σ_i W·r_i`` per window, the same for
every plan), a lazy-NFA step tests every partial match of its state against every event of
its component that passed the filters, and a tree node tests every instance of one child
against every instance of the other; only the survivors become partial matches. Under
selective pairwise conditions (the partition key, the sequence order) the join attempts
exceed the partial matches severalfold, and with selective filters the per-event tests
outweigh both. The formulas below are ours, not the paper's:

* order ``O``: ``Σ_i W·r_i + Σ_{k=0..n-1} PM(k) · W·r_{o_k}·sel_{o_k,o_k}`` (``PM(0) = 1``);
* tree ``T``: ``Σ_i W·r_i + Σ_leaves PM(leaf) + Σ_joins PM(left) · PM(right)``.

The alternative to a plan is NFA^b, which evaluates the pattern order (the TRIVIAL plan's
order) with column-wise filters and run merging. A plan can only win by doing less work, so
:func:`decide` keeps NFA^b unless the candidate plan with the fewest tests needs ``advantage``
times fewer than the pattern order. The candidates are plans of both mechanisms (DP-B and
DP-LD for the SASE+ default): the generators minimise held partial matches, so either may need
fewer tests. How much faster NFA^b runs per test depends on the stream (1.9-3.1× the lazy NFA
on ``bench/sase.py``'s skip-till-any-match settings, where filters reject most events; 0.6× on
a six-type sequence without filters), so the SASE+ default settles a close call by timing
both (:class:`situflow.sase.planned.PlannedOperator`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from situflow.plan.cost import CostInputs, CostModel, Terms
from situflow.plan.pattern import Pattern
from situflow.plan.plans import Join, Leaf, Node, Plan
from situflow.plan.registry import choose_plan
from situflow.plan.stats import Statistics


def work_ord(order: tuple[int, ...], inp: CostInputs) -> float:
    """Tests of a lazy NFA running ``order`` per window (see the module docstring)."""
    terms = Terms(inp, CostModel())
    total, prefix = _filter_tests(inp), 0
    for c in order:
        total += terms.pm(prefix) * _leaf(inp, c)  # PM(0) = 1: the first step's events
        prefix |= 1 << c
    return total


def work_tree(root: Node, inp: CostInputs) -> float:
    """Tests of a ZStream tree per window (see the module docstring)."""
    terms = Terms(inp, CostModel())
    total = _filter_tests(inp)
    for node in root.nodes():
        if isinstance(node, Leaf):
            total += _leaf(inp, node.index)
        else:
            assert isinstance(node, Join)
            total += terms.pm(_mask(node.left)) * terms.pm(_mask(node.right))
    return total


def work(plan: Plan, inp: CostInputs) -> float:
    """Tests of ``plan`` per window on its own mechanism."""
    if plan.kind == "order":
        return work_ord(plan.order, inp)
    return work_tree(plan.as_tree(), inp)


@dataclass(frozen=True)
class Decision:
    """The engine chosen for a pattern: ``plan`` (made by ``algorithm``) is ``None`` when
    NFA^b evaluates it; the estimated tests per window of the cheapest candidate plan and of
    the pattern order."""

    plan: Plan | None
    algorithm: str
    plan_work: float
    order_work: float

    def describe(self) -> str:
        ratio = self.order_work / self.plan_work if self.plan_work else float("inf")
        compared = (f"pattern order {self.order_work:.3g} tests per window, "
                    f"{self.algorithm} plan {self.plan_work:.3g} ({ratio:.2f}× fewer)")
        if self.plan is None:
            return f"NFA^b: {compared}"
        return f"plan {self.algorithm}: {compared}"


def decide(pattern: Pattern, stats: Statistics, algorithms: Sequence[str],
           advantage: float = 1.0, cost_model: CostModel | None = None) -> Decision:
    """Of the plans ``algorithms`` pick under ``stats``, the one with the fewest tests if it
    needs ``advantage`` times fewer than the pattern order, else NFA^b (``plan`` is
    ``None``); the first algorithm breaks ties."""
    inp = CostInputs.build(pattern, stats)
    candidates = [(work(plan, inp), k, name, plan) for k, name in enumerate(algorithms)
                  for plan in [choose_plan(pattern, stats, name, cost_model)]]
    plan_work, _, algorithm, plan = min(candidates, key=lambda c: c[:2])
    order_work = work_ord(tuple(range(pattern.size)), inp)
    wins = plan_work * advantage < order_work
    return Decision(plan if wins else None, algorithm, plan_work, order_work)


def _filter_tests(inp: CostInputs) -> float:
    return sum(inp.window * rate for rate in inp.rates)


def _leaf(inp: CostInputs, i: int) -> float:
    return inp.window * inp.rates[i] * inp.sel[i][i]


def _mask(node: Node) -> int:
    mask = 0
    for i in node.leaves:
        mask |= 1 << i
    return mask
