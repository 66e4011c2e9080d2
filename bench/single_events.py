"""The services with one JSON event per Kafka message (issue 16, items 1 and 2), against a raw
aiokafka pipeline with the same hops, in one run on one embedded broker.

What real producers write is one JSON event per message. K-slack takes them in bundles
(``workers/bundles.py``: every record one fetch brought of a partition, as one message), and
writes Arrow batches on, so the services after it see few, large messages. Prints:

- **each service alone** (the machine's cores to itself, apart from the broker): K-slack over a
  backlog of the single-event messages produced before it starts, then the deriver over the
  backlog K-slack left, then the matcher over the deriver's; stream events (= input messages)
  per second, and each process's CPU time per event over its backlog;
- **end to end**: K-slack, deriver and matcher running while the messages are produced, from the
  first message produced to the last event evaluated, as messages/s;
- **raw**: the same messages through four topics and three relay processes (an aiokafka
  consumer and producer each, every message passed on as it came, the records of one fetch of
  a partition in one produce batch), the hops of the services' pipeline (input, ordered,
  situations, matches), from the first produced to the last read;
- **batched input** (``--arrow-events``): the three TPStream services end to end over Arrow
  batches, and their processes' CPU time over the stream's events (target ≤ 1.2 µs);
- with ``--latency``, :func:`bench.pipeline.report_latency` (p50/p99 end to end at a fixed
  load, each service's message age, one raw hop).

All of it shares the machine's 2 cores with the broker and the producer.

    PYTHONPATH=. python bench/single_events.py [--events 200000] [--arrow-events 1000000]
        [--latency]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from bench.pipeline import (
    QUERY,
    SERVICES,
    Messages,
    all_processed,
    arrow_messages,
    busy_rate,
    counter,
    finished,
    json_messages,
    produce,
    report_latency,
)
from situflow.datagen.cars import car_columns
from situflow.settings import KafkaSettings
from topics.catalog import QUERIES, StreamSpec, stream_topics
from topics.create import create_topics
from workers.broker import EmbeddedBroker
from workers.up import Pipeline, ServiceProcess

#: Topics of the raw pipeline: what the services' pipeline has (input, ordered, situations,
#: matches).
HOPS = 4
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def cpu(service: ServiceProcess) -> float:
    return cpu_seconds(service.process.pid)


@contextmanager
def services(kafka: KafkaSettings, label: str, partitions: int, names: tuple[str, ...],
             backlog: Messages = ()) -> Iterator[Pipeline]:
    """A pipeline of ``names`` over a fresh stream; ``backlog`` is produced before they start."""
    stream = StreamSpec(f"single-{label}", partitions=partitions, key_fields=("car_id",))
    with tempfile.TemporaryDirectory() as work:
        running = Pipeline(stream, QUERY, slack=5, idle_timeout=1.0, kafka=kafka,
                           work_dir=Path(work), name=f"single-{label}", service_names=names)
        asyncio.run(create_topics(kafka, [spec for spec in running.catalog.topics()
                                          if spec.name != QUERIES]))
        if backlog:
            asyncio.run(produce(kafka, stream.name, list(backlog), arrow=False))
        with running:
            yield running


def alone(kafka: KafkaSettings, messages: Messages, events: int,
          partitions: int) -> dict[str, tuple[float, float]]:
    """Per service, events/s over its backlog and CPU µs per event (module doc)."""
    with services(kafka, "alone", partitions, ("kslack",), backlog=messages) as running:
        kslack = running.services["kslack"]
        out = {"kslack": busy(kslack, lambda: released(kslack) / events, events)}
        ordered = counter(kslack, "situflow_events_out_total")
        deriver = running.start_service("deriver")
        out["deriver"] = busy(deriver, lambda: counter(
            deriver, "situflow_events_in_total") / ordered, ordered, lambda: finished(running))
        batches = counter(deriver, "situflow_messages_out_total",
                          topic=str(running.situations_topic))
        matcher = running.start_service("matcher")
        out["matcher"] = busy(matcher, lambda: counter(
            matcher, "situflow_messages_in_total", topic=str(running.situations_topic)) /
            batches, ordered, lambda: finished(running))
    return out


def busy(service: ServiceProcess, progress: Callable[[], float], events: float,
         settled: Callable[[], bool] = lambda: True) -> tuple[float, float]:
    """:func:`bench.pipeline.busy_rate` of a service, and its CPU µs per event over the same
    part of its backlog."""
    while progress() == 0:
        time.sleep(0.005)
    first, before = progress(), cpu(service)
    rate = busy_rate(progress, events, settled)
    return rate, (cpu(service) - before) / (events * (1 - min(first, 1.0))) * 1e6


def released(kslack: ServiceProcess) -> float:
    """Events out of K-slack or waiting in its buffers (the last K time units of each car wait
    for the idle timeout, which is no measure of throughput)."""
    return counter(kslack, "situflow_events_out_total") + \
        counter(kslack, "situflow_kslack_buffered_events")


def end_to_end(kafka: KafkaSettings, messages: Messages, events: int, partitions: int,
               label: str, arrow: bool) -> tuple[float, float]:
    """Events/s from the first message produced to every event evaluated, and the three
    services' CPU µs per event over that time. The services are warm: they evaluated the
    first 5% before (numba kernels load once)."""
    with services(kafka, label, partitions, SERVICES) as running:
        raw = stream_topics(running.stream)[0].name
        warmup = max(1, len(messages) // 20)
        asyncio.run(produce(kafka, raw, messages[:warmup], arrow))
        pages = running.services
        while counter(pages["matcher"], "situflow_messages_in_total") == 0:
            time.sleep(0.1)
        time.sleep(2.0)
        warm = counter(pages["kslack"], "situflow_events_in_total")
        before = sum(cpu(s) for s in pages.values())
        started = time.perf_counter()
        asyncio.run(produce(kafka, raw, messages[warmup:], arrow))
        while not all_processed(running, events):
            time.sleep(0.02)
        elapsed = time.perf_counter() - started
        spent = sum(cpu(s) for s in pages.values()) - before
        measured = events - warm
        return measured / elapsed, spent / measured * 1e6


RELAY = """
import asyncio, sys
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

