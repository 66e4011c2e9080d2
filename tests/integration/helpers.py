"""What the end-to-end tests share: data, the ``situflow run`` oracle, producing to and reading
topics of the real broker, the services' ``/metrics`` pages and bounded waits."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.structs import ConsumerRecord
from prometheus_client.parser import text_string_to_metric_families

from situflow.datagen.cars import car_columns
from situflow.results import result_id
from situflow.settings import KafkaSettings
from workers.evaluation import RESULT_ID_HEADER
from workers.up import REPO_ROOT, Pipeline, ServiceProcess

Headers = list[tuple[str, bytes]]
#: A producer's message: ``(key, value)`` or ``(key, value, headers)``; a None value is a
#: tombstone.
Message = tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, Headers | None]
#: Larger than the JSON codec's 1 MiB limit, so that oversized events reach the services.
MAX_REQUEST_BYTES = 8 << 20  # a 5 MB message of test_dirty_stream.py fits
#: The first car id of :func:`barrier_cars` (the generated cars are numbered from 0).
BARRIER_CARS_FROM = 1_000_000
#: Ticks from the last event to the barrier's match: more than every window of the tests' queries.
BARRIER_GAP = 1_000
#: How the tests read topics: as consumers of services with transactions must (README).
ISOLATION_LEVEL = "read_committed" if os.environ.get("SITUFLOW_PROCESSING_GUARANTEE") == \
    "exactly_once" else "read_uncommitted"


def unique_prefix() -> str:
    """A topic prefix no other test run uses (conftest's ``topic_prefix``, for fixtures that
    outlive one test)."""
    return f"it-{uuid.uuid4().hex[:10]}"


@dataclass
class Produced:
    """A test module's pipeline, and the events and messages produced to its input topic."""

    pipeline: Pipeline
    kafka: KafkaSettings
    events: list[dict[str, Any]]
    messages: list[Message]


def car_events(events: int, cars: int, seed: int) -> list[dict[str, Any]]:
    """The generated car stream (one reading per car and second), in time order."""
    columns = car_columns(events, cars, seed)
    names = list(columns)
    return [dict(zip(names, row, strict=True))
            for row in zip(*(columns[n].tolist() for n in names), strict=True)]


def arrival_order(events: list[dict[str, Any]], slack: int, seed: int) -> list[dict[str, Any]]:
    """Each event delayed by 0..K ticks: no event arrives more than K behind the latest time
    seen before it, so K-slack restores the exact order of every key (event times are unique
    per key)."""
    jitter = np.random.default_rng(seed).integers(0, slack + 1, len(events))
    order = sorted(range(len(events)), key=lambda i: (events[i]["ts"] + jitter[i], i))
    return [events[i] for i in order]


