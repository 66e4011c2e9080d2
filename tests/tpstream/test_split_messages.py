"""Situation messages between the deriver and the matcher services (thesis §5.6.5), without a
broker.

A message travels as JSON and comes back the same; only the matcher of the message's query
*text* matches it; a matcher that has not read the message's registration yet waits for its
registry to read it, and ignores a message of a registration older than what it has read (a
deleted or replaced query). Over an unpartitioned stream (thesis §5.6.3), situation batches
that come in any order, redelivered, from the batch a query begins at, give the fused
operator's matches over the events from that batch on; SASE+ is refused there, and a query
over a keyed stream must partition by its key.
"""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from situflow.errors import InputError, SequenceError, SituflowError
from situflow.languages import compile_query
from situflow.operator import QueryOptions
from situflow.runtime import PartitionOperators as Evaluation
from situflow.tpstream.split.batches import derive_batch
from situflow.tpstream.split.deriver import SituationDeriver
from situflow.tpstream.split.halves import (
    as_batch_matcher,
    as_matcher,
    match_batch,
    match_situations,
    situation_matcher,
)
from situflow.tpstream.split.merger import BatchMatcher
from situflow.tpstream.split.messages import SituationMessage
from tests.tpstream.harness import batch_of, run
from tests.tpstream.test_split import results
from topics.catalog import StreamSpec
from workers.query_source import ServiceQueries as Queries

TPSTREAM = """FROM S PARTITION BY k
DEFINE A AS x > 0, B AS y > 0
PATTERN A overlaps B
WITHIN 100 seconds
RETURN count(A) AS n"""
SASE = "PATTERN SEQ(T a, T b) WHERE [k] WITHIN 10 seconds"
# A = [1, 4), B = [2, 6) for key 1: A overlaps B, certain when A ends at t = 4.
EVENTS = [{"ts": t, "k": 1, "x": int(1 <= t < 4), "y": int(2 <= t < 6)} for t in range(8)]


KEYED = StreamSpec("S", key_fields=("k",))
UNPARTITIONED = StreamSpec("S", unpartitioned=True)


def queries(*texts_by_name: tuple[str, str]) -> Queries:
    found = Queries("matcher", frozenset({"tpstream", "sase"}), KEYED, as_matcher)
    for name, text in texts_by_name:
        found.add(compile_query(text, QueryOptions(name=name)))
    return found


def derived(name: str = "q", text: str = TPSTREAM, registered_at: int = 0) -> SituationMessage:
    query = compile_query(text, QueryOptions(name=name))
    records = SituationDeriver(query).process(batch_of(EVENTS, 0, len(EVENTS)))  # type: ignore[arg-type]
    return SituationMessage(name, query.query_id, registered_at, records)


def test_a_batch_decodes_to_what_was_encoded() -> None:
    batch = derived()
    assert [(r.kind, r.situation, r.at) for r in batch.records] == [
        ("started", "A", 1), ("started", "B", 2), ("running", "A", 2), ("finished", "A", 4),
        ("finished", "B", 6)]
    assert SituationMessage.decode(batch.encode()) == batch


@pytest.mark.parametrize(("value", "reason"), [
    (None, "empty message"),
    (b"{", "invalid JSON"),
    (b'{"query": "q", "query_id": "x", "rows": []}', r"registered_at \(integer\)"),
    (b'{"query": "q", "query_id": "x", "registered_at": 0, "batch": {}}', r"starts \(boolean\)"),
    (b'{"query": "q", "query_id": "x", "registered_at": 0, "starts": true, "batch": {}}',
     "malformed situation batch"),
    (b'{"query": "q", "query_id": "x", "registered_at": true, "rows": []}',
     r"registered_at \(integer\)"),
    (b'{"query": "q", "query_id": "x", "registered_at": 0, "rows": [1]}',
     "a situation record row must be a JSON array of 8 fields"),
    (b'{"query": "q", "query_id": "x", "registered_at": 0, "rows": [["paused", 1, "A", 1, null, '
     b'1, 1, {}]]}', "unknown situation record kind 'paused'"),
])
def test_a_malformed_batch_says_what_is_wrong(value: bytes | None, reason: str) -> None:
    with pytest.raises(InputError, match=reason):
        SituationMessage.decode(value)


