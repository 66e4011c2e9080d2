"""The timeline of a SASE+ run: per partition key, one row per match with the events it
selected at their times (mark ``event``), joined in order by a line (mark ``match``).

An event's colour and shape name its variable. The events a Kleene variable took (SASE+
§2, ``a[ ]``) are also drawn as a run (mark ``run``): a thick segment from the run's first to
its last event, labelled ``a[1..n]``. Tooltips give each event's values.

Results name events by id; the timeline looks them up among the events it keeps: those of
the last ``WITHIN`` window and as much again (a match's events lie within one window of each
other, and a trailing negation emits up to one window after its first event), or, for a query
without ``WITHIN``, the last :data:`UNWINDOWED_EVENTS` events. A selected event older than that
is not drawn and is counted in a note. Without events (``situflow offline``, whose events stay
inside Spark) each match is a point at its result time (mark ``match``). How much is drawn:
:mod:`situflow.timeline.limits`.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from situflow.events import EventBatch, plain
from situflow.operator import Result
from situflow.results import Match
from situflow.sase import SaseCompiledQuery
from situflow.timeline.limits import LIMITS, LastPerKey, Limits, Omissions, chosen_keys, key_of
from situflow.timeline.picture import Picture, key_label, no_results, titled

#: Events kept to look up matches' events when the query has no WITHIN window.
UNWINDOWED_EVENTS = 100_000

# A selected event as drawn: variable, position in the variable, time, values.
Selected = tuple[str, int, int, dict[str, Any]]


@dataclass(frozen=True)
class Drawn:
    """A match and its selected events (None without events), with the counts of its events
    not drawn: past the cap, and no longer kept."""

    match: Match
    selected: list[Selected] | None
    capped: int = 0
    missing: int = 0


class SaseTimeline:
    """Records a SASE+ run (batches and results) and draws it."""

    def __init__(self, query: SaseCompiledQuery, limits: Limits = LIMITS, *, events: bool = True):
        self.query = query
        self.limits = limits
        self.events = events
        self.kleene = {c.var for c in query.automaton.components if c.kleene}
        self.window = query.automaton.window
        self.kept: deque[EventBatch] = deque()
        self.kept_rows = 0
        self.by_id: dict[Any, tuple[EventBatch, int]] = {}
        self.matches: LastPerKey[Drawn] = LastPerKey(limits.results)
        self.total_matches = 0
        self.seen: dict[Hashable, Any] = {}
        self.matched: dict[Hashable, None] = {}

    def add(self, batch: EventBatch | None, results: Sequence[Result]) -> None:
        """The events of one batch (None: no events, at the end of input) and the results
        the run's operator returned for it."""
        if batch is not None and len(batch) and self.events:
            self._keep(batch)
        for result in results:
            assert isinstance(result, Match)
            key = key_of(result.key)
            self.seen.setdefault(key, result.key)
            self.matched.setdefault(key)
            self.total_matches += 1
            self.matches.add(key, self._selected(result) if self.events else Drawn(result, None))

    def _keep(self, batch: EventBatch) -> None:
        self.kept.append(batch)
        self.kept_rows += len(batch)
        for i, event_id in enumerate(batch.ids.tolist()):
            self.by_id[event_id] = (batch, i)
        newest = int(batch.ts.max())
        while len(self.kept) > 1 and self._expired(self.kept[0], newest):
            old = self.kept.popleft()
            self.kept_rows -= len(old)
            for event_id in old.ids.tolist():
                if self.by_id.get(event_id, (None,))[0] is old:
                    del self.by_id[event_id]

    def _expired(self, batch: EventBatch, newest: int) -> bool:
        if math.isinf(self.window):
            return self.kept_rows - len(batch) >= UNWINDOWED_EVENTS
        return int(batch.ts.max()) < newest - 2 * self.window

    def _selected(self, match: Match) -> Drawn:
        found: list[Selected] = []
        capped = missing = 0
        for var, ids in match.bindings.items():
            for position, event_id in enumerate(ids, start=1):
                if len(found) == self.limits.events:
                    capped += 1
                    continue
                where = self.by_id.get(event_id)
                if where is None:
                    missing += 1
                    continue
                batch, i = where
                values = {k: plain(v[i]) for k, v in batch.columns.items()}
                found.append((var, position, int(batch.ts[i]),
                              {k: v for k, v in values.items() if v is not None}))
        return Drawn(match, found, capped, missing)

    # --- the picture ----------------------------------------------------------------------

    def picture(self) -> Picture:
        keys, keys_left = chosen_keys(self.matched, self.seen, self.limits.keys)
        omitted = Omissions(self.limits, keys=keys_left)
        match_rows: list[dict[str, Any]] = []
        event_rows: list[dict[str, Any]] = []
        run_rows: list[dict[str, Any]] = []
        capped = missing = 0
        for key in keys:
            label = key_label(self.seen[key])
            for number, drawn in enumerate(self.matches.of(key), start=1):
                match, selected = drawn.match, drawn.selected
                capped += drawn.capped
                missing += drawn.missing
                row = f"{label} · {number}"
                match_rows.append({"key": label, "row": row, "ts": match.ts,
                                   "emitted_at": match.emitted_at,
                                   "bindings": json.dumps(match.bindings),
                                   "values": json.dumps(match.values)})
                for var, position, ts, values in selected or ():
                    event_rows.append({"key": label, "row": row, "var": var,
                                       "event": f"{var}[{position}]" if var in self.kleene else var,
                                       "ts": ts, "values": json.dumps(values)})
                run_rows += self._runs(label, row, match, selected or [])
        omitted.results = self.total_matches - len(match_rows)
        notes = omitted.lines()
        if capped:
            notes.append(f"{capped} selected events not drawn: at most "
                         f"{self.limits.events} of each match are")
        if missing:
            notes.append(f"{missing} selected events not drawn: older than the events kept "
                         "(two WITHIN windows, or the last "
                         f"{UNWINDOWED_EVENTS:,} events without WITHIN)")
        if not self.events and match_rows:
            notes.append("events not drawn (the offline job keeps them in Spark): each match "
                         "at its result time")
        key_name = ", ".join(self.query.partition_attributes) or "key"
        title = f"{self.query.name}: matches and their events per {key_name}"
        if not match_rows:
            return no_results(title, ["no matches", *notes])
        chart = _chart(match_rows, event_rows, run_rows, self.events, key_name)
        return Picture(titled(chart, title, notes), notes)

    def _runs(self, key: str, row: str, match: Match,
              selected: list[Selected]) -> list[dict[str, Any]]:
        """One run per Kleene variable of a match: from its first to its last drawn event,
        labelled with its whole length."""
        spans: dict[str, list[int]] = {}
        for var, _, ts, _ in selected:
            if var in self.kleene:
                spans.setdefault(var, []).append(ts)
        return [{"key": key, "row": row, "start": min(times), "end": max(times),
                 "label": f"{var}[1..{len(match.bindings[var])}]"}
                for var, times in spans.items()]