def in_blocks(events: Sequence[dict[str, Any]], span: int) -> list[list[dict[str, Any]]]:
    """``events`` (in time order) cut into blocks of ``span`` ticks. Each block is sent on its
    own, its events jittered within it: no event of a block is older than one of an earlier
    block, so K-slack's idle flush in a pause between two blocks makes no event late. (A pause
    inside the jitter would: ``situflow run`` over every event then expects results that
    neither the services nor the archive can give.)"""
    blocks: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        blocks[event["ts"] // span].append(event)
    return [block for _, block in sorted(blocks.items())]


def barrier_cars(partitions: int) -> list[int]:
    """One car per input partition, none of the generated ones: the car that the producer's
    default partitioner puts first into each partition when keyed by ``car_id``."""
    every = list(range(partitions))
    first: dict[int, int] = {}
    car = BARRIER_CARS_FROM
    while len(first) < partitions:
        first.setdefault(DefaultPartitioner()(json.dumps([car]).encode(), every, every), car)
        car += 1
    return [first[p] for p in every]


def barrier(events: list[dict[str, Any]], cars: Sequence[int]) -> list[dict[str, Any]]:
    """Events that end a test's stream, in time order, after ``events``: each car in ``cars``
    drives one aggressive-drivers match and one match of test_unpartitioned.py's queries, then
    idles past every window. Once the services sent the results of the barrier (in
    ``situflow run``'s results on ``events + barrier(...)``), they have evaluated every event
    before it in every partition, so any result still missing is missing for real and any extra
    one would have come already: no waiting "for a wrong result to show up"."""
    start = events[-1]["ts"] + BARRIER_GAP
    ticks = [-BARRIER_GAP // 2, *range(26), *range(30, 420, 30)]
    return [{"ts": start + t, "car_id": car, "speed": barrier_speed(t), "accel": barrier_accel(t)}
            for t in ticks for car in cars]


def barrier_speed(tick: int) -> float:
    """Fast, then faster, then slow; neither fast nor slow (50) before and after."""
    return 80.0 if 4 <= tick <= 12 else 60.0 if 0 <= tick <= 20 else 40.0 if 21 <= tick <= 25 \
        else 50.0


def barrier_accel(tick: int) -> float:
    """Hard acceleration, later hard braking (the aggressive-drivers conditions A and C)."""
    return 9.0 if 0 <= tick <= 6 else -10.0 if 10 <= tick <= 14 else 0.0


def oracle_with_barrier(query: Path, events: list[dict[str, Any]], cars: Sequence[int],
                        name: str, tmp_path: Path
                        ) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """:func:`oracle` on ``events`` and their :func:`barrier`, and the barrier's events; each
    barrier car gives one match, or waiting for the results would not wait for the barrier."""
    ending = barrier(events, cars)
    expected = oracle(query, events + ending, name, tmp_path)
    assert sum(in_barrier(r, events) for r in expected.values()) == len(cars)
    return expected, ending


def in_barrier(result: dict[str, Any], events: list[dict[str, Any]]) -> bool:
    """Whether a result line of ``situflow run`` matches only barrier events (after ``events``)."""
    return min(binding["ts"] for binding in result["bindings"].values()) > events[-1]["ts"]


def keyed(event: dict[str, Any], key_fields: Sequence[str]) -> tuple[bytes, bytes]:
    """A producer's JSON message: keyed by the partition attributes, as the catalog asks."""
    return json.dumps([event[f] for f in key_fields]).encode(), json.dumps(event).encode()


def run_cli(query: Path, events: list[dict[str, Any]], name: str,
            tmp_path: Path, *options: str) -> list[dict[str, Any]]:
    """``situflow run`` (the CLI contract) on ``events``, in file order: its result lines."""
    source, output = tmp_path / f"{name}-input.jsonl", tmp_path / f"{name}-expected.jsonl"
    source.write_text("".join(json.dumps(e) + "\n" for e in events))
    subprocess.run([sys.executable, "-m", "situflow.cli", "run", str(query), "--input",
                    str(source), "--output", str(output), "--name", name, *options],
                   check=True, cwd=REPO_ROOT, timeout=300)
    return [json.loads(line) for line in output.read_text().splitlines()]


def id_of(result: dict[str, Any]) -> str:
    """The deterministic id of a result line of ``situflow run`` (the services send it along)."""
    if "bindings" in result:
        return result_id(result["query"], result["key"], result["bindings"])
    return result_id(result["query"], result["group"],
                     [result["window_start"], result["window_end"]])


def oracle(query: Path, events: list[dict[str, Any]], name: str,
           tmp_path: Path) -> dict[str, dict[str, Any]]:
    """``situflow run`` on ``events``, keyed by result id."""
    return {id_of(r): r for r in run_cli(query, events, name, tmp_path)}


async def produce(kafka: KafkaSettings, topic: str, messages: Sequence[Message]) -> None:
    async with AIOKafkaProducer(**kafka.client_kwargs(), linger_ms=5,
                                max_request_size=MAX_REQUEST_BYTES) as producer:
        sent = []
        for key, value, *headers in messages:
            sent.append(await producer.send(topic, value, key=key,
                                            headers=headers[0] if headers else None))
        await asyncio.gather(*sent)


async def produce_at_once(kafka: KafkaSettings, topic: str,
                          messages: Sequence[tuple[bytes, bytes]]) -> None:
    """``messages`` (keyed, without headers) to the partitions :func:`produce` would send them
    to, each partition's as one record batch, which a consumer fetches whole. Sent one by one,
    a jittered stream turns partly late when this process pauses for longer than K-slack's idle
    timeout between two sends (a loaded machine): K-slack, caught up, flushes the partition,
    and the events after the pause that are older than the ones before it are late."""
    async with AIOKafkaProducer(**kafka.client_kwargs(), max_batch_size=MAX_REQUEST_BYTES,
                                max_request_size=MAX_REQUEST_BYTES) as producer:
        partitions = sorted(await producer.partitions_for(topic))
        choose = DefaultPartitioner()
        batches: dict[int, Any] = {}
        for key, value in messages:
            batch = batches.setdefault(choose(key, partitions, partitions),
                                       producer.create_batch())
            assert batch.append(key=key, value=value, timestamp=None) is not None, \
                "a partition's messages should fit one record batch"
        sent = [await producer.send_batch(batch, topic, partition=partition)
                for partition, batch in batches.items()]
        await asyncio.gather(*sent)


async def read_topic(kafka: KafkaSettings, topic: str) -> list[ConsumerRecord[bytes, bytes]]:
    """Every record now in ``topic`` (the services write one record per batch, so the
    broker's end offsets are exact; see test_broker.py)."""
    async with AIOKafkaConsumer(**kafka.client_kwargs(), enable_auto_commit=False,
                                max_partition_fetch_bytes=MAX_REQUEST_BYTES,
                                isolation_level=ISOLATION_LEVEL) as consumer:
        await consumer.topics()  # loads the metadata partitions_for_topic reads
        partitions = [TopicPartition(topic, p)
                      for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        records: list[ConsumerRecord[bytes, bytes]] = []
        async with asyncio.timeout(30):
            while any([await consumer.position(tp) < ends[tp] for tp in partitions]):
                for batch in (await consumer.getmany(timeout_ms=500)).values():
                    records.extend(batch)
        return records


def deduplicated_results(kafka: KafkaSettings, topic: str) -> dict[str, dict[str, Any]]:
    """The results in ``topic`` by id, as an at-least-once consumer keeps them."""
    results = [json.loads(r.value) for r in asyncio.run(read_topic(kafka, topic))]
    return {v.pop("id"): v for v in results}


def evaluates(service: ServiceProcess, query: str) -> bool:
    """Whether ``service`` says (on its health page) that it evaluates ``query``."""
    return query in service.health().get("queries", ())


def metric_families(service: ServiceProcess) -> set[str]:
    return {family.name for family in
            text_string_to_metric_families(service.get("/metrics").decode())}


def metrics(service: ServiceProcess) -> dict[str, float]:
    """``name{label=value,...}`` → value of every sample on the service's ``/metrics`` page."""
    text = service.get("/metrics").decode()
    return {
        sample.name + "{" + ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items())) + "}":
        sample.value
        for family in text_string_to_metric_families(text) for sample in family.samples
    }


def total(values: dict[str, float], name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` that carry ``labels``."""
    return sum(v for k, v in values.items()
               if k.split("{")[0] == name and labels.items() <= sample_labels(k).items())


def eventually(condition: Callable[[], Any], timeout: float) -> bool:
    """Whether ``condition()`` holds within ``timeout`` seconds (polled)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.25)
    return True


def wait_until(condition: Callable[[], Any], timeout: float, what: str) -> None:
    if not eventually(condition, timeout):
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")


async def record_count(kafka: KafkaSettings, topic: str) -> int:
    """How many records ``topic`` holds now (0 if it does not exist yet)."""
    async with AIOKafkaConsumer(**kafka.client_kwargs(), enable_auto_commit=False) as consumer:
        await consumer.topics()
        partitions = [TopicPartition(topic, p)
                      for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not partitions:
            return 0
        starts = await consumer.beginning_offsets(partitions)
        ends = await consumer.end_offsets(partitions)
        return sum(ends[tp] - starts[tp] for tp in partitions)


def wait_until_evaluated(pipeline: Pipeline, events: int, timeout: float = 120.0) -> None:
    """Until K-slack has released ``events`` events, every other service (all its workers
    together) has evaluated every message the services sent to its inputs (in pipeline order,
    so the matcher waits for the deriver's last situations), and every record a service counts
    as sent (output, dead letter) is in its topic."""
    kafka, kslack = pipeline.kafka, pipeline.services["kslack"]
    assert kafka is not None
    if not eventually(lambda: total(metrics(kslack), "situflow_events_out_total") >= events,
                      timeout):
        values = metrics(kslack)
        raise AssertionError(
            f"timed out after {timeout}s waiting for K-slack to release all {events} events: "
            f"it took in {total(values, 'situflow_events_in_total'):.0f}, released "
            f"{total(values, 'situflow_events_out_total'):.0f}, found "
            f"{total(values, 'situflow_late_events_total'):.0f} late and sent "
            f"{total(values, 'situflow_dlq_messages_total'):.0f} messages to its dead letters")
    for kind in dict.fromkeys(s.kind for s in pipeline.services.values() if s.kind != "kslack"):
        workers = [s for s in pipeline.services.values() if s.kind == kind]
        wait_until(lambda: caught_up(pipeline, workers), timeout,  # noqa: B023 (runs now)
                   f"{kind} to evaluate every message of its inputs")
    for name, service in pipeline.services.items():
        for sample, count in metrics(service).items():
            if sample.split("{")[0] in ("situflow_messages_out_total",
                                        "situflow_dlq_messages_total"):
                topic = sample_labels(sample)["topic"]
                wait_until(lambda: asyncio.run(record_count(kafka, topic)) >= count,  # noqa: B023
                           timeout, f"the {count:.0f} records {name} sent to reach {topic}")


def caught_up(pipeline: Pipeline, workers: Sequence[ServiceProcess]) -> bool:
    """Whether the ``workers`` of a service have together consumed every message the
    pipeline's services sent to its inputs, and evaluated every message they consumed (not
    while a service is too busy to answer a scrape)."""
    try:
        pages = {name: metrics(s) for name, s in pipeline.services.items()}
    except TimeoutError:
        return False
    own = [pages[worker.name] for worker in workers]
    topics = {topic for worker in workers for topic in worker.health().get("inputs", {})}
    for topic in topics:
        sent = sum(total(page, "situflow_messages_out_total", topic=topic)
                   for page in pages.values())
        if sum(total(page, "situflow_messages_in_total", topic=topic) for page in own) < sent:
            return False
    evaluated = sum(total(page, "situflow_processing_latency_seconds_count") for page in own)
    return evaluated >= sum(total(page, "situflow_messages_in_total") for page in own)


def sample_labels(sample: str) -> dict[str, str]:
    """The labels of a ``name{label=value,...}`` key of :func:`metrics`."""
    inner = sample[:-1].split("{", 1)[1]
    return dict(pair.split("=", 1) for pair in inner.split(",") if pair)


def canonical(result: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in result.items() if k != "id"}, sort_keys=True)


def assert_same_results(records: Sequence[ConsumerRecord[bytes, bytes]],
                        expected: Sequence[dict[str, Any]]) -> None:
    """The records of a result topic are ``expected`` (result lines of ``situflow run``): as a
    multiset, and after de-duplication by result id; each carries its own id, in its value and
    in the ``situflow.result.id`` header."""
    found = [json.loads(r.value) for r in records]
    for record, value in zip(records, found, strict=True):
        assert value["id"] == id_of(value) == dict(record.headers)[RESULT_ID_HEADER].decode()
    have, want = Counter(map(canonical, found)), Counter(map(canonical, expected))
    missing, extra = want - have, have - want
    assert not missing and not extra, (
        f"{missing.total()} of {want.total()} expected results missing, {extra.total()} "
        f"unexpected; first missing: {next(iter(missing), None)}; first unexpected: "
        f"{next(iter(extra), None)}")
    assert {v.pop("id"): v for v in found} == {id_of(r): r for r in expected}
