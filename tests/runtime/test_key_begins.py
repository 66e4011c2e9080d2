"""The deriver's per-key begin of a TPStream query submitted with a backfill (situflow/runtime,
batch/README.md "Backfill"), without Kafka: each key begins at its first quiet event at or
after the start, its earlier events are not derived, and a restored checkpoint keeps the begun
keys, so a restart neither drops a begun key's events nor derives an unbegun key's early."""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from situflow.events import EventBatch
from situflow.languages import compile_query
from situflow.operator import QueryOptions
from situflow.runtime import PartitionOperators, QuerySet, key_name
from situflow.tpstream.query import TPStreamQuery, quiet_mask
from situflow.tpstream.split.halves import as_deriver

TPSTREAM = """FROM S PARTITION BY k
DEFINE A AS x > 0, B AS y > 0
PATTERN A overlaps B
WITHIN 100 seconds
RETURN count(A) AS n"""


def deriver_query() -> TPStreamQuery:
    query = as_deriver(compile_query(TPSTREAM, QueryOptions(name="q")))
    assert isinstance(query, TPStreamQuery)
    return query


def handed_off(query: TPStreamQuery) -> QuerySet:
    queries = QuerySet("deriver", frozenset({"tpstream"}), time_field="ts")
    queries.add(query, 0, handoff=True)
    return queries


def derive(state: PartitionOperators, query: TPStreamQuery, events: EventBatch
           ) -> tuple[list[int], list[Any]]:
    """What the deriver does with one message of a handed-off query: the ids of the events it
    derives, and the situation records."""
    kept = state.begin_keys("q", events, quiet_mask(query, events), query.partition_by)
    return kept.ids.tolist(), state.operators["q"][1].process(kept)


def checkpointed(state: PartitionOperators, queries: QuerySet) -> PartitionOperators:
    restored = PartitionOperators.decode(json.loads(json.dumps(state.encode())))
    restored.sync(queries)
    return restored


def test_a_key_begins_at_its_first_quiet_event_and_derives_all_of_its_events_after() -> None:
    query = deriver_query()
    state = PartitionOperators({}, {})
    state.sync(handed_off(query))
    first = EventBatch.from_records([
        {"ts": 1, "id": 10, "k": 1, "x": 1, "y": 0},  # inside a situation of A: not begun
        {"ts": 2, "id": 11, "k": 2, "x": 0, "y": 0},  # quiet: key 2 begins
        {"ts": 3, "id": 12, "k": 1, "x": 0, "y": 0},  # quiet: key 1 begins
        {"ts": 4, "id": 13, "k": 2, "x": 1, "y": 1},
    ], seq=np.arange(4))
    second = EventBatch.from_records([{"ts": 5, "id": 14, "k": 1, "x": 1, "y": 0}],
                                     seq=np.array([4]))

    assert derive(state, query, first)[0] == [11, 12, 13]
    assert derive(state, query, second)[0] == [14]
    assert state.keys["q"] == {key_name([2]): [2, 1], key_name([1]): [3, 2]}


def test_a_plain_submit_or_another_query_keeps_no_begun_keys() -> None:
    query = deriver_query()
    queries = handed_off(query)
    state = PartitionOperators({}, {})
    state.sync(queries)
    derive(state, query, EventBatch.from_records([{"ts": 1, "id": 1, "k": 1, "x": 0, "y": 0}]))
    queries.add(compile_query(TPSTREAM.replace("x > 0", "x > 1"), QueryOptions(name="q")), 1)
    state.sync(queries)
    assert "q" not in queries.handoffs and state.keys == {}


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1), st.integers(0, 1),
                               st.integers(0, 3)), min_size=1, max_size=80),
       cuts=st.lists(st.integers(0, 80), max_size=6), restart=st.integers(0, 80))
def test_split_into_any_messages_and_restored_from_a_checkpoint_it_derives_as_brute_force(
    rows: list[tuple[int, int, int, int]], cuts: list[int], restart: int
) -> None:
    """Whatever the message boundaries and wherever the deriver restarts from its checkpoint,
    it derives exactly what a fresh deriver gives on each key's events from the key's first
    quiet event on (the rule's brute force: tests/integration/test_backfill.py)."""
    records = [{"ts": int(t), "id": i, "k": k, "x": x, "y": y}
               for i, ((k, x, y, _), t) in enumerate(zip(rows, np.cumsum([r[3] for r in rows]),
                                                         strict=True))]
    query = deriver_query()
    queries = handed_off(query)
    state = PartitionOperators({}, {})
    state.sync(queries)
    derived: list[int] = []
    situations: list[Any] = []
    bounds = sorted({0, len(records), restart % (len(records) + 1),
                     *(c % (len(records) + 1) for c in cuts)})
    for lo, hi in pairwise(bounds):
        if lo == restart % (len(records) + 1):
            state = checkpointed(state, queries)
        events = EventBatch.from_records(records[lo:hi], seq=np.arange(lo, hi))
        ids, out = derive(state, query, events)
        derived += ids
        situations += out

    whole = EventBatch.from_records(records, seq=np.arange(len(records)))
    quiet = quiet_mask(query, whole)
    begun: set[int] = set()
    expected = []
    for i, record in enumerate(records):
        if quiet[i]:
            begun.add(record["k"])
        if record["k"] in begun:
            expected.append(i)
    assert derived == expected
    fresh = query.operator().process(whole.take(np.array(expected, dtype=np.int64)))
    assert situations == fresh
