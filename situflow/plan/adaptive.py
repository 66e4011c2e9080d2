"""Running a plan, and re-planning when the statistics drift (Kolchinsky & Schuster §5).

"The arrival rates of event types and the predicate selectivities are rarely obtained in
advance and can change rapidly over time. An adaptive solution must be devised to measure
the desired statistics on-the-fly and adapt the evaluation plan accordingly" (§5; the method
itself is their separate paper [28], not a seed). :class:`AdaptiveEvaluator` measures the
statistics with :class:`~situflow.plan.stats.StatisticsCollector`, tests for drift every
``check_every`` events, and switches to a new plan when the generator then picks another.

A switch never changes the result set. Every piece of evaluator state — partial matches,
buffered events, matches waiting on a trailing negation — involves only events younger than
``now - W`` (older ones can no longer be part of a match that is not complete yet). The new
evaluator is therefore built by replaying the retained events of the last window and then
advancing to the current time; what it emits while doing so was already emitted by the old
evaluator (those matches completed before the switch), so it is discarded, and from then on
the new evaluator emits exactly what the old one would have.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any, Literal

from situflow.errors import StateError
from situflow.plan.cost import CostModel
from situflow.plan.evaluator import Evaluator, PlanMatch
from situflow.plan.order_eval import OrderEvaluator
from situflow.plan.pattern import Event, Pattern
from situflow.plan.plans import Plan
from situflow.plan.registry import DEFAULT, choose_plan
from situflow.plan.stats import Statistics, StatisticsCollector, drifted
from situflow.plan.tree_eval import TreeEvaluator

Mechanism = Literal["order", "tree"]
SNAPSHOT_VERSION = 1


def evaluator_for(plan: Plan, mechanism: Mechanism | None = None) -> Evaluator:
    """The evaluator of ``plan``: its own mechanism, or the one asked for (an order plan
    runs as its left-deep tree, a tree plan in its leaf order)."""
    if (mechanism or plan.kind) == "order":
        return OrderEvaluator(plan)
    return TreeEvaluator(plan)


def same_plan(a: Plan, b: Plan) -> bool:
    return a.kind == b.kind and a.as_tree() == b.as_tree() and a.order == b.order


class AdaptiveEvaluator:
    """Evaluates ``pattern`` with the plan ``algorithm`` picks, re-planning on drift."""

    def __init__(
        self,
        pattern: Pattern,
        algorithm: str = DEFAULT,
        cost_model: CostModel | None = None,
        *,
        stats: Statistics | None = None,
        mechanism: Mechanism | None = None,
        horizon: float | None = None,
        check_every: int = 1000,
        threshold: float = 0.5,
    ) -> None:
        self.pattern = pattern
        self.algorithm = algorithm
        self.cost_model = cost_model or CostModel()
        self.collector = StatisticsCollector(pattern, horizon or 10 * pattern.window)
        self.stats = stats or Statistics()
        self.plan = choose_plan(pattern, self.stats, algorithm, self.cost_model)
        self.replans = 0
        self._mechanism = mechanism
        self._evaluator = evaluator_for(self.plan, mechanism)
        self._check_every = check_every
        self._threshold = threshold
        self._types = pattern.types()
        self._recent: deque[Event] = deque()
        self._seen = 0
        self._now = float("-inf")

    def push(self, event: Event) -> list[PlanMatch]:
        out = self._evaluator.push(event)
        self._now = event.ts
        if event.type in self._types:
            self._recent.append(event)
            self.collector.observe(event)
        horizon = event.ts - self.pattern.window
        while self._recent and self._recent[0].ts < horizon:
            self._recent.popleft()
        self._seen += 1
        if self._seen % self._check_every == 0:
            self.replan()
        return out

    def push_many(self, events: Iterable[Event]) -> list[PlanMatch]:
        out: list[PlanMatch] = []
        for event in events:
            out.extend(self.push(event))
        return out

    def advance_to(self, watermark: float) -> list[PlanMatch]:
        self._now = max(self._now, watermark)
        return self._evaluator.advance_to(watermark)

    def flush(self) -> list[PlanMatch]:
        return self._evaluator.flush()

    def state_size(self) -> int:
        """Partial matches and buffered events of the current plan's evaluator."""
        return self._evaluator.state_size()

    def replan(self) -> bool:
        """Re-plan if the measured statistics drifted; whether the plan changed."""
        measured = self.collector.snapshot()
        if not drifted(self.stats, measured, self._threshold):
            return False
        self.stats = measured
        plan = choose_plan(self.pattern, measured, self.algorithm, self.cost_model)
        if same_plan(plan, self.plan):
            self.plan = plan
            return False
        self.switch_to(plan)
        return True

    def snapshot(self) -> dict[str, Any]:
        """The state as plain data: the retained events of the last window, the current
        time and the statistics the plan was chosen with (format version 1)."""
        return {
            "version": SNAPSHOT_VERSION,
            "now": None if self._now == float("-inf") else self._now,
            "rates": dict(self.stats.rates),
            "selectivities": dict(self.stats.selectivities),
            "events": [[e.type, e.ts, e.seq, dict(e.attrs)] for e in self._recent],
        }

    @classmethod
    def restore(
        cls,
        pattern: Pattern,
        data: dict[str, Any],
        algorithm: str = DEFAULT,
        cost_model: CostModel | None = None,
        **options: Any,
    ) -> AdaptiveEvaluator:
        """Rebuild from :meth:`snapshot`: replaying the retained events recreates every
        partial and pending match (see the module docstring); their matches were emitted
        before the snapshot and are discarded."""
        if data.get("version") != SNAPSHOT_VERSION:
            raise StateError(
                f"plan state has format {data.get('version')!r}, this situflow reads "
                f"{SNAPSHOT_VERSION}; replay the input from the last committed offset instead"
            )
        stats = Statistics(data["rates"], data["selectivities"])
        restored = cls(pattern, algorithm, cost_model, stats=stats, **options)
        for kind, ts, seq, attrs in data["events"]:
            event = Event(kind, ts, seq, attrs)
            restored._evaluator.push(event)
            restored._recent.append(event)
            restored.collector.observe(event)
        if data["now"] is not None:
            restored._now = data["now"]
            restored._evaluator.advance_to(data["now"])
        return restored

    def switch_to(self, plan: Plan) -> None:
        """Continue with ``plan``; the result set is unchanged (see the module docstring)."""
        fresh = evaluator_for(plan, self._mechanism)
        for event in self._recent:
            fresh.push(event)
        fresh.advance_to(self._now)
        self._evaluator = fresh
        self.plan = plan
        self.replans += 1
