"""What the TPStream operators share around ``process`` (the operator API of
:mod:`situflow.operator`): the fused operator, and the deriver and matcher of distributed
TPStream (thesis §5.6.5).

Time alone decides nothing in TPStream: a situation ends only at an event (thesis Def 5.1),
so a watermark releases nothing, and situations still open at the end of input are never
emitted (SEMANTICS.md). Snapshots carry a format version and the query id, so a changed query
or format is refused with advice rather than misread.
"""

from __future__ import annotations

from typing import Any

from situflow.errors import StateError
from situflow.tpstream.query import TPStreamQuery

STATE_VERSION = 1


class EventDriven:
    """``advance_to``/``finish`` of an operator that only events drive, and its snapshots."""

    query: TPStreamQuery

    def advance_to(self, watermark: int) -> list[Any]:
        """Time alone decides nothing in TPStream: a situation ends only at an event."""
        return []

    def finish(self) -> list[Any]:
        """Situations still open at the end of input are never emitted (SEMANTICS.md)."""
        return []

    def versioned(self, **state: Any) -> dict[str, Any]:
        """A snapshot: ``state`` with the format version and the query id."""
        return {"version": STATE_VERSION, "query_id": self.query.query_id, **state}


def check_snapshot(query: TPStreamQuery, snapshot: dict[str, Any], what: str) -> None:
    """Raise ``StateError`` unless ``snapshot`` is ``query``'s, in this format."""
    if snapshot.get("version") != STATE_VERSION:
        raise StateError(f"{what} state version {snapshot.get('version')} is not "
                         f"{STATE_VERSION}; delete the state directory and restart")
    if snapshot.get("query_id") != query.query_id:
        raise StateError("the state belongs to another query; delete the state directory "
                         "and restart")
