"""RETURN aggregates of situations, finished and running (thesis Def 5.1, §5.5.3).

A finished situation's aggregates come from its derivation record (the kernel's incremental
count/sum/min/max and the positions of its first and last events). A *running* situation that
joins a low-latency match is summarized over its events up to and including the emitting event,
from the batch and the aggregate state before the batch. Both the fused operator (which computes
them when a match needs them) and the deriver of distributed TPStream (which ships them in its
situation records, :mod:`situflow.tpstream.split.records`) use this one code, so both give the same
values bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from situflow.events import EventBatch, plain
from situflow.tpstream.derive.state import column, in_kernel, kernel_values
from situflow.tpstream.match.situations import Situation
from situflow.tpstream.query import TPStreamQuery

#: The derivation state a running situation's aggregates start from (copied before a batch).
PRE_BATCH = ("count", "a_sum", "a_min", "a_max", "a_cnt")


class BatchContext:
    """What computing aggregates of running situations needs about the current batch."""

    def __init__(self, batch: EventBatch, codes: np.ndarray, number: int,
                 pre: dict[str, np.ndarray]):
        self.batch = batch
        self.codes = codes
        self.number = number
        # Aggregate state before this batch, for situations that began in an earlier one.
        self.pre = pre
        self._by_slot: tuple[np.ndarray, np.ndarray] | None = None

    def rows(self, slot: int, lo: int, hi: int) -> np.ndarray:
        """Positions ``lo <= i <= hi`` of the batch's events of ``slot``, ascending."""
        if self._by_slot is None:
            order = np.argsort(self.codes, kind="stable")
            self._by_slot = (order, self.codes[order])
        order, sorted_codes = self._by_slot
        a, b = np.searchsorted(sorted_codes, [slot, slot + 1])
        positions = order[a:b]
        i, j = np.searchsorted(positions, [lo, hi + 1])
        return positions[i:j]


class SituationAggregates:
    """The aggregates of ``query.aggregates`` a situation's definition owns."""

    def __init__(self, query: TPStreamQuery, deriver: Any):
        self.query = query
        self.deriver = deriver
        self.refs_by_def = query.refs_by_def
        numeric = [k for k, a in enumerate(query.aggregates) if in_kernel(a)]
        self.numeric_index = {k: i for i, k in enumerate(numeric)}

    def finished(self, rec: Any, r: int, d: int, slot: int,
                 ctx: BatchContext) -> list[Any] | None:
        """Aggregates of the situation that derivation record ``r`` finishes (None: none)."""
        refs = self.refs_by_def[d]
        if not refs:
            return None
        # Indexed like query.aggregates; only this situation's own entries are filled.
        values: list[Any] = [None] * len(self.query.aggregates)
        for k in refs:
            agg = self.query.aggregates[k]
            if agg.attr is None:
                values[k] = int(rec.count[r])
            elif agg.func in ("first", "last"):
                position = int((rec.first if agg.func == "first" else rec.last)[r])
                carried = self.deriver.carried_first if agg.func == "first" else \
                    self.deriver.carried_last
                values[k] = (plain(column(ctx.batch, agg.attr)[position]) if position >= 0
                             else carried[slot, k])
            else:
                i = self.numeric_index[k]
                values[k] = numeric(agg.func, float(rec.sum[i, r]), float(rec.min[i, r]),
                                    float(rec.max[i, r]), int(rec.cnt[i, r]))
        return values

    def finished_columns(self, rec: Any, rows: np.ndarray, d: int, slots: np.ndarray,
                         ctx: BatchContext) -> list[list[Any]]:
        """:meth:`finished` of many derivation records of definition ``d`` at once: per
        aggregate of ``query.aggregates``, its values for records ``rows`` (of state slots
        ``slots``; None for other definitions' aggregates). Each value equals what
        :meth:`finished` gives, bit for bit: the same float operations, in numpy."""
        columns: list[list[Any]] = []
        own = set(self.refs_by_def[d])
        for k, agg in enumerate(self.query.aggregates):
            if k not in own:
                columns.append([None] * len(rows))
            elif agg.attr is None:
                columns.append(rec.count[rows].tolist())
            elif agg.func in ("first", "last"):
                positions = (rec.first if agg.func == "first" else rec.last)[rows]
                carried = (self.deriver.carried_first if agg.func == "first"
                           else self.deriver.carried_last)[slots, k]
                here = positions >= 0
                values = carried.tolist()
                seen = column(ctx.batch, agg.attr)[positions[here]].tolist()
                for i, v in zip(np.flatnonzero(here).tolist(), seen, strict=True):
                    values[i] = plain(v)
                columns.append(values)
            else:
                columns.append(numeric_column(agg.func, rec, self.numeric_index[k], rows))
        return columns

    def running(self, s: Situation, slot: int, p: int, ctx: BatchContext) -> list[Any]:
        """Aggregates of a running situation over its events up to and including event ``p``."""
        fresh = s.batch == ctx.number and s.first >= 0
        rows = ctx.rows(slot, s.first if fresh else 0, p)
        # Indexed like query.aggregates; only this situation's own entries are filled.
        values: list[Any] = [None] * len(self.query.aggregates)
        pre = ctx.pre
        for k in self.refs_by_def[s.defn]:
            agg = self.query.aggregates[k]
            if agg.attr is None:
                values[k] = len(rows) + (0 if fresh else int(pre["count"][slot, s.defn]))
                continue
            seen = column(ctx.batch, agg.attr)[rows]
            if agg.func == "first":
                values[k] = plain(seen[0]) if fresh else self.deriver.carried_first[slot, k]
            elif agg.func == "last":
                values[k] = plain(seen[-1])
            else:
                col = kernel_values(agg, seen)
                col = col[~np.isnan(col)]
                i = self.numeric_index[k]
                # Summed in event order from the state before the batch, as the kernel sums
                # (a pairwise sum would make the last bits depend on the batch boundaries).
                total = 0.0 if fresh else float(pre["a_sum"][slot, i])
                for v in col.tolist():
                    total += v
                low, high = float(col.min(initial=np.inf)), float(col.max(initial=-np.inf))
                cnt = len(col)
                if not fresh and pre["a_cnt"][slot, i]:
                    low = min(low, float(pre["a_min"][slot, i]))
                    high = max(high, float(pre["a_max"][slot, i]))
                    cnt += int(pre["a_cnt"][slot, i])
                values[k] = numeric(agg.func, total, low, high, cnt)
        return values


def pre_batch(deriver: Any) -> dict[str, np.ndarray]:
    """The derivation state running situations' aggregates start from, before a batch."""
    return {name: getattr(deriver, name).copy() for name in PRE_BATCH} \
        if deriver.query.aggregates else {}


def numeric(func: str, total: float, low: float, high: float, cnt: int) -> Any:
    if func == "count":
        return cnt
    if not cnt:
        return None
    return {"sum": total, "min": low, "max": high, "avg": total / cnt}[func]


def numeric_column(func: str, rec: Any, i: int, rows: np.ndarray) -> list[Any]:
    """:func:`numeric` over the kernel aggregate ``i`` of derivation records ``rows``."""
    cnt = rec.cnt[i, rows]
    if func == "count":
        return cnt.tolist()
    if func == "avg":
        # The kernel counts what it sums, so a situation without values has a zero count.
        values = np.divide(rec.sum[i, rows], cnt, out=np.zeros(len(rows)), where=cnt > 0)
    else:
        values = {"sum": rec.sum, "min": rec.min, "max": rec.max}[func][i, rows]
    out: list[Any] = values.tolist()
    for r in np.flatnonzero(cnt == 0).tolist():
        out[r] = None
    return out
