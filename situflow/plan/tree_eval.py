"""Tree-based evaluation: instance-based ZStream (Kolchinsky & Schuster §2.3, Mei & Madden [36]).

"For each event participating in a pattern, a designated leaf is created. During evaluation,
events are routed to their corresponding leaves and are buffered there. The non-leaf nodes
accumulate the partial matches ... Whenever a new instance I′ is created, the system will
attempt to combine it with previously created 'siblings', that is, instances corresponding
to the subtree sharing the parent node ... recursively until the root of the tree is reached
or no siblings are found." Matches formed at the root are reported.

The §4 operators are node types: a Kleene leaf holds every non-empty subset of its type's
events within the window (created when its newest member arrives), and a negation is an
NSEQ check at the lowest node covering the events it depends on
(:meth:`~situflow.plan.plans.TreePlan.negation_nodes`); a trailing negation delays emission
at the root. Semantics and the exactly-once argument: :mod:`situflow.plan.evaluator`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from situflow.plan.evaluator import Binding, Check, Evaluator, Partial, PlanMatch, joinable, merge, subsets
from situflow.plan.pattern import Event
from situflow.plan.plans import Join, Leaf, Node, OrderPlan, Plan, TreePlan, left_deep

_PRUNE_EVERY = 256
"""Pushes between sweeps that drop expired instances (joins also skip them on the fly)."""


@dataclass(eq=False)
class _Slot:
    """One plan node at run time: its instances and how it joins its sibling."""

    mask: int
    leaf: int  # component index of a leaf, -1 for a join
    kleene: bool
    parent: _Slot | None = None
    sibling: _Slot | None = None
    checks: list[tuple[int, int, list[Check]]] = field(default_factory=list)
    negations: list[int] = field(default_factory=list)
    instances: list[Partial] = field(default_factory=list)
    raw: deque[Event] = field(default_factory=deque)  # a Kleene leaf's events, for subsets


class TreeEvaluator(Evaluator):
    """Runs a :class:`TreePlan` (an :class:`OrderPlan` runs as its left-deep tree)."""

    def __init__(self, plan: Plan) -> None:
        super().__init__(plan.pattern)
        if isinstance(plan, OrderPlan):
            plan = TreePlan(plan.pattern, left_deep(plan.order), plan.cost, plan.algorithm)
        self.plan = plan
        self._blank: Binding = ((),) * self.compiled.n
        slots: dict[int, _Slot] = {}
        self._leaves: list[_Slot] = []
        self._joins: list[_Slot] = []
        self._build(plan.root, slots)
        self._pushes = 0
        for k, node in enumerate(plan.negation_nodes()):
            if not self.compiled.negations[k].trailing:
                slots[id(node)].negations.append(k)

    def _build(self, node: Node, slots: dict[int, _Slot]) -> _Slot:
        comps = self.pattern.components
        if isinstance(node, Leaf):
            slot = _Slot(1 << node.index, node.index, comps[node.index].kleene)
            self._leaves.append(slot)
        else:
            assert isinstance(node, Join)
            left, right = self._build(node.left, slots), self._build(node.right, slots)
            slot = _Slot(left.mask | right.mask, -1, False)
            left.parent = right.parent = slot
            left.sibling, right.sibling = right, left
            # The checks run from the side that receives a new instance to its sibling.
            left.checks = self.compiled.join_checks(left.mask, right.mask)
            right.checks = self.compiled.join_checks(right.mask, left.mask)
            self._joins.append(slot)
        slots[id(node)] = slot
        return slot

    def _positive(self, event: Event, out: list[PlanMatch]) -> None:
        horizon = event.ts - self.window
        for slot in self._leaves:
            while slot.raw and slot.raw[0].ts < horizon:
                slot.raw.popleft()
        self._pushes += 1
        if self._pushes % _PRUNE_EVERY == 0:
            for slot in (*self._leaves, *self._joins):
                slot.instances = [p for p in slot.instances if p[1] >= horizon]
        for slot in self._leaves:
            if not self.compiled.accepts(slot.leaf, event):
                continue
            for elements in self._leaf_instances(slot, event):
                binding = (*self._blank[: slot.leaf], elements, *self._blank[slot.leaf + 1 :])
                self._arrive(slot, (binding, elements[0].ts, event.ts), out)
            if slot.kleene:
                slot.raw.append(event)

    def _leaf_instances(self, slot: _Slot, newest: Event) -> list[tuple[Event, ...]]:
        if not slot.kleene:
            return [(newest,)]
        horizon = newest.ts - self.window
        candidates = [x for x in slot.raw if x.ts >= horizon]
        return [(*chosen, newest) for chosen in subsets(candidates)]

    def _arrive(self, slot: _Slot, instance: Partial, out: list[PlanMatch]) -> None:
        binding, lo, hi = instance
        if slot.negations and not self._negations_clear(slot.negations, binding):
            return
        if slot.parent is None:
            self._complete(binding, out)
            return
        slot.instances.append(instance)
        sibling = slot.sibling
        assert sibling is not None
        horizon = hi - self.window
        for other, other_lo, other_hi in sibling.instances:
            if other_lo < horizon or not joinable(binding, other, slot.checks):
                continue
            low = min(lo, other_lo)
            high = max(hi, other_hi)
            if high - low <= self.window:
                merged = merge(binding, other)
                self._arrive(slot.parent, (merged, low, high), out)

    def state_size(self) -> int:
        slots = (*self._leaves, *self._joins)
        return super().state_size() + sum(len(s.instances) + len(s.raw) for s in slots)
