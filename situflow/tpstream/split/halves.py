"""The two halves of distributed TPStream as compiled queries, and how a situation message
finds the half that matches it (the design: :mod:`situflow.tpstream.split`).

Each half is the compiled query bound to that half as its engine (:class:`Half`), so the
per-partition bookkeeping of the services serves both: :func:`as_deriver` and
:func:`as_matcher` over a partitioned stream, :func:`as_batch_deriver` and
:func:`as_batch_matcher` over an unpartitioned one.
:func:`match_situations` skips the steps (the records of one event of one key) at or before the
key's position, which a redelivery or a deriver restart repeats (positions live under
``<query>\\x00<key>``, checkpointed with the operators), and returns the matches of the rest:
the fused operator's, with the same result ids (``tests/tpstream/test_split.py``).
:func:`match_batch` hands a situation batch to its query's merger, which skips a duplicate.

The deriver and the matcher follow the query registry independently, so a message may come
before the matcher has read the registration it was derived under. Each message carries that
registration's offset in the registry (``registered_at``; -1 for a query from a file): a
matcher that has not read that far yet waits until it has, so a query's first situations are
not lost; a message of a registration older than what the matcher knows (a deleted or replaced
query) is ignored. An unpartitioned query registered while the stream runs begins at a batch
every deriver agrees on (:func:`derived_for`); that batch's message says ``starts``, and its
matcher merges from there (:func:`match_batch`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, cast

from situflow.operator import CompiledQuery, Operator
from situflow.results import Match
from situflow.tpstream.match.planner import Planner
from situflow.tpstream.query import TPStreamQuery
from situflow.tpstream.split.batches import BatchDeriver
from situflow.tpstream.split.deriver import SituationDeriver
from situflow.tpstream.split.matcher import SituationMatcher
from situflow.tpstream.split.merger import MAX_PENDING, BatchMatcher
from situflow.tpstream.split.messages import SituationMessage
from situflow.tpstream.split.records import SituationRecord

Operators = type[SituationDeriver] | type[SituationMatcher] | type[BatchDeriver] | type[BatchMatcher]


@dataclass(frozen=True)
class Half:
    """One half of distributed TPStream as the engine of a compiled query: ``operators`` made
    with ``options`` (keyword arguments of the class and of its ``restore``)."""

    operators: Operators
    options: dict[str, Any] = field(default_factory=dict)

    def __call__(self, query: TPStreamQuery) -> Operator:
        return cast(Operator, self.operators(query, **self.options))

    def restore(self, query: TPStreamQuery, snapshot: dict[str, Any]) -> Operator:
        return cast(Operator, self.operators.restore(query, snapshot, **self.options))

    @staticmethod
    def plan(query: TPStreamQuery) -> list[str]:
        """The matching half's evaluation orders, which the deriving half's results feed."""
        return Planner(query).describe()


def _split(query: CompiledQuery, half: Half) -> CompiledQuery:
    if not isinstance(query, TPStreamQuery):
        return query
    return replace(query, engine=half)


def as_deriver(query: CompiledQuery) -> CompiledQuery:
    """``query`` as the deriver evaluates it over a partitioned stream."""
    return _split(query, Half(SituationDeriver))


def as_matcher(query: CompiledQuery) -> CompiledQuery:
    """``query`` as the matcher evaluates it over a partitioned stream (SASE+ as it is)."""
    return _split(query, Half(SituationMatcher))


def as_batch_deriver(query: CompiledQuery) -> CompiledQuery:
    """``query`` as the deriver evaluates it over an unpartitioned stream."""
    return _split(query, Half(BatchDeriver))


def as_batch_matcher(query: CompiledQuery, max_pending: int = MAX_PENDING) -> CompiledQuery:
    """``query`` as the matcher evaluates it over an unpartitioned stream, its merger holding
    at most ``max_pending`` batches that wait."""
    return _split(query, Half(BatchMatcher, {"max_pending": max_pending}))


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
    m, i = len(records), 0
    while i < m:
        first = records[i]
        key, seq, at = first.key, first.seq, first.at
        name = json.dumps(key)
        j = i + 1
        # A step's records are adjacent; the key's name is serialised once per step.
        while j < m and records[j].seq == seq and records[j].at == at and \
                same_name(records[j].key, key, name):
            j += 1
        name = f"{query}\x00{name}"
        position, last = [at, seq], positions.get(name)
        if last is None or position > last:
            positions[name] = position
            fresh += records[i:j]
        i = j
    return fresh


def same_name(value: Any, key: Any, name: str) -> bool:
    """Whether ``value`` serialises to ``name``, the JSON of ``key``: at once for the same
    object, or an integer or a text equal to it and of its type (for which equal values and
    equal JSON are the same), else by serialising it."""
    if value is key or (type(value) is type(key) and type(key) in (int, str) and value == key):
        return True
    return json.dumps(value) == name


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
