"""Run COGRA queries over literal events the way the CLI does, in any batch sizes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from situflow.events import EventBatch
from situflow.trends.query import compile

# The running example of the paper (Fig. 2): letters are types, numbers time stamps.
RUNNING = "a1 b2 a3 a4 c5 b6 a7 b8"
PATTERN = "(SEQ(A+, B))+"


def stream(text: str, **columns: Sequence[Any]) -> list[dict[str, Any]]:
    """``"a1 b2"`` as events; ``attr`` is the time stamp number unless ``columns`` say else."""
    events = []
    for j, word in enumerate(text.split()):
        event: dict[str, Any] = {"type": word[0].upper(), "ts": int(word[1:]), "attr": int(word[1:])}
        for name, values in columns.items():
            if values[j] is not None:
                event[name] = values[j]
        events.append(event)
    return events


def batch(events: list[dict[str, Any]]) -> EventBatch:
    """An event batch; every event gets every key, because ``from_records`` infers the
    columns from the first record alone."""
    keys = list(dict.fromkeys(k for e in events for k in e))
    return EventBatch.from_records([{k: e.get(k) for k in keys} for e in events])


def run(text: str, events: list[dict[str, Any]], sizes: Sequence[int] = ()) -> list[dict]:
    """Results as CLI dicts; ``sizes`` cut the input into batches (cycled), default one batch."""
    op = compile(text).operator()
    out = []
    i, b = 0, 0
    while i < len(events):
        step = sizes[b % len(sizes)] if sizes else len(events)
        out += op.process(batch(events[i:i + step]))
        i, b = i + step, b + 1
    out += op.finish()
    return [r.to_dict() for r in out]


def query(returns: str, semantics: str, pattern: str = PATTERN, where: str = "",
          within: str = "WITHIN 100") -> str:
    clause = f" WHERE {where}" if where else ""
    return f"RETURN {returns} PATTERN {pattern} SEMANTICS {semantics}{clause} {within}"


def values(text: str, events: list[dict[str, Any]]) -> dict[str, Any]:
    """The values of the single result of a one-window, one-group query."""
    results = run(text, events)
    assert len(results) == 1, results
    return results[0]["values"]


ANY, NEXT, CONT = "skip-till-any-match", "skip-till-next-match", "contiguous"
