"""Pictures of a query's results (``situflow run --timeline``, ``situflow offline
--timeline``) and of its structure (``situflow explain``): Vega-Lite specifications drawn into
self-contained HTML or SVG files (:mod:`situflow.timeline.page`).

A timeline is recorded while the query runs: :func:`timeline_for` gives the language's
recorder (:mod:`~situflow.timeline.tpstream`, :mod:`~situflow.timeline.sase`,
:mod:`~situflow.timeline.cogra`), the run calls ``add(batch, results)`` for every batch (and
``add(None, results)`` at the end), then ``picture()`` draws what the rule of
:mod:`~situflow.timeline.limits` keeps. altair and vl-convert load only then.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from situflow.events import EventBatch
from situflow.operator import CompiledQuery, Result
from situflow.results import Match, TrendResult
from situflow.timeline.limits import LIMITS, Limits
from situflow.timeline.picture import Picture


class Timeline(Protocol):
    def add(self, batch: EventBatch | None, results: Sequence[Result]) -> None: ...

    def picture(self) -> Picture: ...


def timeline_for(query: CompiledQuery, limits: Limits = LIMITS, *, events: bool = True) -> Timeline:
    """The recorder of ``query``'s language; ``events=False`` when the run's events are not at
    hand (``situflow offline``): the picture is then drawn from the results alone."""
    recorder: Any
    if query.language == "tpstream":
        from situflow.timeline.tpstream import TPStreamTimeline as recorder
    elif query.language == "sase":
        from situflow.timeline.sase import SaseTimeline as recorder
    else:
        from situflow.timeline.cogra import TrendTimeline as recorder
    timeline: Timeline = recorder(query, limits, events=events)
    return timeline


def result_of(line: dict[str, Any]) -> Result:
    """A result from its JSON object (the CLI contract): what ``situflow offline`` writes.

    >>> result_of({"query": "q", "group": "tech", "window_start": 0, "window_end": 10,
    ...            "values": {"COUNT(*)": 3}}).window_end
    10
    """
    if "group" in line:
        return TrendResult(line["query"], line["group"], line["window_start"],
                           line["window_end"], line["values"])
    return Match(line["query"], line["key"], line["ts"], line["emitted_at"], line["values"],
                 line["bindings"])
