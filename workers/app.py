"""What every situflow Faust service shares: the Faust app configured for the
brokers we run on (:mod:`workers.broker`), and how it starts; its pages are in
:mod:`workers.metrics`, its announcements (``situflow status`` finds it by them) in
:mod:`workers.announce`.

:func:`make_app` sets, each for a measured reason (``bench/README.md``, "Measurements behind
the services' Faust settings"): at-least-once by default, ``exactly_once`` as one Kafka
transaction per input partition (:mod:`workers.faust_patches`; :func:`check_transactions`
stops a service whose broker grants none); one record per produce batch (tansu 0.6 answers
ListOffsets wrongly after a multi-record batch); acknowledgements only at checkpoints
(:mod:`workers.partitions`), so a rebalance does not wait for them; state records up to
:data:`MAX_STATE_BYTES`; a short fetch wait (``SITUFLOW_FETCH_MAX_WAIT_MS``); short session
and heartbeat timeouts, so a killed worker's partitions move quickly; and
:func:`gc.freeze` of the objects alive :data:`GC_FREEZE_AT` seconds after the start, whose
full collections were the p99 latency (``SITUFLOW_GC_FREEZE=0`` turns it off).
Settings: :class:`workers.settings.ServiceConfig`, a view of :mod:`situflow.settings`
(every variable in ``docs/settings.md``). Design: ARCHITECTURE.md, "The services".
"""

from __future__ import annotations

import asyncio
import gc
import logging
import ssl
import sys
import time
import uuid
from typing import Any

import faust
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from situflow.settings import AT_LEAST_ONCE, EXACTLY_ONCE, KafkaSettings
from topics.catalog import (
    DLQ_OFFSET_HEADER,
    DLQ_PARTITION_HEADER,
    DLQ_REASON_HEADER,
    DLQ_TOPIC_HEADER,
)
from topics.connection import BrokerUnreachable, retry_unreachable
from workers import faust_patches
from workers.announce import announce
from workers.failures import error_headers
from workers.settings import ServiceConfig

#: Seconds after the start at which the objects then alive are frozen (module doc).
GC_FREEZE_AT = (10.0, 60.0, 300.0)
#: Largest checkpoint (state of one partition) a changelog record may hold.
MAX_STATE_BYTES = 64 * 1024 * 1024
#: Seconds a broker may take to grant a transactional producer at start.
TRANSACTIONS_PROBE_TIMEOUT = 30.0


class ServiceWorker(faust.Worker):
    """Faust's worker without its terminal spinner. To turn the spinner on every log record,
    Faust's worker sets the root logger to DEBUG, so every debug call of every library (aiokafka
    above all) builds a record: 5% of an idle service's CPU (bench/README.md, "Services"). A
    service's output is a log, not a terminal."""

    def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
        self.spinner = None
        super().on_setup_root_logger(logger, level)


def make_app(app_id: str, config: ServiceConfig) -> faust.App:
    """A Faust app with RocksDB tables and the broker settings of the module doc."""
    app = faust.App(
        app_id,
        Worker=ServiceWorker,
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
    faust_patches.install(config.settings.fetch_max_wait_ms)
    if config.settings.gc_freeze:
        app.task(_freeze_long_lived)
    announce(app, config)  # on the services topic, for situflow status
    return app


async def _freeze_long_lived() -> None:
    """Move the objects alive :data:`GC_FREEZE_AT` seconds after the start out of the cycle
    collector's way (module doc)."""
    started = time.monotonic()
    for at in GC_FREEZE_AT:
        await asyncio.sleep(max(0.0, at - (time.monotonic() - started)))
        gc.freeze()


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
    wait = config.settings.broker_wait

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
            username=kafka.sasl_username, password=kafka.sasl_password_text(),
            ssl_context=context, mechanism=kafka.sasl_mechanism,
        )
    return faust.SSLCredentials(context) if context is not None else None


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
