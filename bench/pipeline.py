"""The services end to end: K-slack and matcher over a real broker, against the broker's own limit.

Prints, measured in one run on one embedded broker (aggressive-drivers query, generated cars):
- the raw limit: aiokafka producing the stream's Arrow messages to a topic and consuming them
  back (events/s for the same bytes, no processing);
- end-to-end events/s through K-slack and the matcher, with the stream produced as Arrow IPC
  batches and as JSON (one event per message), each as a ratio to the raw limit;
- each service's own rate while it was busy (its ``situflow_events_in`` counter), running
  together and then alone (K-slack first with the matcher stopped, then the matcher over the
  backlog), the latter being the figure the per-process target is about;
- p50/p99 latency at a fixed offered load (Arrow batches every 20 ms at ``--rate`` events/s),
  from producing the event that *releases* a result's emitting event from K-slack (the car's
  next event, with K = 0) to a consumer reading the result from ``matches.<query>``. The wait
  for that next event is the K-slack contract, not processing, so it is left out.

All services, the broker and this process share the machine's cores, so the rates are lower
than one service alone on a core would reach.

    python bench/pipeline.py [--events 1000000] [--json-events 100000] [--cars 1000] [--rate 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from situflow.codecs.arrow_events import HEADERS, encode_batch
from situflow.datagen.cars import car_columns
from topics.catalog import StreamSpec, stream_topics
from topics.create import create_topics
from workers.broker import EmbeddedBroker
from workers.settings import KafkaSettings
from workers.up import REPO_ROOT, Pipeline, ServiceProcess

QUERY = REPO_ROOT / "situflow/examples/aggressive_drivers.tps"
Messages = list[tuple[int, bytes]]  # (partition, value)


def counter(service: ServiceProcess, name: str) -> float:
    text = service.get("/metrics").decode()
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == name)


def partitioned(columns: dict[str, np.ndarray], partitions: int) -> list[dict[str, np.ndarray]]:
    """The stream split by ``car_id % partitions`` (one car, one partition), in time order."""
    return [{k: v[columns["car_id"] % partitions == p] for k, v in columns.items()}
            for p in range(partitions)]


def arrow_messages(columns: dict[str, np.ndarray], partitions: int, size: int) -> Messages:
    return [(p, encode_batch(b))
            for p, part in enumerate(partitioned(columns, partitions))
            for b in pa.table(part).to_batches(max_chunksize=size)]


def json_messages(columns: dict[str, np.ndarray], partitions: int) -> Messages:
    out = []
    for p, part in enumerate(partitioned(columns, partitions)):
        names = list(part)
        for row in zip(*(part[n].tolist() for n in names), strict=True):
            out.append((p, json.dumps(dict(zip(names, row, strict=True))).encode()))
    return out


def producer(kafka: KafkaSettings) -> AIOKafkaProducer:
    return AIOKafkaProducer(**kafka.client_kwargs(), linger_ms=5, max_request_size=64 << 20,
                            max_batch_size=1 << 20)


async def produce(kafka: KafkaSettings, topic: str, messages: Messages, arrow: bool) -> None:
    headers = HEADERS if arrow else None
    async with producer(kafka) as client:
        sent = [await client.send(topic, v, partition=p, headers=headers) for p, v in messages]
        await asyncio.gather(*sent)


async def raw_limit(kafka: KafkaSettings, messages: Messages, events: int,
                    partitions: int) -> float:
    """Events/s of producing ``messages`` to a fresh topic and consuming them all back."""
    stream = StreamSpec("bench-raw", partitions=partitions)
    await create_topics(kafka, stream_topics(stream)[:1])
    started = time.perf_counter()
    await produce(kafka, stream.name, messages, arrow=True)
    async with AIOKafkaConsumer(stream.name, **kafka.client_kwargs(),
                                auto_offset_reset="earliest", fetch_max_bytes=64 << 20,
                                max_partition_fetch_bytes=64 << 20) as consumer:
        seen = 0
        while seen < len(messages):
            for records in (await consumer.getmany(timeout_ms=500)).values():
                seen += len(records)
    return events / (time.perf_counter() - started)


@contextmanager
def pipeline(kafka: KafkaSettings, label: str, partitions: int, slack: int,
             services: tuple[str, ...] = ("kslack", "matcher")) -> Iterator[Pipeline]:
    stream = StreamSpec(f"bench-{label}", partitions=partitions, key_fields=("car_id",))
    with tempfile.TemporaryDirectory() as work, \
            Pipeline(stream, QUERY, slack=slack, idle_timeout=1.0, kafka=kafka,
                     work_dir=Path(work), name=f"bench-{label}",
                     service_names=services) as running:
        yield running


def busy_rate(service: ServiceProcess, events: float, timeout: float = 600) -> float:
    """Events/s of ``service`` from its first consumed event until it has consumed ``events``."""
    deadline = time.perf_counter() + timeout
    first = None
    while (count := counter(service, "situflow_events_in_total")) < events:
        if first is None and count > 0:
            first = time.perf_counter(), count
        if time.perf_counter() > deadline:
            raise TimeoutError(f"{service.name} did not consume {events:.0f} events")
        time.sleep(0.02)
    if first is None:  # all at once, between two polls
        return float("inf")
    return (events - first[1]) / (time.perf_counter() - first[0])


def one_at_a_time(kafka: KafkaSettings, messages: Messages, events: int,
                  partitions: int) -> dict[str, float]:
    """Each service's events/s with the machine to itself: K-slack over the whole input while
    the matcher is not running yet, then the matcher over the backlog K-slack left it."""
    with pipeline(kafka, "alone", partitions, slack=5, services=("kslack",)) as running:
        kslack = running.services["kslack"]
        asyncio.run(produce(kafka, stream_topics(running.stream)[0].name, messages, arrow=True))
        rates = {"kslack": busy_rate(kslack, events)}
        released = counter(kslack, "situflow_events_out_total")
        running.start_service("matcher")
        running.wait_ready()
        rates["matcher"] = busy_rate(running.services["matcher"], released)
        return rates


def all_processed(running: Pipeline, events: int) -> bool:
    """Every event reached the matcher or waits in a K-slack buffer (the last K time units of
    each car wait there until the idle timeout, which is no measure of throughput)."""
    kslack, matcher = running.services["kslack"], running.services["matcher"]
    return counter(kslack, "situflow_events_in_total") >= events and \
        counter(matcher, "situflow_events_in_total") + \
        counter(kslack, "situflow_kslack_buffered_events") >= events


def end_to_end(kafka: KafkaSettings, messages: Messages, events: int, arrow: bool,
               partitions: int) -> tuple[float, dict[str, float]]:
    """End-to-end events/s, and each service's events/s while busy."""
    with pipeline(kafka, "arrow" if arrow else "json", partitions, slack=5) as running:
        raw = stream_topics(running.stream)[0].name
        # Warm up on the first 5% (numba kernels load on the first batch); measure the rest.
        warmup = max(1, len(messages) // 20)
        asyncio.run(produce(kafka, raw, messages[:warmup], arrow))
        matcher = running.services["matcher"]
        while counter(matcher, "situflow_events_in_total") == 0:
            time.sleep(0.1)
        time.sleep(2.0)
        services = running.services
        done = {name: counter(s, "situflow_events_in_total") for name, s in services.items()}
        started = time.perf_counter()
        busy_until: dict[str, float] = {}
        last = dict(done)
        asyncio.run(produce(kafka, raw, messages[warmup:], arrow))
        while not all_processed(running, events):
            for name, service in services.items():
                count = counter(service, "situflow_events_in_total")
                if count > last[name]:
                    busy_until[name], last[name] = time.perf_counter(), count
            time.sleep(0.05)
        elapsed = time.perf_counter() - started
        measured = events - done["matcher"]
        rates = {name: (last[name] - done[name]) / (busy_until[name] - started)
                 for name in services if name in busy_until}
        return measured / elapsed, rates


async def latency(kafka: KafkaSettings, running: Pipeline, columns: dict[str, np.ndarray],
                  rate: int, seconds: float) -> list[float]:
    """Seconds from producing each result's releasing event to reading the result."""
    raw = stream_topics(running.stream)[0].name
    partitions = running.stream.partitions
    tick = 0.02
    per_tick = max(1, int(rate * tick))
    count = min(len(columns["ts"]), int(rate * seconds))
    sent_at: dict[int, float] = {}  # event time -> when its first event was sent
    arrived: list[tuple[int, float]] = []  # (emitted_at, when read)

    async def read() -> None:
        async with AIOKafkaConsumer(running.output_topic, **kafka.client_kwargs(),
                                    auto_offset_reset="earliest",
                                    fetch_max_wait_ms=10) as consumer:
            async for record in consumer:
                arrived.append((json.loads(record.value)["emitted_at"], time.perf_counter()))

    reader = asyncio.create_task(read())
    await asyncio.sleep(2.0)  # the reader joins before the first result
    async with producer(kafka) as client:
        started = time.perf_counter()
        for n, start in enumerate(range(0, count, per_tick)):
            chunk = {k: v[start:start + per_tick] for k, v in columns.items()}
            now = time.perf_counter()
            for ts in np.unique(chunk["ts"]).tolist():
                sent_at.setdefault(ts, now)
            for p, value in arrow_messages(chunk, partitions, per_tick):
                await client.send(raw, value, partition=p, headers=HEADERS)
            await asyncio.sleep(max(0.0, started + (n + 1) * tick - time.perf_counter()))
        await client.flush()
    await asyncio.sleep(3.0)
    reader.cancel()
    # The releasing event of a result emitted at t is the car's next event, at t + 1 (K = 0).
    return [when - sent_at[t + 1] for t, when in arrived if t + 1 in sent_at]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--json-events", type=int, default=100_000)
    p.add_argument("--cars", type=int, default=1_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--arrow-batch", type=int, default=5_000)
    p.add_argument("--rate", type=int, default=20_000)
    p.add_argument("--seconds", type=float, default=15.0)
    args = p.parse_args()
    columns = car_columns(args.events, args.cars, seed=7)
    arrow = arrow_messages(columns, args.partitions, args.arrow_batch)
    with EmbeddedBroker() as broker:
        kafka = KafkaSettings(broker.bootstrap_servers)
        limit = asyncio.run(raw_limit(kafka, arrow, args.events, args.partitions))
        print(f"raw aiokafka produce->consume, Arrow messages  {limit:12,.0f} events/s")
        rate, rates = end_to_end(kafka, arrow, args.events, True, args.partitions)
        print(f"services end to end, Arrow batches            {rate:12,.0f} events/s "
              f"({rate / limit:.3f} of raw)")
        for name, value in rates.items():
            print(f"  {name:<8} while busy                       {value:12,.0f} events/s")
        for name, value in one_at_a_time(kafka, arrow, args.events, args.partitions).items():
            print(f"  {name:<8} alone, Arrow batches             {value:12,.0f} events/s")
        json_columns = car_columns(args.json_events, args.cars, seed=7)
        json_rate, json_rates = end_to_end(kafka, json_messages(json_columns, args.partitions),
                                           args.json_events, False, args.partitions)
        print(f"services end to end, JSON per event           {json_rate:12,.0f} events/s "
              f"({json_rate / limit:.3f} of raw)")
        for name, value in json_rates.items():
            print(f"  {name:<8} while busy                       {value:12,.0f} events/s")
        with pipeline(kafka, "latency", args.partitions, slack=0) as running:
            waits = asyncio.run(latency(kafka, running, columns, args.rate, args.seconds))
        if waits:
            p50, p99 = np.percentile(waits, [50, 99]) * 1000
            print(f"latency at {args.rate:,} events/s ({len(waits)} results): "
                  f"p50 {p50:.1f} ms, p99 {p99:.1f} ms")
        else:
            print("latency: no result arrived")


if __name__ == "__main__":
    main()
