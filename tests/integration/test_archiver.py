"""End to end through a real broker: the archiver service writes ``<stream>.ordered`` and a
result topic to Parquet segments, every event exactly once with a dense seq, even when it is
killed with ``kill -9`` in the middle of the stream (situflow/archive/log.py module doc).

Events go straight to ``<stream>.ordered`` as K-slack writes them (Arrow batches with their
input seq, now and then a JSON event, which K-slack sends when a batch's attributes do not fit
one schema), so the expected archive is known message by message: per partition, the events in
the order of their messages' offsets.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from situflow.archive import (
    ARCHIVE_OFFSET,
    ARCHIVE_SEQ,
    StreamSettings,
    check_topic,
    open_archive,
    partition_dir,
    read_archive,
    read_meta,
    segment_paths,
    stream_settings,
)
from situflow.codecs.arrow_events import HEADERS, batch_from_events, encode_batch
from situflow.settings import KafkaSettings
from tests.integration.helpers import metrics, total, wait_until
from topics.catalog import ROW_BITS, SEQ_FIELD, QueryOutput, StreamSpec, query_topic, stream_topics
from topics.create import create_topics
from workers.up import Pipeline, ServiceProcess

pytestmark = pytest.mark.integration

PARTITIONS = 3
SEGMENT_ROWS = 250


@dataclass
class Sent:
    """A message for one partition, and what the archive must hold of it."""

    partition: int
    value: bytes
    headers: list[tuple[str, bytes]] | None
    events: list[dict[str, Any]]  # empty for a message that does not decode
    offset: int = -1  # assigned by the broker


def event_messages(partition: int, count: int, start: int = 0) -> list[Sent]:
    """``count`` messages of 1 to 40 events, mostly Arrow, every seventh one JSON, and one
    malformed message (to the DLQ, no rows)."""
    messages = []
    event_id = start * 100
    for i in range(start, start + count):
        size = 1 if i % 7 == 3 else 1 + (i * 13) % 40
        events = [{"id": f"{partition}-{event_id + row}", "ts": 1_000 * i + row,
                   "car_id": row % 5, "speed": 0.5 * row, SEQ_FIELD: (i << ROW_BITS) | row}
                  for row in range(size)]
        event_id += size
        if size == 1:
            messages.append(Sent(partition, json.dumps(events[0]).encode(), None, events))
        else:
            messages.append(Sent(partition, encode_batch(batch_from_events(events)), HEADERS,
                                 events))
        if i == start + count // 2:
            messages.append(Sent(partition, b'{"ts": oops', None, []))
    return messages


def result_messages(partition: int, count: int) -> list[Sent]:
    results = [{"query": "q", "key": [k], "ts": k, "values": {"n": k},
                "bindings": {"a": [k, k + 1]}, "id": f"r{partition}-{k}"} for k in range(count)]
    # Nested values are archived as JSON text.
    return [Sent(partition, json.dumps(r).encode(), None,
                 [{k: json.dumps(v) if isinstance(v, dict | list) else v for k, v in r.items()}])
            for r in results]


async def produce(kafka: KafkaSettings, topic: str, messages: list[Sent]) -> None:
    """Send each message to its partition and note the offset the broker gave it."""
    async with AIOKafkaProducer(**kafka.client_kwargs(), linger_ms=5) as producer:
        futures = [await producer.send(topic, m.value, partition=m.partition, headers=m.headers)
                   for m in messages]
        for message, metadata in zip(messages, await asyncio.gather(*futures), strict=True):
            message.offset = metadata.offset


def expected_rows(messages: list[Sent], partition: int) -> list[dict[str, Any]]:
    """What the archive of ``partition`` must hold: each event once, in offset order, numbered
    0, 1, 2, … and with its message's offset."""
    ordered = sorted((m for m in messages if m.partition == partition), key=lambda m: m.offset)
    rows = [{**event, ARCHIVE_OFFSET: m.offset} for m in ordered for event in m.events]
    return [{**row, ARCHIVE_SEQ: seq} for seq, row in enumerate(rows)]


def archived_rows(root: Path, topic: str, partition: int) -> list[dict[str, Any]]:
    """The archived rows, with only the attributes they have (a JSON event's missing ones are
    null in a segment shared with other events)."""
    rows = read_archive(root, topic, partition).to_pylist()
    return [{k: v for k, v in row.items() if v is not None} for row in rows]


def archived_count(root: Path, topic: str) -> int:
    return sum(read_meta(path).rows for p in range(PARTITIONS)
               for path in segment_paths(partition_dir(root, topic, p)))


def settled(archiver: ServiceProcess) -> bool:
    """Whether the archiver has consumed every input message and written every segment."""
    values = metrics(archiver)
    lags = [v for k, v in values.items() if k.startswith("situflow_consumer_lag{")]
    return bool(lags) and not any(lags) and total(values, "situflow_archive_open_rows") == 0


def assert_archived_exactly_once(root: Path, topic: str, messages: list[Sent]) -> None:
    for partition in range(PARTITIONS):
        assert archived_rows(root, topic, partition) == expected_rows(messages, partition), (
            f"{topic}[{partition}] archive differs from its messages")
        metas = [read_meta(path) for path in segment_paths(partition_dir(root, topic, partition))]
        assert all(a.next_seq == b.first_seq for a, b in itertools.pairwise(metas)), \
            "every segment starts where the one before it ends"


