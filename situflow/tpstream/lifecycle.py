"""The time part of the operator API (:mod:`situflow.operator`) that every TPStream operator
shares: the fused operator and the halves of distributed TPStream.

Time alone decides nothing in TPStream: a situation ends only at an event (thesis Def 5.1),
so a watermark releases nothing, and situations still open at the end of input are never
emitted (SEMANTICS.md). Snapshots go through :mod:`situflow.snapshot`, each operator under its
own kind and :data:`STATE_VERSION`.
"""

from __future__ import annotations

from typing import Any

#: The format version of every TPStream operator's state.
STATE_VERSION = 1


class EventDriven:
    """``advance_to``/``finish`` of an operator that only events drive."""

    def advance_to(self, watermark: int) -> list[Any]:
        """Time alone decides nothing in TPStream: a situation ends only at an event."""
        return []

    def finish(self) -> list[Any]:
        """Situations still open at the end of input are never emitted (SEMANTICS.md)."""
        return []
