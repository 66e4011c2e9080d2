"""The hand-off of ``situflow query submit --backfill-from`` (batch/README.md, "Backfill"),
and what it shares with ``situflow backfill`` (batch/backfill.py): the core's evaluation of
archived events, and publishing results exactly as the services do.

Each result goes out with the services' key, value, result id and header
(:func:`workers.evaluation.encode_result`), so a consumer that de-duplicates by id sees one
result where the backfill and the services both produced it. The evaluation is the core's, on
the archive of ``<stream>.ordered``: per topic partition one fresh operator over the archived
events in their order, typed as the services type them (:func:`situflow.event_types.conform`),
each event with its input seq, exactly as the services feed them
(:func:`situflow.runtime.ordered_events`). No end of input is signalled (the services never see
one): a result the services would emit only later is not backfilled.

**The hand-off**: the services record, per partition of ``<stream>.ordered``, the offset ``X``
of the first message they evaluated the query on (:class:`topics.registry.QueryStart`).
Online, a SASE+ query (a window, no CONSUME) evaluated from ``X`` with fresh state gives
exactly the results of the whole stream whose first event is at or after ``X``, with the same
ids. The backfill evaluates the archive from ``--backfill-from`` up to ``w`` ticks past the
last event before ``X`` and publishes the results whose first event is before ``X``.
Together: every result once after de-duplication by id. It lives here, not in ``batch/``,
because ``situflow query submit`` (workers/cli.py) runs it and services sit below Spark jobs.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from situflow.archive import ARCHIVE_OFFSET, ARCHIVE_SEQ, Archive, StreamSettings, check_topic, ordered_topic
from situflow.errors import SituflowError
from situflow.event_types import conform
from situflow.events import EventBatch
from situflow.kslack.positions import SEQ_FIELD
from situflow.languages import compile_query
from situflow.operator import CompiledQuery, QueryOptions
from situflow.results import Match
from situflow.settings import KafkaSettings
from topics.catalog import QueryOutput, StreamSpec, query_topic
from topics.create import create_topics
from topics.registry import OUTPUT_ROLES, QueryRecord, read_starts, submit
from workers.evaluation import encode_result

#: Seconds between two looks at the status topic or the archive while the hand-off waits.
POLL_SECONDS = 1.0
#: Sends a publisher awaits together: the producer batches them, and no more are held.
IN_FLIGHT = 10_000


class BackfillError(SituflowError):
    """A backfill that cannot give every result; the message says what is missing where."""


def compile_file(query_file: Path, name: str | None, settings: StreamSettings) -> CompiledQuery:
    """The query of ``query_file`` over the stream, named ``name`` or else by the file's stem
    (as ``situflow run`` and ``situflow query submit`` name it, so result ids agree)."""
    options = QueryOptions(name=name or query_file.stem, time_unit=settings.time_unit,
                           type_field=settings.type_field)
    return compile_query(query_file.read_text(encoding="utf-8"), options)


def archive_partitions(archive: Archive, topic: str, lo: int | None = None,
                       hi: int | None = None) -> list[int]:
    """The partitions of ``topic`` in ``archive``, checked (:meth:`Archive.check`: a corrupt
    segment, a gap, schema drift, no data in ``lo``..``hi`` raise ``ArchiveError`` naming files
    and seqs)."""
    check_topic(archive, topic, lo=lo, hi=hi)
    return archive.partitions(topic)


def archived_events(table: pa.Table, settings: StreamSettings) -> EventBatch:
    """One partition's archived rows as the services' events: the attributes, each event
    with its input seq (:func:`situflow.runtime.ordered_events`)."""
    seq = np.asarray(table.column(SEQ_FIELD).to_numpy(), dtype=np.int64)
    return EventBatch.from_arrow(table.drop_columns([SEQ_FIELD, ARCHIVE_SEQ, ARCHIVE_OFFSET]),
                                 time_field=settings.time_field,
                                 type_field=settings.type_field, id_field=settings.id_field,
                                 seq=seq)


def partition_results(compiled: CompiledQuery, events: EventBatch, settings: StreamSettings
                      ) -> list[Any]:
    """The query's results over one partition's events (in archive order), with a fresh
    operator and the services' typing rule (module doc)."""
    return list(stream_results(compiled, [events], settings))


def stream_results(compiled: CompiledQuery, batches: Iterable[EventBatch],
                   settings: StreamSettings) -> Iterator[Any]:
    """:func:`partition_results` over one partition's events given batch by batch (the
    operator keeps its state across them, as in the services)."""
    types = compiled.attribute_types.without(
        {settings.time_field, settings.type_field, settings.id_field})
    operator = compiled.operator()
    for events in batches:
        if len(events):
            yield from operator.process(conform(events, types).batch)


def first_offsets(results: Sequence[Match], events: EventBatch, offsets: pa.ChunkedArray
                  ) -> list[int]:
    """Per SASE+ result the Kafka offset of its first event's message (``events`` are one
    partition's, ``offsets`` their messages' offsets; bindings name event ids)."""
    offset_of = dict(zip(events.ids.tolist(), offsets.to_pylist(), strict=True))
    return [min(offset_of[event_id] for bound in result.bindings.values()
                for event_id in (bound if isinstance(bound, list) else [bound]))
            for result in results]


