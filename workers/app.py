"""What every situflow Faust service shares: its settings from the environment, the Faust app
configured for the brokers we run on, and the Prometheus ``/metrics`` and ``/health`` pages.

The Faust settings encode measured broker behaviour (see :mod:`workers.broker`):

* ``processing_guarantee``: ``SITUFLOW_PROCESSING_GUARANTEE``, ``at_least_once`` by default
  (tansu has no transactions). After a crash a service may re-send some output; results carry
  a deterministic id so consumers drop duplicates, and the services skip input their state
  already holds (:mod:`workers.partitions`). ``exactly_once`` runs Faust's Kafka transactions,
  one per input partition number: whatever a service sends while handling a message or tick
  of partition ``p`` (output, dead letters, the checkpoint's changelog record) joins ``p``'s
  transaction, which each checkpoint of ``p`` commits with ``p``'s input offsets
  (:func:`_transactions_by_input`; Faust itself would pick the transaction of the partition a
  record goes *to*). A service started so checks first that the broker grants transactions
  and exits 1 with the reason if not (:func:`check_transactions`);
* ``producer_max_batch_size=1``: one record per produce batch, because tansu 0.6 answers
  ListOffsets(latest) wrongly after a multi-record batch, which makes changelog recovery abort
  with ``ConsistencyError``. ``recovery_consistency_check`` stays on: turning it off would
  silently lose table updates.
* ``stream_wait_empty=False``: services acknowledge messages only at checkpoints
  (:mod:`workers.partitions`), so a rebalance must not wait for every message to be
  acknowledged; unacknowledged ones are redone by the next owner from the last checkpoint;
* state values (one checkpoint per partition) may exceed Kafka's default 1 MB record limit:
  producer requests and the changelog topics allow :data:`MAX_STATE_BYTES`;
* a fetch waits at most ``SITUFLOW_FETCH_MAX_WAIT_MS`` (default 20 ms) for data: tansu answers
  a fetch over several partitions only after a large part of that wait even when one of them
  has data (measured: 0.55 s at 1.5 s, 2.3 s at 5 s, 5 ms at 50 ms), and Faust hard-codes 1.5 s,
  which put seconds of latency on every hop. Faust has no setting for it, so
  :func:`_short_fetch_wait` wraps the consumer's construction;
* short session, rebalance and heartbeat timeouts (10 s / 10 s / 1 s by default), so that the
  partitions of a killed worker move to a survivor quickly;
* the web server (metrics, health) binds to ``SITUFLOW_WEB_BIND`` (default ``127.0.0.1``;
  containers set ``0.0.0.0``) on ``SITUFLOW_WEB_PORT``.

Garbage collection: every full collection of CPython's cycle collector walks every tracked
object, most of which are the modules, Faust and the compiled numba kernels, alive for the whole
run. With about 120,000 of them it stopped a service for 60–170 ms every few seconds under load,
the largest part of the p99 latency (``bench/README.md``). So the objects alive at
:data:`GC_FREEZE_AT` seconds after the start (after the first messages compiled the kernels)
are moved to the collector's permanent generation (:func:`gc.freeze`); collections then take
15–33 ms. Frozen objects are still freed by reference counting; only a reference cycle among
the objects alive at those three moments would never be collected, a bounded amount.
``SITUFLOW_GC_FREEZE=0`` turns this off.

Environment of every service (besides the ``KAFKA_*`` connection of :mod:`workers.settings`):

=================================  ==========================================================
``SITUFLOW_STREAM``                input stream name (topic ``<stream>``); default ``events``
``SITUFLOW_TIME_FIELD``            event-time field; default ``ts``
``SITUFLOW_TIME_UNIT``             seconds per event-time tick (default 1; ``0.001`` for a
                                   stream of milliseconds): integer times are ticks, ISO-8601
                                   times are converted to them, and so are query durations
``SITUFLOW_KEY_FIELDS``            comma-separated partition attributes (e.g. ``car_id``)
``SITUFLOW_UNPARTITIONED``         ``1``: the stream has none (thesis §5.6.3, ``workers.kslack``)
``SITUFLOW_PARTITIONS``            partitions of the stream's topics; default 4
``SITUFLOW_DATA_DIR``              RocksDB and Faust data directory
``SITUFLOW_WEB_PORT``              port of ``/metrics`` and ``/health``; default 6066
``SITUFLOW_WEB_BIND``              address to bind; default ``127.0.0.1``
``SITUFLOW_SESSION_TIMEOUT``       consumer group session timeout in seconds; default 10
``SITUFLOW_GC_FREEZE``             ``0``: do not freeze long-lived objects (see above)
``SITUFLOW_PROCESSING_GUARANTEE``  ``at_least_once`` (default) or ``exactly_once`` (Kafka
                                   transactions; module doc)
``SITUFLOW_SITUATIONS_TOPIC``      situation batches from the deriver to the matcher; default
                                   ``situations`` (one such topic per stream: see
                                   :mod:`workers.matcher`)
``SITUFLOW_ON_ERROR``              ``continue`` (default) or ``fail``: what a processing error
                                   does (:mod:`workers.failures`)
``SITUFLOW_QUARANTINE_AFTER``      crashes of the process at one message before it goes to the
                                   DLQ, and within the crash window a crash loop; default 3
``SITUFLOW_CRASH_WINDOW``          seconds; default 300
``SITUFLOW_STALL_TIMEOUT``         seconds a partition's applied offset may stand still while
                                   input waits before ``/health`` says not ready; default 60
=================================  ==========================================================
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import ssl
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import faust
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError
from faust.transport.consumer import TransactionManager
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread
from faust.types import HeadersArg, RecordMetadata
from faust.web import Request, Response, View
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from topics.catalog import (
    DEFAULT_PARTITIONS,
    DLQ_OFFSET_HEADER,
    DLQ_PARTITION_HEADER,
    DLQ_REASON_HEADER,
    DLQ_TOPIC_HEADER,
    SITUATIONS,
    StreamSpec,
)
from workers.failures import CrashRecord, error_headers
from workers.settings import BrokerUnreachable, KafkaSettings, retry_unreachable

#: Prometheus' text format; aiohttp refuses a charset parameter in ``content_type``.
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4"
#: Seconds after the start at which the objects then alive are frozen (module doc).
GC_FREEZE_AT = (10.0, 60.0, 300.0)
FETCH_MAX_WAIT_MS = int(os.environ.get("SITUFLOW_FETCH_MAX_WAIT_MS", "20"))
#: Largest checkpoint (state of one partition) a changelog record may hold.
MAX_STATE_BYTES = 64 * 1024 * 1024
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
AT_LEAST_ONCE, EXACTLY_ONCE = "at_least_once", "exactly_once"
#: Seconds a broker may take to grant a transactional producer at start.
TRANSACTIONS_PROBE_TIMEOUT = 30.0


@dataclass(frozen=True)
class ServiceConfig:
    """One service's settings; :meth:`from_env` reads them (see the module doc)."""

    service: str
    stream: StreamSpec
    kafka: KafkaSettings
    data_dir: str
    web_port: int = 6066
    web_bind: str = "127.0.0.1"
    session_timeout: float = 10.0
    situations: str = SITUATIONS
    processing_guarantee: str = AT_LEAST_ONCE

    @classmethod
    def from_env(cls, service: str, env: Mapping[str, str] | None = None) -> ServiceConfig:
        env = os.environ if env is None else env
        keys = tuple(f.strip() for f in env.get("SITUFLOW_KEY_FIELDS", "").split(",") if f.strip())
        stream = StreamSpec(
            env.get("SITUFLOW_STREAM", "events"),
            time_field=env.get("SITUFLOW_TIME_FIELD", "ts"),
            partitions=int(env.get("SITUFLOW_PARTITIONS", DEFAULT_PARTITIONS)),
            key_fields=keys,
            unpartitioned=env.get("SITUFLOW_UNPARTITIONED") == "1",
            time_unit=float(env.get("SITUFLOW_TIME_UNIT", "1")),
        )
        return cls(
            service=service,
            stream=stream,
            kafka=KafkaSettings.from_env(env),
            data_dir=env.get("SITUFLOW_DATA_DIR", f"situflow-data/{service}"),
            web_port=int(env.get("SITUFLOW_WEB_PORT", 6066)),
            web_bind=env.get("SITUFLOW_WEB_BIND", "127.0.0.1"),
            session_timeout=float(env.get("SITUFLOW_SESSION_TIMEOUT", 10)),
            situations=env.get("SITUFLOW_SITUATIONS_TOPIC", SITUATIONS),
            processing_guarantee=_guarantee(env.get("SITUFLOW_PROCESSING_GUARANTEE",
                                                    AT_LEAST_ONCE)),
        )


