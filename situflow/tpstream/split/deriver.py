"""The deriver of distributed TPStream: events in, situation records out (thesis §5.6.5; the
design: :mod:`situflow.tpstream.split`).

Runs the same derivation as the fused operator (Alg. 5.1 in :mod:`situflow.tpstream.derive.kernel`,
through :class:`situflow.tpstream.derive.state.Deriver`) and turns its per-batch derivation records
into :class:`situflow.tpstream.split.records.SituationRecord` values, in stream order, with the
aggregates the matcher needs to report exactly what the fused operator reports
(:mod:`situflow.tpstream.derive.aggregates` computes them for both):

- ``started`` and ``finished`` records for every situation the fused matcher would file;
- ``running`` records with the aggregates so far of the key's other started situations at each
  event where something changed and matching is feasible, because a low-latency match reported
  at that event may include them (§5.5.3). Only definitions the RETURN clause aggregates need
  them, so a query without aggregates sends none.

The deriver keeps only derivation state (open situations, partial aggregates, first/last
values carried across batches); the matcher's buffers are elsewhere. Like every operator it is
incremental and batched, its records do not depend on the batch sizes, and
:meth:`snapshot`/:meth:`restore` continue exactly where it stopped.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from situflow.events import EventBatch
from situflow.snapshot import unwrap, wrap
from situflow.tpstream.derive.aggregates import BatchContext, SituationAggregates, pre_batch
from situflow.tpstream.derive.kernel import START
from situflow.tpstream.derive.state import Deriver
from situflow.tpstream.lifecycle import STATE_VERSION, EventDriven
from situflow.tpstream.match.situations import Situation
from situflow.tpstream.query import TPStreamQuery
from situflow.tpstream.split.records import FINISHED, RUNNING, STARTED, SituationRecord, aggregate_name

KIND = "tpstream-situation-deriver"


class SituationDeriver(EventDriven):
    """Per-partition-key situation derivation of one query, as situation records."""

    def __init__(self, query: TPStreamQuery, deriver: Deriver | None = None):
        self.query = query
        self.deriver = Deriver(query) if deriver is None else deriver
        self.aggregates = SituationAggregates(query, self.deriver)
        self.names = [d.name for d in query.definitions]
        self.aggregate_names = [aggregate_name(query, ref) for ref in query.aggregates]
        self.batches = 0

    def process(self, batch: EventBatch) -> list[SituationRecord]:
        """The situation records of a batch of events, in stream order."""
        if not len(batch):
            return []
        return self.derive(batch, self.deriver.slots(batch), self.deriver.conditions(batch))

    def derive(self, batch: EventBatch, codes: np.ndarray, cond: np.ndarray) -> list[SituationRecord]:
        """:meth:`process` with the events' state slots and conditions already known."""
        deriver = self.deriver
        pre = pre_batch(deriver)
        # Which situations were started (visible) before the batch: running records need them.
        n = len(deriver.key_list)
        started_before = (deriver.visible[:n].copy(), deriver.start_ts[:n].copy()) if pre else None
        rec = deriver.run(batch, codes, cond)
        self.batches += 1
        records = self._records(rec, BatchContext(batch, codes, self.batches, pre),
                                started_before)
        deriver.carry(batch)
        return records

    def _records(self, rec: Any, ctx: BatchContext,
                 started_before: tuple[np.ndarray, np.ndarray] | None) -> list[SituationRecord]:
        """The records of a batch, step by step (the step loop of
        :mod:`situflow.tpstream.match.pattern`)."""
        out: list[SituationRecord] = []
        pos, defn, kind = rec.pos.tolist(), rec.defn.tolist(), rec.kind.tolist()
        start, feasible, first = rec.start.tolist(), rec.feasible.tolist(), rec.first.tolist()
        slots = ctx.codes[rec.pos].tolist()
        times = ctx.batch.ts[rec.pos].tolist()
        seqs = ctx.batch.seq[rec.pos].tolist()
        key_list, names, refs = self.deriver.key_list, self.names, self.aggregates.refs_by_def
        # Per slot seen in this batch: its started situations by definition (running records).
        started: dict[int, dict[int, Situation]] = {}
        m, i = len(pos), 0
        while i < m:
            p, slot, t, seq = pos[i], slots[i], times[i], seqs[i]
            key = key_list[slot]
            running = None
            if started_before is not None:
                running = started.get(slot)
                if running is None:
                    running = started[slot] = self._started_before(slot, started_before)
            changed = set()
            j = i
            while j < m and pos[j] == p:
                d = defn[j]
                changed.add(d)
                if kind[j] == START:
                    s = Situation(d, start[j], None, None, first[j], ctx.number)
                    if running is not None:
                        running[d] = s
                    values = self.aggregates.running(s, slot, p, ctx) if refs[d] else None
                    out.append(SituationRecord(STARTED, key, names[d], start[j], None, t, seq,
                                               self._named(d, values)))
                else:  # FINISH or APPEAR: the situation ends here
                    if running is not None:
                        running.pop(d, None)
                    values = self.aggregates.finished(rec, j, d, slot, ctx)
                    out.append(SituationRecord(FINISHED, key, names[d], start[j], t, t, seq,
                                               self._named(d, values)))
                j += 1
            if running and feasible[i]:
                for d in sorted(running):
                    if d not in changed and refs[d]:
                        s = running[d]
                        values = self.aggregates.running(s, slot, p, ctx)
                        out.append(SituationRecord(RUNNING, key, names[d], s.ts, None, t, seq,
                                                   self._named(d, values)))
            i = j
        return out

    @staticmethod
    def _started_before(slot: int, before: tuple[np.ndarray, np.ndarray]) -> dict[int, Situation]:
        """The situations of ``slot`` started before the batch (a new key has none)."""
        visible, start_ts = before
        if slot >= len(visible):
            return {}
        # Rows as lists: a numpy call per definition costs more than the row has entries.
        starts = start_ts[slot].tolist()
        return {d: Situation(d, starts[d]) for d, shown in enumerate(visible[slot].tolist())
                if shown}

    def _named(self, d: int, values: list[Any] | None) -> dict[str, Any]:
        """Definition ``d``'s aggregates by name (``values`` is indexed like query.aggregates)."""
        if values is None:
            return {}
        return {self.aggregate_names[k]: values[k] for k in self.aggregates.refs_by_def[d]}

    def stats(self) -> dict[str, int]:
        return {"open_situations": self.deriver.open_situations}

    def snapshot(self) -> dict[str, Any]:
        return wrap(KIND, STATE_VERSION, self.query.query_id, {"deriver": self.deriver.to_state()})

    @classmethod
    def restore(cls, query: TPStreamQuery, snapshot: dict[str, Any]) -> SituationDeriver:
        state = unwrap(KIND, STATE_VERSION, query.query_id, snapshot)
        op = cls(query)
        op.deriver.load_state(state["deriver"])
        return op

