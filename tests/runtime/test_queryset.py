"""The query set of an evaluating service and the operators of one partition (situflow/runtime),
without Kafka: versions, refusals, re-submits, and a checkpoint that restores each query's
operator only for the same text."""

from __future__ import annotations

import json

import numpy as np
import pytest

from situflow.errors import SituflowError
from situflow.events import EventBatch
from situflow.languages import compile_query
from situflow.operator import CompiledQuery, QueryOptions
from situflow.runtime import PartitionOperators, QuerySet

TPSTREAM = """FROM S PARTITION BY k
DEFINE A AS x > 0, B AS y > 0
PATTERN A overlaps B
WITHIN 100 seconds
RETURN count(A) AS n"""
OTHER_TPSTREAM = TPSTREAM.replace("x > 0", "x > 1")
SASE = "PATTERN SEQ(T a, T b) WHERE [k] WITHIN 10 seconds"


def compiled(text: str, name: str = "q") -> CompiledQuery:
    return compile_query(text, QueryOptions(name=name))


def keyed_by_k(query: CompiledQuery) -> None:
    if query.name == "unkeyed":
        raise SituflowError("query 'unkeyed' must partition by the stream's key attributes k")


def query_set() -> QuerySet:
    return QuerySet("matcher", frozenset({"tpstream"}), time_field="ts", stream_check=keyed_by_k)


def test_every_change_and_only_a_change_moves_the_version() -> None:
    queries = query_set()
    steps = [
        (lambda: queries.add(compiled(TPSTREAM), 3), 1, {"q": 3}),
        (lambda: queries.add(compiled(TPSTREAM + "\n"), 9), 1, {"q": 3}),  # the same text
        (lambda: queries.add(compiled(OTHER_TPSTREAM), 9), 2, {"q": 9}),  # a changed text
        (lambda: queries.remove("absent"), 2, {"q": 9}),
        (lambda: queries.remove("q"), 3, {}),
    ]
    for change, version, registered_at in steps:
        change()
        assert (queries.version, queries.registered_at) == (version, registered_at)


@pytest.mark.parametrize(("text", "name", "reason"), [
    (SASE, "q", "the matcher service evaluates tpstream queries, not sase"),
    (TPSTREAM, "unkeyed", "must partition by the stream's key attributes k"),
])
def test_a_query_the_service_cannot_evaluate_is_refused(text: str, name: str, reason: str) -> None:
    queries = query_set()
    with pytest.raises(SituflowError, match=reason):
        queries.add(compiled(text, name))
    assert (queries.compiled, queries.version) == ({}, 0)


def test_the_typing_rule_leaves_out_the_time_type_and_id_fields() -> None:
    queries = query_set()
    queries.add(compiled(TPSTREAM))
    assert not {"ts", "type", "id"} & set(queries.types["q"].used)


def test_a_checkpoint_restores_each_operator_only_for_its_own_query_text() -> None:
    queries = query_set()
    queries.add(compiled(TPSTREAM))
    partition = PartitionOperators({}, {"(1,)": [3, 4]})
    partition.sync(queries)
    events = EventBatch.from_records([{"ts": t, "k": 1, "x": 1, "y": 1} for t in range(3)],
                                     time_field="ts", seq=np.arange(3, dtype=np.int64))
    partition.operators["q"][1].process(events)
    checkpoint = json.loads(json.dumps(partition.encode()))

    restored = PartitionOperators.decode(checkpoint)
    restored.sync(queries)
    assert restored.positions == {"(1,)": [3, 4]}
    assert restored.operators["q"][1].snapshot() == partition.operators["q"][1].snapshot()

    queries.add(compiled(OTHER_TPSTREAM))
    changed = PartitionOperators.decode(checkpoint)
    changed.sync(queries)
    fresh = compiled(OTHER_TPSTREAM).operator().snapshot()
    assert changed.operators["q"][1].snapshot() == fresh, "a changed query starts afresh"


def test_sync_follows_the_query_set_and_is_free_while_it_is_unchanged() -> None:
    queries = query_set()
    partition = PartitionOperators({}, {})
    queries.add(compiled(TPSTREAM, "a"))
    queries.add(compiled(TPSTREAM, "b"))
    partition.sync(queries)
    first = partition.operators["a"]
    queries.remove("b")
    partition.sync(queries)
    assert list(partition.operators) == ["a"] and partition.operators["a"] is first
    partition.operators.clear()
    partition.sync(queries)  # same version: nothing to do
    assert partition.operators == {}
    assert PartitionOperators.decode(None) == PartitionOperators({}, {})


def test_the_time_a_query_began_at_outlives_a_checkpoint_and_a_changed_query_begins_again() -> None:
    queries = query_set()
    queries.add(compiled(TPSTREAM))
    partition = PartitionOperators({}, {})
    partition.sync(queries)
    assert partition.begin("q", 7) == 7
    assert partition.begin("q", 9) == 7, "a query begins once"
    checkpoint = json.loads(json.dumps(partition.encode()))

    restored = PartitionOperators.decode(checkpoint)
    restored.sync(queries)
    assert restored.begin("q", 12) == 7

    queries.add(compiled(OTHER_TPSTREAM))
    changed = PartitionOperators.decode(checkpoint)
    changed.sync(queries)
    assert changed.begin("q", 12) == 12
    queries.remove("q")
    changed.sync(queries)
    assert changed.begun == {}
