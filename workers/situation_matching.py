"""Situation messages: how the deriver hands situations to the matcher (distributed TPStream,
thesis §5.6.5), and the matcher's side of them.

The deriver (:mod:`workers.deriver`) writes :class:`SituationMessage` values to the situations
topic; the matcher (:mod:`workers.matcher`) files and matches them. Each query's
per-partition operator is one half of TPStream: :class:`SplitQuery` is a query whose operator
is its deriving half (in the deriver) or its matching half (in the matcher), so the
per-partition bookkeeping of :class:`workers.evaluation.Evaluation` serves both. Two streams,
two pairs of halves:

- **partitioned** (a message per ordered message and query: the situation records it gave):
  :class:`~situflow.tpstream.situation_deriver.SituationDeriver` and
  :class:`~situflow.tpstream.situation_matcher.SituationMatcher`. :func:`match_situations`
  skips the steps (the records of one event of one key) at or before the key's position, which
  a redelivery or a deriver restart repeats (positions live in the evaluation's ``positions``
  under ``<query>\\x00<key>``, checkpointed with the operators), and returns the matches of the
  rest: the fused operator's, with the same result ids (``tests/tpstream/test_split.py``);
- **unpartitioned** (a message per event batch and query: its thesis §5.6.3 situation batch,
  :class:`~situflow.tpstream.situation_batches.SituationBatch`): :class:`BatchDeriver`
  (stateless, ``derive_batch``) and :class:`BatchMatcher`, which merges the batches in sequence
  (:class:`~situflow.tpstream.batch_merger.BatchMerger`, Alg. 5.5 behind the K-slack on sequence
  numbers) and matches the merged records. A redelivered or re-derived batch is a duplicate of
  its number and is skipped by the merger.

The deriver and the matcher follow the query registry independently, so a message may come
before the matcher has read the registration it was derived under. Each message carries that
registration's offset in the registry (``registered_at``; -1 for a query from a file): a
matcher that has not read that far yet waits until it has (:meth:`Queries.catch_up
<workers.evaluation.Queries.catch_up>`), so a query's first situations are not lost; a message
of a registration older than what the matcher knows (a deleted or replaced query) is ignored.

An unpartitioned query registered while the stream runs begins at a batch every deriver agrees
on: the first batch K-slack cut after reading its registration (:mod:`workers.kslack`); that
batch's message says ``starts``, and its matcher merges from there (:func:`match_batch`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any, cast

from situflow.errors import InputError
from situflow.events import EventBatch
from situflow.operator import CompiledQuery, Operator
from situflow.results import Match
from situflow.tpstream.batch_merger import MAX_PENDING, BatchMerger
from situflow.tpstream.lifecycle import EventDriven, check_snapshot
from situflow.tpstream.query import TPStreamQuery
from situflow.tpstream.records import SituationRecord
from situflow.tpstream.situation_batches import SituationBatch, derive_batch
from situflow.tpstream.situation_deriver import SituationDeriver
from situflow.tpstream.situation_matcher import SituationMatcher


class BatchDeriver(EventDriven):
    """The deriving half of unpartitioned TPStream: each event batch on its own (thesis §5.6.3,
    deriving phase). Stateless: a batch derived twice gives the same situation batch."""

    def __init__(self, query: TPStreamQuery):
        self.query = query

    def derive(self, seq: int, events: EventBatch) -> SituationBatch:
        return derive_batch(self.query, seq, events)

    def snapshot(self) -> dict[str, Any]:
        return self.versioned()

    @classmethod
    def restore(cls, query: TPStreamQuery, snapshot: dict[str, Any]) -> BatchDeriver:
        check_snapshot(query, snapshot, "batch deriver")
        return cls(query)


class BatchMatcher(EventDriven):
    """The matching half of unpartitioned TPStream: situation batches in any order, merged in
    sequence into the sequential deriver's records (:class:`BatchMerger`), matched by a
    :class:`SituationMatcher` ("one matcher", thesis §5.6.5). ``started`` once the batch its
    query begins at has come (before, batches wait in the merger); ``registered_at``: the
    registration its batches were derived under (None until the first batch)."""

    def __init__(self, query: TPStreamQuery, max_pending: int = MAX_PENDING):
        self.query = query
        self.merger = BatchMerger(query, max_pending)
        self.matcher = SituationMatcher(query)
        self.started = False
        self.registered_at: int | None = None

    def process(self, batch: SituationBatch, starts: bool) -> list[Match]:
        """The matches of the records this batch completes; ``SequenceError`` if it can
        neither be merged nor wait (the merger keeps what it holds)."""
        records: list[SituationRecord] = []
        if starts and not self.started:
            self.started = True
            records += self.merger.start_at(batch.seq)
        records += self.merger.push(batch)
        return self.matcher.process(records)

    @property
    def open_situations(self) -> int:
        return self.merger.open_situations

    def snapshot(self) -> dict[str, Any]:
        return self.versioned(merger=self.merger.snapshot(), matcher=self.matcher.snapshot(),
                              started=self.started, registered_at=self.registered_at)

    @classmethod
    def restore(cls, query: TPStreamQuery, snapshot: dict[str, Any],
                max_pending: int = MAX_PENDING) -> BatchMatcher:
        check_snapshot(query, snapshot, "batch matcher")
        op = cls(query, max_pending)
        op.merger = BatchMerger.restore(query, snapshot["merger"], max_pending)
        op.matcher = SituationMatcher.restore(query, snapshot["matcher"])
        op.started = snapshot["started"]
        op.registered_at = snapshot["registered_at"]
        return op


Half = type[SituationDeriver] | type[SituationMatcher] | type[BatchDeriver] | type[BatchMatcher]


class SplitQuery:
    """A TPStream query whose operator is one half of distributed TPStream (see the module
    doc), made with ``options`` (keyword arguments of the half and its ``restore``)."""

    def __init__(self, query: TPStreamQuery, half: Half, **options: Any):
        self.query, self.half, self.options = query, half, options
        self.language, self.name, self.query_id = query.language, query.name, query.query_id

    def canonical(self) -> str:
        return self.query.canonical()

    def describe(self) -> str:
        return self.query.describe()

    def operator(self) -> Operator:
        return cast(Operator, self.half(self.query, **self.options))

    def restore(self, snapshot: dict[str, Any]) -> Operator:
        return cast(Operator, self.half.restore(self.query, snapshot, **self.options))


def _split(query: CompiledQuery, half: Half, **options: Any) -> CompiledQuery:
    if query.language != "tpstream":
        return query
    return cast(CompiledQuery, SplitQuery(cast(TPStreamQuery, query), half, **options))


def over_events(query: CompiledQuery) -> CompiledQuery:
    """``query`` as the deriver evaluates it over a partitioned stream."""
    return _split(query, SituationDeriver)


def over_situations(query: CompiledQuery) -> CompiledQuery:
    """``query`` as the matcher evaluates it over a partitioned stream (SASE+ as it is)."""
    return _split(query, SituationMatcher)


def over_event_batches(query: CompiledQuery) -> CompiledQuery:
    """``query`` as the deriver evaluates it over an unpartitioned stream."""
    return _split(query, BatchDeriver)


def over_situation_batches(query: CompiledQuery, max_pending: int = MAX_PENDING) -> CompiledQuery:
    """``query`` as the matcher evaluates it over an unpartitioned stream, its merger holding
    at most ``max_pending`` batches that wait."""
    return _split(query, BatchMatcher, max_pending=max_pending)


@dataclass(frozen=True)
class SituationMessage:
    """One message of the situations topic: what one query derived from one ordered message.

    Over a partitioned stream, its situation records in stream order (``records``); the value
    is ``{"query", "query_id", "registered_at", "rows"}``, a record as the positional row of
    :meth:`SituationRecord.to_row` (named fields and a record id per record made encoding and
    decoding cost more than deriving and matching). Over an unpartitioned stream, the batch's
    situation batch (``batch``) and whether the query begins at it (``starts``); the value is
    ``{"query", "query_id", "registered_at", "starts", "batch"}`` with
    :meth:`SituationBatch.to_dict`.
    """

    query: str
    query_id: str
    registered_at: int
    records: list[SituationRecord] = field(default_factory=list)
    batch: SituationBatch | None = None
    starts: bool = False

    def encode(self) -> bytes:
        value: dict[str, Any] = {"query": self.query, "query_id": self.query_id,
                                 "registered_at": self.registered_at}
        if self.batch is None:
            value["rows"] = [r.to_row() for r in self.records]
        else:
            value["starts"] = self.starts
            value["batch"] = self.batch.to_dict()
        return json.dumps(value).encode()

    @classmethod
    def decode(cls, value: bytes | None) -> SituationMessage:
        """The message of a Kafka message value; ``InputError`` says what is wrong with it."""
        if value is None:
            raise InputError("empty message (null value)")
        try:
            message = json.loads(value)
        except (UnicodeDecodeError, ValueError) as exc:
            raise InputError(f"invalid JSON: {exc}") from None
        if not isinstance(message, dict) or not isinstance(message.get("query"), str) or \
                not isinstance(message.get("query_id"), str) or \
                type(message.get("registered_at")) is not int or \
                not (isinstance(message.get("rows"), list) or
                     (isinstance(message.get("batch"), dict) and
                      type(message.get("starts")) is bool)):
            raise InputError("a situation message is a JSON object {query, query_id, "
                             "registered_at (integer), rows: [...]} or {query, query_id, "
                             "registered_at, starts (boolean), batch: {...}}")
        head = message["query"], message["query_id"], message["registered_at"]
        if "batch" in message:
            return cls(*head, batch=SituationBatch.from_dict(message["batch"]),
                       starts=message["starts"])
        return cls(*head, [SituationRecord.from_row(r) for r in message["rows"]])


def derived_for(registered_at: int, registry_before: int, registry: int) -> tuple[bool, bool]:
    """Whether a batch that K-slack cut after reading ``registry`` registry records
    (``registry_before`` at the batch before; -1 before the first) is derived for a query
    registered at offset ``registered_at`` (-1: from a file), and whether the query begins at
    it: at the first batch cut after its registration was read.

    >>> [derived_for(4, before, after) for before, after in [(3, 4), (4, 5), (5, 6)]]
    [(False, False), (True, True), (True, False)]
    >>> derived_for(-1, -1, 0)  # a query from a file begins at batch 0
    (True, True)
    """
    return registered_at < registry, registry_before <= registered_at < registry


def situation_matcher(operators: dict[str, tuple[str, Operator]],
                       message: SituationMessage) -> SituationMatcher | BatchMatcher | None:
    """The operator that matches ``message``: its query's, if that text of it is evaluated by
    the half the message is for."""
    current = operators.get(message.query)
    half = SituationMatcher if message.batch is None else BatchMatcher
    if current is None or current[0] != message.query_id or not isinstance(current[1], half):
        return None
    return current[1]


def fresh_steps(positions: dict[str, list[int]], query: str,
                records: list[SituationRecord]) -> list[SituationRecord]:
    """The steps after their key's position (per query), whole; moves the positions on."""
    fresh: list[SituationRecord] = []
    for (key, seq, at), step in groupby(records, key=lambda r: (json.dumps(r.key), r.seq, r.at)):
        name = f"{query}\x00{key}"
        position, last = [at, seq], positions.get(name)
        if last is None or position > last:
            positions[name] = position
            fresh += step
    return fresh


