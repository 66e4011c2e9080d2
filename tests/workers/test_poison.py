"""Poison messages never stop a partition (workers/failures.py, issue 12), without a broker.

The consumer is the model of ``test_partitions.py``. A message whose handling raises is found,
skipped and given to the service's ``on_poison``; the state is the fold of every other message,
each applied once and in order, whatever the failing handler changed halfway; a failure that
does not recur skips nothing; a failure that surfaces later than its message (work deferred
over several messages, a state that does not encode at the checkpoint) is pinned on the
message that caused it; a failing query skips that query alone on its message; a message that
crashed the worker process too often is quarantined.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.workers.test_partitions import PARTITION, App, Consumer, Event, Stream, checkpoint, latest
from workers import partitions
from workers.failures import (
    EXIT_PROCESSING_ERROR,
    FAIL,
    CrashRecord,
    Failure,
    Quarantined,
    QueryFailed,
    error_headers,
    plain,
)
from workers.partitions import PartitionStates

LOG = {"cars": list(range(12)), "situations": []}


class Boom(RuntimeError):
    """What a bug in a handler raises."""


def consume(handler: Callable[[PartitionStates[list[Any]], Event], None], *, interval: float = 0.0,
            crashes: CrashRecord | None = None, on_error: str = "continue",
            ) -> tuple[list[Any], list[tuple[int, Failure]], PartitionStates[list[Any]]]:
    """Run the partition over ``LOG`` from an empty checkpoint with ``handler`` applying each
    message; the stored state and what went to ``on_poison``."""
    table = checkpoint(LOG, {})
    app = App(Consumer(LOG, committed={"cars": 0, "situations": 0}))
    states = PartitionStates(app, table, lambda v: [] if v is None else v, list,
                             interval=interval, crashes=crashes, on_error=on_error)
    poisoned: list[tuple[int, Failure]] = []

    async def on_message(event: Event) -> None:
        handler(states, event)

    async def on_poison(event: Event, failure: Failure) -> None:
        poisoned.append((event.message.offset, failure))

    async def run() -> None:
        await states.consume(Stream(app, table), "ticks", on_message, on_poison=on_poison)
        await states.checkpoint(PARTITION)

    asyncio.run(run())
    return latest(table)["state"], poisoned, states


def append(states: PartitionStates[list[Any]], event: Event, value: Any = None) -> None:
    offset = event.message.offset
    states.changed(PARTITION, [*states.get(PARTITION), offset if value is None else value], event)


def test_a_message_that_always_fails_is_skipped_and_the_rest_applied_once_in_order() -> None:
    def handler(states: PartitionStates[list[Any]], event: Event) -> None:
        state = states.get(PARTITION)
        state.append("half-done")  # the failing handler changed the state before it raised
        if event.message.offset == 5:
            raise Boom("offset 5")
        state.pop()
        append(states, event)

    state, poisoned, _ = consume(handler, interval=10.0)
    assert state == [o for o in LOG["cars"] if o != 5]
    assert [(o, type(f.exception), f.query) for o, f in poisoned] == [(5, Boom, None)]


def test_a_failure_that_does_not_recur_skips_nothing() -> None:
    failed: set[int] = set()

    def handler(states: PartitionStates[list[Any]], event: Event) -> None:
        if event.message.offset == 7 and not failed:
            failed.add(7)
            raise Boom("once")
        append(states, event)

    state, poisoned, _ = consume(handler, interval=10.0)
    assert state == LOG["cars"] and not poisoned


def test_a_failure_of_deferred_work_is_pinned_on_the_message_that_caused_it() -> None:
    """As K-slack pushes JSON events in batches: the batch with offset 4 fails when it is
    pushed at offset 5; a careful replay pushes each message at once and finds 4."""
    inbox: list[int] = []

    def handler(states: PartitionStates[list[Any]], event: Event) -> None:
        inbox.append(event.message.offset)
        states.changed(PARTITION, states.get(PARTITION), event)
        if len(inbox) == 3 or states.careful(PARTITION):
            pushed = list(inbox)
            inbox.clear()
            if 4 in pushed:
                raise Boom("pushed 4")
            states.changed(PARTITION, [*states.get(PARTITION), *pushed])

    state, poisoned, _ = consume(handler, interval=10.0)
    assert [o for o, _ in poisoned] == [4]
    assert set(state) | set(inbox) == set(LOG["cars"]) - {4}


def test_a_state_that_does_not_encode_is_pinned_on_the_message_that_made_it() -> None:
    """The deriver's checkpoint raised ``ndarray is not JSON serializable`` for ever; numpy
    values now encode as plain data, anything else that does not is that message's fault."""

    def handler(states: PartitionStates[list[Any]], event: Event) -> None:
        offset = event.message.offset
        value = {3: np.array([1, 2]), 8: object()}.get(offset, np.int64(offset))
        append(states, event, value)

    state, poisoned, _ = consume(handler)
    assert [o for o, _ in poisoned] == [8]
    assert state == [0, 1, 2, [1, 2], 4, 5, 6, 7, 9, 10, 11]
    assert json.loads(json.dumps({"a": np.float64(1.5)}, default=plain)) == {"a": 1.5}


