"""Result records of the CLI contract (ARCHITECTURE.md) and their deterministic ids.

A result id hashes the query, the partition key and the constituent event or situation ids, so
a consumer can drop the duplicates that at-least-once delivery may produce.

Keys and values are JSON numbers: a whole float within 2^53 is written as an integer, since a
column of integers reads as floats where one event lacks the attribute, and a result must not
depend on which events shared a batch (SEMANTICS.md, determinism).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Match:
    """A TPStream or SASE+ result."""

    query: str
    key: Any
    ts: int
    emitted_at: int
    values: dict[str, Any]
    bindings: dict[str, Any]
    # Ordering within one emitting event, so every runtime prints results in the same order.
    order: tuple[Any, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", json_number(self.key))
        object.__setattr__(self, "values", {k: json_number(v) for k, v in self.values.items()})

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "key": self.key,
            "ts": self.ts,
            "emitted_at": self.emitted_at,
            "values": self.values,
            "bindings": self.bindings,
        }

    @property
    def result_id(self) -> str:
        return result_id(self.query, self.key, self.bindings)


@dataclass(frozen=True, slots=True)
class TrendResult:
    """A COGRA result: one aggregate row per window and group."""

    query: str
    group: Any
    window_start: int
    window_end: int
    values: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "group": self.group,
            "window_start": self.window_start,
            "window_end": self.window_end,
            "values": self.values,
        }

    @property
    def result_id(self) -> str:
        return result_id(self.query, self.group, [self.window_start, self.window_end])


def json_number(value: Any) -> Any:
    """``value`` with whole floats within 2^53 as integers (lists element by element)."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    if isinstance(value, list):
        return [json_number(v) for v in value]
    return value


def result_id(query: str, key: Any, constituents: Any) -> str:
    """A stable 128-bit hex id of a result from what identifies it."""
    text = json.dumps([query, key, constituents], sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
