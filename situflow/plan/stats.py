"""Statistics for plan generation, measured online: arrival rates and selectivities.

Kolchinsky & Schuster (PVLDB 2018) cost every plan from the arrival rate ``r_i`` of each
event type and the selectivity ``sel_i,j`` of each condition (§3.1), and note in §5 that both
"are rarely obtained in advance and can change rapidly over time", so they must be measured
on the fly and the plan adapted (their adaptive paper [28]). This module measures them:

* **rates** by sliding counts: the number of events of a type in the last ``horizon`` time
  units, divided by the covered span (the whole horizon once the stream is that long). Counts
  are exact and bounded by the horizon, unlike an EMA of inter-arrival times, which reacts
  slowly to a type that stops arriving.
* **selectivities** by sampling: every ``stride``-th event is tested against the last
  ``sample`` events of the other variable's type (filters: against itself); passes and
  trials decay exponentially (factor ``decay`` per trial) so that old behaviour fades. The
  stride keeps the measuring cheaper than the evaluation it steers. A condition never tried
  keeps its declared prior, and the prior counts as one trial more: a rare condition that
  has not passed yet is estimated small, never 0, which would make every plan that tests it
  early look free.
* **drift**: :func:`drifted` reports whether any rate or selectivity moved by more than a
  factor ``1 + threshold`` (relative, both directions); the adaptive evaluator re-plans then.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from situflow.plan.pattern import Event, Pattern


@dataclass(frozen=True)
class Statistics:
    """A snapshot: events per time unit by type, selectivity by condition name."""

    rates: Mapping[str, float] = field(default_factory=dict)
    selectivities: Mapping[str, float] = field(default_factory=dict)

    def rate(self, event_type: str) -> float:
        return self.rates.get(event_type, 0.0)

    def selectivity(self, name: str, prior: float) -> float:
        return self.selectivities.get(name, prior)


def drifted(old: Statistics, new: Statistics, threshold: float = 0.5) -> bool:
    """Whether a rate or a selectivity changed by more than a factor ``1 + threshold``."""

    def moved(a: float, b: float) -> bool:
        lo, hi = min(a, b), max(a, b)
        if hi == 0.0:
            return False
        return lo == 0.0 or hi / lo > 1.0 + threshold

    for key in set(old.rates) | set(new.rates):
        if moved(old.rate(key), new.rate(key)):
            return True
    return any(
        moved(old.selectivities.get(k, 1.0), new.selectivities.get(k, 1.0))
        for k in set(old.selectivities) | set(new.selectivities)
    )


class StatisticsCollector:
    """Measures :class:`Statistics` for one pattern from the events it observes."""

    def __init__(
        self,
        pattern: Pattern,
        horizon: float,
        sample: int = 8,
        decay: float = 0.999,
        stride: int = 4,
    ) -> None:
        self._pattern = pattern
        self._horizon = horizon
        self._decay = decay
        self._arrivals: dict[str, deque[float]] = {t: deque() for t in pattern.types()}
        self._first_ts: float | None = None
        self._now = 0.0
        var_type = {c.var: c.type for c in pattern.components}
        var_type.update({n.var: n.type for n in pattern.negations})
        self._var_type = var_type
        self._recent: dict[str, deque[Event]] = {t: deque(maxlen=sample) for t in pattern.types()}
        self._stride = stride
        self._observed = 0
        self._passes: dict[str, float] = {}
        self._priors = {f.name: f.selectivity for f in pattern.filters}
        self._priors.update({p.name: p.selectivity for p in pattern.predicates})
        self._trials: dict[str, float] = {}

    def observe(self, event: Event) -> None:
        arrivals = self._arrivals.get(event.type)
        if arrivals is None:
            return
        if self._first_ts is None:
            self._first_ts = event.ts
        self._now = event.ts
        arrivals.append(event.ts)
        while arrivals[0] < event.ts - self._horizon:
            arrivals.popleft()
        self._observed += 1
        if self._observed % self._stride == 0:
            self._sample(event)
        self._recent[event.type].append(event)

    def _sample(self, event: Event) -> None:
        """Test the conditions ``event`` takes part in against recent events."""
        for flt in self._pattern.filters:
            if self._var_type[flt.var] == event.type:
                self._count(flt.name, bool(flt.fn(event)))
        for pred in self._pattern.predicates:
            left, right = self._var_type[pred.left], self._var_type[pred.right]
            if left == event.type:
                for other in self._recent[right]:
                    self._count(pred.name, bool(pred.fn(event, other)))
            elif right == event.type:
                for other in self._recent[left]:
                    self._count(pred.name, bool(pred.fn(other, event)))

    def _count(self, name: str, passed: bool) -> None:
        self._passes[name] = self._passes.get(name, 0.0) * self._decay + passed
        self._trials[name] = self._trials.get(name, 0.0) * self._decay + 1.0

    def snapshot(self) -> Statistics:
        if self._first_ts is None:
            return Statistics()
        start = self._now - self._horizon
        # A stream shorter than the horizon is measured over what it covers (at least 1 unit).
        span = max(min(self._horizon, self._now - self._first_ts), 1.0)
        rates: dict[str, float] = {}
        for event_type, arrivals in self._arrivals.items():
            while arrivals and arrivals[0] < start:
                arrivals.popleft()
            rates[event_type] = len(arrivals) / span
        selectivities = {k: (self._passes[k] + self._priors[k]) / (self._trials[k] + 1.0)
                         for k in self._trials}
        return Statistics(rates, selectivities)
