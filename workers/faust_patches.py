"""situflow's two changes to Faust internals, installed by :func:`install` (``make_app`` calls it).

Faust has no setting for either, so each replaces a private attribute:

* :func:`short_fetch_wait`: a worker consumer waits at most ``fetch_max_wait_ms`` per fetch,
  not Faust's hard-coded 1.5 s, because tansu answers a fetch over several partitions late
  (``bench/README.md``, "Measurements behind the services' Faust settings");
* :func:`transactions_by_input`: in exactly-once mode a record joins the transaction of the
  input partition being handled, not that of the partition it goes to, so a checkpoint commits
  exactly the effects of the input it acknowledges (:mod:`workers.partitions`);
* :func:`bundled_fetch`: the records one fetch returns of a topic partition of a topic
  registered with :func:`bundle_topics` reach the agent as one message (:mod:`workers.bundles`).

:data:`PATCHED` and :data:`PATCHED_FOR_BUNDLES` list the replaced attributes;
``tests/workers/test_faust_patches.py`` and ``tests/workers/test_bundles.py`` fail when a Faust
upgrade removes or reshapes one (faust-streaming is pinned to a tested range).
"""

from __future__ import annotations

from collections.abc import Awaitable
from functools import wraps
from typing import Any

import faust
from faust.transport.consumer import Consumer, TransactionManager
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread
from faust.transport.drivers.aiokafka import Consumer as AIOKafkaConsumer
from faust.types import TP, HeadersArg, RecordMetadata

from workers.bundles import BundleRecord, bundle_message, bundled

#: (owner, attribute) of every Faust internal replaced here.
PATCHED: tuple[tuple[type, str], ...] = (
    (AIOKafkaConsumerThread, "_create_worker_consumer"),
    (TransactionManager, "send"),
)
#: (owner, attribute) of the Faust internals :func:`bundled_fetch` replaces.
PATCHED_FOR_BUNDLES: tuple[tuple[type, str], ...] = (
    (Consumer, "_wait_next_records"),
    (AIOKafkaConsumer, "_to_message"),
)
#: The fetch wait of the worker consumers created from now on (:func:`install`).
fetch_max_wait_ms = 20
#: The topics whose records reach the agent in bundles (:func:`bundle_topics`).
bundled_topics: frozenset[str] = frozenset()


def install(fetch_wait_ms: int) -> None:
    """Install both patches (once; a later call only sets the fetch wait)."""
    global fetch_max_wait_ms
    fetch_max_wait_ms = fetch_wait_ms
    short_fetch_wait()
    transactions_by_input()
    bundled_fetch()


def bundle_topics(topics: frozenset[str]) -> None:
    """Deliver the records of ``topics`` in bundles from now on (in this process: one service
    runs per process)."""
    global bundled_topics
    bundled_topics = topics


def installed(owner: type, name: str) -> bool:
    return getattr(getattr(owner, name), "situflow_wrapped", False)


def short_fetch_wait() -> None:
    """Make Faust's worker consumer wait at most :data:`fetch_max_wait_ms` per fetch."""
    if installed(AIOKafkaConsumerThread, "_create_worker_consumer"):
        return
    create = AIOKafkaConsumerThread._create_worker_consumer

    @wraps(create)
    def create_worker_consumer(self: Any, transport: Any) -> Any:
        consumer = create(self, transport)
        consumer._fetch_max_wait_ms = fetch_max_wait_ms  # read when the consumer starts
        return consumer

    create_worker_consumer.situflow_wrapped = True  # type: ignore[attr-defined]
    AIOKafkaConsumerThread._create_worker_consumer = create_worker_consumer  # type: ignore[method-assign]


def transactions_by_input() -> None:
    """In exactly-once mode, send each record in the transaction of the input partition whose
    message or tick Faust is handling (module doc). A record sent outside any event (a timer's
    tick) goes outside transactions, so that it is read before the commit it may be needed
    for."""
    if installed(TransactionManager, "send"):
        return

    @wraps(TransactionManager.send)
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


def bundled_fetch() -> None:
    """Make each fetch's records of one partition of a topic of :data:`bundled_topics` bundles
    (:mod:`workers.bundles`); the offsets before a bundle's last become a gap of Faust's, which
    it counts as acknowledged with the last."""
    if installed(Consumer, "_wait_next_records"):
        return
    wait_next_records = Consumer._wait_next_records
    to_message = AIOKafkaConsumer._to_message

    @wraps(wait_next_records)
    async def bundled_records(self: Consumer, timeout: float) -> Any:
        records, active = await wait_next_records(self, timeout)
        if not records or not bundled_topics:
            return records, active
        out = {}
        for tp, fetched in records.items():
            if tp.topic in bundled_topics:
                fetched = bundled(fetched)
                for bundle in fetched:
                    if isinstance(bundle, BundleRecord):
                        await self._add_gap(tp, bundle.records[0].offset, bundle.offset - 1)
            out[tp] = fetched
        return out, active

    @wraps(to_message)
    def bundle_or_message(self: AIOKafkaConsumer, tp: TP, record: Any) -> Any:
        if isinstance(record, BundleRecord):
            return bundle_message(tp, record, self.app.consumer_generation_id)
        return to_message(self, tp, record)

    bundled_records.situflow_wrapped = True  # type: ignore[attr-defined]
    bundle_or_message.situflow_wrapped = True  # type: ignore[attr-defined]
    Consumer._wait_next_records = bundled_records  # type: ignore[method-assign]
    AIOKafkaConsumer._to_message = bundle_or_message  # type: ignore[method-assign]
