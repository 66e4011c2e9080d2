"""How an evaluating service waits for its registry reader to read the registration a message
names (:meth:`workers.query_source.ServiceQueries.catch_up`), without a broker.

Nothing is dropped: a reader that gets there late, after any number of warning rounds, is
waited for; one that does not get there within ``REGISTRY_TIMEOUT`` stops the worker, whose
restart replays the message after reading the registry. Each wait is counted and its length
shown while it lasts. The same through real topics, with a reader held back:
``tests/integration/test_registry_catch_up.py``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from tests.tpstream.test_split_messages import KEYED
from workers import query_source
from workers.query_source import RegistryWaits, ServiceQueries

ROUND = 0.02  # REGISTRY_WAIT in these tests
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def short_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(query_source, "REGISTRY_WAIT", ROUND)
    # Far more than the rounds the tests let pass, however slowly a loaded machine runs them.
    monkeypatch.setattr(query_source, "REGISTRY_TIMEOUT", 200 * ROUND)


class Reader:
    """A registry reader that has read ``position`` records and reads the one asked for (of
    ``records``) at the ``rounds + 1``-th time it is asked, each round before being cut short
    by the service's timeout; never if ``rounds`` is None."""

    def __init__(self, position: int, records: int, rounds: int | None = 0) -> None:
        self.position, self.records, self.rounds = position, records, rounds
        self.asked = 0

    async def reached(self, offset: int) -> bool:
        if offset >= self.records:
            return False
        self.asked += 1
        if self.rounds is None or self.asked <= self.rounds:
            await asyncio.Event().wait()
        self.position = max(self.position, offset + 1)
        return True


def service_queries(reader: Reader | None) -> tuple[ServiceQueries, list[int]]:
    """The matcher's queries following ``reader``, and the offsets it gave up on."""
    queries = ServiceQueries("matcher", frozenset({"tpstream"}), KEYED)
    queries.registry = reader  # type: ignore[assignment]
    given_up: list[int] = []
    queries.give_up = given_up.append
    return queries, given_up


def exported(queries: ServiceQueries) -> dict[str, float]:
    registry = CollectorRegistry()
    registry.register(RegistryWaits("matcher", queries))
    return {sample.name: sample.value for family in registry.collect()
            for sample in family.samples}


def test_a_registration_read_already_or_not_in_the_registry_is_not_waited_for() -> None:
    queries, given_up = service_queries(None)
    assert not asyncio.run(queries.catch_up(3)), "without a registry nothing is waited for"
    queries, given_up = service_queries(Reader(position=3, records=5))
    assert not asyncio.run(queries.catch_up(2)), "read already: the message's query is gone"
    assert not asyncio.run(queries.catch_up(-1)), "a query from a file"
    assert not asyncio.run(queries.catch_up(7)), "no such registration"
    assert (queries.waits, given_up) == (0, [])
    assert exported(queries) == {"situflow_registry_waits_total": 0,
                                 "situflow_registry_wait_seconds": 0}


def test_a_reader_later_than_several_rounds_is_waited_for_with_a_warning_each_round(
        caplog: pytest.LogCaptureFixture) -> None:
    reader = Reader(position=0, records=1, rounds=4)
    queries, given_up = service_queries(reader)
    seen_waiting: list[float] = []

    async def watch() -> bool:
        catching_up = asyncio.create_task(queries.catch_up(0))
        await asyncio.sleep(2 * ROUND)
        seen_waiting.append(exported(queries)["situflow_registry_wait_seconds"])
        return await catching_up

    with caplog.at_level(logging.WARNING, logger=query_source.__name__):
        assert asyncio.run(watch()), "the queries may have changed"
    assert reader.position == 1 and given_up == []
    assert len([r for r in caplog.records if "registry reader" in r.message]) == 4
    assert seen_waiting[0] >= ROUND
    assert exported(queries) == {"situflow_registry_waits_total": 1,
                                 "situflow_registry_wait_seconds": 0}


def test_a_reader_that_does_not_get_there_in_time_stops_the_worker_for_a_replay(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(query_source, "REGISTRY_TIMEOUT", 5 * ROUND)
    queries, given_up = service_queries(Reader(position=0, records=1, rounds=None))
    started = time.monotonic()
    assert not asyncio.run(queries.catch_up(0))
    assert given_up == [0]
    assert time.monotonic() - started >= query_source.REGISTRY_TIMEOUT
    assert exported(queries)["situflow_registry_waits_total"] == 1


def test_a_worker_gives_up_by_exiting_with_its_own_code() -> None:
    assert ServiceQueries("matcher", frozenset({"tpstream"}), KEYED).give_up is \
        query_source.exit_registry_behind
    exited = subprocess.run(
        [sys.executable, "-c", "from workers.query_source import exit_registry_behind as e; e(3)"],
        capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=60)
    assert exited.returncode == query_source.EXIT_REGISTRY_BEHIND == 75
    assert "has not reached the registration at offset 3" in exited.stderr
