"""The TPStream operator: situation derivation feeding low-latency matching, batch by batch.

Events of all partitions arrive interleaved in one batch; per-partition state lives in slot-
indexed arrays (derivation) and :class:`Partition` objects (matching). Results come out in the
order of the events that emitted them, and within one event by the members' start times, so
every runtime prints the same lines in the same order for any batch size.
"""

from __future__ import annotations

from typing import Any

from situflow.errors import StateError
from situflow.events import EventBatch
from situflow.results import Match
from situflow.tpstream.deriver import Deriver
from situflow.tpstream.matcher import BatchContext, Matcher
from situflow.tpstream.query import TPStreamQuery

STATE_VERSION = 1
_PRE = ("count", "a_sum", "a_min", "a_max", "a_cnt")


class TPStreamOperator:
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
        pre = {name: getattr(self.deriver, name).copy() for name in _PRE} \
            if self.query.aggregates else {}
        records = self.deriver.run(batch, codes)
        self.batches += 1
        results = self.matcher.run(records, BatchContext(batch, codes, self.batches, pre))
        self.deriver.carry(batch)
        return results

    def advance_to(self, watermark: int) -> list[Match]:
        """Time alone decides nothing in TPStream: a situation ends only at an event."""
        return []

    def finish(self) -> list[Match]:
        """Situations still open at the end of input are never emitted (SEMANTICS.md)."""
        return []

    @property
    def open_situations(self) -> int:
        return int(self.deriver.open_[: len(self.deriver.key_list)].sum())

    def snapshot(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "query_id": self.query.query_id,
            "deriver": self.deriver.to_state(),
            "matcher": self.matcher.to_state(),
        }

    @classmethod
    def restore(cls, query: TPStreamQuery, snapshot: dict[str, Any]) -> TPStreamOperator:
        if snapshot.get("version") != STATE_VERSION:
            raise StateError(f"TPStream state version {snapshot.get('version')} is not "
                             f"{STATE_VERSION}; delete the state directory and restart")
        if snapshot.get("query_id") != query.query_id:
            raise StateError("the state belongs to another query; delete the state directory "
                             "and restart")
        op = cls(query)
        op.deriver.load_state(snapshot["deriver"])
        op.matcher.load_state(snapshot["matcher"])
        return op
