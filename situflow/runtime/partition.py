"""The operators of one input partition: per query its operator, per key its position.

Per input partition a service runs one core operator per query over every key of the
partition, as ``situflow run`` evaluates the partition's events. The checkpoint of a
partition is :meth:`PartitionOperators.encode`: each query's operator snapshot, with the id of
the query text it belongs to (a changed query starts afresh) and the time of the first event
its operator evaluated (where it *began*: the backfill's hand-off, batch/README.md, needs it to
outlive restarts), for a handed-off TPStream query the keys it began and where
(:mod:`situflow.runtime.begins`), and per key the position (event time, input seq) of the last
event evaluated (:mod:`situflow.runtime.dedup`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from situflow.events import EventBatch
from situflow.operator import Operator
from situflow.runtime.begins import begin_keys
from situflow.runtime.queryset import QuerySet


@dataclass
class PartitionOperators:
    """One input partition: per query name its (query id, operator), the time its operator
    began at and, handed off per key, its begun keys; per key its position."""

    operators: dict[str, tuple[str, Operator]]
    positions: dict[str, list[int]]
    version: int = -1  # of the query set the operators were last synchronised with
    snapshots: dict[str, dict[str, Any]] = field(default_factory=dict)  # not yet restored
    begun: dict[str, int] = field(default_factory=dict)  # query name -> its first event's time
    # query name -> key name -> [time, seq] of the event the key began at (handed-off queries)
    keys: dict[str, dict[str, list[int]]] = field(default_factory=dict)

    def begin(self, name: str, time: int) -> int:
        """The time query ``name``'s operator began at here: ``time`` (of the first event it
        evaluates) unless it began earlier."""
        return self.begun.setdefault(name, time)

    def begin_keys(self, name: str, events: EventBatch, quiet: np.ndarray,
                   fields: tuple[str, ...]) -> EventBatch:
        """The events query ``name`` evaluates when each key begins at its first ``quiet``
        event (:func:`situflow.runtime.begins.begin_keys`); keys begun now are remembered."""
        keep = begin_keys(self.keys.setdefault(name, {}), events, quiet, fields)
        return events if keep.all() else events.take(np.flatnonzero(keep))

    def sync(self, queries: QuerySet) -> None:
        """Start operators for new queries (restored if the checkpoint has one), drop removed."""
        if self.version == queries.version:
            return
        for name in set(self.operators) - set(queries.compiled):
            del self.operators[name]
            self.begun.pop(name, None)
            self.keys.pop(name, None)
        for name, query in queries.compiled.items():
            current = self.operators.get(name)
            if current is not None and current[0] == query.query_id:
                continue
            stored = self.snapshots.pop(name, None)
            self.begun.pop(name, None)
            self.keys.pop(name, None)
            if stored is not None and stored["id"] == query.query_id:
                operator = query.restore(stored["operator"])
                if stored.get("begun") is not None:
                    self.begun[name] = int(stored["begun"])
                if stored.get("keys") is not None:
                    self.keys[name] = stored["keys"]
            else:
                operator = query.operator()
            self.operators[name] = (query.query_id, operator)
        self.version = queries.version

    @classmethod
    def decode(cls, value: Any) -> PartitionOperators:
        """The partition as :meth:`encode` stored it (None: a partition never checkpointed);
        its operators start at the first :meth:`sync`."""
        if value is None:
            return cls({}, {})
        return cls({}, value["positions"], snapshots=value["queries"])

    def encode(self) -> dict[str, Any]:
        """The partition's checkpoint: plain data, for JSON."""
        queries = {name: {"id": query_id, "operator": operator.snapshot(),
                          "begun": self.begun.get(name), "keys": self.keys.get(name)}
                   for name, (query_id, operator) in self.operators.items()}
        return {"queries": queries, "positions": self.positions}
