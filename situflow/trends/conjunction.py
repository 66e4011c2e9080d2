"""Conjunction of sub-patterns, ``P1 AND P2`` (COGRA Appendix C; GRETA, Poppe et al., VLDB 2017).

COGRA's Appendix C says only that the aggregates of a conjunctive pattern "can be computed
based on the aggregates for the sub-patterns" and cites GRETA, where a conjunction matches a
*pair* of trends, one per sub-pattern, and a disjunction counts
``COUNT(P1) + COUNT(P2) - COUNT(P12)``. GRETA's text was not at hand to check, so the precise
rules are situflow's own decision, in GRETA's spirit:

- a match of ``P1 AND ... AND Pn`` is a tuple ``(t1, ..., tn)`` where ``tk`` is a trend of
  ``Pk`` under the query's semantics, each sub-pattern judged on its own over the whole
  sub-stream (events of the other sides' types are irrelevant events to it, so they break
  its contiguous trends), all events of all ``tk`` in one window and one partition
  (``[attrs]`` and GROUP-BY hold across the whole match);
- the sides bind different variables, so no trend is paired with itself and no correction
  for trends matched by two sides (as ``- COUNT(P12)`` in a disjunction) is ever needed; an
  event may be in several ``tk``, as it may be in several trends;
- a match counts every binding of its trends, so with ``Ck``, ``Ek``, ``Sk``, ``Mk`` the
  COUNT(*), COUNT(E), SUM(E.x) and MIN(E.x) of side ``k`` in a window and partition:
  ``COUNT(*) = C1·C2``, ``COUNT(E) = E1·C2 + C1·E2``, ``SUM(E.x) = S1·C2 + C1·S2``,
  ``MIN(E.x) = min(M1, M2)`` when ``C1·C2 > 0`` (MAX alike), ``AVG = SUM / COUNT(E)``;
  more sides fold left, the rule being associative.

Each side runs its own executor (:class:`~situflow.trends.operator.TrendOperator`, with its
own granularity); the sides' window records are combined per partition before the
partitions of a group are merged, so no trend and no pair is ever enumerated.
"""

from __future__ import annotations

from functools import reduce
from typing import Any

import numpy as np

from situflow.events import EventBatch
from situflow.results import TrendResult
from situflow.snapshot import unwrap, wrap
from situflow.trends import kernel
from situflow.trends.configuration import TrendPlan
from situflow.trends.operator import (
    END_OF_TIME,
    STATE_VERSION,
    Record,
    TrendOperator,
    TrendProgram,
    slot_identities,
    slot_kinds,
    window_results,
)

SNAPSHOT_KIND = "cogra-conjunction"

Scaled = tuple[np.ndarray, int]  # slot values and the binary exponent of the additive ones


def pair(a: Scaled, b: Scaled, kind: np.ndarray) -> Scaled:
    """The aggregates of every pair of a trend aggregated in ``a`` and one in ``b``.

    >>> add = np.array([kernel.ADD, kernel.ADD, kernel.SMALLEST])
    >>> values, exp = pair((np.array([2.0, 6.0, 4.0]), 0), (np.array([3.0, 3.0, 1.0]), 0), add)
    >>> (values * 2.0 ** np.where(add == kernel.ADD, exp, 0)).tolist()
    [6.0, 24.0, 1.0]
    """
    (va, ea), (vb, eb) = _normal(a, kind), _normal(b, kind)
    ca, cb = va[0], vb[0]
    add, smallest, largest = (kind == kernel.ADD), (kind == kernel.SMALLEST), \
        (kind == kernel.LARGEST)
    out = np.empty_like(va)
    out[add] = va[add] * cb + ca * vb[add]
    out[0] = ca * cb  # the trend count itself
    # MIN and MAX range over the events of existing pairs only.
    paired = ca > 0 and cb > 0
    out[smallest] = np.minimum(va[smallest], vb[smallest]) if paired else np.inf
    out[largest] = np.maximum(va[largest], vb[largest]) if paired else -np.inf
    return out, ea + eb


def _normal(scaled: Scaled, kind: np.ndarray) -> Scaled:
    """The additive values divided by a power of two so that the largest is below 1: products
    of two sides then stay in float64's range, and the exponent carries the rest."""
    values, exp = scaled
    largest = float(np.max(np.abs(np.where(kind == kernel.ADD, values, 0.0))))
    if largest == 0.0:
        return values, exp
    shift = int(np.frexp(largest)[1])
    return np.where(kind == kernel.ADD, np.ldexp(values, -shift), values), exp + shift


class ConjunctionOperator:
    """Runs ``P1 AND ... AND Pn`` as one executor per side (lifecycle: situflow.operator)."""

    def __init__(self, plan: TrendPlan, programs: tuple[TrendProgram, ...], name: str, query_id: str):
        self.plan = plan
        self.name = name
        self.query_id = query_id
        self.sides = [TrendOperator(p, name, query_id) for p in programs]
        self._kind = slot_kinds(plan)
        self._none = (slot_identities(plan), 0)

    def process(self, batch: EventBatch) -> list[TrendResult]:
        return self._combine([side.process_records(batch) for side in self.sides])

    def advance_to(self, watermark: int) -> list[TrendResult]:
        return self._combine([side.advance_records(int(watermark)) for side in self.sides])

    def finish(self) -> list[TrendResult]:
        return self.advance_to(END_OF_TIME)

    def _combine(self, per_side: list[list[Record]]) -> list[TrendResult]:
        # Every side sees every event, so all sides close a window in the same call; a side
        # without a record for a window and partition matched nothing there.
        found: dict[tuple[int, tuple[Any, ...]], list[Scaled]] = {}
        for k, records in enumerate(per_side):
            for window, key, values, exp in records:
                found.setdefault((window, key), [self._none] * len(self.sides))[k] = (values,
                                                                                     exp)
        combined: list[Record] = []
        for (window, key), sides in found.items():
            values, exp = reduce(lambda a, b: pair(a, b, self._kind), sides)
            combined.append((window, key, values, exp))
        return window_results(self.plan, self.name, combined)

    def stats(self) -> dict[str, int]:
        """The sides' :meth:`TrendOperator.stats`, added up."""
        total: dict[str, int] = {}
        for side in self.sides:
            for name, count in side.stats().items():
                total[name] = total.get(name, 0) + count
        return total

    def snapshot(self) -> dict[str, Any]:
        return wrap(SNAPSHOT_KIND, STATE_VERSION, self.query_id,
                    {"sides": [side.snapshot() for side in self.sides]})

    @classmethod
    def restore(cls, plan: TrendPlan, programs: tuple[TrendProgram, ...], name: str, query_id: str,
                snapshot: dict[str, Any]) -> ConjunctionOperator:
        sides = unwrap(SNAPSHOT_KIND, STATE_VERSION, query_id, snapshot)["sides"]
        op = cls(plan, programs, name, query_id)
        op.sides = [TrendOperator.restore(p, name, query_id, s)
                    for p, s in zip(programs, sides, strict=True)]
        return op
