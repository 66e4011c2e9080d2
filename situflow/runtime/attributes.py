"""The attributes a query uses that none of its events has carried yet.

A query over an attribute no event has (a typo, a renamed field) yields nothing, silently; a
service counts such attributes per query and reports them once the query has seen enough
events to tell (SEMANTICS.md, typing rule: a missing attribute is no error).
"""

from __future__ import annotations

from collections.abc import Iterable

from situflow.event_types import carried
from situflow.events import EventBatch


class UnseenAttributes:
    """Per query, the attributes it uses that no event it evaluated has carried yet."""

    def __init__(self, report_after: int = 1000) -> None:
        #: Events a query evaluates before its unseen attributes are reported.
        self.report_after = report_after
        self.unseen: dict[str, set[str]] = {}
        self.events_seen: dict[str, int] = {}
        self.reported: set[str] = set()

    def observe(self, query: str, used: Iterable[str], events: EventBatch) -> int | None:
        """How many of the attributes ``query`` uses are still unseen after ``events``
        (None: every one was seen before, nothing changed)."""
        unseen = self.unseen.setdefault(query, set(used))
        if not unseen:
            return None
        unseen -= carried(events, unseen)
        self.events_seen[query] = self.events_seen.get(query, 0) + len(events)
        return len(unseen)

    def to_report(self, query: str) -> list[str]:
        """The unseen attributes of ``query`` to report now: once, after :attr:`report_after`
        events (empty: nothing to report)."""
        unseen = self.unseen.get(query)
        if not unseen or query in self.reported or \
                self.events_seen.get(query, 0) < self.report_after:
            return []
        self.reported.add(query)
        return sorted(unseen)
