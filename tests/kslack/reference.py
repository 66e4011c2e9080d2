"""The per-event K-slack of [BSW04] (thesis §5.6.1): the reference the columnar one in
:mod:`situflow.kslack.reorder` is tested against, item by item."""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

E = TypeVar("E")


@dataclass
class _KeyQueue(Generic[E]):
    heap: list[tuple[int, int, E]] = field(default_factory=list)
    max_seen: int | None = None
    released: int | None = None  # time of the last released event


class KSlack(Generic[E]):
    """Reorders items of type ``E`` per partition key by their event time."""

    def __init__(self, slack: int):
        if slack < 0:
            raise ValueError("the slack K must not be negative")
        self.slack = slack
        self._partitions: dict[Hashable, _KeyQueue[E]] = {}
        self._arrivals = 0
        self._buffered = 0

    def push(self, key: Hashable, ts: int, item: E) -> tuple[list[E], list[E]]:
        """Add one item; returns (items released, in order; items that arrived late)."""
        part = self._partitions.get(key)
        if part is None:
            part = self._partitions[key] = _KeyQueue()
        if part.released is not None and ts < part.released:
            return [], [item]
        self._arrivals += 1
        self._buffered += 1
        heapq.heappush(part.heap, (ts, self._arrivals, item))
        if part.max_seen is None or ts > part.max_seen:
            part.max_seen = ts
        return self._release(part, part.max_seen - self.slack), []

    def advance_to(self, watermark: int) -> list[E]:
        """Release, in every partition, what is more than ``K`` older than ``watermark``."""
        return [e for part in self._partitions.values()
                for e in self._release(part, watermark - self.slack)]

    def finish(self) -> list[E]:
        """End of input: release everything, partition by partition."""
        return [e for part in self._partitions.values() for e in self._release(part, None)]

    def _release(self, part: _KeyQueue[E], bound: int | None) -> list[E]:
        out = []
        heap = part.heap
        while heap and (bound is None or heap[0][0] < bound):
            ts, _, item = heapq.heappop(heap)
            part.released = ts
            out.append(item)
        self._buffered -= len(out)
        return out

    @property
    def buffered(self) -> int:
        """Items waiting in all partitions (a gauge for the metrics endpoint)."""
        return self._buffered

    def snapshot(self, encode: Any = lambda item: item) -> dict[str, Any]:
        """Plain data; ``encode`` turns an item into JSON-able data."""
        return {
            "slack": self.slack,
            "arrivals": self._arrivals,
            "partitions": [[key, p.max_seen, p.released,
                            [[ts, n, encode(item)] for ts, n, item in p.heap]]
                           for key, p in self._partitions.items()],
        }

    @classmethod
    def restore(cls, state: dict[str, Any], decode: Any = lambda data: data) -> KSlack[Any]:
        ks: KSlack[Any] = cls(state["slack"])
        ks._arrivals = state["arrivals"]
        for key, max_seen, released, heap in state["partitions"]:
            hashable = tuple(key) if isinstance(key, list) else key
            ks._partitions[hashable] = _KeyQueue(
                [(ts, n, decode(item)) for ts, n, item in heap], max_seen, released)
            heapq.heapify(ks._partitions[hashable].heap)
            ks._buffered += len(heap)
        return ks