def assert_indexed(root: Path, topic: str, rows: int) -> None:
    """Every segment of ``topic`` has its block index, and the blocks cover every row."""
    archive = open_archive(root)
    assert check_topic(archive, topic) == [], "a segment lacks its block index, or worse"
    assert sum(b.count for p in range(PARTITIONS) for b in archive.blocks(topic, p)) == rows


@pytest.fixture
def archive_env(tmp_path: Path) -> dict[str, str]:
    return {"SITUFLOW_ARCHIVE_DIR": str(tmp_path / "archive"),
            "SITUFLOW_ARCHIVE_SEGMENT_ROWS": str(SEGMENT_ROWS),
            "SITUFLOW_ARCHIVE_SEGMENT_SECONDS": "1"}


@pytest.fixture
def archiver(kafka: KafkaSettings, topic_prefix: str, tmp_path: Path,
             archive_env: dict[str, str]) -> Iterator[Pipeline]:
    """The archiver alone, following ``<stream>.ordered`` and one query's result topic."""
    stream = StreamSpec(f"{topic_prefix}.cars", partitions=PARTITIONS, key_fields=("car_id",))
    results = query_topic(QueryOutput(f"{topic_prefix}-q", partitions=PARTITIONS))
    asyncio.run(create_topics(kafka, [results]))
    env = {**archive_env, "SITUFLOW_ARCHIVE_TOPICS": results.name}
    with Pipeline(stream, kafka=kafka, work_dir=tmp_path / "pipeline",
                  service_names=("archiver",), extra_env=env) as running:
        yield running


def test_every_event_and_result_is_archived_once_with_a_dense_seq_in_topic_order(
    archiver: Pipeline, archive_env: dict[str, str]
) -> None:
    kafka = archiver.kafka
    assert kafka is not None
    root = Path(archive_env["SITUFLOW_ARCHIVE_DIR"])
    _, ordered, _, dlq = (spec.name for spec in stream_topics(archiver.stream))
    results = archiver.extra_env["SITUFLOW_ARCHIVE_TOPICS"]
    events = [m for p in range(PARTITIONS) for m in event_messages(p, 60)]
    answers = [m for p in range(PARTITIONS) for m in result_messages(p, 15)]
    asyncio.run(produce(kafka, ordered, events))
    asyncio.run(produce(kafka, results, answers))

    service = archiver.services["archiver"]
    event_count = sum(len(m.events) for m in events)
    wait_until(lambda: archived_count(root, ordered) >= event_count and settled(service), 90,
               f"the archiver to write all {event_count} events")
    assert_archived_exactly_once(root, ordered, events)
    assert_archived_exactly_once(root, results, answers)
    assert_indexed(root, ordered, event_count)
    assert stream_settings(root, ordered) == StreamSettings(archiver.stream.name,
                                                            key_fields=("car_id",))

    values = metrics(service)
    files = [path for topic in (ordered, results) for p in range(PARTITIONS)
             for path in segment_paths(partition_dir(root, topic, p))]
    assert total(values, "situflow_events_in_total", topic=ordered) == event_count
    assert total(values, "situflow_events_out_total", topic=ordered) == event_count
    assert total(values, "situflow_archive_segments_total") == len(files)
    assert total(values, "situflow_archive_bytes_total") == sum(f.stat().st_size for f in files)
    assert total(values, "situflow_dlq_messages_total", topic=dlq) == PARTITIONS


@pytest.mark.slow
def test_an_archiver_killed_mid_stream_resumes_without_losing_or_repeating_an_event(
    archiver: Pipeline, archive_env: dict[str, str], record_property: Any
) -> None:
    """kill -9 while segments are being written; restarted on its data dir, the archiver
    adopts the segments its checkpoint missed, skips redelivered messages, and the archive
    holds every event once, dense, in topic order."""
    kafka = archiver.kafka
    assert kafka is not None
    root = Path(archive_env["SITUFLOW_ARCHIVE_DIR"])
    ordered = stream_topics(archiver.stream)[1].name
    first = [m for p in range(PARTITIONS) for m in event_messages(p, 300)]
    second = [m for p in range(PARTITIONS) for m in event_messages(p, 300, start=300)]
    first_count = sum(len(m.events) for m in first)

    asyncio.run(produce(kafka, ordered, first))
    wait_until(lambda: archived_count(root, ordered) >= first_count // 3, 60,
               "the archiver to be busy with the first half")
    kill_as_a_segment_appears(archiver.services["archiver"], root / ordered)
    record_property("events_archived_at_the_kill", archived_count(root, ordered))

    archiver.start_service("archiver")
    asyncio.run(produce(kafka, ordered, second))
    archiver.wait_ready()
    restarted = archiver.services["archiver"]
    count = first_count + sum(len(m.events) for m in second)
    wait_until(lambda: archived_count(root, ordered) >= count and settled(restarted), 120,
               f"the restarted archiver to write all {count} events")
    assert_archived_exactly_once(root, ordered, first + second)
    assert_indexed(root, ordered, count)  # adopted segments got their block index too
    record_property("segments_adopted_after_the_restart",
                    total(metrics(restarted), "situflow_archive_adopted_segments_total"))


def kill_as_a_segment_appears(service: ServiceProcess, directory: Path) -> None:
    """kill -9 just after a new segment appears, which is when the checkpoint that records it
    may not have reached the broker yet (the restart then adopts the segment): the most
    demanding moment, caught when the timing allows, and a kill anyway after ten seconds."""
    def count() -> int:
        return sum(1 for _ in directory.glob("partition=*/*.parquet"))

    before, deadline = count(), time.monotonic() + 10
    while count() == before and time.monotonic() < deadline:
        pass
    service.process.kill()
    service.process.wait()