def _chart(matches: list[dict[str, Any]], events: list[dict[str, Any]],
           runs: list[dict[str, Any]], with_events: bool, key_name: str) -> Any:
    import altair as alt

    # The outer padding leaves room for the labels of the first row's runs.
    y = alt.Y("row:N", sort=[m["row"] for m in matches], title=None,
              axis=alt.Axis(labels=False, ticks=False), scale=alt.Scale(paddingOuter=1))
    facet = alt.Row("key:N", sort=list(dict.fromkeys(m["key"] for m in matches)), title=key_name,
                    header=alt.Header(labelAngle=0, labelAlign="left"))
    match_tooltip = [alt.Tooltip(f) for f in ("key:N", "ts:Q", "emitted_at:Q", "bindings:N",
                                              "values:N")]
    rows = ([{**r, "kind": "match"} for r in matches] + [{**r, "kind": "event"} for r in events]
            + [{**r, "kind": "run"} for r in runs])
    zoom = alt.selection_interval(bind="scales", encodings=["x"])
    if not with_events:
        points = alt.Chart(name="match").mark_point(filled=True, size=60).encode(
            x=alt.X("ts:Q", title="event time", scale=alt.Scale(zero=False)), y=y,
            tooltip=match_tooltip,
        ).transform_filter("datum.kind == 'match'").add_params(zoom)
        layered = alt.layer(points)
    else:
        x = alt.X("ts:Q", title="event time", scale=alt.Scale(zero=False))
        lines = alt.Chart(name="match").mark_line(color="#555", strokeWidth=1).encode(
            x=x, y=y, detail="row:N", order="ts:Q",
        ).transform_filter("datum.kind == 'event'").add_params(zoom)
        run_bars = alt.Chart(name="run").mark_rule(strokeWidth=7, opacity=0.35).encode(
            x=alt.X("start:Q"), x2="end:Q", y=y, color=alt.value("#9467bd"),
            tooltip=[alt.Tooltip("label:N", title="Kleene run"), "start:Q", "end:Q"],
        ).transform_filter("datum.kind == 'run'")
        run_labels = alt.Chart(name="run_label").mark_text(align="left", dy=-9, fontSize=9).encode(
            x=alt.X("start:Q"), y=y, text="label:N").transform_filter("datum.kind == 'run'")
        points = alt.Chart(name="event").mark_point(filled=True, size=50).encode(
            x=x, y=y, color=alt.Color("var:N", title="variable"),
            shape=alt.Shape("var:N", title="variable"),
            tooltip=[alt.Tooltip("key:N"), alt.Tooltip("event:N"), alt.Tooltip("ts:Q"),
                     alt.Tooltip("values:N")],
        ).transform_filter("datum.kind == 'event'")
        layered = alt.layer(run_bars, lines, run_labels, points)
    return layered.properties(width=800, height=alt.Step(18)).facet(
        data=alt.Data(values=rows), row=facet).resolve_scale(y="independent")
