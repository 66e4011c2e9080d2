"""A service worker announces itself on the services topic while it runs (topics.announcements).

:func:`announce` adds it to a Faust app: once the app has started (its tables recovered, its
web server about to serve), the worker writes its :class:`~topics.announcements.Announcement`,
again every :data:`~topics.announcements.ANNOUNCE_INTERVAL` seconds with a new ``last_seen``,
and a tombstone when the app stops cleanly. It writes with a producer of its own, outside
any transaction of the exactly-once mode, and a Kafka that does not answer costs a warning in
the log, never the service. ``situflow status`` reads the topic to find the workers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
import time
from importlib.metadata import PackageNotFoundError, version

import faust
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from topics.announcements import (
    ANNOUNCE_INTERVAL,
    Announcement,
    encode_announcement,
    encode_departure,
    worker_id,
)
from topics.catalog import services_topic
from topics.create import TopicCreationError, create_topics
from workers.settings import ServiceConfig

logger = logging.getLogger(__name__)
#: Seconds one announcement may take before the worker gives up on it (until the next one).
SEND_TIMEOUT = 5.0


def announce(app: faust.App, config: ServiceConfig) -> None:
    """Announce the worker of ``app`` while it runs (module doc)."""
    app.task(Announcer(config).run)


class Announcer:
    """The announcements of one worker (module doc)."""

    def __init__(self, config: ServiceConfig, interval: float = ANNOUNCE_INTERVAL) -> None:
        settings = config.settings
        self.kafka = config.kafka
        self.topic = settings.services_topic
        self.interval = interval
        host = socket.gethostname()
        self.announcement = Announcement(
            worker=worker_id(config.service, host, config.web_port), service=config.service,
            stream=config.stream.name, url=settings.web_url, host=host, pid=os.getpid(),
            started_at=_now_ms(), last_seen=0, version=_version())
        self._producer: AIOKafkaProducer | None = None

    async def run(self) -> None:
        """Announce now and every ``interval`` seconds until cancelled (Faust cancels its
        tasks when the app stops), then write the tombstone."""
        try:
            try:
                await create_topics(self.kafka, [services_topic(self.topic)])
            except (KafkaError, OSError, TopicCreationError) as exc:
                logger.warning("cannot create the services topic %s: %s", self.topic, exc)
            while True:
                self.announcement = dataclasses.replace(self.announcement, last_seen=_now_ms())
                await self._send(*encode_announcement(self.announcement))
                await asyncio.sleep(self.interval)
        finally:
            if self.announcement.last_seen:  # announced (or tried to)
                await self._send(*encode_departure(self.announcement.worker))
            if self._producer is not None:
                await self._producer.stop()

    async def _send(self, key: bytes, value: bytes | None) -> None:
        try:
            async with asyncio.timeout(SEND_TIMEOUT):
                if self._producer is None:
                    producer = AIOKafkaProducer(**self.kafka.client_kwargs(), acks="all")
                    try:
                        await producer.start()
                    except BaseException:
                        await producer.stop()
                        raise
                    self._producer = producer
                await self._producer.send_and_wait(self.topic, value, key=key, partition=0)
        except (KafkaError, OSError, TimeoutError) as exc:
            logger.warning("cannot announce %s on %s: %s", self.announcement.worker, self.topic,
                           exc)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _version() -> str:
    try:
        return version("situflow")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"