def _guarantee(value: str) -> str:
    if value not in (AT_LEAST_ONCE, EXACTLY_ONCE):
        raise ValueError(f"SITUFLOW_PROCESSING_GUARANTEE={value!r}: use {AT_LEAST_ONCE} or "
                         f"{EXACTLY_ONCE}")
    return value


def make_app(app_id: str, config: ServiceConfig) -> faust.App:
    """A Faust app with RocksDB tables and the broker settings of the module doc."""
    app = faust.App(
        app_id,
        broker=[f"kafka://{server}" for server in config.kafka.bootstrap_servers.split(",")],
        broker_credentials=_credentials(config.kafka),
        store="rocksdb://",
        datadir=config.data_dir,
        version=1,
        topic_partitions=config.stream.partitions,
        topic_disable_leader=True,
        processing_guarantee=config.processing_guarantee,
        producer_max_batch_size=1,
        producer_max_request_size=MAX_STATE_BYTES,
        consumer_max_fetch_size=MAX_STATE_BYTES,
        stream_wait_empty=False,
        broker_session_timeout=config.session_timeout,
        broker_rebalance_timeout=config.session_timeout,
        broker_heartbeat_interval=1.0,
        consumer_auto_offset_reset="earliest",
        web_bind=config.web_bind,
        web_port=config.web_port,
        web_host=config.web_bind,
    )
    if os.environ.get("SITUFLOW_GC_FREEZE", "1") != "0":
        app.task(_freeze_long_lived)
    return app


