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
of the first message they evaluated the query on and the time ``t`` of its first event
(:class:`topics.registry.QueryStart`). Online, a SASE+ query (a window, no CONSUME) evaluated
from ``X`` with fresh state gives exactly the results of the whole stream whose first event is
at or after ``X``, with the same ids. The backfill evaluates the archive from
``--backfill-from`` up to ``w`` ticks past the last event before ``X`` and publishes the
results whose first event is before ``X``. A COGRA query's operator online sends only the
windows that begin after ``t`` (workers/trends.py), which hold no event before ``X``; the
backfill evaluates the archive up to the event that closes the last window beginning at or
before ``t`` and publishes exactly those windows. A TPStream query (keyed streams only) is
registered with the hand-off flag (:attr:`topics.registry.QueryRecord.handoff`): the deriver
begins each key ``k`` at ``b_k``, its first quiet event (no definition holds) at or after ``X``,
so online gives exactly the matches whose situations all begin at or after ``b_k``; the
backfill takes the deriver's latest ``X`` (the matcher records starts of SASE+ queries only),
finds each ``b_k`` in the archive, waits per key for a quiet event more than the window after
``b_k`` and publishes the matches whose earliest situation begins before ``b_k``. Together:
every result once after de-duplication by id. It lives here, not in ``batch/``,
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
from situflow.results import Match, TrendResult
from situflow.runtime import key_name, key_names
from situflow.settings import KafkaSettings
from situflow.tpstream.query import TPStreamQuery, quiet_mask
from topics.catalog import QueryOutput, StreamSpec, query_topic
from topics.create import create_topics
from topics.registry import OUTPUT_ROLES, QueryRecord, read_start_times, read_starts, submit
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


def check_handoff(compiled: CompiledQuery, stream: StreamSpec) -> float:
    """The query's window in ticks (a COGRA query's window size; for TPStream how far apart a
    match's situations may start), if the hand-off rule holds for it over ``stream``; else
    ``BackfillError`` saying why (batch/README.md, "Backfill")."""
    plan = getattr(compiled, "plan", None)
    if compiled.language == "cogra" and plan is not None:
        return float(plan.size)
    if isinstance(compiled, TPStreamQuery):
        if stream.unpartitioned:
            raise BackfillError(
                "--backfill-from hands off TPStream queries over keyed streams only: over an "
                "unpartitioned stream the deriver cannot begin each key at a quiet event; "
                "submit it, then run `situflow backfill` up to where it started")
        return float(compiled.starts_within)
    automaton = getattr(compiled, "automaton", None)
    if compiled.language != "sase" or automaton is None:
        raise BackfillError(f"--backfill-from cannot hand off a {compiled.language} query")
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


def handoff_windows(compiled: CompiledQuery, archive: Archive, topic: str, partition: int,
                    begun: int, size: float, lo: int | None, settings: StreamSettings
                    ) -> list[Any] | None:
    """The windows of one partition that are the backfill's: those that begin at or before
    ``begun`` (the time the services' operator began at) and at or after ``lo``, evaluated
    from ``lo``; None while the archive holds no event at or after the end of the last of them
    (``size`` ticks past ``begun`` at most), the event that closes it."""
    later = archive.read(topic, partition, lo=int(begun + size), columns=[])
    if later.num_rows == 0:
        return None
    close = pc.min(later.column(settings.time_field)).as_py()
    rows = archive.read(topic, partition, lo=lo, hi=close)
    if rows.num_rows == 0:
        return []
    return [r for r in partition_results(compiled, archived_events(rows, settings), settings)
            if isinstance(r, TrendResult) and r.window_start <= begun
            and (lo is None or r.window_start >= lo)]


