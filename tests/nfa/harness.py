"""Test harness for SASE+ queries: literal events in, literal matches out.

``Harness.for_query(text)`` compiles a query; ``run(events, batch=n)`` feeds the events in
batches of ``n`` (all at once by default) and returns every result including those released at
the end. ``matches`` gives them as ``{var: [ids]}`` dicts, the form the tests compare.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from situflow.events import EventBatch
from situflow.nfa.operator import NfaOperator
from situflow.operator import QueryOptions
from situflow.results import Match
from situflow.sase import SaseCompiledQuery, compile

# Figure 3 of the SASE+ paper: the Query 3 stream (one symbol, all within the hour).
FIGURE3_PRICE = [100, 120, 120, 121, 120, 125, 120, 120]
FIGURE3_VOLUME = [1010, 990, 1005, 999, 999, 750, 950, 700]

QUERY3 = """PATTERN SEQ(Stock+ a[ ], Stock b)
WHERE    skip_till_next_match(a[ ], b) {
                    [symbol]
       and       a[1].volume > 1000
       and       a[i].price > avg(a[..i-1].price)
       and       b.volume < 80%*a[a.LEN].volume }
WITHIN    1 hour"""

QUERY1 = """PATTERN SEQ(Shelf a, ∼(Register b), Exit c)
WHERE    skip_till_next_match(a, b, c) {
                  a.tag_id = b.tag_id
       and     a.tag_id = c.tag_id
                  /* equivalently, [tag_id] */     }
WITHIN    12 hours"""


def figure3(times: Sequence[int] | None = None) -> list[dict[str, Any]]:
    times = times or list(range(1, 9))
    return [
        {"id": f"e{i + 1}", "type": "Stock", "symbol": "GOOG", "price": p, "volume": v,
         "ts": times[i]}
        for i, (p, v) in enumerate(zip(FIGURE3_PRICE, FIGURE3_VOLUME, strict=True))
    ]


def match(a: Sequence[int], b: int) -> dict[str, list[str]]:
    """A Query 3 match written as in Figure 3: ``match([1, 2, 3, 4, 5], 6)`` is R1."""
    return {"a": [f"e{i}" for i in a], "b": [f"e{b}"]}


def with_strategy(query: str, strategy: str) -> str:
    return query.replace("skip_till_next_match", strategy)


@dataclass
class Harness:
    compiled: SaseCompiledQuery
    type_field: str = "type"

    @classmethod
    def for_query(cls, text: str, **options: Any) -> Harness:
        return cls(compile(text, QueryOptions(**options)), options.get("type_field", "type"))

    def run(self, events: Sequence[dict[str, Any]], batch: int | None = None,
            merge_runs: bool = True, time_field: str = "ts") -> list[Match]:
        op = self.compiled.operator(merge_runs=merge_runs)
        return feed(op, events, batch, self.type_field, time_field)

    def matches(self, events: Sequence[dict[str, Any]], **kwargs: Any) -> list[dict[str, Any]]:
        return [m.bindings for m in self.run(events, **kwargs)]


def batches(events: Sequence[dict[str, Any]], batch: int | None, type_field: str = "type",
            time_field: str = "ts", offset: int = 0) -> list[EventBatch]:
    """Event batches of ``batch`` events; ``offset`` is the stream position of the first."""
    size = batch or max(len(events), 1)
    # Arrow takes the columns from the first record: give every record every attribute.
    names = list(dict.fromkeys(k for e in events for k in e))
    out = []
    for start in range(0, len(events), size):
        chunk = [{k: e.get(k) for k in names} for e in events[start:start + size]]
        b = EventBatch.from_records(chunk, type_field=type_field, time_field=time_field)
        # Sequence numbers are stream positions, not positions within the batch.
        out.append(EventBatch(b.columns, b.ts, b.seq + start + offset, b.ids, b.types))
    return out


def feed(op: Any, events: Sequence[dict[str, Any]], batch: int | None = None,
         type_field: str = "type", time_field: str = "ts", offset: int = 0,
         finish: bool = True) -> list[Match]:
    out: list[Match] = []
    for b in batches(events, batch, type_field, time_field, offset):
        out += op.process(b)
    return out + op.finish() if finish else out


def nfa_operator(h: Harness, compiled: bool, merge_runs: bool = True) -> NfaOperator:
    """A fresh operator of ``h``'s query: the compiled loop or the per-event Python one."""
    return NfaOperator(h.compiled.automaton, h.compiled.name, h.compiled.query_id, merge_runs,
                       compiled)


def across_loops(h: Harness, events: Sequence[dict[str, Any]], batch: int | None, cut: int,
                 first_loop: bool) -> list[dict[str, Any]]:
    """The results of ``events`` fed to one loop up to ``cut``, snapshotted through JSON and
    restored into the other loop for the rest: a snapshot of either loop restores into the
    other."""
    op = nfa_operator(h, first_loop)
    first = feed(op, events[:cut], batch, finish=False)
    snapshot = json.loads(json.dumps(op.snapshot()))
    restored = NfaOperator.restore(h.compiled.automaton, h.compiled.name, h.compiled.query_id,
                                   snapshot, compiled=not first_loop)
    rest = feed(restored, events[cut:], batch, offset=cut)
    return [m.to_dict() for m in first + rest]