async def main(bootstrap, source, target, count, fetch_wait):
    async with AIOKafkaConsumer(source, bootstrap_servers=bootstrap, group_id=target,
                                auto_offset_reset="earliest", fetch_max_wait_ms=fetch_wait) \\
            as consumer, AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5,
                                          max_batch_size=1 << 20) as producer:
        seen = 0
        while seen < count:
            for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                batch = producer.create_batch()
                for record in records:
                    if batch.append(key=None, value=record.value, timestamp=None) is None:
                        await producer.send_batch(batch, target, partition=tp.partition)
                        batch = producer.create_batch()
                        batch.append(key=None, value=record.value, timestamp=None)
                await producer.send_batch(batch, target, partition=tp.partition)
                seen += len(records)
        await producer.flush()

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])))
"""


def raw_pipeline(kafka: KafkaSettings, messages: Messages, partitions: int) -> float:
    """Messages/s through :data:`HOPS` topics with a relay process between each two (module
    doc), from the first produced to the last read from the last topic."""
    topics = [StreamSpec(f"single-raw-{hop}", partitions=partitions) for hop in range(HOPS)]
    asyncio.run(create_topics(kafka, [stream_topics(t)[0] for t in topics]))
    relays = [subprocess.Popen([sys.executable, "-c", RELAY, kafka.bootstrap_servers,
                                source.name, target.name, str(len(messages)), "20"])
              for source, target in pairwise(topics)]
    try:
        return asyncio.run(_through(kafka, messages, topics[0].name, topics[-1].name))
    finally:
        for relay in relays:
            relay.kill()
            relay.wait()


async def _through(kafka: KafkaSettings, messages: Messages, first: str, last: str) -> float:
    async with AIOKafkaConsumer(last, **kafka.client_kwargs(), auto_offset_reset="earliest",
                                fetch_max_wait_ms=20) as consumer:
        await asyncio.sleep(3.0)  # the relays join their topics
        started = time.perf_counter()
        async with AIOKafkaProducer(**kafka.client_kwargs(), linger_ms=5) as producer:
            sent = [await producer.send(first, value, partition=p) for p, value in messages]
            await asyncio.gather(*sent)
        seen = 0
        while seen < len(messages):
            for records in (await consumer.getmany(timeout_ms=500)).values():
                seen += len(records)
        return len(messages) / (time.perf_counter() - started)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--arrow-events", type=int, default=1_000_000,
                   help="events of the batched-input measure (0: skip it)")
    p.add_argument("--cars", type=int, default=1_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--latency", action="store_true")
    p.add_argument("--rate", type=int, default=20_000)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--warmup", type=float, default=5.0)
    args = p.parse_args()
    messages = json_messages(car_columns(args.events, args.cars, seed=7), args.partitions)
    with EmbeddedBroker() as broker:
        kafka = KafkaSettings(broker.bootstrap_servers)
        print(f"load average at the start: {os.getloadavg()[0]:.2f}")
        for name, (rate, us) in alone(kafka, messages, args.events, args.partitions).items():
            print(f"{name:<8} alone, one event per message  {rate:10,.0f} messages/s, "
                  f"{us:6.2f} µs CPU per event")
        raw = raw_pipeline(kafka, messages, args.partitions)
        print(f"raw aiokafka, {HOPS} topics and {HOPS - 1} relays    {raw:10,.0f} messages/s")
        rate, us = end_to_end(kafka, messages, args.events, args.partitions, "json", False)
        print(f"services end to end, one per message {rate:10,.0f} messages/s "
              f"({rate / raw:.2f} of raw), {us:.2f} µs CPU per event")
        if args.arrow_events:
            columns = car_columns(args.arrow_events, args.cars, seed=7)
            arrow = arrow_messages(columns, args.partitions, 5_000)
            rate, us = end_to_end(kafka, arrow, args.arrow_events, args.partitions, "arrow",
                                  True)
            print(f"services end to end, Arrow batches   {rate:10,.0f} events/s, "
                  f"{us:.2f} µs CPU per event (kslack + deriver + matcher)")
        if args.latency:
            report_latency(kafka, car_columns(max(args.events, args.rate * 60), args.cars,
                                              seed=7), args)
        print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
