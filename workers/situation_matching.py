"""Situation batches: how the deriver hands situations to the matcher (distributed TPStream,
thesis §5.6.5), and the matcher's side of them.

The deriver (:mod:`workers.deriver`) writes, for every ordered message and every TPStream
query that derives anything from it, one :class:`SituationBatch` (thesis §5.6.3's situation
batch) to the situations topic; the matcher (:mod:`workers.matcher`) files and matches it:

- each query's per-partition operator is one half of TPStream: :class:`SplitQuery` is a query
  whose operator is its :class:`~situflow.tpstream.situation_deriver.SituationDeriver` (in the
  deriver) or its :class:`~situflow.tpstream.situation_matcher.SituationMatcher` (in the
  matcher, :func:`over_situations`), so the per-partition bookkeeping of
  :class:`workers.evaluation.Evaluation` serves both;
- :func:`match_situations` ignores a batch of a query the partition does not evaluate, or of
  another text of it (``query_id``), skips the steps (the records of one event of one key) at
  or before the key's position, which a redelivery or a deriver restart repeats (positions
  live in the evaluation's ``positions`` under ``<query>\\x00<key>``, checkpointed with the
  operators), and returns the matches of the rest: the fused operator's, with the same result
  ids (``tests/tpstream/test_split.py``).

The deriver and the matcher follow the query registry independently, so a batch may come
before the matcher has read the registration it was derived under. Each batch carries that
registration's offset in the registry (``registered_at``; -1 for a query from a file): a
matcher that has not read that far yet waits until it has (:meth:`Queries.catch_up
<workers.evaluation.Queries.catch_up>`), so a query's first situations are not lost; a batch
of a registration older than what the matcher knows (a deleted or replaced query) is ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import groupby
from typing import Any, cast

from situflow.errors import InputError
from situflow.operator import CompiledQuery, Operator
from situflow.results import Match
from situflow.tpstream.query import TPStreamQuery
from situflow.tpstream.records import SituationRecord
from situflow.tpstream.situation_deriver import SituationDeriver
from situflow.tpstream.situation_matcher import SituationMatcher


class SplitQuery:
    """A TPStream query whose operator is one half of distributed TPStream: its situation
    deriver or its situation matcher (see the module doc)."""

    def __init__(self, query: TPStreamQuery,
                 half: type[SituationDeriver] | type[SituationMatcher] = SituationMatcher):
        self.query, self.half = query, half
        self.language, self.name, self.query_id = query.language, query.name, query.query_id

    def canonical(self) -> str:
        return self.query.canonical()

    def describe(self) -> str:
        return self.query.describe()

    def operator(self) -> Operator:
        return cast(Operator, self.half(self.query))

    def restore(self, snapshot: dict[str, Any]) -> Operator:
        return cast(Operator, self.half.restore(self.query, snapshot))


def over_events(query: CompiledQuery) -> CompiledQuery:
    """``query`` as the deriver evaluates it: its situation deriver."""
    return cast(CompiledQuery, SplitQuery(cast(TPStreamQuery, query), SituationDeriver))


def over_situations(query: CompiledQuery) -> CompiledQuery:
    """``query`` as the matcher evaluates it: TPStream over situation batches, else as it is."""
    if query.language == "tpstream":
        return cast(CompiledQuery, SplitQuery(cast(TPStreamQuery, query)))
    return query


@dataclass(frozen=True)
class SituationBatch:
    """One message of the situations topic: the records one ordered message gave one query.

    The value is a JSON object ``{"query", "query_id", "registered_at", "records"}`` whose
    records (:meth:`SituationRecord.to_dict`) are in stream order.
    """

    query: str
    query_id: str
    registered_at: int
    records: list[SituationRecord]

    def encode(self) -> bytes:
        return json.dumps({"query": self.query, "query_id": self.query_id,
                           "registered_at": self.registered_at,
                           "records": [r.to_dict(self.query) for r in self.records]}).encode()

    @classmethod
    def decode(cls, value: bytes | None) -> SituationBatch:
        """The batch of a message value; ``InputError`` says what is wrong with it."""
        if value is None:
            raise InputError("empty message (null value)")
        try:
            batch = json.loads(value)
        except (UnicodeDecodeError, ValueError) as exc:
            raise InputError(f"invalid JSON: {exc}") from None
        if not isinstance(batch, dict) or not isinstance(batch.get("records"), list) or \
                not isinstance(batch.get("query"), str) or \
                not isinstance(batch.get("query_id"), str) or \
                type(batch.get("registered_at")) is not int:
            raise InputError("a situation batch is a JSON object {query, query_id, "
                             "registered_at (integer), records: [...]}")
        return cls(batch["query"], batch["query_id"], batch["registered_at"],
                   [SituationRecord.from_dict(r) for r in batch["records"]])


def situation_matcher(operators: dict[str, tuple[str, Operator]],
                      batch: SituationBatch) -> SituationMatcher | None:
    """The operator that matches ``batch``: its query's, if that text of it is evaluated."""
    current = operators.get(batch.query)
    if current is None or current[0] != batch.query_id or \
            not isinstance(current[1], SituationMatcher):
        return None
    return current[1]


def fresh_steps(positions: dict[str, list[int]], query: str,
                records: list[SituationRecord]) -> list[SituationRecord]:
    """The steps after their key's position (per query), whole; moves the positions on."""
    fresh: list[SituationRecord] = []
    for _, group in groupby(records, key=lambda r: (json.dumps(r.key), r.seq, r.at)):
        step = list(group)
        name = f"{query}\x00{json.dumps(step[0].key)}"
        position, last = [step[0].at, step[0].seq], positions.get(name)
        if last is None or position > last:
            positions[name] = position
            fresh += step
    return fresh


def match_situations(operators: dict[str, tuple[str, Operator]], positions: dict[str, list[int]],
                     batch: SituationBatch) -> list[Match]:
    """The matches of one situation batch (see the module doc)."""
    matcher = situation_matcher(operators, batch)
    if matcher is None:
        return []
    return matcher.process(fresh_steps(positions, batch.query, batch.records))


def buffered_situations(operator: Operator) -> int:
    """How many situations a situation matcher holds in its buffers (0 for other operators)."""
    if not isinstance(operator, SituationMatcher):
        return 0
    return sum(len(buffer) for _, part in operator.keys.values() for buffer in part.buffers)