def match_situations(operators: dict[str, tuple[str, Operator]], positions: dict[str, list[int]],
                     message: SituationMessage) -> list[Match]:
    """The matches of one message of situation records (see the module doc)."""
    matcher = situation_matcher(operators, message)
    if not isinstance(matcher, SituationMatcher):
        return []
    return matcher.process(fresh_steps(positions, message.query, message.records))


def match_batch(operators: dict[str, tuple[str, Operator]],
                message: SituationMessage) -> list[Match]:
    """The matches of one situation batch of an unpartitioned query: the merger takes it (a
    duplicate is skipped) and the records it completes are matched. ``SequenceError`` if the
    merger can neither merge nor buffer it (see :mod:`workers.matcher`).

    A batch of a later registration of the same text (the query was deleted and submitted
    again, maybe before this partition saw it gone) starts a fresh matcher, which begins at
    that registration's first batch; batches of an earlier registration are ignored."""
    matcher = situation_matcher(operators, message)
    if not isinstance(matcher, BatchMatcher) or message.batch is None:
        return []
    if matcher.registered_at is not None and message.registered_at != matcher.registered_at:
        if message.registered_at < matcher.registered_at:
            return []
        matcher = BatchMatcher(matcher.query, matcher.merger.max_pending)
        operators[message.query] = (message.query_id, cast(Operator, matcher))
    matcher.registered_at = message.registered_at
    return matcher.process(message.batch, message.starts)


def buffered_situations(operator: Operator) -> int:
    """How many situations a TPStream matcher holds in its buffers (0 for other operators)."""
    if isinstance(operator, BatchMatcher):
        operator = cast(Operator, operator.matcher)
    if not isinstance(operator, SituationMatcher):
        return 0
    return sum(len(buffer) for _, part in operator.keys.values() for buffer in part.buffers)
