"""Run TPStream queries over literal events in tests."""

from __future__ import annotations

from typing import Any

import numpy as np

from situflow.events import EventBatch
from situflow.operator import QueryOptions
from situflow.tpstream import compile
from situflow.tpstream.query import TPStreamQuery


def query(text: str) -> TPStreamQuery:
    return compile(text, QueryOptions(name="q"))


def run(q: TPStreamQuery | str, events: list[dict[str, Any]], batch_size: int = 1_000_000):
    """All matches of ``q`` over ``events`` fed in batches of ``batch_size``."""
    q = query(q) if isinstance(q, str) else q
    op = q.operator()
    out = []
    for i in range(0, len(events), batch_size):
        out += op.process(batch_of(events, i, i + batch_size))
    return out + op.finish()


def batch_of(events: list[dict[str, Any]], start: int, stop: int) -> EventBatch:
    """Events ``start:stop`` as a batch whose sequence numbers are their list positions."""
    part = events[start:stop]
    return EventBatch.from_records(part, seq=np.arange(start, start + len(part), dtype=np.int64))


def from_intervals(intervals: dict[str, list[tuple[int, int]]], until: int) -> list[dict]:
    """One event per tick 0..until; attribute ``x`` (lower-cased name) is 1 inside [ts, te)."""
    return [{"ts": t, **{name.lower(): int(any(s <= t < e for s, e in spans))
                         for name, spans in intervals.items()}} for t in range(until + 1)]


def summary(matches) -> list[tuple[int, dict[str, tuple[int, int | None]]]]:
    """(emitted_at, {name: (ts, te)}) per match, te None while open."""
    return [(m.emitted_at, {k: (v["ts"], v["te"]) for k, v in m.bindings.items()})
            for m in matches]
