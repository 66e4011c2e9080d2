"""Replay of the archive's events through the core operators (thesis §3.4.2, SEMANTICS.md
"Offline, index-pruned replay").

The pipeline is: the planner's *core* intervals (every full-replay match lies inside one, per
partition key) → :func:`widen` → *replay ranges* → :func:`replay`. Each range is replayed by a
fresh operator over **all** events of its time range (never a concatenated pruned stream,
AT-08), and only the results that the range decides exactly are kept:

- **SASE+** (``kind == "events"``): a result is kept when its time (its last event) lies in a
  core interval of its key. A leading negation looks ``w`` back from the last event and a
  trailing negation ``w`` ahead of the first, and its match is emitted at the first event after
  that deadline, so a core ``[lo, hi]`` is replayed over ``[lo - w, hi + w]`` plus that next
  event (each side only where the query has such a negation).
- **TPStream** (``"situations"``): per key, the range starts at the last *quiet* event before
  the core (one where no definition's condition holds, so no situation spans it) and ends at
  the first quiet event after it: every situation that starts in the core is derived from its
  true start to its true end, and a result is kept when its earliest situation starts in a core
  interval of its key (SEMANTICS.md: the end of a range is extended to the end of each open
  situation).
- **COGRA** (``"windows"``): a core is widened to the windows that overlap it; a window result
  is kept when the whole window lies inside the replayed range (it then saw every event).

Ranges of all keys are merged, so no event is replayed twice and a result's emitting event is
inside its range. A result whose id an earlier range gave is dropped (not one a range gives
twice: TPStream may emit two results with one id, two situations of a definition that start at
one duplicate timestamp, and a full replay keeps both). Results come in **full-replay order**:
by range (ranges are disjoint in time), then as the operator emitted them (by emitting event,
then the operator's order within one event). :func:`result_rows` carries them for Spark, with
``(order_ts, order_seq)`` = (emission time, position in the list) to restore that order.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

from situflow.event_types import conform
from situflow.events import EventBatch
from situflow.kslack.positions import SEQ_FIELD
from situflow.lang.sase import SaseQuery
from situflow.offline.intervals import Interval, merge_intervals, replay_intervals
from situflow.offline.queries import ARCHIVE_SEQ, OfflineQuery
from situflow.offline.source import EventSource, interval_key_text, key_text, key_texts
from situflow.operator import Result
from situflow.results import Match, TrendResult

#: Archive bookkeeping columns that are no event attributes.
ARCHIVE_OFFSET = "_situflow_offset"


@dataclass(frozen=True)
class ReplayRange(Interval):
    """A time range replayed by one fresh operator (``key`` is None: all keys' events), with
    the core intervals whose results it decides."""

    cores: tuple[Interval, ...] = ()
    # Where the query's events lie (its time range within the partition's data; None: open):
    # a window that reaches beyond it is whole when its part inside was replayed, as in a full
    # replay of the range.
    within: tuple[int | None, int | None] = (None, None)


# --- replay intervals --------------------------------------------------------------------------

def candidate_intervals(offline: OfflineQuery, selected: Sequence[int],
                        hits: Mapping[int, pa.Table]) -> list[Interval]:
    """The core replay intervals from the index hits of the ``selected`` symbol positions
    (``hits[i]``: rows with ``ts``, ``seq``, ``key``, ``key_seq``).

    Ordered patterns (SASE+) use Algorithm 3.1 (:func:`replay_intervals`). In an order-free
    pattern (TPStream, COGRA) a match of span ≤ w contains an event of every selected symbol,
    so it lies within ``[t - w, t + w]`` of one of each symbol's hits: the intervals are, per
    key, the intersection over the selected symbols of the union of those spans.
    """
    assert offline.pattern is not None
    if not selected:
        raise ValueError("no symbol selected: without an index the whole range is replayed")
    if not offline.order_free:
        return replay_intervals(offline.pattern, selected, hits)
    w = offline.pattern.window
    per_key: dict[Any, list[tuple[int, int]]] | None = None
    for position in selected:
        union = _spans_around(hits[position], w)
        per_key = union if per_key is None else {
            key: _intersect(per_key[key], union[key]) for key in per_key.keys() & union.keys()}
    assert per_key is not None
    return sorted((Interval(lo, hi, key) for key, spans in per_key.items() for lo, hi in spans),
                  key=lambda i: (i.lo, i.hi, str(i.key)))


def _spans_around(hits: pa.Table, w: int) -> dict[Any, list[tuple[int, int]]]:
    """Per key, the union of ``[t - w, t + w]`` over the hits' times, as sorted disjoint spans
    (adjoining ones joined: ticks are integers)."""
    ts = np.asarray(hits.column("ts").to_numpy(zero_copy_only=False), dtype=np.int64)
    keys = hits.column("key").to_pylist() if "key" in hits.column_names else [None] * len(ts)
    groups: dict[Any, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    out = {}
    for key, rows in groups.items():
        times = np.unique(ts[rows])
        starts = np.flatnonzero(np.r_[True, np.diff(times) > 2 * w + 1])
        ends = np.r_[starts[1:] - 1, len(times) - 1]
        out[key] = list(zip((times[starts] - w).tolist(), (times[ends] + w).tolist(),
                            strict=True))
    return out


def _intersect(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The intersection of two sorted lists of disjoint closed intervals."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def widen(offline: OfflineQuery, intervals: Sequence[Interval], source: EventSource,
          partition: int = 0, *, lo: int | None = None, hi: int | None = None
          ) -> list[ReplayRange]:
    """The replay ranges of the core ``intervals`` of ``partition`` (module doc): each core
    widened to the events its results depend on, clipped to the query's time range
    ``[lo, hi]`` (None: open), then merged over all keys."""
    bounds = source.bounds(partition)
    if bounds is None:
        return []
    data = (bounds[0] if lo is None else max(lo, bounds[0]),
            bounds[1] if hi is None else min(hi, bounds[1]))
    near = _near_quiet(offline, source, partition, intervals, data) \
        if offline.kind == "situations" and offline.pattern is not None else None
    contexts = []
    for core in intervals:
        start, stop = _context(offline, core, source, partition, data, near)
        contexts.append(((_clip(start, lo, max), _clip(stop, hi, min)), core))
    return _merged_ranges(contexts, data)


def _clip(bound: int | None, limit: int | None, pick: Any) -> int | None:
    return limit if bound is None else bound if limit is None else int(pick(bound, limit))


def _context(offline: OfflineQuery, core: Interval, source: EventSource, partition: int,
             data: tuple[int, int], near: _QuietPoints | None) -> tuple[int | None, int | None]:
    """The time range whose events decide the results of ``core`` exactly (None: open);
    ``data`` is where the query's events lie, ``near`` the quiet events around the cores."""
    if offline.pattern is None:
        return core.lo, core.hi
    if offline.kind == "windows":
        assert offline.window is not None
        size, slide = offline.window
        first = max(0, -(-(core.lo - size + 1) // slide))
        return first * slide, (core.hi // slide) * slide + size - 1
    if offline.kind == "situations":
        assert near is not None
        return (near.find(offline, source, partition, core, data, before=True),
                near.find(offline, source, partition, core, data, before=False))
    query: SaseQuery = offline.compiled.ast  # type: ignore[attr-defined]
    w = offline.pattern.window
    lo = core.lo - w if query.components[0].negated else core.lo
    hi = _next_time(offline, source, partition, core.hi + w, data) \
        if query.components[-1].negated else core.hi
    return lo, hi


@dataclass(frozen=True)
class _QuietPoints:
    """The events of the time spans around the cores (each core and a window on either side),
    read once: per key (:func:`key_text`; None without keys) the sorted times of its quiet
    events and of all its events."""

    spans: list[tuple[int, int]]
    times: dict[str | None, np.ndarray]
    seen: dict[str | None, np.ndarray]

    def find(self, offline: OfflineQuery, source: EventSource, partition: int, core: Interval,
             data: tuple[int, int], before: bool) -> int | None:
        """The time of the last quiet event of the core's key before the core (``before``), or
        of the first after it; None when there is none up to the edge of the data. A core of
        every key of a keyed query (the coarse pattern map's) takes the earliest (latest) of
        those of the keys with events in it: a key without any has no situation there."""
        edge = core.lo - 1 if before else core.hi + 1
        if not data[0] <= edge <= data[1]:
            return None
        if core.key is None and offline.pattern is not None and offline.pattern.keys:
            return self._of_keys(offline, source, partition, core, data, before)
        span = next(s for s in self.spans if s[0] <= edge <= s[1])
        times = self.times.get(None if core.key is None else interval_key_text(core.key),
                               np.empty(0, np.int64))
        if before:
            i = int(np.searchsorted(times, core.lo, side="left")) - 1
            if i >= 0 and times[i] >= span[0]:
                return int(times[i])
            return _quiet_time(offline, source, partition, core, data, span[0] - 1, before)
        i = int(np.searchsorted(times, core.hi, side="right"))
        if i < len(times) and times[i] <= span[1]:
            return int(times[i])
        return _quiet_time(offline, source, partition, core, data, span[1] + 1, before)

    def _of_keys(self, offline: OfflineQuery, source: EventSource, partition: int,
                 core: Interval, data: tuple[int, int], before: bool) -> int | None:
        keys = [k for k, t in self.seen.items()
                if np.searchsorted(t, core.hi, side="right") > np.searchsorted(t, core.lo)]
        span = next(s for s in self.spans
                    if s[0] <= (core.lo - 1 if before else core.hi + 1) <= s[1])
        bounds = []
        missing = set()
        for key in keys:
            quiet = self.times.get(key, np.empty(0, np.int64))
            inside = quiet[(quiet < core.lo) if before else (quiet > core.hi)]
            if len(inside) and (inside[-1] >= span[0] if before else inside[0] <= span[1]):
                bounds.append(int(inside[-1] if before else inside[0]))
            else:
                missing.add(key)
        if missing:
            found = _quiet_times_of_keys(offline, source, partition, missing, data,
                                         span[0] - 1 if before else span[1] + 1, before)
            if found is None:
                return None
            bounds += found
        if not bounds:
            return core.lo if before else core.hi
        return min(bounds) if before else max(bounds)


def _quiet_times_of_keys(offline: OfflineQuery, source: EventSource, partition: int,
                         keys: set[str | None], data: tuple[int, int], edge: int,
                         before: bool) -> list[int] | None:
    """Per key of ``keys``, the time of its last quiet event up to ``edge`` (``before``; else
    its first from ``edge`` on), in spans that double and that all keys share, so many keys
    cost one look-back; None when a key has none up to the edge of the data."""
    assert offline.pattern is not None
    width = max(1, offline.pattern.window)
    missing = set(keys)
    found: list[int] = []
    while missing and (data[0] <= edge if before else edge <= data[1]):
        lo, hi = (max(edge - width + 1, data[0]), edge) if before else \
            (edge, min(edge + width - 1, data[1]))
        times, texts, quiet = _keyed_events(offline, source.events(partition, lo, hi))
        nearest: dict[str | None, int] = {}
        for t, key, q in zip(times.tolist(), texts, quiet.tolist(), strict=True):
            if q and key in missing and (before or key not in nearest):
                nearest[key] = t  # in time order: the last one wins looking back
        found += nearest.values()
        missing -= nearest.keys()
        edge = lo - 1 if before else hi + 1
        width *= 2
    return None if missing else found


def _near_quiet(offline: OfflineQuery, source: EventSource, partition: int,
                cores: Sequence[Interval], data: tuple[int, int]) -> _QuietPoints:
    assert offline.pattern is not None
    w = max(1, offline.pattern.window)
    around = merge_intervals(Interval(max(c.lo - w, data[0]), min(c.hi + w, data[1]))
                             for c in cores if c.lo - w <= data[1] and c.hi + w >= data[0])
    spans = [(i.lo, i.hi) for i in around]
    found: dict[str | None, list[int]] = {}
    seen: dict[str | None, list[int]] = {}
    for lo, hi in spans:
        times, keys, quiet = _keyed_events(offline, source.events(partition, lo, hi))
        for t, key, q in zip(times.tolist(), keys, quiet.tolist(), strict=True):
            seen.setdefault(key, []).append(t)
            if q:
                found.setdefault(key, []).append(t)
    return _QuietPoints(spans, {k: np.array(v, np.int64) for k, v in found.items()},
                        {k: np.array(v, np.int64) for k, v in seen.items()})


def _keyed_events(offline: OfflineQuery, table: pa.Table
                  ) -> tuple[np.ndarray, list[str | None], np.ndarray]:
    """The times and keys of the events of ``table``, and which of them are quiet."""
    assert offline.quiet is not None and offline.pattern is not None
    if not table.num_rows:
        return np.empty(0, np.int64), [], np.empty(0, bool)
    batch = _events(offline, table)
    keys = offline.pattern.keys
    columns = [batch.column(k) for k in keys]
    texts: list[str | None] = [*key_texts(columns)] if keys else [None] * len(batch)
    return batch.ts, texts, np.asarray(offline.quiet(batch), bool)


def _quiet_events(offline: OfflineQuery, table: pa.Table) -> tuple[np.ndarray, list[str | None]]:
    """The times and keys of the quiet events of ``table``."""
    times, keys, quiet = _keyed_events(offline, table)
    return times[quiet], [k for k, q in zip(keys, quiet.tolist(), strict=True) if q]


def _quiet_time(offline: OfflineQuery, source: EventSource, partition: int, core: Interval,
                data: tuple[int, int], edge: int, before: bool) -> int | None:
    """:meth:`_QuietPoints.find` beyond what was read, from ``edge`` on, in spans that double."""
    assert offline.pattern is not None
    span = max(1, offline.pattern.window)
    wanted = None if core.key is None else interval_key_text(core.key)
    while data[0] <= edge if before else edge <= data[1]:
        lo, hi = (max(edge - span + 1, data[0]), edge) if before else \
            (edge, min(edge + span - 1, data[1]))
        times, keys = _quiet_events(offline, source.events(partition, lo, hi, core.key))
        mine = [t for t, key in zip(times.tolist(), keys, strict=True)
                if wanted is None or key == wanted]
        if mine:
            return int(mine[-1] if before else mine[0])
        edge = lo - 1 if before else hi + 1
        span *= 2
    return None


def _next_time(offline: OfflineQuery, source: EventSource, partition: int, after: int,
               data: tuple[int, int]) -> int:
    """The time of the first event after ``after`` (``after`` itself when none follows)."""
    span = 1
    edge = after + 1
    while edge <= data[1]:
        table = source.events(partition, edge, min(edge + span - 1, data[1]))
        if table.num_rows:
            return int(_times(offline, table).min())
        edge += span
        span *= 2
    return after


def _merged_ranges(contexts: Iterable[tuple[tuple[int | None, int | None], Interval]],
                   within: tuple[int | None, int | None] | None) -> list[ReplayRange]:
    """Merge overlapping replay contexts over all keys (None bounds are open); ``within`` None:
    each range is the query's whole time range."""
    low, high = -(1 << 63), (1 << 63) - 1
    ordered = sorted(((low if lo is None else lo, high if hi is None else hi, core)
                      for (lo, hi), core in contexts), key=lambda c: (c[0], c[1]))
    ranges: list[ReplayRange] = []
    for lo, hi, core in ordered:
        if ranges and lo <= ranges[-1].hi:
            last = ranges[-1]
            ranges[-1] = ReplayRange(last.lo, max(last.hi, hi), None, (*last.cores, core))
        else:
            ranges.append(ReplayRange(lo, hi, None, (core,)))
    return [replace(r, within=(r.lo, r.hi) if within is None else within) for r in ranges]


# --- replay ------------------------------------------------------------------------------------

def replay(offline: OfflineQuery, table: pa.Table, intervals: Sequence[Interval]) -> list[Result]:
    """The results of replaying ``table`` (one archive partition, in archive order, holding at
    least the rows of the ranges) over ``intervals`` (module doc). Plain intervals that
    :func:`widen` did not make are their own ranges."""
    ranges = [i for i in intervals if isinstance(i, ReplayRange)]
    if len(ranges) < len(intervals):
        ranges = _merged_ranges((((i.lo, i.hi), i) for i in intervals), None)
    table = _in_archive_order(table)
    times = _times(offline, table)
    # Ids of earlier ranges only: one operator may emit two results with one id (TPStream: two
    # situations of a definition that start at one duplicate timestamp), as a full replay does.
    earlier: set[str] = set()
    out: list[Result] = []
    for r in ranges:
        start = int(np.searchsorted(times, r.lo, side="left"))
        stop = int(np.searchsorted(times, r.hi, side="right"))
        cores = _core_spans(r.cores)
        kept = [result for result in _run(offline, table.slice(start, stop - start))
                if _decided(offline, r, cores, result) and result.result_id not in earlier]
        earlier.update(result.result_id for result in kept)
        out += kept
    return out


def full_replay(offline: OfflineQuery, table: pa.Table) -> list[Result]:
    """Every result of one operator over all of ``table`` (what ``situflow run`` gives)."""
    return _run(offline, _in_archive_order(table))


def _run(offline: OfflineQuery, table: pa.Table) -> list[Result]:
    batch = _events(offline, table)
    operator = offline.compiled.operator()
    return [*operator.process(batch), *operator.finish()] if len(batch) else []


def _core_spans(cores: Iterable[Interval]) -> dict[str | None, tuple[np.ndarray, np.ndarray]]:
    """Per key (:func:`key_text`; None: every key) the merged cores as sorted bounds."""
    by_key: dict[str | None, list[Interval]] = {}
    for core in cores:
        key = None if core.key is None else interval_key_text(core.key)
        by_key.setdefault(key, []).append(Interval(core.lo, core.hi, key))
    spans = {}
    for key, found in by_key.items():
        merged = merge_intervals(found)
        spans[key] = (np.array([i.lo for i in merged]), np.array([i.hi for i in merged]))
    return spans


def _decided(offline: OfflineQuery, replayed: ReplayRange,
             cores: Mapping[str | None, tuple[np.ndarray, np.ndarray]], result: Result) -> bool:
    """Whether ``replayed`` decides ``result`` exactly (module doc)."""
    if isinstance(result, TrendResult):
        start, end = replayed.within
        first = result.window_start if start is None else max(result.window_start, start)
        last = result.window_end - 1 if end is None else min(result.window_end - 1, end)
        return replayed.lo <= first and last <= replayed.hi
    assert isinstance(result, Match)
    # A SASE+ result's time is its last event's; a TPStream result starts at its first situation.
    situations = offline.kind == "situations"
    time = min(b["ts"] for b in result.bindings.values()) if situations else result.ts
    for key in (None, key_text(result.key)):
        if key in cores:
            los, his = cores[key]
            i = int(np.searchsorted(los, time, side="right")) - 1
            if i >= 0 and his[i] >= time:
                return True
    return False


def _in_archive_order(table: pa.Table) -> pa.Table:
    if ARCHIVE_SEQ in table.column_names and table.num_rows:
        seq = table.column(ARCHIVE_SEQ).to_numpy()
        if np.any(seq[1:] < seq[:-1]):
            return table.take(np.argsort(seq, kind="stable"))
    return table


def _times(offline: OfflineQuery, table: pa.Table) -> np.ndarray:
    return np.asarray(table.column(offline.settings.time_field).to_numpy(zero_copy_only=False),
                      dtype=np.int64)


def _events(offline: OfflineQuery, table: pa.Table) -> EventBatch:
    """The rows as the services feed them (``ordered_events``: the seq is the ordered topic's
    ``_situflow_seq``, else the archive seq), conformed to the query's typing rule (a rejected
    event is as if it had never been there)."""
    settings = offline.settings
    names = table.column_names
    seq_column = SEQ_FIELD if SEQ_FIELD in names else ARCHIVE_SEQ if ARCHIVE_SEQ in names else None
    seq = None if seq_column is None else np.asarray(table.column(seq_column).to_numpy(),
                                                     dtype=np.int64)
    table = table.drop_columns([c for c in (SEQ_FIELD, ARCHIVE_SEQ, ARCHIVE_OFFSET) if c in names])
    batch = EventBatch.from_arrow(table, time_field=settings.time_field,
                                  type_field=settings.type_field, id_field=settings.id_field,
                                  seq=seq)
    hidden = {settings.time_field, settings.type_field, settings.id_field}
    conformed = conform(batch, offline.compiled.attribute_types.without(hidden))
    return conformed.batch


def result_rows(results: Sequence[Result]) -> pa.Table:
    """``results`` (one :func:`replay` or :func:`full_replay` output, in its order) as rows:
    ``result_id``, ``order_ts`` (emission time: ``emitted_at``, a window's end), ``order_seq``
    (position in ``results``) and ``json`` (the CLI's line). Sorting rows of disjoint ranges by
    ``(order_ts, order_seq)`` gives the full-replay order."""
    return pa.table({
        "result_id": pa.array([r.result_id for r in results], pa.string()),
        "order_ts": pa.array([r.emitted_at if isinstance(r, Match) else r.window_end
                              for r in results], pa.int64()),
        "order_seq": pa.array(range(len(results)), pa.int64()),
        "json": pa.array([json.dumps(r.to_dict()) for r in results], pa.string()),
    })


