"""Situation batches between the deriver and the matcher services (thesis §5.6.5), without a broker.

A batch travels as JSON and comes back the same; only the matcher of the batch's query *text*
matches it; a matcher that has not read the batch's registration yet waits for its registry to
read it, and ignores a batch of a registration older than what it has read (a deleted or
replaced query).
"""

from __future__ import annotations

import asyncio

import pytest

from situflow.errors import InputError
from situflow.operator import QueryOptions
from situflow.queries import compile_query
from situflow.tpstream.situation_deriver import SituationDeriver
from tests.tpstream.harness import batch_of
from workers import evaluation
from workers.evaluation import Evaluation, Queries
from workers.situation_matching import (
    SituationBatch,
    buffered_situations,
    match_situations,
    over_situations,
    situation_matcher,
)

TPSTREAM = """FROM S PARTITION BY k
DEFINE A AS x > 0, B AS y > 0
PATTERN A overlaps B
WITHIN 100 seconds
RETURN count(A) AS n"""
SASE = "PATTERN SEQ(T a, T b) WHERE [k] WITHIN 10 seconds"
# A = [1, 4), B = [2, 6) for key 1: A overlaps B, certain when A ends at t = 4.
EVENTS = [{"ts": t, "k": 1, "x": int(1 <= t < 4), "y": int(2 <= t < 6)} for t in range(8)]


def queries(*texts_by_name: tuple[str, str]) -> Queries:
    found = Queries("matcher", frozenset({"tpstream", "sase"}), ("k",), over_situations)
    for name, text in texts_by_name:
        found.add(compile_query(text, QueryOptions(name=name)))
    return found


def derived(name: str = "q", text: str = TPSTREAM, registered_at: int = 0) -> SituationBatch:
    query = compile_query(text, QueryOptions(name=name))
    records = SituationDeriver(query).process(batch_of(EVENTS, 0, len(EVENTS)))  # type: ignore[arg-type]
    return SituationBatch(name, query.query_id, registered_at, records)


def test_a_batch_decodes_to_what_was_encoded() -> None:
    batch = derived()
    assert [(r.kind, r.situation, r.at) for r in batch.records] == [
        ("started", "A", 1), ("started", "B", 2), ("running", "A", 2), ("finished", "A", 4),
        ("finished", "B", 6)]
    assert SituationBatch.decode(batch.encode()) == batch


@pytest.mark.parametrize(("value", "reason"), [
    (None, "empty message"),
    (b"{", "invalid JSON"),
    (b'{"query": "q", "query_id": "x", "records": []}', r"registered_at \(integer\)"),
    (b'{"query": "q", "query_id": "x", "registered_at": true, "records": []}',
     r"registered_at \(integer\)"),
    (b'{"query": "q", "query_id": "x", "registered_at": 0, "records": [1]}',
     "a situation record must be a JSON object"),
])
def test_a_malformed_batch_says_what_is_wrong(value: bytes | None, reason: str) -> None:
    with pytest.raises(InputError, match=reason):
        SituationBatch.decode(value)


def test_only_the_matcher_of_the_batch_s_query_text_matches_it() -> None:
    evaluation = Evaluation({}, {})
    evaluation.sync(queries(("q", TPSTREAM), ("seq", SASE)))
    batch = derived()
    other_text = derived(text=TPSTREAM.replace("100 seconds", "99 seconds"))
    assert situation_matcher(evaluation.operators, batch) is evaluation.operators["q"][1]
    assert situation_matcher(evaluation.operators, other_text) is None
    assert situation_matcher(evaluation.operators, derived(name="unknown")) is None
    sase_named = SituationBatch("seq", evaluation.operators["seq"][0], 0, batch.records)
    assert situation_matcher(evaluation.operators, sase_named) is None

    matches = match_situations(evaluation.operators, evaluation.positions, batch)
    assert [(m.ts, m.values) for m in matches] == [(4, {"n": 3})]
    assert buffered_situations(evaluation.operators["q"][1]) == 2
    assert match_situations(evaluation.operators, evaluation.positions, batch) == [], \
        "a redelivered batch is skipped by position"


class Registry:
    """A registry watcher that has read ``position`` records and reads the rest on demand."""

    def __init__(self, position: int, records: int) -> None:
        self.position, self.records = position, records
        self.waited_for: list[int] = []

    async def reached(self, offset: int) -> bool:
        self.waited_for.append(offset)
        if offset >= self.records:
            return False
        self.position = max(self.position, offset + 1)
        return True


def test_a_registration_not_read_yet_is_waited_for_and_an_older_one_ignored() -> None:
    found = queries()
    assert not asyncio.run(found.catch_up(3)), "without a registry nothing is waited for"
    registry = Registry(position=3, records=5)
    found.registry = registry  # type: ignore[assignment]
    assert not asyncio.run(found.catch_up(2)), "read already: the batch's query is gone"
    assert not asyncio.run(found.catch_up(-1)), "a query from a file"
    assert asyncio.run(found.catch_up(4))
    assert registry.position == 5
    assert not asyncio.run(found.catch_up(7)), "no such registration"
    assert registry.waited_for == [4, 7]


def test_a_registry_that_does_not_get_there_is_given_up_on(monkeypatch: pytest.MonkeyPatch) -> None:
    class Stuck(Registry):
        async def reached(self, offset: int) -> bool:
            await asyncio.Event().wait()
            return True

    monkeypatch.setattr(evaluation, "REGISTRY_WAIT", 0.01)
    found = queries()
    found.registry = Stuck(position=0, records=1)  # type: ignore[assignment]
    assert not asyncio.run(found.catch_up(0))