async def _freeze_long_lived() -> None:
    """Move the objects alive :data:`GC_FREEZE_AT` seconds after the start out of the cycle
    collector's way (module doc)."""
    started = time.monotonic()
    for at in GC_FREEZE_AT:
        await asyncio.sleep(max(0.0, at - (time.monotonic() - started)))
        gc.freeze()


def _short_fetch_wait() -> None:
    """Make Faust's worker consumer wait at most ``FETCH_MAX_WAIT_MS`` per fetch (module doc)."""
    create = AIOKafkaConsumerThread._create_worker_consumer
    if getattr(create, "situflow_wrapped", False):
        return

    def create_worker_consumer(self: Any, transport: Any) -> Any:
        consumer = create(self, transport)
        consumer._fetch_max_wait_ms = FETCH_MAX_WAIT_MS  # read when the consumer starts
        return consumer

    create_worker_consumer.situflow_wrapped = True  # type: ignore[attr-defined]
    AIOKafkaConsumerThread._create_worker_consumer = create_worker_consumer  # type: ignore[method-assign]


_short_fetch_wait()


def _transactions_by_input() -> None:
    """In exactly-once mode, send each record in the transaction of the input partition whose
    message or tick Faust is handling, not in that of the partition the record goes to
    (module doc): a checkpoint commits exactly the effects of the input it acknowledges. A
    record sent outside any event (a timer's tick) goes outside transactions, so that it is
    read before the commit it may be needed for."""
    if getattr(TransactionManager.send, "situflow_wrapped", False):
        return

    async def send(self: TransactionManager, topic: str, key: bytes | None,
                   value: bytes | None, partition: int | None, timestamp: float | None,
                   headers: HeadersArg | None, *, transactional_id: str | None = None,
                   ) -> Awaitable[RecordMetadata]:
        event = faust.current_event()
        if event is None:
            return await self.producer.send(topic, key, value, partition, timestamp, headers)
        source = event.message
        group = self.app.assignor.group_for_topic(source.topic)
        return await self.producer.send(
            topic, key, value, partition, timestamp, headers,
            transactional_id=f"{self.app.conf.id}-{group}-{source.partition}")

    send.situflow_wrapped = True  # type: ignore[attr-defined]
    TransactionManager.send = send  # type: ignore[method-assign]


_transactions_by_input()


