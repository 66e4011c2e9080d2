"""Low-latency temporal pattern matching (thesis §5.5.2-5.5.3, Alg. 5.3/5.4, Table 5.2).

A configuration (one situation per definition) is reported at the earliest event at which it
is *certain* to match: every temporal constraint holds for every possible end of the
situations still running, and the window holds with running situations ending now
(SEMANTICS.md). Certainty is decided pairwise, which is exact because the constraints are a
conjunction of pairwise disjunctions:

- at most one of the two situations runs: its end is later than every known time, so each
  relation has one definite truth value (``BIG`` stands for that end);
- both run: their ends may compare ``<``, ``=`` or ``>``; the constraint is certain only if it
  holds in all three cases. This is exactly the thesis' prefix-group rule: ``B contains;
  finished-by;overlaps C`` is certain at ``C.ts``.

Certainty can only arise at an endpoint of a member, so matching runs when situations start,
end, appear (upper-bounded ones, at their end) or reach their lower duration bound (deferred
start). A configuration is reported there if it is certain now and was not certain before this
event, which makes every result unique without remembering past results: the thesis' two
hazards (duplicates at the second endpoint, false ``finishes``/``equals`` while both run) cannot
occur. Candidates come from binary searches over the buffers (:class:`SituationBuffer`), in the
evaluation order of the :class:`Planner`.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from situflow.events import EventBatch, plain
from situflow.results import Match
from situflow.tpstream.allen import relation
from situflow.tpstream.deriver import column
from situflow.tpstream.kernels import APPEAR, FINISH, START
from situflow.tpstream.planner import Planner
from situflow.tpstream.query import TPStreamQuery
from situflow.tpstream.situations import BIG, Situation, SituationBuffer

Config = list[Situation | None]


def certain(rels: frozenset[str], x: Situation, y: Situation) -> bool:
    """Whether ``x r y`` holds for some r in ``rels`` whatever the unknown ends turn out to be."""
    if x.te is None and y.te is None:
        return (relation(x.ts, BIG, y.ts, BIG + 1) in rels
                and relation(x.ts, BIG, y.ts, BIG) in rels
                and relation(x.ts, BIG + 1, y.ts, BIG) in rels)
    return relation(x.ts, x.end, y.ts, y.end) in rels


class Partition:
    """Matcher state of one partition: finished situations and the running visible ones."""

    __slots__ = ("active", "buffers")

    def __init__(self, ndef: int):
        self.buffers = [SituationBuffer() for _ in range(ndef)]
        self.active: list[Situation | None] = [None] * ndef

    def to_state(self) -> list[Any]:
        return [[b.to_state() for b in self.buffers],
                [None if s is None else s.to_state() for s in self.active]]

    @classmethod
    def from_state(cls, state: list[Any]) -> Partition:
        buffers, active = state
        part = cls(len(buffers))
        part.buffers = [SituationBuffer.from_state(b) for b in buffers]
        part.active = [None if s is None else Situation.from_state(s) for s in active]
        return part


class BatchContext:
    """What computing aggregates of running situations needs about the current batch."""

    def __init__(self, batch: EventBatch, codes: np.ndarray, number: int,
                 pre: dict[str, np.ndarray]):
        self.batch = batch
        self.codes = codes
        self.number = number
        # Aggregate state before this batch, for situations that began in an earlier one.
        self.pre = pre


class Matcher:
    def __init__(self, query: TPStreamQuery, deriver: Any):
        self.query = query
        self.deriver = deriver
        self.ndef = len(query.definitions)
        self.window = query.window
        self.constraints = query.constraints
        self.planner = Planner(query)
        self.partitions: list[Partition | None] = []
        self._steps: dict[tuple[int, ...], list[list[int]]] = {}
        self.refs_by_def: list[list[int]] = [[] for _ in range(self.ndef)]
        for k, agg in enumerate(query.aggregates):
            self.refs_by_def[agg.defn].append(k)
        self.numeric_index = {k: i for i, k in enumerate(deriver.numeric)}

    def partition(self, slot: int) -> Partition:
        if len(self.partitions) <= slot:
            self.partitions.extend([None] * (slot + 1 - len(self.partitions)))
        part = self.partitions[slot]
        if part is None:
            part = self.partitions[slot] = Partition(self.ndef)
        return part

    # --- records -> buffers -> matching -------------------------------------------------------

    def run(self, rec: Any, ctx: BatchContext) -> list[Match]:
        """File the situation records of a batch and match at every feasible event."""
        results: list[Match] = []
        pos, defn, kind = rec.pos.tolist(), rec.defn.tolist(), rec.kind.tolist()
        start, feasible, first = rec.start.tolist(), rec.feasible.tolist(), rec.first.tolist()
        ts, codes = ctx.batch.ts, ctx.codes
        bound_window = self.window
        m, i = len(pos), 0
        slots, times = codes[rec.pos].tolist(), ts[rec.pos].tolist()
        partitions = self.partitions
        if m:
            self.partition(max(slots))
        while i < m:
            p, slot, t = pos[i], slots[i], times[i]
            part = partitions[slot] or self.partition(slot)
            changes: list[tuple[Situation, bool]] = []
            j = i
            while j < m and pos[j] == p:
                d, k = defn[j], kind[j]
                if k == START:
                    s = Situation(d, start[j], None, None, first[j], ctx.number)
                    part.active[d] = s
                    changes.append((s, True))
                elif k == FINISH:
                    s = cast(Situation, part.active[d])
                    part.active[d] = None
                    if t > s.ts:  # a run within one timestamp is no interval: dropped
                        s.te = t
                        s.values = self._finished_values(rec, j, d, slot, ctx)
                        self._file(part.buffers[d], s, t - bound_window)
                        changes.append((s, False))
                else:
                    assert k == APPEAR
                    s = Situation(d, start[j], t, self._finished_values(rec, j, d, slot, ctx))
                    self._file(part.buffers[d], s, t - bound_window)
                    changes.append((s, True))
                j += 1
            if changes and feasible[i]:
                results += self._match(part, slot, p, t, changes, ctx)
            i = j
        return results

    @staticmethod
    def _file(buffer: SituationBuffer, s: Situation, bound: float) -> None:
        buffer.purge(bound)
        buffer.append(s)

    def _match(self, part: Partition, slot: int, p: int, t: int,
               changes: list[tuple[Situation, bool]], ctx: BatchContext) -> list[Match]:
        for b in part.buffers:
            b.purge(t - self.window)
        self.planner.observe([len(b) + (a is not None) for b, a in zip(part.buffers, part.active,
                                                                       strict=True)])
        new = {id(s) for s, is_new in changes if is_new}
        ended = {id(s) for s, is_new in changes if not is_new}
        found: dict[tuple[int, ...], list[Situation]] = {}
        for s, _ in changes:
            order = self.planner.order(s.defn)
            ws: Config = [None] * self.ndef
            ws[s.defn] = s
            self._extend(part, order, self._steps_of(order), 1, ws, t, s.ts,
                         t if s.te is None else s.te, found, new, ended)
        results = []
        for key in sorted(found, key=lambda ws: tuple(s.ts for s in found[ws])):
            results.append(self._result(found[key], slot, p, t, ctx))
        return results

    def _steps_of(self, order: tuple[int, ...]) -> list[list[int]]:
        """For each step of ``order``, the earlier definitions it has constraints with."""
        steps = self._steps.get(order)
        if steps is None:
            steps = [[j for j in order[:k] if self.constraints[order[k]][j] is not None]
                     for k in range(len(order))]
            self._steps[order] = steps
        return steps

    def _extend(self, part: Partition, order: tuple[int, ...], steps: list[list[int]], k: int,
                ws: Config, t: int, min_ts: int, max_end: int,
                found: dict[tuple[int, ...], list[Situation]], new: set[int],
                ended: set[int]) -> None:
        """Alg. 5.3 PerformMatch: bind the situation of step ``k`` and recurse."""
        if k == len(order):
            members = cast(list[Situation], ws)
            key = tuple(id(s) for s in members)
            if key not in found and self._newly_certain(members, new, ended):
                found[key] = list(members)
            return
        e, anchors = order[k], steps[k]
        anchor = anchors[0]
        x = ws[anchor]
        assert x is not None
        buffer = part.buffers[e]
        window = self.window
        ranges = [buffer.related(rel, x.ts, x.end)
                  for rel in self.constraints[anchor][e]]  # type: ignore[union-attr]
        if len(buffer):
            self.planner.observe_selectivity(anchor, e, sum(map(len, ranges)), len(buffer))
        for indexes in ranges:
            for idx in indexes:
                y = buffer.items[idx]
                lo, hi = min(min_ts, y.ts), max(max_end, y.end)
                if hi - lo > window or not self._holds(ws, y, e, anchors[1:]):
                    continue
                ws[e] = y
                self._extend(part, order, steps, k + 1, ws, t, lo, hi, found, new, ended)
        running = part.active[e]
        if running is not None:
            lo, hi = min(min_ts, running.ts), max(max_end, t)
            if hi - lo <= window and self._holds(ws, running, e, anchors):
                ws[e] = running
                self._extend(part, order, steps, k + 1, ws, t, lo, hi, found, new, ended)
        ws[e] = None

    def _holds(self, ws: Config, y: Situation, e: int, anchors: list[int]) -> bool:
        constraints = self.constraints
        return all(certain(constraints[j][e], ws[j], y)  # type: ignore[arg-type]
                   for j in anchors)

    def _newly_certain(self, members: list[Situation], new: set[int], ended: set[int]) -> bool:
        """Whether the configuration was not yet certain before this event."""
        if any(id(s) in new for s in members):
            return True  # a member did not exist (for the matcher) before this event
        before = [Situation(s.defn, s.ts) if id(s) in ended else s for s in members]
        n = len(members)
        return not all(
            certain(self.constraints[i][j], before[i], before[j])  # type: ignore[arg-type]
            for i in range(n) for j in range(i + 1, n) if self.constraints[i][j] is not None
        )

    # --- results --------------------------------------------------------------------------

    def _result(self, members: list[Situation], slot: int, p: int, t: int,
                ctx: BatchContext) -> Match:
        q = self.query
        aggregates: list[Any] = [None] * len(q.aggregates)
        for s in members:
            values = s.values if s.te is not None else self._running_values(s, slot, p, ctx)
            for k in self.refs_by_def[s.defn]:
                aggregates[k] = values[k]
        return Match(
            query=q.name,
            key=self.deriver.key_list[slot],
            ts=max(t if s.te is None else s.te for s in members),
            emitted_at=t,
            values={name: _safe(fn, aggregates) for name, fn in q.outputs},
            bindings={d.name: s.to_binding() for d, s in zip(q.definitions, members, strict=True)},
            order=tuple(s.ts for s in members),
        )

    def _finished_values(self, rec: Any, r: int, d: int, slot: int,
                         ctx: BatchContext) -> list[Any] | None:
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
                values[k] = _numeric(agg.func, float(rec.sum[i, r]), float(rec.min[i, r]),
                                     float(rec.max[i, r]), int(rec.cnt[i, r]))
        return values

    def _running_values(self, s: Situation, slot: int, p: int,
                        ctx: BatchContext) -> list[Any]:
        """Aggregates of a running situation over its events up to and including event ``p``."""
        fresh = s.batch == ctx.number and s.first >= 0
        lo = s.first if fresh else 0
        rows = lo + np.flatnonzero(ctx.codes[lo:p + 1] == slot)
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
                col = seen.astype(np.float64)
                col = col[~np.isnan(col)]
                i = self.numeric_index[k]
                total, low, high, cnt = float(col.sum()), float(col.min(initial=np.inf)), \
                    float(col.max(initial=-np.inf)), len(col)
                if not fresh and pre["a_cnt"][slot, i]:
                    total += float(pre["a_sum"][slot, i])
                    low = min(low, float(pre["a_min"][slot, i]))
                    high = max(high, float(pre["a_max"][slot, i]))
                    cnt += int(pre["a_cnt"][slot, i])
                values[k] = _numeric(agg.func, total, low, high, cnt)
        return values

    # --- state ----------------------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        return {
            "partitions": [None if p is None else p.to_state() for p in self.partitions],
            "planner": self.planner.to_state(),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.partitions = [None if p is None else Partition.from_state(p)
                           for p in state["partitions"]]
        self.planner.load_state(state["planner"])


def _numeric(func: str, total: float, low: float, high: float, cnt: int) -> Any:
    if func == "count":
        return cnt
    if not cnt:
        return None
    return {"sum": total, "min": low, "max": high, "avg": total / cnt}[func]


def _safe(fn: Any, aggregates: list[Any]) -> Any:
    """A RETURN value; arithmetic over a missing aggregate gives null, not a crash."""
    try:
        value = fn(aggregates)
    except (TypeError, ZeroDivisionError):
        return None
    return plain(value)