def test_only_the_matcher_of_the_batch_s_query_text_matches_it() -> None:
    evaluation = Evaluation({}, {})
    evaluation.sync(queries(("q", TPSTREAM), ("seq", SASE)))
    batch = derived()
    other_text = derived(text=TPSTREAM.replace("100 seconds", "99 seconds"))
    assert situation_matcher(evaluation.operators, batch) is evaluation.operators["q"][1]
    assert situation_matcher(evaluation.operators, other_text) is None
    assert situation_matcher(evaluation.operators, derived(name="unknown")) is None
    sase_named = SituationMessage("seq", evaluation.operators["seq"][0], 0, batch.records)
    assert situation_matcher(evaluation.operators, sase_named) is None

    matches = match_situations(evaluation.operators, evaluation.positions, batch)
    assert [(m.ts, m.values) for m in matches] == [(4, {"n": 3})]
    assert evaluation.operators["q"][1].stats()["buffered_situations"] == 2
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


UNPARTITIONED_TPSTREAM = """FROM S
DEFINE A AS x > 0, B AS y > 0
PATTERN A overlaps B
WITHIN 20 seconds
RETURN count(A) AS n, avg(B.y) AS y"""
PER_KEY = UNPARTITIONED_TPSTREAM.replace("FROM S", "FROM S PARTITION BY k")


