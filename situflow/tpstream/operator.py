"""The TPStream operator: situation derivation feeding low-latency matching, batch by batch.

Events of all partitions arrive interleaved in one batch; per-partition state lives in slot-
indexed arrays (derivation) and :class:`Partition` objects (matching). Results come out in the
order of the events that emitted them, and within one event by the members' start times, so
every runtime prints the same lines in the same order for any batch size.
"""

from __future__ import annotations

from typing import Any

from situflow.events import EventBatch
from situflow.results import Match
from situflow.tpstream.aggregates import BatchContext, pre_batch
from situflow.tpstream.deriver import Deriver
from situflow.tpstream.lifecycle import EventDriven, check_snapshot
from situflow.tpstream.matcher import Matcher
from situflow.tpstream.query import TPStreamQuery


class TPStreamOperator(EventDriven):
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

    @property
    def open_situations(self) -> int:
        return int(self.deriver.open_[: len(self.deriver.key_list)].sum())

    def snapshot(self) -> dict[str, Any]:
        return self.versioned(deriver=self.deriver.to_state(), matcher=self.matcher.to_state())

    @classmethod
    def restore(cls, query: TPStreamQuery, snapshot: dict[str, Any]) -> TPStreamOperator:
        check_snapshot(query, snapshot, "TPStream")
        op = cls(query)
        op.deriver.load_state(snapshot["deriver"])
        op.matcher.load_state(snapshot["matcher"])
        return op
