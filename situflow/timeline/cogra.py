"""The timeline of a COGRA run: per group, each result row's window ``[window_start,
window_end)`` as a bar (mark ``window``) at the height of the row's aggregate and coloured by it.

The aggregate drawn is the first number of a row's values that is not a ``GROUP-BY``
attribute (``COUNT(*)`` for the bundled examples); the tooltip shows all of them. Sliding
windows overlap (COGRA's ``WITHIN … SLIDE …``, windows ``[k·SLIDE, k·SLIDE + WITHIN)``), so
the bars are translucent: where windows overlap, their outlines stay visible. How much is
drawn: :mod:`situflow.timeline.limits` (the last :attr:`~situflow.timeline.limits.Limits.windows`
rows of each group).
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from typing import Any

from situflow.events import EventBatch
from situflow.operator import CompiledQuery, Result
from situflow.results import TrendResult
from situflow.timeline.limits import LIMITS, LastPerKey, Limits, Omissions, chosen_keys, key_of
from situflow.timeline.picture import Picture, key_label, no_results, titled


class TrendTimeline:
    """Records a COGRA run's results and draws them (the events are not needed)."""

    def __init__(self, query: CompiledQuery, limits: Limits = LIMITS, *, events: bool = True):
        self.query = query
        self.limits = limits
        self.rows: LastPerKey[TrendResult] = LastPerKey(limits.windows)
        self.total = 0
        self.seen: dict[Hashable, Any] = {}

    def add(self, batch: EventBatch | None, results: Sequence[Result]) -> None:
        """The results the run's operator returned for one batch (its events are unused)."""
        for result in results:
            assert isinstance(result, TrendResult)
            key = key_of(result.group)
            self.seen.setdefault(key, result.group)
            self.rows.add(key, result)
            self.total += 1

    def picture(self) -> Picture:
        keys, keys_left = chosen_keys(self.seen, (), self.limits.keys)
        omitted = Omissions(self.limits, keys=keys_left, key_word="groups",
                            result_word="results", per_key=self.limits.windows)
        grouping = set(self.query.partition_attributes)
        rows: list[dict[str, Any]] = []
        measure = None
        for key in keys:
            for r in self.rows.of(key):
                if measure is None:
                    measure = _measure(r.values, grouping)
                value = r.values.get(measure) if measure is not None else None
                rows.append({"group": key_label(self.seen[key]), "start": r.window_start,
                             "end": r.window_end, "value": value,
                             "values": json.dumps(r.values)})
        omitted.results = self.total - len(rows)
        notes = omitted.lines()
        group_by = ", ".join(self.query.partition_attributes)
        title = f"{self.query.name}: window aggregates per {group_by or 'window'}"
        if not rows:
            return no_results(title, ["no results", *notes])
        chart = _chart(rows, [key_label(self.seen[k]) for k in keys], measure or "value",
                       group_by or "group")
        return Picture(titled(chart, title, notes), notes)


def _measure(values: dict[str, Any], grouping: set[str]) -> str | None:
    """The name of the aggregate to draw: the first number that is no GROUP-BY attribute.

    >>> _measure({"sector": "tech", "COUNT(*)": 3}, {"sector"})
    'COUNT(*)'
    """
    return next((name for name, v in values.items() if name not in grouping
                 and isinstance(v, int | float) and not isinstance(v, bool)), None)


def _chart(rows: list[dict[str, Any]], groups: list[str], measure: str, group_by: str) -> Any:
    import altair as alt

    zoom = alt.selection_interval(bind="scales", encodings=["x"])
    bars = alt.Chart(name="window").mark_bar(opacity=0.5, stroke="#333", strokeWidth=0.5).encode(
        x=alt.X("start:Q", title="event time (window start to end)", scale=alt.Scale(zero=False)),
        x2="end:Q",
        y=alt.Y("value:Q", title=measure),
        color=alt.Color("value:Q", title=measure, scale=alt.Scale(scheme="viridis")),
        tooltip=[alt.Tooltip("group:N"), alt.Tooltip("start:Q", title="window_start"),
                 alt.Tooltip("end:Q", title="window_end"), alt.Tooltip("values:N")],
    ).add_params(zoom).properties(width=800, height=120)
    return bars.facet(data=alt.Data(values=rows),
                      row=alt.Row("group:N", sort=groups, title=group_by,
                                  header=alt.Header(labelAngle=0, labelAlign="left"))
                      ).resolve_scale(y="independent")
