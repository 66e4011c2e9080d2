"""``situflow demo``: the aggressive-drivers query through the services, over Kafka topics.

Without ``KAFKA_BOOTSTRAP_SERVERS`` it runs the embedded default: a local broker, the topics and
every service as processes (:class:`workers.up.Pipeline`): K-slack, the deriver, the matcher
(which matches the deriver's situations) and trends. With it, it uses the pipeline that
``situflow up`` runs on that Kafka. Either way it registers the aggressive-drivers query,
produces a generated car stream to ``cars`` (JSON, one event per message, each event delayed by
up to K ticks so that K-slack has work to do), prints the matches as it reads them from
``matches.aggressive_drivers``, and checks them against the same query evaluated in process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any

import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from situflow.datagen.cars import car_columns
from situflow.events import EventBatch
from situflow.languages import compile_query
from situflow.operator import QueryOptions
from situflow.settings import ENV_BOOTSTRAP, KafkaSettings
from topics.catalog import QUERIES, SITUATIONS, StreamSpec
from topics.catalog import SERVICES as SERVICES_TOPIC
from topics.registry import submit
from workers.up import EVALUATING, REPO_ROOT, Pipeline

QUERY = REPO_ROOT / "situflow/examples/aggressive_drivers.tps"
NAME = "aggressive_drivers"
STREAM = StreamSpec("cars", partitions=4, key_fields=("car_id",))
SERVICES = ("kslack", *EVALUATING)


def demo(args: argparse.Namespace) -> int:
    events = generated_events(args.events, args.cars, args.slack)
    expected = in_process(events)
    print(QUERY.read_text(), file=sys.stderr)
    if os.environ.get(ENV_BOOTSTRAP):
        kafka = KafkaSettings.from_env()
        asyncio.run(submit(kafka, QUERY.read_text(), name=NAME, source_path=str(QUERY)))
        return feed_and_show(kafka, events, expected, args.timeout)
    print("starting a local broker and the services ...", file=sys.stderr)
    started = time.perf_counter()
    with Pipeline(STREAM, QUERY, slack=args.slack, idle_timeout=1.0, name=NAME,
                  registry_topic=QUERIES, situations_topic=SITUATIONS,
                  services_topic=SERVICES_TOPIC,
                  service_names=SERVICES) as pipeline:
        assert pipeline.kafka is not None
        print(f"ready in {time.perf_counter() - started:.0f} s: broker "
              f"{pipeline.kafka.bootstrap_servers}, services "
              + ", ".join(f"{s.name} {s.url}/metrics" for s in pipeline.services.values()),
              file=sys.stderr)
        return feed_and_show(pipeline.kafka, events, expected, args.timeout)


def generated_events(count: int, cars: int, slack: int) -> list[dict[str, Any]]:
    """The car stream in *arrival* order: each event delayed by 0..K ticks. Times are seconds
    from now on and the cars are new ones, so that a second demo on the same pipeline is not
    late for K-slack."""
    columns = car_columns(count, cars, seed=9)
    now = int(time.time())
    columns["ts"] = columns["ts"] + now
    columns["car_id"] = columns["car_id"] + now % 1_000_000 * cars
    names = list(columns)
    events = [dict(zip(names, row, strict=True))
              for row in zip(*(columns[n].tolist() for n in names), strict=True)]
    jitter = np.random.default_rng(9).integers(0, slack + 1, len(events))
    return [events[i] for i in sorted(range(len(events)),
                                      key=lambda i: (events[i]["ts"] + jitter[i], i))]


def in_process(events: list[dict[str, Any]]) -> set[str]:
    """Result ids of the query on the events in time order, as ``situflow run`` finds them."""
    ordered = sorted(events, key=lambda e: e["ts"])
    operator = compile_query(QUERY.read_text(), QueryOptions(name=NAME)).operator()
    results = [*operator.process(EventBatch.from_records(ordered)), *operator.finish()]
    return {r.result_id for r in results}


def feed_and_show(kafka: KafkaSettings, events: list[dict[str, Any]], expected: set[str],
                  timeout: float) -> int:
    found = asyncio.run(produce_and_read(kafka, events, expected, timeout))
    missing = expected - found
    if missing:
        print(f"{len(found)} matches read, {len(missing)} of the in-process run's missing after "
              f"{timeout:.0f} s", file=sys.stderr)
        return 1
    extra = found - expected
    print(f"{len(found)} aggressive drivers found in {len(events):,} events, read from "
          f"matches.{NAME}" + ("" if extra else ", the same as evaluated in process")
          + (f" ({len(extra)} not in the in-process run)" if extra else ""), file=sys.stderr)
    return 1 if extra else 0


async def produce_and_read(kafka: KafkaSettings, events: list[dict[str, Any]],
                           expected: set[str], timeout: float) -> set[str]:
    found: set[str] = set()
    async with AIOKafkaConsumer(f"matches.{NAME}", **kafka.client_kwargs(),
                                auto_offset_reset="latest", fetch_max_wait_ms=50) as consumer:
        await consumer.getmany(timeout_ms=100)  # joins at the end: only this run's matches
        async with AIOKafkaProducer(**kafka.client_kwargs(), linger_ms=5) as producer:
            sent = [await producer.send(STREAM.name, json.dumps(e).encode(),
                                        key=json.dumps([e["car_id"]]).encode())
                    for e in events]
            await asyncio.gather(*sent)
        print(f"produced {len(events):,} events to {STREAM.name!r}; matches:", file=sys.stderr)
        deadline = time.monotonic() + timeout
        while not expected <= found and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for record in records:
                    result = json.loads(record.value)
                    if result["id"] not in found:
                        found.add(result.pop("id"))
                        print(json.dumps(result), flush=True)
    return found