async def publish(kafka: KafkaSettings, compiled: CompiledQuery, results: Iterable[Any]) -> int:
    """Send ``results`` to the query's output topic (created if missing) as the services do;
    how many. At most :data:`IN_FLIGHT` sends are pending at a time: ``results`` may be a long
    stream that is never held whole."""
    spec = query_topic(QueryOutput(compiled.name, OUTPUT_ROLES[compiled.language]))
    await create_topics(kafka, [spec])
    count = 0
    async with AIOKafkaProducer(**kafka.client_kwargs(), acks="all") as producer:
        sent = []
        for result in results:
            key, value, headers = encode_result(result)
            sent.append(await producer.send(spec.name, value, key=key, headers=headers))
            count += 1
            if len(sent) == IN_FLIGHT:
                await asyncio.gather(*sent)
                sent.clear()
        await asyncio.gather(*sent)
    return count


def check_handoff(compiled: CompiledQuery) -> float:
    """The query's window in ticks, if the hand-off rule holds for it; else ``BackfillError``
    saying why (batch/README.md, "Backfill")."""
    automaton = getattr(compiled, "automaton", None)
    if compiled.language != "sase" or automaton is None:
        raise BackfillError(
            f"--backfill-from hands off SASE+ queries only; a {compiled.language} query started "
            "online sees its situations or windows cut at the start (batch/README.md, "
            "Backfill): submit it, then run `situflow backfill` up to where it started")
    if automaton.consume or not math.isfinite(automaton.window):
        raise BackfillError("--backfill-from needs a WITHIN window and no CONSUME: otherwise "
                            "matches before the hand-off change those after it")
    return float(automaton.window)


def handoff_results(compiled: CompiledQuery, archive: Archive, topic: str, partition: int,
                    start: int, window: float, lo: int | None, settings: StreamSettings
                    ) -> list[Any] | None:
    """The results of one partition that are the backfill's: those whose first event's
    message is before offset ``start`` (where the services began), evaluated from ``lo``;
    None while the archive does not yet reach ``window`` ticks past the last event before
    ``start`` (a result begun before ``start`` may end there)."""
    if start == 0:
        return []  # the services evaluate the whole partition
    time_field = settings.time_field
    placed = archive.read(topic, partition, columns=[ARCHIVE_OFFSET])
    offsets = placed.column(ARCHIVE_OFFSET)
    before = placed.filter(pc.less(offsets, start))
    if before.num_rows == 0:
        return [] if placed.num_rows and pc.min(offsets).as_py() >= start else None
    reach = pc.max(before.column(time_field)).as_py() + window
    if pc.max(placed.column(time_field)).as_py() <= reach:
        return None
    rows = archive.read(topic, partition, lo=lo, hi=int(reach))
    if rows.num_rows == 0:
        return []
    events = archived_events(rows, settings)
    results = [r for r in partition_results(compiled, events, settings) if isinstance(r, Match)]
    firsts = first_offsets(results, events, rows.column(ARCHIVE_OFFSET))
    return [r for r, first in zip(results, firsts, strict=True) if first < start]


async def partition_count(kafka: KafkaSettings, topic: str) -> int:
    """How many partitions ``topic`` has; ``BackfillError`` if the broker has no such topic."""
    async with AIOKafkaConsumer(**kafka.client_kwargs(), enable_auto_commit=False) as consumer:
        await consumer.topics()  # loads the metadata partitions_for_topic reads
        partitions = consumer.partitions_for_topic(topic)
    if not partitions:
        raise BackfillError(f"the broker has no topic {topic}: is the stream's name right?")
    return len(partitions)


def wait_for_starts(kafka: KafkaSettings, record: QueryRecord, partitions: int,
                    registry: str | None, deadline: float) -> dict[int, int]:
    """Per partition of ``<stream>.ordered``, where the services began the query."""
    while True:
        starts = asyncio.run(read_starts(kafka, record.name, record.query_id, topic=registry))
        if len(starts) >= partitions:
            return starts
        if time.monotonic() > deadline:
            missing = sorted(set(range(partitions)) - set(starts))
            raise BackfillError(f"the services have not begun {record.name} on partitions "
                                f"{missing} of the ordered topic (no message there yet?)")
        time.sleep(POLL_SECONDS)


def submit_with_backfill(query_file: Path, *, stream: StreamSpec, archive: Archive, lo: int,
                         kafka: KafkaSettings, name: str | None = None,
                         registry: str | None = None, type_field: str = "type",
                         timeout: float = 300.0) -> tuple[QueryRecord, int]:
    """``situflow query submit --backfill-from``: register the query, wait until the services
    began it on every partition and the archive reaches a window past that, then publish the
    backfill's share (module doc); the record and the number of results published."""
    topic = ordered_topic(stream.name)
    settings = archive.settings(topic) or StreamSettings(
        stream.name, stream.time_field, stream.time_unit, type_field, stream.key_fields)
    compiled = compile_file(query_file, name, settings)
    window = check_handoff(compiled)
    partitions = asyncio.run(partition_count(kafka, topic))
    record = asyncio.run(submit(kafka, query_file.read_text(encoding="utf-8"),
                                name=compiled.name, source_path=str(query_file),
                                topic=registry, stream=stream))
    deadline = time.monotonic() + timeout
    starts = wait_for_starts(kafka, record, partitions, registry, deadline)
    pending = dict(starts)
    published = 0
    while pending:
        for partition, start in list(pending.items()):
            results = handoff_results(compiled, archive, topic, partition, start, window, lo,
                                      settings)
            if results is not None:
                asyncio.run(publish(kafka, compiled, results))
                published += len(results)
                del pending[partition]
        if pending and time.monotonic() > deadline:
            raise BackfillError(
                f"the archive {archive.uri} does not reach a window ({window:g} ticks) past the "
                f"hand-off of partitions {sorted(pending)} of {topic} (offsets "
                f"{ {p: starts[p] for p in sorted(pending)} }): is the archiver running?")
        if pending:
            time.sleep(POLL_SECONDS)
    return record, published