async def check_transactions(kafka: KafkaSettings) -> None:
    """Raise :class:`KafkaError` (or :class:`TimeoutError`) unless the broker grants a
    transactional producer, so that a broker without transactions (tansu answers
    InitProducerId with an unknown error) stops a service at start, with the reason. The
    transactional id is a fresh one, so no worker is fenced."""
    producer = AIOKafkaProducer(**kafka.client_kwargs(),
                                transactional_id=f"situflow-probe-{uuid.uuid4().hex}")
    try:
        async with asyncio.timeout(TRANSACTIONS_PROBE_TIMEOUT):
            await producer.start()
            await producer.begin_transaction()
            await producer.commit_transaction()
    finally:
        await producer.stop()


def run(app: faust.App, config: ServiceConfig) -> None:
    """Start the worker once a broker answers: an unreachable one is reported in one line per
    attempt and retried with backoff for ``SITUFLOW_BROKER_WAIT`` seconds (default 300), then
    the process exits 1 (so an orchestrator restarts it) instead of Faust's endless log. In
    exactly-once mode a broker without transactions ends it the same way, at once."""
    wait = float(os.environ.get("SITUFLOW_BROKER_WAIT", "300"))

    async def probe(kafka: KafkaSettings) -> None:
        client = AIOKafkaAdminClient(**kafka.client_kwargs())
        await client.start()
        await client.close()

    def retrying(pause: float) -> None:
        print(f"situflow {config.service}: cannot reach Kafka at "
              f"{config.kafka.bootstrap_servers}; retrying in {pause:.2f}s", file=sys.stderr)

    client_log = logging.getLogger("aiokafka")
    level = client_log.level
    client_log.setLevel(logging.CRITICAL)  # one line per attempt is ours
    try:
        asyncio.run(retry_unreachable(config.kafka, probe, wait, on_retry=retrying))
        if config.processing_guarantee == EXACTLY_ONCE:
            asyncio.run(check_transactions(config.kafka))
    except BrokerUnreachable as exc:
        sys.exit(f"situflow {config.service}: {exc}")
    except (KafkaError, TimeoutError) as exc:
        sys.exit(f"situflow {config.service}: SITUFLOW_PROCESSING_GUARANTEE={EXACTLY_ONCE} needs "
                 f"Kafka transactions, and the broker at {config.kafka.bootstrap_servers} does "
                 f"not grant them ({type(exc).__name__}: {exc}); run {AT_LEAST_ONCE} there (the "
                 f"default)")
    finally:
        client_log.setLevel(level)
    app.main()


def state_table(app: faust.App, name: str, config: ServiceConfig, help: str) -> Any:
    """The table of one service's per-partition checkpoints, co-partitioned with its input.
    Values are bytes (JSON that :class:`workers.partitions.PartitionStates` encodes), so a
    checkpoint is serialised once and its size is known."""
    return app.Table(name, default=None, partitions=config.stream.partitions, help=help,
                     key_type=str, value_type=bytes,
                     extra_topic_configs={"max.message.bytes": MAX_STATE_BYTES})


def _credentials(kafka: KafkaSettings) -> Any:
    context = None
    if kafka.uses_ssl:
        context = ssl.create_default_context(cafile=kafka.ssl_cafile)
        if kafka.ssl_certfile and kafka.ssl_keyfile:
            context.load_cert_chain(kafka.ssl_certfile, kafka.ssl_keyfile)
    if kafka.uses_sasl:
        return faust.SASLCredentials(
            username=kafka.sasl_username, password=kafka.sasl_password,
            ssl_context=context, mechanism=kafka.sasl_mechanism,
        )
    return faust.SSLCredentials(context) if context is not None else None


