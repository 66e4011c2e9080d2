"""The timeline of a TPStream run: per partition key, one lane per situation definition with
its situations as bars, and each match as a bracket over the time its bindings span.

Situations come from a :class:`~situflow.tpstream.split.deriver.SituationDeriver` fed the same
batches as the run's operator (thesis §5.4, Alg. 5.1; the records of
:mod:`situflow.tpstream.split.records`): a ``finished`` record with ``te > ts`` is a situation
(Def 5.1), a ``started`` one without its ``finished`` by the end of input is drawn open-ended
to the last event time, faded and dashed. Without events (``situflow offline``, whose events
stay inside Spark) the situations drawn are the matches' bindings only.

A bracket (mark ``match``) spans from its first binding's start to the latest end (an open
binding: its emission time); its label gives the Allen relation that held for each pair of
definitions the PATTERN constrains, and a triangle (mark ``emitted``) marks ``emitted_at``,
the earliest point at which the match was certain (§5.5.3, low-latency matching): often
before its last situation ends. Overlapping brackets of one key stack in lanes ``matches``,
``matches 2``, … How much is drawn: :mod:`situflow.timeline.limits`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Sequence
from typing import Any

from situflow.events import EventBatch
from situflow.operator import Result
from situflow.results import Match
from situflow.timeline.limits import LIMITS, LastPerKey, Limits, Omissions, chosen_keys, key_of
from situflow.timeline.picture import Picture, key_label, no_results, titled
from situflow.tpstream.match.allen import relation
from situflow.tpstream.query import TPStreamQuery
from situflow.tpstream.split.deriver import SituationDeriver
from situflow.tpstream.split.records import FINISHED, STARTED

MATCH_LANE = "matches"
#: The width of the time axis in pixels, and about how wide a label's character is.
WIDTH, LABEL_CHAR = 800, 5.5

# A situation as drawn: (definition name, ts, te or None while open).
Interval = tuple[str, int, int | None]


class TPStreamTimeline:
    """Records a TPStream run (batches and results) and draws it."""

    def __init__(self, query: TPStreamQuery, limits: Limits = LIMITS, *, events: bool = True):
        self.query = query
        self.limits = limits
        self.names = [d.name for d in query.definitions]
        self.deriver = SituationDeriver(query) if events else None
        self.situations: LastPerKey[Interval] = LastPerKey(limits.situations)
        self.open: dict[Hashable, dict[str, int]] = {}
        self.matches: LastPerKey[Match] = LastPerKey(limits.results)
        self.total_matches = 0
        self.seen: dict[Hashable, Any] = {}  # first-seen order; the key as the results give it
        self.matched: dict[Hashable, None] = {}  # order of first match
        self.last_time: int | None = None

    def add(self, batch: EventBatch | None, results: Sequence[Result]) -> None:
        """The events of one batch (None: no events, at the end of input) and the results
        the run's operator returned for it."""
        if batch is not None and len(batch):
            self._advance(int(batch.ts.max()))
            if self.deriver is not None:
                self._file(self.deriver.process(batch))
        for result in results:
            assert isinstance(result, Match)
            key = key_of(result.key)
            self.seen.setdefault(key, result.key)
            self.matched.setdefault(key)
            self.matches.add(key, result)
            self.total_matches += 1
            if self.deriver is None:
                self._advance(max([result.emitted_at] + [b["te"] for b in result.bindings.values()
                                                         if b["te"] is not None]))

    def _advance(self, time: int) -> None:
        self.last_time = time if self.last_time is None else max(self.last_time, time)

    def _file(self, records: Sequence[Any]) -> None:
        for r in records:
            key = key_of(r.key)
            self.seen.setdefault(key, r.key)
            running = self.open.setdefault(key, {})
            if r.kind == STARTED:
                running[r.situation] = r.ts
            elif r.kind == FINISHED:
                running.pop(r.situation, None)
                if r.te > r.ts:  # else no interval (Def 5.1): withdrawn
                    self.situations.add(key, (r.situation, r.ts, r.te))

    # --- the picture ----------------------------------------------------------------------

    def picture(self) -> Picture:
        keys, keys_left = chosen_keys(self.matched, self.seen, self.limits.keys)
        omitted = Omissions(self.limits, keys=keys_left)
        situation_rows: list[dict[str, Any]] = []
        match_rows: list[dict[str, Any]] = []
        lanes = list(self.names)
        end = self.last_time if self.last_time is not None else 0
        drawn: list[list[dict[str, Any]]] = []
        for order, key in enumerate(keys):
            label = key_label(self.seen[key])
            matches = self.matches.of(key)
            for name, ts, te in self._situations_of(key, matches):
                situation_rows.append(_situation_row(label, order, name, ts, te, end))
            drawn.append([self._match_row(label, order, match) for match in matches])
        starts = [r["start"] for r in situation_rows] + [r["start"] for rows in drawn for r in rows]
        span = max(1, end - min(starts, default=end))
        for rows in drawn:
            for level, row in zip(_levels(rows, span / WIDTH * LABEL_CHAR), rows, strict=True):
                row["lane"] = MATCH_LANE if level == 0 else f"{MATCH_LANE} {level + 1}"
                if row["lane"] not in lanes:
                    lanes.append(row["lane"])
                match_rows.append(row)
        omitted.results = self.total_matches - len(match_rows)
        omitted.situations = sum(self.situations.dropped[k] for k in keys)
        notes = omitted.lines()
        if not match_rows:
            notes.insert(0, "no matches")
        key_name = ", ".join(self.query.partition_by) or "key"
        title = f"{self.query.name}: situations and matches per {key_name}"
        if not situation_rows and not match_rows:
            return no_results(title, notes)
        chart = _chart(situation_rows, match_rows, [key_label(self.seen[k]) for k in keys],
                       lanes, self.names, key_name)
        return Picture(titled(chart, title, notes), notes)

    def _situations_of(self, key: Hashable, matches: list[Match]) -> list[Interval]:
        if self.deriver is not None:
            running = [(name, ts, None) for name, ts in self.open.get(key, {}).items()]
            return [*self.situations.of(key), *running]
        # Without events: each distinct binding of the drawn matches.
        found: dict[tuple[str, int], int | None] = {}
        for match in matches:
            for name, b in match.bindings.items():
                found[(name, b["ts"])] = b["te"]
        return [(name, ts, te) for (name, ts), te in found.items()]

    def _match_row(self, label: str, order: int, match: Match) -> dict[str, Any]:
        spans = {name: (b["ts"], math.inf if b["te"] is None else b["te"])
                 for name, b in match.bindings.items()}
        start = min(ts for ts, _ in spans.values())
        stop = max([match.emitted_at] + [te for _, te in spans.values() if te != math.inf])
        return {
            "key": label, "order": order, "start": start, "end": stop,
            "emitted_at": match.emitted_at, "ts": match.ts,
            "relations": " · ".join(self._relations(spans)),
            "bindings": json.dumps(match.bindings), "values": json.dumps(match.values),
        }

    def _relations(self, spans: dict[str, tuple[float, float]]) -> list[str]:
        """The relation that held for each pair of definitions a PATTERN constraint names."""
        out = []
        for i, row in enumerate(self.query.constraints):
            for j in range(i + 1, len(row)):
                if row[j] is None and self.query.constraints[j][i] is None:
                    continue
                x, y = self.names[i], self.names[j]
                if x in spans and y in spans:
                    out.append(f"{x} {relation(*spans[x], *spans[y])} {y}")
        return out


