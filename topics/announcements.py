"""Service announcements: which workers a deployment runs and where their web pages are.

Every service worker writes one record about itself to the compacted services topic
(:func:`topics.catalog.services_topic`, ``situflow.services`` unless ``SITUFLOW_SERVICES_TOPIC``
names another), keyed by its worker id ``<service>@<host>:<web port>`` (UTF-8)::

    {"service": "kslack", "stream": "cars", "url": "http://10.0.0.7:6066", "host": "kslack-0",
     "pid": 1, "started_at": 1700000000000, "last_seen": 1700000012000, "version": "0.1.0"}

``url`` is where ``/health`` and ``/metrics`` answer (``SITUFLOW_WEB_ADVERTISE``); times are
epoch milliseconds. The worker re-sends it every :data:`ANNOUNCE_INTERVAL` seconds with a new
``last_seen`` (:mod:`workers.announce`) and writes a tombstone when it stops cleanly, so a
record whose ``last_seen`` is old belongs to a worker that died without stopping. A worker
restarted on the same host and port (a container restart, ``situflow up``'s supervisor) has
the same id and replaces its old record; the record of one that does not come back stays until
:func:`forget` deletes it (``situflow status --prune``). Readers: :func:`read_announcements`
(``situflow status``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaProducer

from situflow.settings import KafkaSettings
from topics.catalog import services_topic
from topics.registry import read_control_topic

#: Seconds between two announcements of one worker.
ANNOUNCE_INTERVAL = 10.0

_FIELDS: dict[str, type] = {"service": str, "stream": str, "url": str, "host": str, "pid": int,
                            "started_at": int, "last_seen": int, "version": str}


@dataclass(frozen=True)
class Announcement:
    """One worker's record in the services topic: ``worker`` is its key, the rest its value
    (see the module doc)."""

    worker: str
    service: str
    stream: str
    url: str
    host: str
    pid: int
    started_at: int
    last_seen: int
    version: str


def worker_id(service: str, host: str, port: int) -> str:
    """``<service>@<host>:<web port>``: the same for a worker restarted where it ran."""
    return f"{service}@{host}:{port}"


def encode_announcement(announcement: Announcement) -> tuple[bytes, bytes]:
    """The (key, value) of ``announcement`` in the services topic."""
    value = {name: getattr(announcement, name) for name in _FIELDS}
    return announcement.worker.encode(), json.dumps(value).encode()


def encode_departure(worker: str) -> tuple[bytes, None]:
    """The (key, value) that says worker ``worker`` stopped: a tombstone."""
    return worker.encode(), None


def decode_announcement(key: bytes | None, value: bytes | None) -> Announcement | None:
    """The announcement of a services-topic record; None for a tombstone or a record that is
    none (a reader skips it)."""
    if key is None or value is None:
        return None
    try:
        fields: Any = json.loads(value)
    except ValueError:
        return None
    if not isinstance(fields, dict) or any(
            not isinstance(fields.get(name), kind) or isinstance(fields.get(name), bool)
            for name, kind in _FIELDS.items()):
        return None
    return Announcement(key.decode(errors="replace"), **{name: fields[name] for name in _FIELDS})


async def read_announcements(kafka: KafkaSettings, topic: str) -> dict[str, Announcement]:
    """The live announcements by worker id: the services topic ``topic`` read to its end
    (created if missing), each worker's newest record, departed workers left out."""
    announcements: dict[str, Announcement] = {}
    for message in await read_control_topic(kafka, services_topic(topic)):
        if message.key is None:
            continue
        worker = message.key.decode(errors="replace")
        announcement = decode_announcement(message.key, message.value)
        if announcement is None:
            announcements.pop(worker, None)
        else:
            announcements[worker] = announcement
    return announcements


async def forget(kafka: KafkaSettings, topic: str, workers: Iterable[str]) -> None:
    """Delete the records of ``workers`` from the services topic ``topic`` (tombstones): workers
    that died without stopping and will not come back where they ran."""
    async with AIOKafkaProducer(**kafka.client_kwargs(), acks="all") as producer:
        for worker in workers:  # one record per send: tansu's ListOffsets (topics.registry)
            key, value = encode_departure(worker)
            await producer.send_and_wait(topic, value, key=key, partition=0)
