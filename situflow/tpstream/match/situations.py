"""Situations and the per-definition situation buffers (thesis §5.5.2).

A buffer holds the finished situations of one definition in one partition. They are disjoint,
so ordering by start also orders by end, and every Allen relation becomes two binary searches
(on starts and on ends) whose index ranges intersect (Fig. 5.3). Purging drops situations that
started before ``t - window``; they can join no new match.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from typing import Any

from situflow.tpstream.match.allen import RANGES

# Stand-in for the unknown end of a running situation: later than every known time.
BIG = 1 << 62


class Situation:
    """An interval ``[ts, te)`` of definition ``defn``; ``te`` is None while it runs."""

    __slots__ = ("batch", "defn", "first", "te", "ts", "values")

    def __init__(self, defn: int, ts: int, te: int | None = None, values: Any = None,
                 first: int = -1, batch: int = -1):
        self.defn = defn
        self.ts = ts
        self.te = te
        # RETURN aggregates of a finished situation, indexed like query.aggregates, else None.
        self.values = values
        # Where a running situation's first event is: position ``first`` of batch ``batch``.
        self.first = first
        self.batch = batch

    @property
    def end(self) -> int:
        return BIG if self.te is None else self.te

    def to_binding(self) -> dict[str, Any]:
        return {"ts": self.ts, "te": self.te, "open": self.te is None}

    def to_state(self) -> list[Any]:
        return [self.defn, self.ts, self.te, self.values]

    @classmethod
    def from_state(cls, state: list[Any]) -> Situation:
        defn, ts, te, values = state
        return cls(defn, ts, te, values)

    def __repr__(self) -> str:
        return f"Situation({self.defn}, [{self.ts}, {self.te}))"


class SituationBuffer:
    """Finished situations of one definition, sorted by start (and end), purgeable from the head."""

    __slots__ = ("ends", "head", "items", "starts")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.items: list[Situation] = []
        self.head = 0

    def __len__(self) -> int:
        return len(self.items) - self.head

    def __iter__(self) -> Iterator[Situation]:
        return iter(self.items[self.head:])

    def append(self, s: Situation) -> None:
        assert s.te is not None
        self.starts.append(s.ts)
        self.ends.append(s.te)
        self.items.append(s)

    def purge(self, bound: float) -> None:
        """Drop situations with ``ts < bound`` (thesis: ``s.ts < t - window``)."""
        head = bisect_left(self.starts, bound, self.head)
        if head > 64 and head * 2 > len(self.items):
            del self.starts[:head], self.ends[:head], self.items[:head]
            head = 0
        self.head = head

    def related(self, relation: str, xs: int, xe: int) -> range:
        """Indexes of situations Y with ``X relation Y`` for X = [xs, xe) (two binary searches)."""
        (ts_bound, te_bound) = RANGES[relation]
        a1, b1 = self._bounds(self.starts, ts_bound, xs, xe)
        a2, b2 = self._bounds(self.ends, te_bound, xs, xe)
        return range(max(a1, a2), min(b1, b2))

    def _bounds(self, keys: list[int], bound: Any, xs: int, xe: int) -> tuple[int, int]:
        low, low_inclusive, high, high_inclusive = bound
        lo, hi = self.head, len(keys)
        if low is not None:
            value = xs if low == "s" else xe
            lo = (bisect_left if low_inclusive else bisect_right)(keys, value, lo, hi)
        if high is not None:
            value = xs if high == "s" else xe
            hi = (bisect_right if high_inclusive else bisect_left)(keys, value, lo, hi)
        return lo, hi

    def to_state(self) -> list[Any]:
        return [s.to_state() for s in self]

    @classmethod
    def from_state(cls, state: list[Any]) -> SituationBuffer:
        buffer = cls()
        for item in state:
            buffer.append(Situation.from_state(item))
        return buffer
