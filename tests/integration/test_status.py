"""``situflow status`` against a running pipeline (issue 15): every worker found through the
services topic and listed ready with its partitions, the registered query running, rates
above zero while events flow, and a worker killed with SIGKILL shown as unreachable (stale
once its announcement is old) with exit code 1, whose record ``--prune`` deletes; a clean
stop takes a worker off the topic.

The tests share one pipeline and run in file order: the last one kills a service.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from situflow.settings import ENV_BOOTSTRAP, KafkaSettings
from tests.integration.helpers import (
    car_events,
    keyed,
    metrics,
    produce,
    total,
    unique_prefix,
    wait_until,
)
from topics.announcements import read_announcements
from topics.catalog import StreamSpec, stream_topics
from workers.broker import free_port
from workers.up import REPO_ROOT, Pipeline

pytestmark = pytest.mark.integration

QUERY = REPO_ROOT / "situflow/examples/aggressive_drivers.tps"
SERVICES = ("kslack", "deriver", "matcher")
PARTITIONS = 4


@pytest.fixture(scope="module")
def pipeline(kafka: KafkaSettings, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[Pipeline]:
    prefix = unique_prefix()
    stream = StreamSpec(f"{prefix}.cars", partitions=PARTITIONS, key_fields=("car_id",))
    with Pipeline(stream, query_file=QUERY, name=f"{prefix}-aggressive", slack=5,
                  idle_timeout=1.0, kafka=kafka, service_names=SERVICES,
                  work_dir=tmp_path_factory.mktemp("status")) as pipeline:
        yield pipeline


def status(pipeline: Pipeline, *options: str) -> subprocess.CompletedProcess[str]:
    """``situflow status`` as an operator runs it, for the deployment of ``pipeline``."""
    assert pipeline.kafka is not None
    env = {**os.environ, **pipeline.kafka.to_env(),
           "SITUFLOW_SERVICES_TOPIC": str(pipeline.services_topic),
           "SITUFLOW_QUERIES_TOPIC": str(pipeline.registry_topic)}
    return subprocess.run([sys.executable, "-m", "situflow.cli", "status", *options], env=env,
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)


def report(pipeline: Pipeline, *options: str) -> tuple[int, dict[str, Any]]:
    done = status(pipeline, "--json", *options)
    return done.returncode, json.loads(done.stdout)


def test_an_unreachable_kafka_is_one_line_and_exit_1() -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    done = subprocess.run([sys.executable, "-m", "situflow.cli", "status", "--wait", "0.5"],
                          env={**os.environ, ENV_BOOTSTRAP: address}, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (
        1, "", f"situflow: cannot reach Kafka at {address} (retried for 0.5s); "
               f"is it running? {ENV_BOOTSTRAP} names the brokers\n")


def test_every_worker_is_listed_ready_with_its_partitions_and_the_query_runs(
    pipeline: Pipeline
) -> None:
    code, found = report(pipeline)
    assert (code, found["healthy"], found["problems"]) == (0, True, [])
    assert sorted(found["services"]) == sorted(SERVICES)
    raw, ordered = (spec.name for spec in stream_topics(pipeline.stream)[:2])
    every = list(range(PARTITIONS))
    inputs = {"kslack": raw, "deriver": ordered, "matcher": pipeline.situations_topic}
    for service, workers in found["services"].items():
        [worker] = workers
        process = pipeline.services[service]
        assert (worker["state"], worker["url"], worker["pid"], worker["stream"]) == (
            "ready", process.url, process.process.pid, pipeline.stream.name)
        assert worker["partitions"][inputs[service]] == every
    [query] = found["queries"]
    assert {key: query[key] for key in ("name", "language", "stream", "state")} == {
        "name": pipeline.query_name, "language": "tpstream", "stream": pipeline.stream.name,
        "state": "running"}


def test_rates_are_above_zero_while_events_flow(pipeline: Pipeline) -> None:
    assert pipeline.kafka is not None
    kafka, raw = pipeline.kafka, stream_topics(pipeline.stream)[0].name
    events = car_events(100_000, 200, seed=3)
    stop = threading.Event()

    def feed() -> None:  # in time order, until the status has been read
        for start in range(0, len(events), 500):
            if stop.is_set():
                return
            chunk = events[start:start + 500]
            asyncio.run(produce(kafka, raw, [keyed(e, ("car_id",)) for e in chunk]))

    producer = threading.Thread(target=feed)
    producer.start()
    try:
        wait_until(lambda: total(metrics(pipeline.services["deriver"]),
                                 "situflow_events_in_total") > 0, 30, "events to reach the deriver")
        code, found = report(pipeline, "--interval", "2")
    finally:
        stop.set()
        producer.join()
    assert code == 0, found["problems"]
    for service in ("kslack", "deriver"):
        [worker] = found["services"][service]
        assert worker["in_rate"] > 0 and worker["out_rate"] > 0, (service, worker)
    [matcher] = found["services"]["matcher"]
    assert matcher["in_rate"] > 0


def test_a_killed_worker_is_unreachable_then_stale_and_the_status_exits_1(
    pipeline: Pipeline
) -> None:
    assert pipeline.kafka is not None
    deriver = pipeline.services["deriver"]
    deriver.process.kill()
    deriver.process.wait()

    screen = status(pipeline)
    assert screen.returncode == 1
    lines = screen.stdout.splitlines()
    killed = [line.split() for line in lines if line.strip().startswith("deriver@")]
    assert killed[0][1] == "unreachable", screen.stdout
    assert lines[-1].startswith("unhealthy: deriver@") and "unreachable" in lines[-1]
    assert "kslack (stream" in screen.stdout and "queries: 1" in screen.stdout

    # Every announcement is older than 0 s: all are stale, only the killed worker is gone.
    code, found = report(pipeline, "--stale", "0", "--prune")
    [gone] = found["services"]["deriver"]
    assert (code, gone["state"], gone["answered"]) == (1, "stale", False)
    services_topic = str(pipeline.services_topic)
    left = asyncio.run(read_announcements(pipeline.kafka, services_topic))
    assert sorted(announcement.service for announcement in left.values()) == ["kslack", "matcher"]

    pipeline.stop()  # SIGTERM: the other workers take their announcements back
    assert asyncio.run(read_announcements(pipeline.kafka, services_topic)) == {}
