"""SITUFLOW_PROCESSING_GUARANTEE chooses at-least-once (default) or exactly-once processing.

Exactly-once is Faust's Kafka transactions, one per input partition number: what a service sends
while it handles a message or tick of partition p joins p's transaction, which p's checkpoints
commit with p's input offsets (workers/app.py, workers/partitions.py). A broker without
transactions (tansu) makes the service exit at start with the reason instead of hanging.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import weakref
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from faust.streams import _current_event
from faust.transport.consumer import TransactionManager
from faust.types.enums import ProcessingGuarantee

from workers import faust_patches
from workers.app import make_app
from workers.broker import EmbeddedBroker
from workers.settings import ServiceConfig

REPO = Path(__file__).parents[2]


def app_guarantee(env: dict[str, str], tmp_path: Path) -> ProcessingGuarantee:
    config = ServiceConfig.from_env("kslack", {**env, "SITUFLOW_DATA_DIR": str(tmp_path)})
    guarantee: ProcessingGuarantee = make_app("situflow-test", config).conf.processing_guarantee
    return guarantee


def test_the_setting_reaches_the_faust_app(tmp_path: Path) -> None:
    assert app_guarantee({}, tmp_path) is ProcessingGuarantee.AT_LEAST_ONCE
    exactly_once = {"SITUFLOW_PROCESSING_GUARANTEE": "exactly_once"}
    assert app_guarantee(exactly_once, tmp_path) is ProcessingGuarantee.EXACTLY_ONCE


def test_an_unknown_guarantee_names_the_variable() -> None:
    with pytest.raises(ValueError, match="SITUFLOW_PROCESSING_GUARANTEE='exactly-once': use "
                                         "at_least_once or exactly_once"):
        ServiceConfig.from_env("kslack", {"SITUFLOW_PROCESSING_GUARANTEE": "exactly-once"})


class Event:
    def __init__(self, topic: str, partition: int) -> None:
        self.message = SimpleNamespace(topic=topic, partition=partition)


class Producer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, int | None, str | None]] = []

    async def send(self, topic: str, key: Any, value: Any, partition: int | None,
                   timestamp: Any, headers: Any, *, transactional_id: str | None = None) -> Any:
        self.sent.append((topic, partition, transactional_id))
        return None


def test_output_joins_the_transaction_of_the_input_partition_being_handled() -> None:
    """Whatever partition a record goes to: a matcher handling partition 2 of its input sends
    a result keyed to partition 0 and its checkpoint, and the timer sends a tick."""
    faust_patches.transactions_by_input()
    producer = Producer()
    app = SimpleNamespace(conf=SimpleNamespace(id="situflow-matcher"),
                          assignor=SimpleNamespace(group_for_topic={"cars.ordered": 0}.get))
    manager: Any = SimpleNamespace(producer=producer, app=app)

    async def handle() -> None:
        event = Event("cars.ordered", 2)
        _current_event.set(weakref.ref(event))  # type: ignore[arg-type]
        await TransactionManager.send(manager, "matches.q", b"k", b"v", 0, None, None)
        await TransactionManager.send(manager, "matchers-changelog", b"2", b"{}", 2, None, None)

    async def timer() -> None:
        await TransactionManager.send(manager, "ticks", None, b"", 1, None, None)

    asyncio.run(handle())
    asyncio.run(timer())
    assert producer.sent == [("matches.q", 0, "situflow-matcher-0-2"),
                             ("matchers-changelog", 2, "situflow-matcher-0-2"),
                             ("ticks", 1, None)]


@pytest.mark.integration
def test_a_broker_without_transactions_stops_the_service_at_start(tmp_path: Path) -> None:
    with EmbeddedBroker() as broker:  # tansu: no transactions (issue 5)
        bootstrap = broker.bootstrap_servers
        env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
               "SITUFLOW_PROCESSING_GUARANTEE": "exactly_once", "SITUFLOW_KEY_FIELDS": "car_id",
               "SITUFLOW_DATA_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "workers.kslack", "worker"], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)
        took = time.monotonic() - started
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"situflow kslack: SITUFLOW_PROCESSING_GUARANTEE=exactly_once needs Kafka transactions, "
        f"and the broker at {bootstrap} does not grant them (")
    assert last.endswith("); run at_least_once there (the default)")
    assert took < 60, "it fails at once, not after a hang"
