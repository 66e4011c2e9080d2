"""Poison messages never crash-loop a service (issue 12, workers/failures.py), through a real
broker and real service processes.

The car stream goes through K-slack, the deriver and the matcher with the aggressive-drivers
query, and with three kinds of trouble that the tests inject through variables only tests set
(``SITUFLOW_TEST_*``, :mod:`workers.failures`, :mod:`workers.evaluation`):

- events on which K-slack raises while it pushes its inbox, a bug in work deferred past the
  message: each goes to ``<stream>.dlq`` with the exception's class and message, is counted in
  ``situflow_processing_errors_total``, and K-slack goes on in the same process;
- a second query whose operator raises on every message: its errors go to ``errors.<query>``
  once per message, never to the input DLQ, ``situflow query list`` marks it failed, and the
  first query's results equal ``situflow run``'s;
- a message that kills K-slack's process (SIGKILL, as a segfault would): after three crashes at
  it the restarted K-slack quarantines it to the DLQ, counts the restart, and ``/health`` says
  not ready while the crashes are recent.

A late event goes to ``<stream>.late`` with a reason that says how late against which released
event time, and the source's topic, partition and offset.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiokafka.structs import ConsumerRecord

from situflow.settings import KafkaSettings
from tests.integration.helpers import (
    assert_same_results,
    car_events,
    deduplicated_results,
    evaluates,
    keyed,
    metrics,
    produce,
    read_topic,
    record_count,
    run_cli,
    total,
    unique_prefix,
    wait_until,
    wait_until_evaluated,
)
from topics.catalog import (
    DLQ_OFFSET_HEADER,
    DLQ_PARTITION_HEADER,
    DLQ_REASON_HEADER,
    DLQ_TOPIC_HEADER,
    StreamSpec,
    stream_topics,
)
from workers.failures import (
    ERROR_CLASS_HEADER,
    ERROR_MESSAGE_HEADER,
    ERROR_QUERY_HEADER,
    TEST_CRASH_ENV,
    TEST_RAISE_ENV,
)
from workers.up import REPO_ROOT, Pipeline

pytestmark = pytest.mark.integration

QUERY = REPO_ROOT / "situflow/examples/aggressive_drivers.tps"
EVENTS, CARS, SEED, SLACK = 10_000, 100, 9, 5
RAISE, CRASH = "poison-raise", "poison-crash"
POISONED = 3


def headers_of(record: ConsumerRecord[bytes, bytes]) -> dict[str, str]:
    return {key: value.decode() for key, value in record.headers}


@dataclass
class Run:
    pipeline: Pipeline
    kafka: KafkaSettings
    events: list[dict[str, Any]]
    failing: str
    kslack_pid: int
    expected: list[dict[str, Any]]


@pytest.fixture(scope="module")
def run(kafka: KafkaSettings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    prefix = unique_prefix()
    tmp_path = tmp_path_factory.mktemp("poison")
    name, failing = f"{prefix}-aggressive", f"{prefix}-failing"
    events = car_events(EVENTS, CARS, SEED)
    expected = run_cli(QUERY, events, name, tmp_path)
    messages = [keyed(e, ("car_id",)) for e in events]
    for i in range(POISONED):  # valid events of cars of their own, on which K-slack raises
        poison = {**events[(i + 1) * len(events) // (POISONED + 1)], "car_id": 10_000 + i,
                  "note": RAISE}
        messages.insert((i + 1) * len(messages) // (POISONED + 1), keyed(poison, ("car_id",)))
    stream = StreamSpec(f"{prefix}.cars", partitions=2, key_fields=("car_id",))
    env = {TEST_RAISE_ENV: RAISE, TEST_CRASH_ENV: CRASH, "SITUFLOW_TEST_FAIL_QUERY": failing}
    with Pipeline(stream, QUERY, slack=SLACK, idle_timeout=2.0, kafka=kafka, name=name,
                  work_dir=tmp_path / "pipeline", extra_env=env) as pipeline:
        pipeline.submit(QUERY, failing)
        deriver = pipeline.services["deriver"]
        wait_until(lambda: evaluates(deriver, failing), 30,
                   "the deriver to evaluate the failing query")
        asyncio.run(produce(kafka, stream.name, messages))
        wait_until_evaluated(pipeline, len(events))
        # A replay sends events again, which the counts above include: wait for what the
        # replays bring too, the poison events in the DLQ and every result.
        dlq = stream_topics(stream)[3].name
        wait_until(lambda: asyncio.run(record_count(kafka, dlq)) >= POISONED, 120,
                   "the poison events in the DLQ")
        wait_until(lambda: len(deduplicated_results(kafka, pipeline.output_topic))
                   >= len(expected), 120, "every result")
        wait_until_evaluated(pipeline, len(events))
        yield Run(pipeline, kafka, events, failing, pipeline.services["kslack"].process.pid,
                  expected)


def test_a_message_whose_processing_raises_is_dead_lettered_with_the_exception(run: Run) -> None:
    raw, _, _, dlq = (spec.name for spec in stream_topics(run.pipeline.stream))
    dead = asyncio.run(read_topic(run.kafka, dlq))
    assert len(dead) == POISONED, "the poison events alone, once each"
    for record in dead:
        assert RAISE.encode() in record.value
        headers = headers_of(record)
        assert headers[ERROR_CLASS_HEADER] == "RuntimeError"
        assert TEST_RAISE_ENV in headers[ERROR_MESSAGE_HEADER]
        assert headers[DLQ_REASON_HEADER].startswith("processing failed: RuntimeError")
        assert headers[DLQ_TOPIC_HEADER] == raw
        assert {DLQ_PARTITION_HEADER, DLQ_OFFSET_HEADER} <= headers.keys()
    kslack = run.pipeline.services["kslack"]
    assert kslack.process.pid == run.kslack_pid and kslack.process.poll() is None
    assert total(metrics(kslack), "situflow_processing_errors_total") == POISONED


def test_a_failing_query_reports_to_its_error_topic_and_spares_the_input_dlq(run: Run) -> None:
    pipeline = run.pipeline
    assert_same_results(asyncio.run(read_topic(run.kafka, pipeline.output_topic)), run.expected)
    topic = f"errors.{run.failing}"

    def failures() -> float:
        return total(metrics(pipeline.services["deriver"]), "situflow_processing_errors_total",
                     query=run.failing)

    # The deriver may still be evaluating what K-slack's replays sent again: wait for a moment
    # at which every failure it counted is in the error topic, and no more.
    wait_until(lambda: 0 < failures() == asyncio.run(record_count(run.kafka, topic)), 60,
               "each failure counted, once, in the error topic")
    errors = asyncio.run(read_topic(run.kafka, topic))
    deriver = metrics(pipeline.services["deriver"])
    sources = [(h[DLQ_PARTITION_HEADER], h[DLQ_OFFSET_HEADER]) for h in map(headers_of, errors)]
    assert len(set(sources)) == len(sources), "once per message"
    for headers in map(headers_of, errors):
        assert headers[ERROR_QUERY_HEADER] == run.failing
        assert headers[ERROR_CLASS_HEADER] == "RuntimeError"
        assert headers[DLQ_TOPIC_HEADER] == stream_topics(pipeline.stream)[1].name
    assert total(deriver, "situflow_dlq_messages_total") == 0, "no input is dead-lettered"

    listing = situflow(run, "query", "list")
    assert listing.returncode == 0, listing.stderr
    lines = {line.split()[0]: line for line in listing.stdout.splitlines()}
    assert "failed at" in lines[run.failing] and "RuntimeError" in lines[run.failing]
    assert "failed" not in lines[pipeline.query_name]
    listed = {r["name"]: r for r in map(json.loads, situflow(run, "query", "list", "--json")
                                         .stdout.splitlines())}
    assert listed[run.failing]["status"]["state"] == "failed"
    assert "status" not in listed[pipeline.query_name]


def situflow(run: Run, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **run.pipeline.kafka.to_env(),
           "SITUFLOW_QUERIES_TOPIC": str(run.pipeline.registry_topic)}
    return subprocess.run([sys.executable, "-m", "situflow.cli", *args], env=env, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60, check=False)


def test_a_late_event_says_how_late_against_which_released_time(run: Run) -> None:
    raw, _, late_topic, _ = (spec.name for spec in stream_topics(run.pipeline.stream))
    late = {**run.events[0], "car_id": 20_000, "ts": 0}
    asyncio.run(produce(run.kafka, raw, [keyed(late, ("car_id",))]))
    kslack = run.pipeline.services["kslack"]
    wait_until(lambda: total(metrics(kslack), "situflow_late_events_total") >= 1, 30,
               "K-slack to send the late event")
    records = asyncio.run(read_topic(run.kafka, late_topic))
    assert len(records) == 1
    headers = headers_of(records[0])
    released = max(e["ts"] for e in run.events) - SLACK  # at least this much was released
    reason = headers[DLQ_REASON_HEADER]
    assert reason.startswith("event time 0 is ") and reason.endswith(f"(slack {SLACK})"), reason
    against = int(reason.split("released time ")[1].split()[0])
    assert against >= released - 1 and f"is {against} before" in reason
    assert headers[DLQ_TOPIC_HEADER] == raw and DLQ_OFFSET_HEADER in headers


def test_a_message_that_crashes_the_process_three_times_is_quarantined(run: Run) -> None:
    pipeline = run.pipeline
    raw, _, _, dlq = (spec.name for spec in stream_topics(pipeline.stream))
    crash = {**run.events[-1], "car_id": 30_000, "note": CRASH}
    asyncio.run(produce(run.kafka, raw, [keyed(crash, ("car_id",))]))
    for attempt in range(3):
        kslack = pipeline.services["kslack"]
        assert kslack.process.wait(timeout=90) != 0, f"crash {attempt + 1}"
        pipeline.start_service("kslack")
    kslack = pipeline.services["kslack"]
    wait_until(lambda: any(CRASH.encode() in r.value
                           for r in asyncio.run(read_topic(run.kafka, dlq))), 90,
               "the quarantined message in the DLQ")
    record = next(r for r in asyncio.run(read_topic(run.kafka, dlq)) if CRASH.encode() in r.value)
    headers = headers_of(record)
    assert headers[ERROR_CLASS_HEADER] == "Quarantined"
    assert "crashed the worker process 3 times" in headers[ERROR_MESSAGE_HEADER]
    assert kslack.process.poll() is None, "it goes on"
    assert total(metrics(kslack), "situflow_restarts_total") == 1, "this start found a crash"
    health = kslack.health()
    assert health["crash_looping"] and not health["ready"], health
    assert health["recent_crashes"] == 3


def test_lag_is_measured_on_applied_offsets(run: Run) -> None:
    for service in run.pipeline.services.values():
        values = metrics(service)
        lags = [v for k, v in values.items() if k.startswith("situflow_input_lag{")]
        assert lags and all(v >= 0 for v in lags), service.name


def test_query_submit_refuses_what_the_stream_does_not_allow(run: Run, tmp_path: Path) -> None:
    query = tmp_path / "per-lane.tps"
    query.write_text(QUERY.read_text().replace("PARTITION BY car_id", "PARTITION BY lane"))
    refused = situflow(run, "query", "submit", str(query), "--stream", run.pipeline.stream.name,
                       "--key-fields", "car_id")
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"{query}:1:1: query 'per-lane' must partition by the "
                                     "stream's key attributes car_id"), refused.stderr
    assert "per-lane" not in situflow(run, "query", "list").stdout
