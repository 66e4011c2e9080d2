"""The services end to end: K-slack, deriver and matcher over a real broker, against the
broker's own limit.

The aggressive-drivers query crosses three services (thesis §5.6.5): K-slack orders the cars
into ``<stream>.ordered``, the deriver derives situation batches into the situations topic, the
matcher matches them into ``matches.<query>``. Prints, measured in one run on one embedded
broker (generated cars):
- the raw limit: aiokafka producing the stream's Arrow messages to a topic and consuming them
  back (events/s for the same bytes, no processing);
- end-to-end events/s through the three services, with the stream produced as Arrow IPC
  batches and as JSON (one event per message), each as a ratio to the raw limit;
- each service's rate while it was busy (stream events over the time from the start until its
  input counter last moved), running together and then alone (each over the backlog the one
  before it left, with the services after it stopped), the latter being the figure the
  per-process target is about; with each service's checkpointed state;
- the processes' CPU time per stream event (user and system, ``/proc/<pid>/stat``): the three
  services together end to end on Arrow batches (issue 16's target: 1.2 µs), and each alone
  over its backlog from its second message on (the first loads the numba kernels). Each is
  printed as measured, less the CPU the bench's own looks at the services' ``/metrics``
  pages cost them (a few ms each, measured on the idle services; Prometheus looks every
  15-30 s, the bench every 50 ms), and with the part of it that the services spend idle in
  the same time (empty fetches, timers: per second, not per event);
- p50/p99 latency at a fixed offered load (Arrow batches every 20 ms at ``--rate`` events/s),
  from producing the event that *releases* a result's emitting event from K-slack (the car's
  next event, with K = 0) to a consumer reading the result from ``matches.<query>``. The wait
  for that next event is the K-slack contract, not processing, so it is left out; so are the
  results of the first ``--warmup`` seconds (numba kernels load once). With it, each
  service's message age when it is done with a message, mean and 99th percentile (from the
  message's Kafka timestamp: the time on the broker, in the consumer and in processing);
  and, as the baseline, one broker hop at the same load: the same messages produced and read
  back by a plain aiokafka consumer with the services' fetch wait;
- where the deriver's and the matcher's time goes: each step of their message path, timed in
  this process on ordered Arrow messages, in CPU ns per event.

All services, the broker and this process share the machine's cores, so the rates are lower
than one service alone on a core would reach.

    PYTHONPATH=. python bench/pipeline.py [--events 1000000] [--json-events 100000]
        [--cars 1000] [--rate 20000] [--seconds 45] [--warmup 5]
        [--latency-only | --throughput-only]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from situflow.codecs.arrow_events import HEADERS, decode_batch, encode_batch
from situflow.datagen.cars import car_columns
from situflow.operator import QueryOptions
from situflow.runtime import OrderedLayout, fresh_rows, ordered_events
from situflow.settings import KafkaSettings, ServiceSettings
from situflow.tpstream import compile
from situflow.tpstream.split.deriver import SituationDeriver
from situflow.tpstream.split.halves import fresh_steps
from situflow.tpstream.split.matcher import SituationMatcher
from situflow.tpstream.split.messages import SituationMessage
from topics.catalog import SEQ_FIELD, StreamSpec, stream_topics
from topics.create import create_topics
from workers.broker import EmbeddedBroker
from workers.up import REPO_ROOT, Pipeline, ServiceProcess

QUERY = REPO_ROOT / "situflow/examples/aggressive_drivers.tps"
SERVICES = ("kslack", "deriver", "matcher")
#: The input counter that shows each service at work.
WORK = {"kslack": "situflow_events_in_total", "deriver": "situflow_events_in_total",
        "matcher": "situflow_messages_in_total"}
Messages = list[tuple[int, bytes]]  # (partition, value)
#: The steps of each service's message path that :func:`message_path` times.
DERIVER_STEPS = ("decode", "fresh rows", "to events", "derive", "encode batch")
MATCHER_STEPS = ("decode batch", "fresh steps", "match")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu(service: ServiceProcess) -> float:
    """The service process's user and system CPU seconds so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{service.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def samples(service: ServiceProcess) -> list[Sample]:
    """The samples of the service's ``/metrics`` page (none while it starts)."""
    try:
        text = service.get("/metrics").decode()
    except OSError:
        return []
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def total(page: list[Sample], name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` that carry ``labels``."""
    return sum(s.value for s in page if s.name == name and labels.items() <= s.labels.items())


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
             services: tuple[str, ...] = SERVICES) -> Iterator[Pipeline]:
    stream = StreamSpec(f"bench-{label}", partitions=partitions, key_fields=("car_id",))
    with tempfile.TemporaryDirectory() as work, \
            Pipeline(stream, QUERY, slack=slack, idle_timeout=1.0, kafka=kafka,
                     work_dir=Path(work), name=f"bench-{label}",
                     service_names=services) as running:
        yield running


class Scrape:
    """One look at the running services: each one's ``/metrics`` page, fetched once, and its
    ``/health`` only when asked for the inputs it reads. A page costs the service a few ms of
    CPU, which the bench measures too, so each look is counted (:data:`LOOKS`) and its cost
    taken out of the CPU figures as well (:func:`look_cost`)."""

    def __init__(self, running: Pipeline) -> None:
        self.running = running
        self.pages = {name: samples(s) for name, s in running.services.items()}
        LOOKS.update(list(self.pages))
        self._inputs: dict[str, list[str]] = {}

    def total(self, service: str, name: str, **labels: str) -> float:
        return total(self.pages.get(service, []), name, **labels)

    def inputs(self, service: str) -> list[str]:
        if service not in self._inputs:
            self._inputs[service] = list(self.running.services[service].health()
                                         .get("inputs", {}))
        return self._inputs[service]


#: Seconds between two looks at the services while they work.
POLL = 0.05
#: Per service, the ``/metrics`` pages the bench has fetched.
LOOKS: Counter[str] = Counter()


def idle_cpu(running: Pipeline, seconds: float = 2.0) -> dict[str, float]:
    """Per service, its CPU seconds per second while it has no input and nobody looks:
    fetches that come back empty, timers, ticks."""
    before = {name: cpu(s) for name, s in running.services.items()}
    time.sleep(seconds)
    return {name: (cpu(s) - before[name]) / seconds for name, s in running.services.items()}


def look_cost(running: Pipeline, idle: dict[str, float], looks: int = 20) -> dict[str, float]:
    """Per service, the CPU seconds one look at its ``/metrics`` page costs it, above its
    ``idle`` CPU."""
    before = {name: cpu(s) for name, s in running.services.items()}
    started = time.perf_counter()
    for _ in range(looks):
        Scrape(running)
    elapsed = time.perf_counter() - started
    return {name: max(0.0, cpu(s) - before[name] - idle[name] * elapsed) / looks
            for name, s in running.services.items()}


@dataclass
class Busy:
    """A service over its backlog: events/s, CPU µs per event, that CPU less the bench's
    looks at its page, and of that what it spends idle in the same time (fetches that come
    back empty, timers: a cost per second, not per event)."""

    rate: float
    cpu_us: float
    less_looks_us: float
    idle_us: float


def busy_rate(running: Pipeline, name: str, progress: Callable[[Scrape], float],
              events: float, settled: Callable[[Scrape], bool] = lambda scrape: True,
              timeout: float = 600) -> Busy:
    """Service ``name`` over a backlog of ``events`` stream events: from the time its first
    message is done (its ``progress``, the part of the backlog it has taken in, moved past
    the first value seen above 0: the first message loads the numba kernels, once per
    process), counting only the rest, until the progress is 1 and ``settled``."""
    service = running.services[name]
    deadline = time.perf_counter() + timeout
    first = 0.0
    while (seen := progress(Scrape(running))) == 0 or first in (0.0, seen):
        if seen >= 1:
            raise ValueError(f"{name} took in its whole backlog at once: too few --events")
        first = first or seen
        if time.perf_counter() > deadline:
            raise TimeoutError("the service did not start")
        time.sleep(0.01)
    first = seen
    started, before, looks = time.perf_counter(), cpu(service), LOOKS[name]
    while True:
        scrape = Scrape(running)
        if progress(scrape) >= 1 and settled(scrape):
            break
        if time.perf_counter() > deadline:
            raise TimeoutError("the service did not finish its backlog")
        time.sleep(POLL)
    elapsed, spent, looks = time.perf_counter() - started, cpu(service) - before, \
        LOOKS[name] - looks
    measured = events * (1 - min(first, 1.0))
    idle = idle_cpu(running)
    cost = look_cost(running, idle)[name]
    return Busy(measured / elapsed, spent / measured * 1e6,
                (spent - looks * cost) / measured * 1e6, idle[name] * elapsed / measured * 1e6)


def one_at_a_time(kafka: KafkaSettings, messages: Messages, events: int,
                  partitions: int) -> dict[str, Busy]:
    """Each service over its backlog with the machine to itself: K-slack over the whole input
    while the others are not running yet, then the deriver over the backlog K-slack left it,
    then the matcher over the deriver's."""
    with pipeline(kafka, "alone", partitions, slack=5, services=("kslack",)) as running:
        asyncio.run(produce(kafka, stream_topics(running.stream)[0].name, messages, arrow=True))
        rates = {"kslack": busy_rate(running, "kslack",
                                     lambda scrape: released(scrape) / events, events)}
        ordered = Scrape(running).total("kslack", "situflow_events_out_total")
        running.start_service("deriver")
        rates["deriver"] = busy_rate(
            running, "deriver",
            lambda scrape: scrape.total("deriver", "situflow_events_in_total") / ordered,
            ordered, finished)
        situations = running.situations_topic
        batches = Scrape(running).total("deriver", "situflow_messages_out_total",
                                        topic=situations)
        running.start_service("matcher")
        rates["matcher"] = busy_rate(
            running, "matcher",
            lambda scrape: scrape.total("matcher", "situflow_messages_in_total",
                                        topic=situations) / batches,
            ordered, finished)
        return rates


def released(scrape: Scrape) -> float:
    """Events out of K-slack, or waiting in its buffers (the last K time units of each car
    wait there until the idle timeout, which is no measure of throughput)."""
    return scrape.total("kslack", "situflow_events_out_total") + \
        scrape.total("kslack", "situflow_kslack_buffered_events")


def finished(scrape: Scrape) -> bool:
    """Whether each running service after K-slack has evaluated every message sent to it."""
    for name in ("deriver", "matcher"):
        if name not in scrape.pages:
            continue
        if scrape.total(name, "situflow_processing_latency_seconds_count") < \
                scrape.total(name, "situflow_messages_in_total"):
            return False
        for topic in scrape.inputs(name):
            sent = sum(scrape.total(s, "situflow_messages_out_total", topic=topic)
                       for s in scrape.pages)
            if scrape.total(name, "situflow_messages_in_total", topic=topic) < sent:
                return False
    return True


def all_processed(scrape: Scrape, events: int) -> bool:
    """Every event reached the deriver or waits in a K-slack buffer, and every service after
    K-slack has evaluated all it was sent."""
    return scrape.total("deriver", "situflow_events_in_total") + \
        scrape.total("kslack", "situflow_kslack_buffered_events") >= events and finished(scrape)


@dataclass
class EndToEnd:
    """The services together over a stream: events/s, each one's events/s while busy and
    largest checkpoint (bytes, all its partitions), and the three processes' CPU µs per
    event: as measured, less the bench's looks at their pages, and of that what they spend
    idle in the same time (fetches that come back empty, timers: a cost per second, not per
    event)."""

    rate: float
    rates: dict[str, float]
    state: dict[str, float]
    cpu_us: float
    less_looks_us: float
    idle_us: float


def end_to_end(kafka: KafkaSettings, messages: Messages, events: int, arrow: bool,
               partitions: int) -> EndToEnd:
    """The three services over ``messages``, warm (:class:`EndToEnd`)."""
    with pipeline(kafka, "arrow" if arrow else "json", partitions, slack=5) as running:
        raw = stream_topics(running.stream)[0].name
        # Warm up on the first 5% (numba kernels load on the first batch); measure the rest.
        warmup = max(1, len(messages) // 20)
        asyncio.run(produce(kafka, raw, messages[:warmup], arrow))
        services = running.services
        while any(Scrape(running).total(name, WORK[name]) == 0 for name in SERVICES):
            time.sleep(0.1)
        time.sleep(2.0)
        idle = idle_cpu(running)
        cost = look_cost(running, idle)
        scrape = Scrape(running)
        last = {name: scrape.total(name, WORK[name]) for name in services}
        before = scrape.total("kslack", "situflow_events_in_total")
        started = time.perf_counter()
        busy_until: dict[str, float] = {}
        state = dict.fromkeys(services, 0.0)  # the largest checkpoint seen, all partitions
        cpu_before, looks = sum(cpu(s) for s in services.values()), LOOKS.copy()
        asyncio.run(produce(kafka, raw, messages[warmup:], arrow))
        while True:
            scrape = Scrape(running)
            for name in services:
                count = scrape.total(name, WORK[name])
                if count > last[name]:
                    busy_until[name], last[name] = time.perf_counter(), count
                state[name] = max(state[name], scrape.total(name, "situflow_state_bytes"))
            if all_processed(scrape, events):
                break
            time.sleep(POLL)
        elapsed = time.perf_counter() - started
        spent = sum(cpu(s) for s in services.values()) - cpu_before
        looked = sum((LOOKS[name] - looks[name]) * cost[name] for name in services)
        measured = events - before
        rates = {name: measured / (busy_until[name] - started) for name in busy_until}
        return EndToEnd(measured / elapsed, rates, state, spent / measured * 1e6,
                        (spent - looked) / measured * 1e6,
                        sum(idle.values()) * elapsed / measured * 1e6)


async def offer(kafka: KafkaSettings, topic: str, columns: dict[str, np.ndarray],
                partitions: int, rate: int, seconds: float,
                sent: Callable[[dict[str, np.ndarray], float], None]) -> float:
    """Produce ``columns`` to ``topic`` at ``rate`` events/s, as the Arrow messages of 20 ms
    of events each; ``sent(chunk, when)`` is told before each 20 ms. Returns the start time."""
    tick = 0.02
    per_tick = max(1, int(rate * tick))
    count = min(len(columns["ts"]), int(rate * seconds))
    async with producer(kafka) as client:
        started = time.perf_counter()
        for n, start in enumerate(range(0, count, per_tick)):
            chunk = {k: v[start:start + per_tick] for k, v in columns.items()}
            sent(chunk, time.perf_counter())
            for p, value in arrow_messages(chunk, partitions, per_tick):
                await client.send(topic, value, partition=p, headers=HEADERS)
            await asyncio.sleep(max(0.0, started + (n + 1) * tick - time.perf_counter()))
        await client.flush()
    return started


async def raw_hop(kafka: KafkaSettings, columns: dict[str, np.ndarray], partitions: int,
                  rate: int, seconds: float) -> list[float]:
    """Seconds from producing each message to a plain aiokafka consumer reading it, at the
    latency test's load: one broker hop without a service, of which a result takes four."""
    stream = StreamSpec("bench-hop", partitions=partitions)
    await create_topics(kafka, stream_topics(stream)[:1])
    sent_at: list[float] = []  # per 20 ms, which sends one message to each partition
    waits: list[float] = []

    fetch_wait = ServiceSettings.from_env().fetch_max_wait_ms

    async def read() -> None:
        async with AIOKafkaConsumer(stream.name, **kafka.client_kwargs(),
                                    auto_offset_reset="earliest",
                                    fetch_max_wait_ms=fetch_wait) as consumer:
            async for record in consumer:  # offset n of a partition: the n-th 20 ms
                waits.append(time.perf_counter() - sent_at[record.offset])

    def sent(chunk: dict[str, np.ndarray], when: float) -> None:
        sent_at.append(when)

    reader = asyncio.create_task(read())
    await asyncio.sleep(2.0)
    await offer(kafka, stream.name, columns, partitions, rate, seconds, sent)
    await asyncio.sleep(1.0)
    reader.cancel()
    return waits


async def latency(kafka: KafkaSettings, running: Pipeline, columns: dict[str, np.ndarray],
                  rate: int, seconds: float, warmup: float) -> list[float]:
    """Seconds from producing each result's releasing event to reading the result, for the
    events sent after the first ``warmup`` seconds (the services' first batches and matches
    load numba kernels: seconds once, which is no steady state)."""
    raw = stream_topics(running.stream)[0].name
    sent_at: dict[int, float] = {}  # event time -> when its first event was sent
    arrived: list[tuple[int, float]] = []  # (emitted_at, when read)

    async def read() -> None:
        async with AIOKafkaConsumer(running.output_topic, **kafka.client_kwargs(),
                                    auto_offset_reset="earliest",
                                    fetch_max_wait_ms=10) as consumer:
            async for record in consumer:
                arrived.append((json.loads(record.value)["emitted_at"], time.perf_counter()))

    def sent(chunk: dict[str, np.ndarray], when: float) -> None:
        for ts in np.unique(chunk["ts"]).tolist():
            sent_at.setdefault(ts, when)

    reader = asyncio.create_task(read())
    await asyncio.sleep(2.0)  # the reader joins before the first result
    started = await offer(kafka, raw, columns, running.stream.partitions, rate, seconds, sent)
    await asyncio.sleep(3.0)
    reader.cancel()
    # The releasing event of a result emitted at t is the car's next event, at t + 1 (K = 0).
    return [when - sent_at[t + 1] for t, when in arrived
            if t + 1 in sent_at and sent_at[t + 1] >= started + warmup]


def message_path(columns: dict[str, np.ndarray], partitions: int,
                 size: int) -> dict[str, float]:
    """CPU nanoseconds per event of each step of the deriver's and the matcher's message path, in
    this process on one partition's ordered Arrow messages (after two messages of warm-up,
    in which numba compiles): where a service's time goes, apart from Faust and the broker."""
    query = compile(QUERY.read_text(), QueryOptions(name="bench"))
    part = partitioned(columns, partitions)[0]
    part[SEQ_FIELD] = np.arange(len(part["ts"]), dtype=np.int64)
    messages = [encode_batch(b) for b in pa.table(part).to_batches(max_chunksize=size)]
    stream = OrderedLayout("ts", ("car_id",), SEQ_FIELD)
    deriver, matcher = SituationDeriver(query), SituationMatcher(query)
    positions: dict[str, list[int]] = {}
    steps = (*DERIVER_STEPS, *MATCHER_STEPS)
    spent = dict.fromkeys(steps, 0.0)
    events = 0
    for n, message in enumerate(messages):
        clock = [time.process_time()]
        batch = decode_batch(message, time_field="ts")
        clock.append(time.process_time())
        batch = fresh_rows(positions, batch, stream)
        clock.append(time.process_time())
        batch_events = ordered_events(batch, stream)
        clock.append(time.process_time())
        records = deriver.process(batch_events)
        clock.append(time.process_time())
        value = SituationMessage("bench", query.query_id, 0, records).encode()
        clock.append(time.process_time())
        situations = SituationMessage.decode(value)
        clock.append(time.process_time())
        fresh = fresh_steps(positions, "bench", situations.records)
        clock.append(time.process_time())
        matcher.process(fresh)
        clock.append(time.process_time())
        if n >= 2:
            events += len(batch_events)
            for step, start, end in zip(steps, clock, clock[1:], strict=False):
                spent[step] += end - start
    return {step: seconds / events * 1e9 for step, seconds in spent.items()}


def message_ages(service: ServiceProcess) -> tuple[float, float]:
    """The service's mean message age when it is done with a message, and the upper bound of
    the histogram bucket that holds the 99th percentile, in seconds."""
    page = samples(service)
    count = total(page, "situflow_processing_latency_seconds_count")
    buckets = sorted((float(s.labels["le"]), s.value) for s in page
                     if s.name == "situflow_processing_latency_seconds_bucket")
    p99 = next((le for le, below in buckets if below >= 0.99 * count), float("inf"))
    return total(page, "situflow_processing_latency_seconds_sum") / max(1.0, count), p99


def report_latency(kafka: KafkaSettings, columns: dict[str, np.ndarray],
                   args: argparse.Namespace) -> None:
    hop = asyncio.run(raw_hop(kafka, columns, args.partitions, args.rate, args.seconds / 3))
    p50, p99 = np.percentile(hop, [50, 99]) * 1000
    print(f"raw aiokafka hop at the same load ({len(hop)} messages): p50 {p50:.1f} ms, "
          f"p99 {p99:.1f} ms (a result takes four hops)")
    with pipeline(kafka, "latency", args.partitions, slack=0) as running:
        waits = asyncio.run(latency(kafka, running, columns, args.rate, args.seconds,
                                    args.warmup))
        ages = {name: message_ages(s) for name, s in running.services.items()}
    if waits:
        p50, p99 = np.percentile(waits, [50, 99]) * 1000
        print(f"latency at {args.rate:,} events/s ({len(waits)} results after a "
              f"{args.warmup:g} s warm-up): p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    else:
        print("latency: no result arrived")
    print("  message age when processed, mean (p99 at most): " +
          ", ".join(f"{name} {mean * 1000:.1f} ms ({p99 * 1000:g} ms)"
                    for name, (mean, p99) in ages.items()))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--json-events", type=int, default=100_000, help="0: skip the JSON run")
    p.add_argument("--cars", type=int, default=1_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--arrow-batch", type=int, default=5_000)
    p.add_argument("--rate", type=int, default=20_000)
    p.add_argument("--seconds", type=float, default=45.0)
    p.add_argument("--warmup", type=float, default=5.0)
    p.add_argument("--latency-only", action="store_true",
                   help="measure only the latency and the message path")
    p.add_argument("--throughput-only", action="store_true",
                   help="measure only the throughput and the message path")
    args = p.parse_args()
    print(f"load average at the start: {os.getloadavg()[0]:.2f}")
    columns = car_columns(args.events, args.cars, seed=7)
    arrow = arrow_messages(columns, args.partitions, args.arrow_batch)
    with EmbeddedBroker() as broker:
        kafka = KafkaSettings(broker.bootstrap_servers)
        if not args.latency_only:
            throughput(kafka, arrow, args)
        if not args.throughput_only:
            report_latency(kafka, columns, args)
    path = message_path(columns, args.partitions, args.arrow_batch)
    print("message path in process, ns/event: " +
          ", ".join(f"{step} {ns:.0f}" for step, ns in path.items()))
    print(f"  deriver {sum(path[step] for step in DERIVER_STEPS):.0f}, "
          f"matcher {sum(path[step] for step in MATCHER_STEPS):.0f}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


def throughput(kafka: KafkaSettings, arrow: Messages, args: argparse.Namespace) -> None:
    limit = asyncio.run(raw_limit(kafka, arrow, args.events, args.partitions))
    print(f"raw aiokafka produce->consume, Arrow messages  {limit:12,.0f} events/s")
    run = end_to_end(kafka, arrow, args.events, True, args.partitions)
    print(f"services end to end, Arrow batches            {run.rate:12,.0f} events/s "
          f"({run.rate / limit:.3f} of raw)")
    print(f"  CPU per event, kslack + deriver + matcher: {run.cpu_us:.2f} µs; "
          f"{run.less_looks_us:.2f} µs less the bench's looks at their pages, of which "
          f"{run.idle_us:.2f} µs is what they spend idle in the same time")
    for name, value in run.rates.items():
        print(f"  {name:<8} while busy                       {value:12,.0f} events/s, "
              f"checkpoints up to {run.state[name] / 1e3:,.0f} kB")
    for name, busy in one_at_a_time(kafka, arrow, args.events, args.partitions).items():
        print(f"  {name:<8} alone, Arrow batches             {busy.rate:12,.0f} events/s, "
              f"{busy.cpu_us:.2f} µs CPU per event, {busy.less_looks_us:.2f} less the "
              f"bench's looks, of which {busy.idle_us:.2f} idle")
    if not args.json_events:
        return
    json_columns = car_columns(args.json_events, args.cars, seed=7)
    json_run = end_to_end(kafka, json_messages(json_columns, args.partitions),
                          args.json_events, False, args.partitions)
    print(f"services end to end, JSON per event           {json_run.rate:12,.0f} events/s "
          f"({json_run.rate / limit:.3f} of raw)")
    for name, value in json_run.rates.items():
        print(f"  {name:<8} while busy                       {value:12,.0f} events/s")


if __name__ == "__main__":
    main()
