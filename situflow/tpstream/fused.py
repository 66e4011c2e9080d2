"""The fused TPStream operator: situation derivation feeding low-latency matching in one
process, batch by batch (thesis §5.4-5.5).

Events of all partitions arrive interleaved in one batch; per-partition state lives in slot-
indexed arrays (derivation, :mod:`situflow.tpstream.derive`) and :class:`Partition` objects
(matching, :mod:`situflow.tpstream.match`). Results come out in the order of the events that
emitted them, and within one event by the members' start times, so every runtime prints the
same lines in the same order for any batch size. A one-situation pattern (``PATTERN B``)
skips matching: its matches are the situations the kernel finishes, built from its record
arrays in bulk. Distributed TPStream splits the same algorithms at the situation stream
(:mod:`situflow.tpstream.split`).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from situflow.events import EventBatch
from situflow.results import Match
from situflow.snapshot import unwrap, wrap
from situflow.tpstream.derive.aggregates import BatchContext, SituationAggregates, pre_batch
from situflow.tpstream.derive.kernel import APPEAR, FINISH, START
from situflow.tpstream.derive.state import Deriver
from situflow.tpstream.lifecycle import STATE_VERSION, EventDriven
from situflow.tpstream.match.pattern import Partition, PatternMatcher, RunningValues, return_value
from situflow.tpstream.match.planner import Planner
from situflow.tpstream.match.situations import Situation
from situflow.tpstream.query import TPStreamQuery

KIND = "tpstream"


class Matcher(PatternMatcher):
    """The matching half of the fused operator: files the derivation records of a batch into
    the slot-indexed partitions and matches at every feasible event (thesis §5.5.2-5.5.3)."""

    def __init__(self, query: TPStreamQuery, deriver: Deriver):
        super().__init__(query)
        self.deriver = deriver
        self.aggregates = SituationAggregates(query, deriver)
        self.partitions: list[Partition | None] = []

    def partition(self, slot: int) -> Partition:
        if len(self.partitions) <= slot:
            self.partitions.extend([None] * (slot + 1 - len(self.partitions)))
        part = self.partitions[slot]
        if part is None:
            part = self.partitions[slot] = Partition(self.ndef)
        return part

    # --- records -> buffers -> matching -------------------------------------------------------

    def run(self, rec: Any, ctx: BatchContext) -> list[Match]:
        """File the situation records of a batch and match at every feasible event, step by
        step (the step loop of :mod:`situflow.tpstream.match.pattern`)."""
        if self.single:
            return self._situations(rec, ctx)
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
                        s.values = self.aggregates.finished(rec, j, d, slot, ctx)
                        self._file(part.buffers[d], s, t - bound_window)
                        changes.append((s, False))
                else:
                    assert k == APPEAR
                    s = Situation(d, start[j], t, self.aggregates.finished(rec, j, d, slot, ctx))
                    self._file(part.buffers[d], s, t - bound_window)
                    changes.append((s, True))
                j += 1
            if changes and feasible[i]:
                results += self._match(part, self.deriver.key_list[slot], t, changes,
                                       self._running(slot, p, ctx))
            i = j
        return results

    def _situations(self, rec: Any, ctx: BatchContext) -> list[Match]:
        """``PATTERN B``: the matches are the situations the records finish, within the
        window, at their ends (:meth:`PatternMatcher._ended`), built in bulk from the record
        arrays. No situation object is made: nothing is matched, filed or running."""
        t = ctx.batch.ts[rec.pos]
        ends = (rec.kind != START) & (t > rec.start) & (t - rec.start <= self.window)
        rows = np.flatnonzero(ends & rec.feasible)
        if not len(rows):
            return []
        slots = ctx.codes[rec.pos[rows]]
        q, keys = self.query, self.deriver.key_list
        aggregates = self.aggregates.finished_columns(rec, rows, 0, slots, ctx)
        names = [name for name, _ in q.outputs]
        values = [self._output(aggregates, k, fn, len(rows))
                  for (_, fn), k in zip(q.outputs, q.output_aggregates, strict=True)]
        situation = q.definitions[0].name
        return [
            Match(query=q.name, key=keys[slot], ts=te, emitted_at=te,
                  values=dict(zip(names, row, strict=True)),
                  bindings={situation: {"ts": ts, "te": te, "open": False}}, order=(ts,))
            for slot, ts, te, row in zip(
                slots.tolist(), rec.start[rows].tolist(), t[rows].tolist(),
                zip(*values, strict=True) if values else [()] * len(rows), strict=True)
        ]

    @staticmethod
    def _output(aggregates: list[list[Any]], k: int | None, fn: Any, n: int) -> list[Any]:
        """One RETURN value of each of ``n`` results, what :func:`return_value` gives."""
        if k is None:
            return [return_value(fn, row) for row in zip(*aggregates, strict=True)] \
                if aggregates else [return_value(fn, ()) for _ in range(n)]
        # An aggregate as it is: plain values already, but for NaN (v != v), which is null.
        return [v if v == v else None for v in aggregates[k]]

    def _running(self, slot: int, p: int, ctx: BatchContext) -> RunningValues:
        return lambda s: self.aggregates.running(s, slot, p, ctx)

    def buffered_situations(self) -> int:
        return sum(len(b) for part in self.partitions if part is not None for b in part.buffers)

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


class TPStreamOperator(EventDriven):
    """Derivation and matching of one query over every partition key (the query's engine, as
    :func:`situflow.tpstream.compile` binds it)."""

    def __init__(self, query: TPStreamQuery):
        self.query = query
        self.deriver = Deriver(query)
        self.matcher = Matcher(query, self.deriver)
        self.batches = 0

    def process(self, batch: EventBatch) -> list[Match]:
        if not len(batch):
            return []
        codes = self.deriver.slots(batch)
        # Early results aggregate running situations from their state before this batch.
        pre = pre_batch(self.deriver)
        records = self.deriver.run(batch, codes)
        self.batches += 1
        results = self.matcher.run(records, BatchContext(batch, codes, self.batches, pre))
        self.deriver.carry(batch)
        return results

    def stats(self) -> dict[str, int]:
        return {"open_situations": self.deriver.open_situations,
                "buffered_situations": self.matcher.buffered_situations()}

    def snapshot(self) -> dict[str, Any]:
        return wrap(KIND, STATE_VERSION, self.query.query_id,
                    {"deriver": self.deriver.to_state(), "matcher": self.matcher.to_state()})

    @classmethod
    def restore(cls, query: TPStreamQuery, snapshot: dict[str, Any]) -> TPStreamOperator:
        state = unwrap(KIND, STATE_VERSION, query.query_id, snapshot)
        op = cls(query)
        op.deriver.load_state(state["deriver"])
        op.matcher.load_state(state["matcher"])
        return op

    @staticmethod
    def plan(query: TPStreamQuery) -> list[str]:
        """The evaluation order of each trigger, from the prior statistics (eqs. 5.2-5.5)."""
        return Planner(query).describe()