class ServiceMetrics:
    """The Prometheus metrics of one service, served on the app's ``/metrics`` page.

    A registry of its own keeps the page to situflow's metrics (no process collectors of the
    default registry, which a test process would share). Every name starts ``situflow_`` and
    every metric carries the ``service`` label, so one dashboard covers all services.
    """

    def __init__(self, app: faust.App, service: str, inputs: tuple[str, ...] = ()) -> None:
        self.registry = CollectorRegistry()
        labels = ["service", "topic"]
        reg = self.registry
        self.messages_in = Counter("situflow_messages_in", "Messages consumed", labels,
                                   registry=reg).labels
        self.messages_out = Counter("situflow_messages_out", "Messages produced", labels,
                                    registry=reg).labels
        self.events_in = Counter("situflow_events_in", "Events consumed (an Arrow message holds "
                                 "many)", labels, registry=reg).labels
        self.events_out = Counter("situflow_events_out", "Events or results produced", labels,
                                  registry=reg).labels
        self.dlq = Counter("situflow_dlq_messages", "Messages sent to a dead-letter topic",
                           labels, registry=reg).labels
        self.late = Counter("situflow_late_events", "Events later than the K-slack bound",
                            labels, registry=reg).labels
        self.buffered = Gauge("situflow_kslack_buffered_events",
                              "Events waiting in the K-slack buffers of this worker",
                              ["service"], registry=reg).labels(service)
        self.open_situations = Gauge("situflow_open_situations",
                                     "Situations open in the operator states of this worker",
                                     ["service"], registry=reg).labels(service)
        self.partial_matches = Gauge("situflow_partial_matches",
                                     "Partial matches (NFA runs) in the operator states of this "
                                     "worker", ["service"], registry=reg).labels(service)
        self.buffered_situations = Gauge("situflow_buffered_situations",
                                         "Situations in the buffers of this worker's TPStream "
                                         "matchers", ["service"], registry=reg).labels(service)
        self.state_bytes = Gauge("situflow_state_bytes",
                                 "Size of the last checkpoint of each partition's state",
                                 ["service", "partition"], registry=reg).labels
        self.checkpoints = Counter("situflow_checkpoints", "State checkpoints written",
                                   ["service"], registry=reg).labels(service)
        self.lag = Gauge("situflow_consumer_lag", "Messages of an input partition not yet "
                         "consumed (high watermark minus position)",
                         ["service", "topic", "partition"], registry=reg)
        self.latency = Histogram("situflow_processing_latency_seconds",
                                 "From the input message's Kafka timestamp to its output being "
                                 "sent", ["service"], buckets=LATENCY_BUCKETS,
                                 registry=reg).labels(service)
        self.unseen_attributes = Gauge(
            "situflow_unseen_attributes", "Attributes a query uses that no event it evaluated "
            "has carried yet (a typo yields nothing, silently)", ["service", "query"],
            registry=reg).labels
        self.query_errors = Counter("situflow_query_errors", "Registered queries this service "
                                    "cannot evaluate", ["service"], registry=reg).labels(service)
        self.processing_errors = Counter(
            "situflow_processing_errors", "Messages whose processing raised (workers.failures); "
            "query is empty where the message itself failed", ["service", "topic", "query"],
            registry=reg).labels
        self.input_lag = Gauge("situflow_input_lag", "Messages of an input partition not yet "
                               "applied to its state (high watermark minus applied offset minus "
                               "one)", ["service", "topic", "partition"], registry=reg)
        self.restarts = Counter("situflow_restarts", "Crashes of this service's process found "
                                "at its starts (workers.failures.CrashRecord)", ["service"],
                                registry=reg).labels(service)
        #: The last offset applied of an input partition (set by :meth:`follow`).
        self.applied: Callable[[str, int], int] | None = None
        self.crashes: CrashRecord | None = None
        self.stall_timeout = float(os.environ.get("SITUFLOW_STALL_TIMEOUT", "60"))
        self._progress: dict[tuple[str, int], tuple[int, float]] = {}  # (applied, since)
        self.service = service
        self.inputs = inputs
        #: Whether the query registry has been read to its end (True when not followed).
        self.registry_synced = True
        #: More fields of the health page (e.g. the queries a service evaluates).
        self.health_details: Callable[[], dict[str, Any]] = dict
        self._app = app

        # Faust makes a view class of a page function, so pages are plain functions.
        @app.page("/metrics")
        async def metrics_page(web: View, request: Request) -> Response:
            await self.update_lag()
            return web.bytes(generate_latest(self.registry), content_type=METRICS_CONTENT_TYPE)

        @app.page("/health")
        async def health_page(web: View, request: Request) -> Response:
            return web.json(self.health())

    def follow(self, applied: Callable[[str, int], int], crashes: CrashRecord | None) -> None:
        """Measure lag and stalls on ``applied(topic, partition)``, the last offset applied to a
        partition's state; count the crashes the record found at this start."""
        self.applied = applied
        self.crashes = crashes
        if crashes is not None and crashes.found is not None:
            self.restarts.inc()

    async def update_lag(self) -> None:
        """Set the lag gauges of each assigned partition of the input topics (at scrape time)."""
        consumer = self._app.consumer
        if consumer is None:
            return
        for tp in consumer.assignment():
            if tp.topic in self.inputs:
                position = await consumer.position(tp)
                highwater = consumer.highwater(tp)
                if position is not None and highwater is not None:
                    self.lag.labels(self.service, tp.topic, str(tp.partition)).set(
                        max(0, highwater - position))
        self.stalled()

    def stalled(self, now: float | None = None) -> list[str]:
        """The assigned input partitions whose applied offset has not moved for
        ``SITUFLOW_STALL_TIMEOUT`` seconds although input waits (``topic[partition]``); sets
        the applied-offset lag gauge on the way."""
        consumer, applied = self._app.consumer, self.applied
        if consumer is None or applied is None:
            return []
        now = time.monotonic() if now is None else now
        # A transaction's commit marker takes an offset after its last record.
        markers = 1 if self._app.conf.processing_guarantee.value == EXACTLY_ONCE else 0
        stalled = []
        for tp in consumer.assignment():
            if tp.topic not in self.inputs:
                continue
            highwater = consumer.highwater(tp)
            if highwater is None:
                continue
            last = applied(tp.topic, tp.partition)
            waiting = highwater - last - 1
            self.input_lag.labels(self.service, tp.topic, str(tp.partition)).set(max(0, waiting))
            key = (tp.topic, tp.partition)
            seen = self._progress.get(key)
            if seen is None or seen[0] != last or waiting <= markers:
                self._progress[key] = (last, now)
            elif now - seen[1] >= self.stall_timeout:
                stalled.append(f"{tp.topic}[{tp.partition}]")
        return stalled

    def checkpointed(self, partition: int, size: int) -> None:
        self.checkpoints.inc()
        self.state_bytes(self.service, str(partition)).set(size)

    def health(self) -> dict[str, Any]:
        """Served with 200 while the worker runs; ``ready`` once it has partitions and its
        tables are recovered (what a readiness probe and the tests wait for)."""
        app = self._app
        assigned = len(app.consumer.assignment()) if app.consumer else 0
        recovered = cast(Any, app.tables).recovery.completed.is_set()
        stalled = self.stalled() if recovered and not app.rebalancing else []
        crash_looping = self.crashes is not None and self.crashes.crash_looping()
        ready = assigned > 0 and recovered and not app.rebalancing and self.registry_synced \
            and not stalled and not crash_looping
        inputs = {topic: owned_partitions(app, topic) for topic in self.inputs}
        return {"service": self.service, "ready": ready, "assigned": assigned, "inputs": inputs,
                "rebalancing": app.rebalancing, "tables_recovered": recovered,
                "registry_synced": self.registry_synced, "stalled": stalled,
                "crash_looping": crash_looping,
                "recent_crashes": 0 if self.crashes is None else self.crashes.recent(),
                **self.health_details()}


def dlq_headers(message: Any, reason: str, error: BaseException | None = None,
                query: str | None = None) -> list[tuple[str, bytes]]:
    """Headers of a dead-letter record: why, and where the original message came from; for a
    processing error also the exception's class and message, and the failing query."""
    headers = [
        (DLQ_REASON_HEADER, reason.encode()),
        (DLQ_TOPIC_HEADER, message.topic.encode()),
        (DLQ_PARTITION_HEADER, str(message.partition).encode()),
        (DLQ_OFFSET_HEADER, str(message.offset).encode()),
    ]
    if error is not None:
        headers += error_headers(error, query)
    return headers


def owned_partitions(app: faust.App, topic: str) -> list[int]:
    """The partitions of ``topic`` assigned to this worker now."""
    consumer = app.consumer
    if consumer is None:
        return []
    return sorted(tp.partition for tp in consumer.assignment() if tp.topic == topic)


def message_age(message: Any, now: float) -> float:
    """Seconds since the message's Kafka timestamp (its produce or append time)."""
    return max(0.0, now - message.timestamp) if message.timestamp else 0.0
