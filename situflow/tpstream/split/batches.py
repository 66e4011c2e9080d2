"""Situation batches: one batch of consecutive events derived on its own (thesis §5.6.3, deriving
phase), for unpartitioned TPStream whose batches are derived in parallel (§5.6.5; the design:
:mod:`situflow.tpstream.split`).

:func:`derive_batch` runs the sequential derivation (Alg. 5.1, :class:`SituationDeriver`) over
one batch from a fresh state, as if nothing were ongoing before it, and returns a
:class:`SituationBatch` for :class:`situflow.tpstream.split.merger.BatchMerger`, which merges the
batches in sequence (Alg. 5.5). A batch may hold several partition keys; everything below is
per key. A situation batch carries, as in the thesis:

- ``seq``: its sequence number. The batcher (the one producer that slices the
  ordered stream) numbers batches 0, 1, 2, ... without gaps, so that the merger knows which one
  comes next; an empty batch keeps its number. Where it cuts is :class:`EventSlicer`'s rule.
- ``records``: the situation records of the fresh derivation, in stream order. The merger keeps
  them except in the part of a head that a situation ongoing before the batch reaches; their
  ``running`` records are kept wherever the events before the batch could make matching
  feasible (a definition not visible in the batch yet counts as visible just now), and the
  merger drops those where it is not (see ``UNKNOWN_PAST``).
- ``head``: what was ongoing right after a key's first event in the batch: the definitions
  whose condition holds there, with the key's events from that first one through the event
  that ends the last of those runs (all its events, if a run lasts to the batch's end). The
  thesis' head holds partial situations; this one holds their events, because what the merge
  must produce cannot be computed from partial aggregates: float sums are added in event order
  by the sequential deriver, so only adding the same values in the same order gives the same
  bits; and where an ``AT LEAST`` situation becomes visible, with its aggregates so far, and the
  aggregates of running situations at each change, depend on its true start, known only at the
  merge. The events carry only what derivation needs: time, sequence number, partition and
  aggregated attributes, and each definition's condition (``conditions``).
- ``tail``: per key with a situation ongoing after the batch's last event, that situation's
  state as the deriver keeps it (start, visibility, event count and the partial, mergeable
  aggregates: sum, min, max and count of each numeric aggregate, so avg is sum / count; the
  first and last values).

Duration constraints of a situation that crosses a batch boundary, and when an ``AT LEAST``
situation becomes visible (its ``started`` record), are decided at the merge, where its start is
known; a batch decides them only for situations that begin inside it.

A batch is plain JSON-able data (:meth:`SituationBatch.to_dict`) for the ``situations`` topic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from situflow.errors import InputError
from situflow.events import EventBatch, plain
from situflow.snapshot import unwrap, wrap
from situflow.tpstream.derive.state import Deriver
from situflow.tpstream.lifecycle import STATE_VERSION, EventDriven
from situflow.tpstream.query import TIME_FIELD, TPStreamQuery
from situflow.tpstream.split.deriver import SituationDeriver
from situflow.tpstream.split.records import SituationRecord

#: When each definition was last visible before a batch derived on its own: unknown, so the
#: latest time. A situation record is *feasible* where every definition had a visible situation
#: within the window; with this assumption a batch keeps every running record the events
#: before it could make feasible, and the merger, which knows them, decides.
UNKNOWN_PAST = int(np.iinfo(np.int64).max)

#: The deriver's per-key state of ongoing situations that a tail carries (not ``last_visible``:
#: the merger keeps that from the records it emits).
TAIL_FIELDS = ("open_", "visible", "start_ts", "count", "a_sum", "a_min", "a_max", "a_cnt",
               "carried_first", "carried_last")
_COLUMN_KINDS = "biufO"
BATCH_DERIVER = "tpstream-batch-deriver"


@dataclass(frozen=True)
class SituationBatch:
    """The situations derived from one batch of events (see the module doc)."""

    seq: int
    query_id: str
    records: list[SituationRecord]
    head: EventBatch
    # conditions[d, i]: whether definition d's condition holds for head event i.
    conditions: np.ndarray
    tail: dict[str, Any]
    # Sequence numbers of the batch's first and last events (None: an empty batch).
    span: tuple[int, int] | None

    def to_dict(self) -> dict[str, Any]:
        """The batch as a JSON object."""
        head = self.head
        return {
            "seq": self.seq, "query_id": self.query_id,
            "records": [r.to_row() for r in self.records],
            "head": {"ts": head.ts.tolist(), "seq": head.seq.tolist(),
                     "conditions": self.conditions.tolist(),
                     "columns": {name: [values.dtype.str, [plain(v) for v in values.tolist()]]
                                 for name, values in head.columns.items()}},
            "tail": self.tail,
            "span": None if self.span is None else list(self.span),
        }

    @classmethod
    def from_dict(cls, value: Any) -> SituationBatch:
        """A batch from its JSON object; ``InputError`` names what is wrong."""
        try:
            head = value["head"]
            ts = np.array(head["ts"], np.int64)
            seq = np.array(head["seq"], np.int64)
            columns = {name: _column(kind, values, len(ts))
                       for name, (kind, values) in head["columns"].items()}
            conditions = np.array(head["conditions"], bool)
            if conditions.ndim != 2 or conditions.shape[1] != len(ts):
                raise InputError("a situation batch's head conditions are not one row per "
                                 "definition and one column per event")
            tail = value["tail"]
            if not isinstance(tail, dict) or not isinstance(tail.get("keys"), list):
                raise InputError("a situation batch's tail lacks its keys")
            span = value["span"]
            batch = cls(value["seq"], value["query_id"],
                        [SituationRecord.from_row(r) for r in value["records"]],
                        EventBatch(columns, ts, seq, seq), conditions, tail,
                        None if span is None else (int(span[0]), int(span[1])))
        except InputError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"malformed situation batch: {type(exc).__name__}: {exc}") from None
        if not isinstance(batch.seq, int) or len(seq) != len(ts):
            raise InputError("a situation batch's seq must be an integer and its head columnar")
        return batch


@dataclass
class EventSlicer:
    """Where the batcher cuts the ordered stream into batches (thesis §5.6.3: "the producer
    simply slices the incoming event stream into fixed-size batches").

    A batch ends when it holds ``size`` events, or before an event more than ``span`` time
    units after the batch's first event. Both rules read only the events, so slicing the same
    ordered stream again (a restarted batcher replaying its input from a snapshot) cuts the same
    batches; the span bounds how long an event waits for its batch to end when events are few.

    >>> slicer = EventSlicer(size=3, span=10)
    >>> slicer.cuts(np.array([1, 2, 3, 4, 20]))  # [1 2 3] [4] | 20 open
    [3, 4]
    >>> slicer.cuts(np.array([25, 31])), slicer.count  # [20 25] | 31 open
    ([1], 1)
    """

    size: int
    span: int
    first: int = 0  # time of the open batch's first event
    count: int = 0  # events in the open batch

    def __post_init__(self) -> None:
        if self.size < 1 or self.span < 0:
            raise ValueError("a batch holds at least one event and spans no negative time")

    def cuts(self, ts: np.ndarray) -> list[int]:
        """The positions in ``ts`` (the times of the next events, non-decreasing) before which
        a batch ends (0: the open batch ends before them); the rest stays open."""
        out: list[int] = []
        n, i = len(ts), 0
        while i < n:
            if not self.count:
                self.first = int(ts[i])
            fits = int(np.searchsorted(ts, self.first + self.span, side="right"))
            end = max(i, min(i + self.size - self.count, fits))
            if end >= n:
                self.count += n - i
                break
            out.append(end)
            self.count, i = 0, end
        return out

    def close(self) -> None:
        """The open batch ends (nothing more comes for a while: an idle flush)."""
        self.count = 0


def derive_batch(query: TPStreamQuery, seq: int, events: EventBatch) -> SituationBatch:
    """The situation batch of ``events`` (consecutive events of the ordered stream), numbered
    ``seq``, derived on a fresh state (thesis §5.6.3, deriving phase)."""
    situations = SituationDeriver(query, Deriver(query, visible_before=UNKNOWN_PAST))
    deriver = situations.deriver
    if not len(events):
        return SituationBatch(seq, query.query_id, [], _head(query, events, np.empty(0, np.int64)),
                              np.zeros((deriver.ndef, 0), bool),
                              deriver.rows(np.empty(0, np.int64), TAIL_FIELDS), None)
    codes = deriver.slots(events)
    cond = deriver.conditions(events)
    records = situations.derive(events, codes, cond)
    # Every run at a key's first event may continue a situation of the batch before.
    in_head, _ = head_rows(codes, cond, np.ones((len(deriver.key_list), deriver.ndef), bool))
    rows = np.flatnonzero(in_head)
    ongoing = np.flatnonzero(deriver.open_[: len(deriver.key_list)].any(axis=1))
    return SituationBatch(seq, query.query_id, records, _head(query, events, rows), cond[:, rows],
                          deriver.rows(ongoing, TAIL_FIELDS),
                          (int(events.seq[0]), int(events.seq[-1])))


def _head(query: TPStreamQuery, events: EventBatch, rows: np.ndarray) -> EventBatch:
    """Events ``rows`` with what derivation reads besides conditions: time, sequence number,
    partition and aggregated attributes."""
    needed = dict.fromkeys([*query.partition_by, *(a.attr for a in query.aggregates if a.attr)])
    return EventBatch({name: events.columns[name][rows] for name in needed
                       if name != TIME_FIELD and name in events.columns},
                      events.ts[rows], events.seq[rows], events.seq[rows])


def head_rows(codes: np.ndarray, cond: np.ndarray,
              counted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which events are in the head of their key, and the keys whose head reaches the end.

    ``codes`` holds each event's key slot and ``cond`` each definition's condition on it
    (shaped (definitions, events)); ``counted[slot, d]`` says whether definition ``d``'s run at
    the key's first event counts. A key's head runs from its first event through the first
    later event at which a counted run's condition fails, the latest of them; if a counted run
    never fails, through the key's last event, and the key is returned. Keys without a counted
    definition have no head.
    """
    n = len(codes)
    if not n:
        return np.zeros(0, bool), np.zeros(0, np.int64)
    order = np.argsort(codes, kind="stable")
    keys = codes[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    ends = np.r_[starts[1:], n]
    # For each position (in key order), the nearest position at or after it where a condition
    # fails (n if none).
    failing = np.where(cond[:, order], n, np.arange(n))
    next_fail = np.minimum.accumulate(failing[:, ::-1], axis=1)[:, ::-1]
    first_fail = next_fail[:, starts]
    counts = counted[keys[starts]].T
    has = counts.any(axis=0)
    stop = np.where(counts, np.minimum(first_fail, ends - 1), starts).max(axis=0)
    marks = np.zeros(n + 1, np.int64)
    marks[starts[has]] += 1
    marks[stop[has] + 1] -= 1
    in_head = np.empty(n, bool)
    in_head[order] = np.cumsum(marks[:n]) > 0
    return in_head, keys[starts][(counts & (first_fail >= ends)).any(axis=0)]


def _column(kind: str, values: list[Any], n: int) -> np.ndarray:
    """A head column from its numpy dtype string and values (None: missing)."""
    dtype = np.dtype(kind)
    if dtype.kind not in _COLUMN_KINDS or len(values) != n:
        raise InputError(f"a situation batch's head column has dtype {kind!r} or length "
                         f"{len(values)} (expected {n})")
    if dtype.kind == "O":
        return np.fromiter(values, dtype=object, count=n)
    if dtype.kind == "f":
        return np.array([np.nan if v is None else v for v in values], dtype)
    return np.array(values, dtype)


class BatchDeriver(EventDriven):
    """The deriving half of unpartitioned TPStream: each event batch on its own (thesis §5.6.3,
    deriving phase). Stateless: a batch derived twice gives the same situation batch."""

    def __init__(self, query: TPStreamQuery):
        self.query = query

    def derive(self, seq: int, events: EventBatch) -> SituationBatch:
        return derive_batch(self.query, seq, events)

    def stats(self) -> dict[str, int]:
        return {"open_situations": 0}

    def snapshot(self) -> dict[str, Any]:
        return wrap(BATCH_DERIVER, STATE_VERSION, self.query.query_id, {})

    @classmethod
    def restore(cls, query: TPStreamQuery, snapshot: dict[str, Any]) -> BatchDeriver:
        unwrap(BATCH_DERIVER, STATE_VERSION, query.query_id, snapshot)
        return cls(query)