def test_a_failing_query_skips_that_query_on_that_message_alone() -> None:
    skipped: list[tuple[int, str | None]] = []

    def handler(states: PartitionStates[list[Any]], event: Event) -> None:
        failures = states.failures(event)
        skipped.extend((event.message.offset, f.query) for f in failures)
        if event.message.offset % 4 == 1 and not failures:
            states.get(PARTITION).append("half-done")
            raise QueryFailed("q", Boom("q fails"))
        append(states, event)

    state, poisoned, _ = consume(handler, interval=10.0)
    assert not poisoned, "the input message is fine"
    assert skipped == [(1, "q"), (5, "q"), (9, "q")]
    assert state == LOG["cars"]


def test_a_message_that_crashed_the_worker_three_times_is_quarantined(tmp_path: Path) -> None:
    for _ in range(3):  # three processes that died handling offset 6
        record = CrashRecord(tmp_path)
        record.begin("cars", PARTITION, 6)
    record = CrashRecord(tmp_path)
    assert record.found == ("cars", PARTITION, 6)
    assert record.crashes_at("cars", PARTITION, 6) == 3 and record.crash_looping()
    state, poisoned, _ = consume(lambda states, event: append(states, event), crashes=record)
    assert [(o, type(f.exception)) for o, f in poisoned] == [(6, Quarantined)]
    assert state == [o for o in LOG["cars"] if o != 6]
    assert CrashRecord(tmp_path).found is None, "a clean run leaves no crash behind"


def test_a_crash_record_of_crashes_long_ago_is_no_crash_loop(tmp_path: Path) -> None:
    for _ in range(3):
        CrashRecord(tmp_path).begin("cars", PARTITION, 1)
    record = CrashRecord(tmp_path, window=60.0)
    assert record.recent() == 3
    assert not record.crash_looping(now=record.crashes[-1][3] + 61)


def test_on_error_fail_stops_the_process_at_the_first_failure(monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    def exit_(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(partitions.os, "_exit", exit_)

    def handler(states: PartitionStates[list[Any]], event: Event) -> None:
        if event.message.offset == 2:
            raise Boom("offset 2")
        append(states, event)

    with pytest.raises(SystemExit) as stopped:
        consume(handler, on_error=FAIL)
    assert stopped.value.code == EXIT_PROCESSING_ERROR


def test_error_headers_name_the_exception_and_the_query() -> None:
    assert error_headers(KeyError("speed"), "q") == [
        ("situflow.error.class", b"KeyError"), ("situflow.error.message", b"'speed'"),
        ("situflow.error.query", b"q")]


def test_a_derivers_state_over_a_list_valued_key_encodes_and_restores() -> None:
    """The reported crash loop: ``first(B.car_id)`` of a list-valued ``car_id`` kept a numpy
    array in the deriver's state, and every checkpoint raised ``ndarray is not JSON
    serializable``."""
    from situflow.codecs.arrow_events import batch_from_events
    from situflow.events import EventBatch
    from situflow.languages import compile_query
    from situflow.operator import QueryOptions
    from situflow.runtime import PartitionOperators
    from situflow.tpstream.split.halves import as_deriver
    from workers.up import REPO_ROOT

    text = (REPO_ROOT / "situflow/examples/aggressive_drivers.tps").read_text()
    query = as_deriver(compile_query(text, QueryOptions(name="q")))
    operator = query.operator()
    rows = [{"ts": t, "car_id": [1], "speed": 100, "accel": 1} for t in range(5)]
    operator.process(EventBatch.from_arrow(batch_from_events(rows), time_field="ts",
                                           seq=np.arange(5, dtype=np.int64)))
    checkpoint = PartitionOperators({"q": (query.query_id, operator)}, {}).encode()
    stored = json.loads(json.dumps(checkpoint, default=plain))
    evaluation = PartitionOperators.decode(stored)
    assert evaluation.snapshots["q"]["id"] == query.query_id
    query.restore(evaluation.snapshots["q"]["operator"])