def stream(events: int, seed: int) -> list[dict[str, object]]:
    """Three keys whose conditions hold in runs that cross any batch boundary."""
    rng = random.Random(seed)
    out, x, y = [], 0, 0.0
    for t in range(events):
        x = x if rng.random() < 0.8 else 1 - x
        y = y if rng.random() < 0.8 else (0.0 if y else rng.choice([0.5, 1.25, 2.0]))
        out.append({"ts": t // 2, "k": rng.randrange(3), "x": x, "y": y})
    return out


@pytest.mark.parametrize("text", [UNPARTITIONED_TPSTREAM, PER_KEY])
@pytest.mark.parametrize("seed", [4, 6, 7])
def test_batches_from_the_one_a_query_begins_at_in_any_order_match_like_the_fused_operator(
        text: str, seed: int) -> None:
    """A query registered while the stream runs begins at batch ``START``: its matcher merges
    from there, whatever order the derivers' batches come in, redelivered, across a
    checkpoint, and reports what the fused operator reports on the events from that batch on."""
    size, start = 7, 5
    events = stream(200, seed)
    found = Queries("matcher", frozenset({"tpstream"}), UNPARTITIONED, as_batch_matcher)
    found.add(compile_query(text, QueryOptions(name="q")), registered_at=3)
    query = compile_query(text, QueryOptions(name="q"))  # the fused query the half was made of
    messages = [SituationMessage("q", query.query_id, 3, starts=s == start,
                                 batch=derive_batch(query, s, batch_of(events, s * size,
                                                                       (s + 1) * size)))
                for s in range(start, -(-len(events) // size))]
    rng = random.Random(seed)
    arrivals = rng.sample(messages, len(messages)) + rng.sample(messages, 4)
    state = Evaluation({}, {})
    state.sync(found)
    matches = []
    for i, message in enumerate(arrivals):
        if i == len(arrivals) // 2:  # a checkpoint and a restart
            state = restored(state, found)
        matches += match_batch(state.operators, SituationMessage.decode(message.encode()))
    matcher = state.operators["q"][1]
    assert isinstance(matcher, BatchMatcher) and matcher.started
    assert (matcher.merger.waiting_for, len(matcher.merger.pending)) == (len(messages) + start, 0)
    expected = results(run(query, events[start * size:]))
    assert expected, "the stream should exercise the query"
    assert results(matches) == expected


def restored(before: Evaluation, found: Queries) -> Evaluation:
    """The evaluation as a restart restores it from its checkpoint."""
    after = Evaluation.decode(json.loads(json.dumps(before.encode())))
    after.sync(found)
    return after


def test_the_merger_bound_of_the_service_holds_and_its_overflow_is_a_sequence_error() -> None:
    found = Queries("matcher", frozenset({"tpstream"}), UNPARTITIONED,
                    lambda q: as_batch_matcher(q, max_pending=1))
    found.add(compile_query(UNPARTITIONED_TPSTREAM, QueryOptions(name="q")))
    state = Evaluation({}, {})
    state.sync(found)
    query = compile_query(UNPARTITIONED_TPSTREAM, QueryOptions(name="q"))
    events = stream(40, 1)

    def message(s: int) -> SituationMessage:
        batch = derive_batch(query, s, batch_of(events, s * 10, (s + 1) * 10))
        return SituationMessage("q", query.query_id, -1, batch=batch, starts=s == 0)

    assert match_batch(state.operators, message(2)) == []
    with pytest.raises(SequenceError, match="situation batch 0 is missing"):
        match_batch(state.operators, message(3))
    for s in (0, 1, 3):
        match_batch(state.operators, message(s))
    matcher = state.operators["q"][1]
    assert isinstance(matcher, BatchMatcher) and matcher.merger.waiting_for == 4


def test_an_unpartitioned_stream_runs_any_tpstream_query_and_refuses_sase() -> None:
    found = Queries("matcher", frozenset({"tpstream", "sase"}), UNPARTITIONED,
                    as_batch_matcher)
    for name, text in [("global", UNPARTITIONED_TPSTREAM), ("keyed", PER_KEY)]:
        found.add(compile_query(text, QueryOptions(name=name)))
    assert sorted(found.compiled) == ["global", "keyed"]
    with pytest.raises(SituflowError, match="the sase query 'seq' needs a keyed stream: 'S' is "
                                            "unpartitioned"):
        found.add(compile_query(SASE, QueryOptions(name="seq")))
    keyed = Queries("matcher", frozenset({"tpstream"}), KEYED, as_matcher)
    with pytest.raises(SituflowError, match=r"must partition by the stream's key attributes k .*"
                                            r"SITUFLOW_UNPARTITIONED=1"):
        keyed.add(compile_query(UNPARTITIONED_TPSTREAM, QueryOptions(name="global")))


def test_the_same_text_submitted_again_goes_on_from_its_first_registration() -> None:
    found = queries()
    found.add(compile_query(TPSTREAM, QueryOptions(name="q")), registered_at=2)
    version = found.version
    found.add(compile_query(TPSTREAM, QueryOptions(name="q")), registered_at=5)
    assert (found.registered_at["q"], found.version) == (2, version)
    found.add(compile_query(TPSTREAM.replace("100", "99"), QueryOptions(name="q")), registered_at=7)
    assert found.registered_at["q"] == 7


def test_a_query_submitted_again_after_a_delete_begins_afresh_at_its_new_first_batch() -> None:
    """Its merger may be stuck on a batch that never comes (a refused batch); the same text
    registered anew begins at the first batch of that registration, even where this partition
    never saw the delete, and late batches of the old registration are ignored."""
    found = Queries("matcher", frozenset({"tpstream"}), UNPARTITIONED, as_batch_matcher)
    found.add(compile_query(UNPARTITIONED_TPSTREAM, QueryOptions(name="q")), registered_at=0)
    state = Evaluation({}, {})
    state.sync(found)
    query = compile_query(UNPARTITIONED_TPSTREAM, QueryOptions(name="q"))
    events = stream(120, 7)

    def message(s: int, registered_at: int, starts: bool) -> SituationMessage:
        batch = derive_batch(query, s, batch_of(events, s * 10, (s + 1) * 10))
        return SituationMessage("q", query.query_id, registered_at, batch=batch, starts=starts)

    old = [match_batch(state.operators, message(s, 0, s == 0)) for s in (0, 2, 3)]
    assert old == [[], [], []]  # batch 1 is missing
    matches = [m for s in (7, 6, 8, 9, 10, 11)
               for m in match_batch(state.operators, message(s, 5, s == 6))]
    assert match_batch(state.operators, message(1, 0, False)) == []
    matcher = state.operators["q"][1]
    assert isinstance(matcher, BatchMatcher)
    assert (matcher.registered_at, matcher.merger.waiting_for) == (5, 12)
    expected = results(run(query, events[60:]))
    assert expected, "the stream should exercise the query"
    assert results(matches) == expected