def handoff_matches(compiled: CompiledQuery, archive: Archive, topic: str, partition: int,
                    start: int, window: float, lo: int | None, settings: StreamSettings
                    ) -> list[Any] | None:
    """The TPStream matches of one partition that are the backfill's, evaluated from ``lo``:
    the deriver began each key at ``b_k``, its first quiet event at or after offset ``start``
    (found here in the archive as the deriver found it), and the backfill's are the matches
    whose earliest situation begins before ``b_k`` (all of a key's while it has none). None
    while a key with events before ``b_k`` (or, without one, before ``start``) lacks a quiet
    event more than ``window`` ticks after ``b_k``, which ends every situation of those
    matches."""
    rows = archive.read(topic, partition, lo=lo)
    if rows.num_rows == 0:
        return None
    types = compiled.attribute_types.without(
        {settings.time_field, settings.type_field, settings.id_field})
    archived = archived_events(rows, settings)
    conformed = conform(archived, types)
    events = conformed.batch
    rejected = [seq for seq, _ in conformed.rejected]
    offsets = np.asarray(rows.column(ARCHIVE_OFFSET).to_numpy(), dtype=np.int64)[
        ~np.isin(archived.seq, rejected)]
    assert isinstance(compiled, TPStreamQuery)
    quiet = quiet_mask(compiled, events)
    names, group = key_names(events, compiled.partition_by)
    begins: dict[str, int] = {}
    for number, name in enumerate(names):
        of_key = np.flatnonzero(group == number)
        begin = of_key[quiet[of_key] & (offsets[of_key] >= start)]
        if not len(begin):
            if (offsets[of_key] < start).any():
                return None  # its begin is still to come
            continue
        begun_at = int(events.ts[begin[0]])
        begins[name] = begun_at
        if of_key[0] < begin[0] and not (quiet[of_key] &
                                          (events.ts[of_key] > begun_at + window)).any():
            return None
    single = len(compiled.partition_by) == 1
    results = []
    for result in partition_results(compiled, events, settings):
        earliest = min(bound["ts"] for bound in result.bindings.values())
        name = key_name([result.key] if single else list(result.key))
        if earliest < begins.get(name, math.inf):
            results.append(result)
    return results


async def partition_count(kafka: KafkaSettings, topic: str) -> int:
    """How many partitions ``topic`` has; ``BackfillError`` if the broker has no such topic."""
    async with AIOKafkaConsumer(**kafka.client_kwargs(), enable_auto_commit=False) as consumer:
        await consumer.topics()  # loads the metadata partitions_for_topic reads
        partitions = consumer.partitions_for_topic(topic)
    if not partitions:
        raise BackfillError(f"the broker has no topic {topic}: is the stream's name right?")
    return len(partitions)


def wait_for_starts(kafka: KafkaSettings, record: QueryRecord, partitions: int,
                    registry: str | None, deadline: float, *, times: bool = False,
                    deriver: bool = False) -> dict[int, int]:
    """Per partition of ``<stream>.ordered``, where the services began the query: the
    earliest offset, with ``times`` the latest time their operator began at, with ``deriver``
    the latest offset the deriver began at (batch/README.md, "The TPStream hand-off", 3)."""
    while True:
        if times:
            read = read_start_times(kafka, record.name, record.query_id, topic=registry)
        elif deriver:
            read = read_starts(kafka, record.name, record.query_id, topic=registry,
                               service="deriver", latest=True)
        else:
            read = read_starts(kafka, record.name, record.query_id, topic=registry)
        starts = asyncio.run(read)
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
    window = check_handoff(compiled, stream)
    partitions = asyncio.run(partition_count(kafka, topic))
    record = asyncio.run(submit(kafka, query_file.read_text(encoding="utf-8"),
                                name=compiled.name, source_path=str(query_file),
                                topic=registry, stream=stream, handoff=True))
    deadline = time.monotonic() + timeout
    windows, situations = compiled.language == "cogra", compiled.language == "tpstream"
    starts = wait_for_starts(kafka, record, partitions, registry, deadline, times=windows,
                             deriver=situations)
    share = handoff_windows if windows else handoff_matches if situations else handoff_results
    pending = dict(starts)
    published = 0
    while pending:
        for partition, start in list(pending.items()):
            results = share(compiled, archive, topic, partition, start, window, lo, settings)
            if results is not None:
                asyncio.run(publish(kafka, compiled, results))
                published += len(results)
                del pending[partition]
        if pending and time.monotonic() > deadline:
            raise BackfillError(
                f"the archive {archive.uri} does not reach a window ({window:g} ticks) past the "
                f"hand-off of partitions {sorted(pending)} of {topic} "
                f"({'times' if windows else 'offsets'} "
                f"{ {p: starts[p] for p in sorted(pending)} }): is the archiver running?")
        if pending:
            time.sleep(POLL_SECONDS)
    return record, published


