"""Evaluation orders for the matcher and their cost model (thesis §5.5.4, eqs. 5.2-5.6).

A plan is a join order over situation buffers that starts with the triggering situation and
never joins a buffer without an applicable temporal constraint (no cross products). Its cost
counts intermediate results and binary searches:

    |Res_1| = size of the first step; |Res_i| = |Res_{i-1}| * |Buf_i| * phi_i          (5.4)
    phi_i = prod over constraints C applicable at step i of (sum over R in C of phi_R)  (5.5)
    C_findMatches(Buf_i) = sum over applicable C, R in C of 4 * log2 |Buf_i|            (5.3)
    cost = sum_{i=2..n} (|Res_{i-1}| * |Res_i| + C_findMatches(Buf_i))                  (5.2)

starting from the relation selectivities phi_R of Table 5.3. Buffer sizes and each constraint's
selectivity (the share of a buffer that a range query returns) are tracked as exponential moving
averages over matcher invocations, EMA_i = alpha * x + (1 - alpha) * EMA_{i-1} (5.6); when an
estimate differs from the one a plan was built on by more than ``threshold`` (relative), the
plan is recomputed. The matcher keeps no intermediate results, so switching plans between
two invocations costs nothing and never changes the result set.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from situflow.lang.allen import RELATIONS
from situflow.tpstream.match.allen import SELECTIVITY

if TYPE_CHECKING:
    from situflow.tpstream.query import TPStreamQuery

# Above this many situations the orders are built greedily instead of exhaustively.
EXHAUSTIVE_LIMIT = 7
# Selectivity changes below this scale do not count as drift (they barely move a plan's cost).
MIN_PHI = 0.01
# How many invocations pass between two drift checks (an EMA with alpha 0.01 moves slowly).
DRIFT_CHECK = 16


class Planner:
    def __init__(self, query: TPStreamQuery, alpha: float = 0.01, threshold: float = 0.2):
        self.constraints = query.constraints
        self.names = [d.name for d in query.definitions]
        self.alpha = alpha
        self.threshold = threshold
        n = len(self.names)
        self.sizes = [1.0] * n
        # Selectivity of each constraint, keyed by its pair (i < j); Table 5.3 priors (5.5).
        # fsum: a set's iteration order varies between runs, and so would a plain sum's last
        # digits, swapping evaluation orders of equal cost.
        self.phi = {
            (i, j): math.fsum(SELECTIVITY[r] for r in rels)
            for i, row in enumerate(self.constraints) for j, rels in enumerate(row)
            if i < j and rels is not None
        }
        self._plans: dict[int, tuple[tuple[int, ...], list[float]]] = {}
        self.replans = 0
        self._observed = 0

    def order(self, trigger: int) -> tuple[int, ...]:
        """The evaluation order for a situation of definition ``trigger``."""
        plan = self._plans.get(trigger)
        if plan is None:
            order, _ = self.best_order(trigger, self.sizes, first_size=1.0)
            self._plans[trigger] = plan = (order, self._statistics())
        return plan[0]

    def _statistics(self) -> list[float]:
        return [*self.sizes, *self.phi.values()]

    def observe_selectivity(self, i: int, j: int, related: int, size: int) -> None:
        """Fold one range query into the EMA of constraint (i, j): ``related`` of ``size``
        buffered situations satisfied it."""
        key = (i, j) if i < j else (j, i)
        self.phi[key] = self.alpha * related / size + (1 - self.alpha) * self.phi[key]

    def observe(self, sizes: Sequence[int]) -> None:
        """Fold one invocation's buffer sizes into the EMAs (5.6); every ``DRIFT_CHECK``
        invocations, drop the plans whose statistics drifted."""
        a = self.alpha
        self.sizes = [a * s + (1 - a) * e for s, e in zip(sizes, self.sizes, strict=True)]
        self._observed += 1
        if self._observed % DRIFT_CHECK:
            return
        n = len(self.sizes)
        stale = [
            trigger for trigger, (_, basis) in self._plans.items()
            if any(abs(now - then) > self.threshold * max(then, 1.0 if k < n else MIN_PHI)
                   for k, (now, then) in enumerate(zip(self._statistics(), basis, strict=True)))
        ]
        for trigger in stale:
            del self._plans[trigger]
            self.replans += 1

    # --- cost model -----------------------------------------------------------------------

    def step_selectivity(self, chosen: Sequence[int], step: int) -> float:
        phi = 1.0
        for j in chosen:
            if self.constraints[step][j] is not None:
                phi *= self.phi[(j, step) if j < step else (step, j)]
        return phi

    def cost(self, order: Sequence[int], sizes: Sequence[float],
             first_size: float | None = None) -> float:
        """Eq. 5.2 for ``order``; ``first_size`` overrides |Res_1| (1 for a trigger)."""
        res = sizes[order[0]] if first_size is None else first_size
        total = 0.0
        for k in range(1, len(order)):
            step = order[k]
            applicable = [j for j in order[:k] if self.constraints[step][j] is not None]
            if not applicable:
                return math.inf  # a cross product: never chosen
            nxt = res * sizes[step] * self.step_selectivity(applicable, step)
            searches = sum(len(self.constraints[step][j] or ()) for j in applicable)
            total += res * nxt + searches * 4 * math.log2(max(sizes[step], 1.0))
            res = nxt
        return total

    def best_order(self, first: int, sizes: Sequence[float],
                   first_size: float | None = None) -> tuple[tuple[int, ...], float]:
        rest = [i for i in range(len(sizes)) if i != first]
        if len(sizes) <= EXHAUSTIVE_LIMIT:
            candidates = ((first, *p) for p in itertools.permutations(rest))
            return min(((o, self.cost(o, sizes, first_size)) for o in candidates),
                       key=lambda oc: oc[1])
        order = [first]
        while rest:  # greedy: the cheapest connected next step
            best = min(
                (r for r in rest if any(self.constraints[r][j] is not None for j in order)),
                key=lambda r: self.cost([*order, r], sizes, first_size),
            )
            order.append(best)
            rest.remove(best)
        result = tuple(order)
        return result, self.cost(result, sizes, first_size)

    def describe(self) -> list[str]:
        if len(self.names) == 1:
            # PATTERN B joins nothing: there is no order to choose.
            (name,) = self.names
            return [f"  none: each situation of {name} is a match at its end (PATTERN {name})"]
        lines = []
        for trigger in range(len(self.names)):
            order, cost = self.best_order(trigger, self.sizes, first_size=1.0)
            path = " -> ".join(self.names[i] for i in order)
            lines.append(f"  on {self.names[trigger]}: {path}  (estimated cost {cost:.2f})")
        return lines

    def to_state(self) -> dict[str, Any]:
        return {"sizes": self.sizes, "phi": [[i, j, v] for (i, j), v in self.phi.items()]}

    def load_state(self, state: dict[str, Any]) -> None:
        self.sizes = list(state["sizes"])
        self.phi = {(i, j): v for i, j, v in state["phi"]}
        self._plans.clear()


assert set(SELECTIVITY) == set(RELATIONS)
