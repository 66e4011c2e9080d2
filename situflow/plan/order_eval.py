"""Order-based evaluation: the Lazy NFA of Kolchinsky & Schuster §2.2 ([29, 30]).

"Given a pattern of n events and a user-specified order O on the event types ..., a chain of
n+1 states is constructed, with each state k corresponding to a match prefix of size k − 1
... incoming events are stored locally. A buffered event is retrieved and processed when its
corresponding state in the chain is reached." Here state ``k`` holds the partial matches that
bound the first ``k`` components of the plan order and wait for component ``order[k]``:

* an arriving event of that component extends them (the NFA transition);
* a partial match that has just reached state ``k`` looks back into the buffer of
  ``order[k]`` at once (the lazy part), since those events arrived before it existed.

Kleene components (§4): a Kleene step binds a non-empty set of its type's events — every
subset of the compatible buffered events, with the arriving event as the newest member — so
the "KL operator restored" on the NFA edge is a set-valued transition. Negations (§4) are a
rejecting check placed after the plan step that binds the last positive event they depend on
(:meth:`~situflow.plan.plans.OrderPlan.negation_steps`); a trailing negation delays emission.
Semantics and the exactly-once argument: :mod:`situflow.plan.evaluator`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from situflow.plan.evaluator import Binding, Evaluator, Partial, PlanMatch, subsets
from situflow.plan.pattern import Event
from situflow.plan.plans import OrderPlan, Plan, TreePlan

_PRUNE_EVERY = 256
"""Pushes between sweeps that drop expired partial matches from states not visited lately."""


class OrderEvaluator(Evaluator):
    """Runs an :class:`OrderPlan` (a :class:`TreePlan` runs in its leaf order)."""

    def __init__(self, plan: Plan) -> None:
        super().__init__(plan.pattern)
        order = plan.order
        if isinstance(plan, TreePlan):
            plan = OrderPlan(plan.pattern, order, plan.cost, plan.algorithm)
        self.plan = plan
        n = self.compiled.n
        self._order = order
        self._kleene = [plan.pattern.components[c].kleene for c in order]
        # State k (1..n-1): partial matches bound on order[:k], waiting for order[k].
        self._states: list[list[Partial]] = [[] for _ in range(n)]
        self._buffers: list[deque[Event]] = [deque() for _ in range(n)]
        masks = [0]
        for c in order:
            masks.append(masks[-1] | 1 << c)
        self._checks = [self.compiled.join_checks(masks[k], 1 << order[k]) for k in range(n)]
        steps = plan.negation_steps()
        self._neg_after: list[list[int]] = [[] for _ in range(n + 1)]
        for k, step in enumerate(steps):
            if not self.compiled.negations[k].trailing:
                self._neg_after[step].append(k)
        self._pushes = 0
        self._blank: Binding = ((),) * n

    def _positive(self, event: Event, out: list[PlanMatch]) -> None:
        n = self.compiled.n
        horizon = event.ts - self.window
        self._pushes += 1
        if self._pushes % _PRUNE_EVERY == 0:
            for k in range(1, n):
                self._states[k] = [p for p in self._states[k] if p[1] >= horizon]
        for buffer in self._buffers:
            while buffer and buffer[0].ts < horizon:
                buffer.popleft()
        accepted = [self.compiled.accepts(c, event) for c in self._order]
        for k in range(1, n):
            if accepted[k]:
                self._states[k] = [p for p in self._states[k] if p[1] >= horizon]
        # Only partial matches older than this event may take it; the ones it creates
        # already contain it.
        sizes = [len(s) for s in self._states]
        for k in range(n):
            if not accepted[k]:
                continue
            if k == 0:
                for elements in self._elements(0, self._blank, event):
                    binding = self._with(self._blank, 0, elements)
                    self._reach(1, binding, elements[0].ts, event.ts, out)
                continue
            for partial in self._states[k][: sizes[k]]:
                self._extend(k, partial, event, out)
        for k in range(n):
            if accepted[k]:
                self._buffers[k].append(event)

    def _extend(self, k: int, partial: Partial, event: Event, out: list[PlanMatch]) -> None:
        binding, lo, _ = partial
        if not self._fits(k, binding, event):
            return
        for elements in self._elements(k, binding, event):
            low = min(lo, elements[0].ts)
            self._reach(k + 1, self._with(binding, k, elements), low, event.ts, out)

    def _fits(self, k: int, binding: Binding, event: Event) -> bool:
        """Whether ``event`` may join ``binding`` as (an element of) step ``k``."""
        for i, _, fns in self._checks[k]:
            for bound in binding[i]:
                for fn in fns:
                    if not fn(bound, event):
                        return False
        return True

    def _elements(self, k: int, binding: Binding, newest: Event) -> Iterator[tuple[Event, ...]]:
        """The event tuples step ``k`` may bind, with the arriving ``newest`` as last one."""
        if not self._kleene[k]:
            yield (newest,)
            return
        horizon = newest.ts - self.window
        candidates = [x for x in self._buffers[k] if x.ts >= horizon and self._fits(k, binding, x)]
        for chosen in subsets(candidates):
            yield (*chosen, newest)

    def _with(self, binding: Binding, k: int, elements: tuple[Event, ...]) -> Binding:
        c = self._order[k]
        return (*binding[:c], elements, *binding[c + 1 :])

    def _reach(self, k: int, binding: Binding, lo: float, hi: float, out: list[PlanMatch]) -> None:
        """A partial match now bound on ``order[:k]``: check negations, then catch up."""
        if hi - lo > self.window:
            return
        if self._neg_after[k] and not self._negations_clear(self._neg_after[k], binding):
            return
        if k == self.compiled.n:
            self._complete(binding, out)
            return
        self._states[k].append((binding, lo, hi))
        # Lazy evaluation: the buffered events of the next component arrived before this
        # partial match existed, so they are joined now.
        horizon = hi - self.window
        candidates = [x for x in self._buffers[k] if x.ts >= horizon and self._fits(k, binding, x)]
        if self._kleene[k]:
            for chosen in subsets(candidates):
                if chosen:
                    low = min(lo, chosen[0].ts)
                    self._reach(k + 1, self._with(binding, k, chosen), low, hi, out)
        else:
            for x in candidates:
                self._reach(k + 1, self._with(binding, k, (x,)), min(lo, x.ts), hi, out)

    def partial_counts(self) -> tuple[int, ...]:
        """Partial matches per NFA state: index ``k`` holds those bound on ``order[:k]``."""
        return tuple(len(s) for s in self._states)

    def state_size(self) -> int:
        return super().state_size() + sum(len(s) for s in self._states) + sum(len(b) for b in self._buffers)
