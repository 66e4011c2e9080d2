"""The matcher's side of distributed TPStream (thesis §5.6.5): situation batches from the
``situations`` topic (written by :mod:`workers.deriver`) into matches.

For the matcher service (:mod:`workers.evaluation`) to evaluate a TPStream query over
``situations`` instead of over ``<stream>.ordered``, its per-partition operator is a
:class:`situflow.tpstream.situation_matcher.SituationMatcher` (:func:`over_situations` makes
one in place of the fused operator), and each situation batch message goes through
:func:`match_situations`, which

- decodes it (:func:`decode_situation_batch`; a bad one raises ``InputError`` for the DLQ);
- ignores a batch of a query this partition does not evaluate, or of another text of it
  (``query_id``): the deriver and the matcher pick up a changed query independently;
- skips the steps (the records of one event of one key) at or before the key's position, which
  a redelivery or a deriver restart repeats; positions live in the evaluation's ``positions``
  under ``<query>\\x00<key>``, checkpointed with the operators;
- and returns the matches of the rest, which are the fused operator's
  (``tests/tpstream/test_split.py``), with the same result ids.
"""

from __future__ import annotations

import json
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
    deriver (:mod:`workers.deriver`) or its situation matcher (this module), so that the
    per-partition bookkeeping of :class:`workers.evaluation.Evaluation` serves both."""

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


def over_situations(query: CompiledQuery) -> CompiledQuery:
    """``query`` as the matcher evaluates it: TPStream over situation records, else as it is."""
    if query.language == "tpstream":
        return cast(CompiledQuery, SplitQuery(cast(TPStreamQuery, query)))
    return query


def decode_situation_batch(value: bytes | None) -> tuple[str, str, list[SituationRecord]]:
    """(query name, query id, records) of a situation batch message."""
    if value is None:
        raise InputError("empty message (null value)")
    try:
        batch = json.loads(value)
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"invalid JSON: {exc}") from None
    if not isinstance(batch, dict) or not isinstance(batch.get("records"), list) or \
            not isinstance(batch.get("query"), str) or not isinstance(batch.get("query_id"), str):
        raise InputError("a situation batch is a JSON object {query, query_id, records: [...]}")
    return batch["query"], batch["query_id"], [SituationRecord.from_dict(r)
                                               for r in batch["records"]]


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
                     value: bytes | None) -> tuple[str, list[Match]]:
    """(query name, matches) of one situation batch message (see the module doc)."""
    name, query_id, records = decode_situation_batch(value)
    current = operators.get(name)
    if current is None or current[0] != query_id:
        return name, []
    matcher = cast(SituationMatcher, current[1])
    return name, matcher.process(fresh_steps(positions, name, records))