def _situation_row(key: str, order: int, name: str, ts: int, te: int | None,
                   end: int) -> dict[str, Any]:
    return {"key": key, "order": order, "lane": name, "start": ts,
            "end": max(end, ts) if te is None else te, "open": te is None,
            "te": "open at the end of input" if te is None else te}


def _levels(rows: list[dict[str, Any]], per_char: float) -> list[int]:
    """A stacking level per bracket (in the given order) so that brackets of one level and
    their labels do not overlap: the first level whose last bracket and label ended before this
    one starts (``per_char``: event time per character of a label at the picture's scale)."""
    ends: list[float] = []
    levels = []
    for row in rows:
        stop = max(row["end"], row["start"] + per_char * (len(row["relations"]) + 2))
        level = next((i for i, e in enumerate(ends) if e < row["start"]), len(ends))
        if level == len(ends):
            ends.append(stop)
        else:
            ends[level] = stop
        levels.append(level)
    return levels


def _chart(situations: list[dict[str, Any]], matches: list[dict[str, Any]], keys: list[str],
           lanes: list[str], names: list[str], key_name: str) -> Any:
    import altair as alt

    x = alt.X("start:Q", title="event time", scale=alt.Scale(zero=False))
    zoom = alt.selection_interval(bind="scales", encodings=["x"])
    # The outer padding leaves room for the labels of the first lane's brackets.
    y = alt.Y("lane:N", sort=lanes, title=None, scale=alt.Scale(paddingOuter=0.5))
    bars = alt.Chart(name="situation").mark_bar(height=12, strokeWidth=1.5).encode(
        x=x, x2="end:Q", y=y,
        color=alt.Color("lane:N", scale=alt.Scale(domain=names), title="situation"),
        opacity=alt.condition("datum.open", alt.value(0.35), alt.value(0.9)),
        stroke=alt.condition("datum.open", alt.value("#333"), alt.value(None)),
        strokeDash=alt.condition("datum.open", alt.value([3, 2]), alt.value([1, 0])),
        tooltip=[alt.Tooltip("key:N"), alt.Tooltip("lane:N", title="situation"),
                 alt.Tooltip("start:Q", title="ts"), alt.Tooltip("te:N")],
    ).transform_filter("datum.kind == 'situation'").add_params(zoom)
    tooltip = [alt.Tooltip(f) for f in ("key:N", "ts:Q", "emitted_at:Q", "relations:N",
                                        "bindings:N", "values:N")]
    brackets = alt.Chart(name="match").mark_rule(strokeWidth=3, color="#222").encode(
        x=x, x2="end:Q", y=y, tooltip=tooltip).transform_filter("datum.kind == 'match'")
    emitted = alt.Chart(name="emitted").mark_point(
        shape="triangle-down", filled=True, size=70, color="#d62728", yOffset=-7).encode(
        x=alt.X("emitted_at:Q"), y=y, tooltip=tooltip).transform_filter("datum.kind == 'match'")
    labels = alt.Chart(name="relations").mark_text(align="left", dy=-9, fontSize=9).encode(
        x=x, y=y, text="relations:N").transform_filter("datum.kind == 'match'")
    rows = [{**r, "kind": "situation"} for r in situations] + [{**r, "kind": "match"}
                                                               for r in matches]
    layered = alt.layer(bars, brackets, emitted, labels).properties(
        width=WIDTH, height=alt.Step(26))
    return layered.facet(
        data=alt.Data(values=rows), row=alt.Row("key:N", sort=keys, title=key_name,
                                                header=alt.Header(labelAngle=0, labelAlign="left")),
    ).resolve_scale(y="independent")
