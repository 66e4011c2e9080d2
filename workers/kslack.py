"""The K-slack service: raw ``<stream>`` → ``<stream>.ordered``, in event-time order per partition.

Reads events as JSON (one per message) or Arrow IPC (many per message; ARCHITECTURE.md transport
contract), reorders each input partition's events with :class:`situflow.kslack.KSlack`
(SEMANTICS.md, K-slack) and writes them to the *same partition number* of ``<stream>.ordered``
as Arrow IPC batches, so downstream state stays co-partitioned with the input. The order is per
Kafka partition, not per key, because downstream each partition has one operator over all its
keys, whose windows and run expiry follow one event-time clock. Every released
event carries its input position in the :data:`topics.catalog.SEQ_FIELD` column. Events older
than what was already released go to ``<stream>.late`` (a JSON message unchanged, the late rows
of an Arrow message as an Arrow message), with the DLQ headers of their source message and a
reason that says how late against which released time, e.g. ``event time 12 is 7 before the
released time 19 (slack 5)``; messages that do not decode go, unchanged, to ``<stream>.dlq``
with the reason in the headers. No input stops the service: a message whose processing raises
goes to ``<stream>.dlq`` with the exception (:mod:`workers.failures`).

State: per input partition, its K-slack buffer and the events released but not yet sent,
checkpointed to the ``buffers`` table (RocksDB, changelogged) with the input offset they hold,
as :mod:`workers.partitions` explains (which applies each input message once, in order).
Replaying the input after a restart releases the same events in the same
order, so downstream recognises repeats by position; the one decision that depends on timing,
the idle flush, is checkpointed before its events are sent, and no later checkpoint of a
worker that lost the partition meanwhile can undo it (checkpoints are fenced by an epoch,
:mod:`workers.partitions`).

Producers must key input messages so that one partition key stays in one partition (the
catalog's ``key_fields``): the evaluating services keep a key's state in its partition.

Idle timeout (SEMANTICS.md: "an idle timeout and the end of input flush the buffer"): a tick on
a partition that saw no input for ``SITUFLOW_IDLE_TIMEOUT`` seconds, and whose input is all
consumed, releases every buffered event of that partition. Later events of that partition are
then late, as the semantics say.

**Unpartitioned streams** (``SITUFLOW_UNPARTITIONED=1``; thesis §5.6.3/§5.6.5): K-slack is the
*batcher*. The stream's input has one partition, the one point where a global event-time order
can be made, and this service restores that order and slices it into consecutive batches with
dense numbers 0, 1, 2, ..., written as one Arrow message each to partition ``s mod partitions``
of ``<stream>.ordered`` ("we divide the input topic into n topic partitions and distribute event
batches to those partitions"), so that a deriver group derives them in parallel. Each event's
``_situflow_seq`` is its position in the global order. Where a batch ends is
:class:`~situflow.tpstream.situation_batches.EventSlicer`'s rule: ``SITUFLOW_BATCH_EVENTS``
events (default 8192) or an event more than ``SITUFLOW_BATCH_SPAN`` event-time units (default
K) after the batch's first, so a slow stream's events wait about K more for their batch; an idle
flush also ends the open batch. Both rules read only the released events, which a replay
releases again in the same order, so a restart from a checkpoint cuts and numbers the same
batches as before the crash; an idle flush's cut, the one decision taken by the clock, is
checkpointed before its batch is sent, and batches cut but not yet sent are in the checkpoint.
The batch settings are kept in the state: a restarted service cuts as before, whatever its
environment says. An attribute whose type changes between events never cuts a batch: such a
column is held as JSON text (:func:`situflow.codecs.arrow_events.unify`).

K-slack also reads the query registry (``SITUFLOW_REGISTRY=1``) and heads each batch with how
many registry records it had read when it cut the batch, and the batch before: a query
registered in between begins at this batch, for every deriver alike (derivers read the registry
at their own pace, so "from when a deriver learns of it" would leave holes in the sequence).
It reads the registry to its end before it cuts anything, so the counts never go back, also
across restarts.

Settings (besides :mod:`workers.app`): ``SITUFLOW_SLACK`` (K, in event-time units; default 0)
and ``SITUFLOW_IDLE_TIMEOUT`` (seconds; default 5); for unpartitioned streams
``SITUFLOW_BATCH_EVENTS`` and ``SITUFLOW_BATCH_SPAN``. Run: ``python -m workers.kslack worker``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from faust.types import TP

from situflow.codecs import arrow_events
from situflow.codecs.errors import InputError
from situflow.codecs.event_types import arrow_key_problem, key_problem
from situflow.codecs.json_events import decode_event
from situflow.kslack import ColumnarKSlack
from situflow.tpstream.situation_batches import EventSlicer
from topics.catalog import (
    BATCH_REGISTRY_BEFORE_HEADER,
    BATCH_REGISTRY_HEADER,
    BATCH_SEQ_HEADER,
    ROW_BITS,
    SEQ_FIELD,
    stream_topics,
)
from topics.registry import RegistryWatcher
from workers.app import (
    ServiceConfig,
    ServiceMetrics,
    dlq_headers,
    make_app,
    message_age,
    owned_partitions,
    run,
    state_table,
)
from workers.evaluation import check_stream
from workers.failures import (
    TEST_RAISE_ENV,
    CrashRecord,
    Failure,
    crash_test_marker,
    describe,
    on_error_setting,
)
from workers.partitions import PartitionStates

config = ServiceConfig.from_env("kslack")
SLACK = int(os.environ.get("SITUFLOW_SLACK", "0"))
IDLE_TIMEOUT = float(os.environ.get("SITUFLOW_IDLE_TIMEOUT", "5"))
#: Released events go out as one Arrow message when this many wait, or when the oldest has
#: waited ``LINGER`` seconds (a tick sends them when no input comes): few, large messages
#: under load, low latency otherwise.
OUTPUT_BATCH = 8192
LINGER = 0.005
#: JSON events pushed into the K-slack buffer together at most.
INBOX_BATCH = 1024
STREAM = config.stream
check_stream(config)
UNPARTITIONED = STREAM.unpartitioned
BATCH_EVENTS = int(os.environ.get("SITUFLOW_BATCH_EVENTS", OUTPUT_BATCH))
BATCH_SPAN = int(os.environ.get("SITUFLOW_BATCH_SPAN", SLACK))
RAW, ORDERED, LATE, DLQ = (spec.name for spec in stream_topics(STREAM))
# The app's, the table's and the ticks' partitions are the input's (one if unpartitioned).
INPUT = dataclasses.replace(config, stream=dataclasses.replace(
    STREAM, partitions=STREAM.input_partitions))

app = make_app(f"situflow-kslack-{STREAM.name}", INPUT)
metrics = ServiceMetrics(app, "kslack", inputs=(RAW,))
TICKS = f"{app.conf.id}-ticks"

# internal=True: Faust creates the ticks topic (co-partitioned with the input) before it
# subscribes; the raw topic already exists (topics are created from the catalog first) and is
# left as it is.
source = app.topic(RAW, TICKS, internal=True, partitions=STREAM.input_partitions,
                   key_serializer="raw", value_serializer="raw", retention=3600.0)
ticks = app.topic(TICKS, key_serializer="raw", value_serializer="raw")
ordered = app.topic(ORDERED, key_serializer="raw", value_serializer="raw")
late = app.topic(LATE, key_serializer="raw", value_serializer="raw")
dlq = app.topic(DLQ, key_serializer="raw", value_serializer="raw")


@dataclass
class Batch:
    """A batch of an unpartitioned stream, cut but maybe not sent yet (module doc): its number,
    the registry records read at its cut and at the cut before, its events."""

    seq: int
    registry_before: int
    registry: int
    events: pa.Table


@dataclass
class Batcher:
    """The batcher of an unpartitioned stream: where it cuts, what it numbers next, the batches
    cut but not sent (the open batch's events are the buffer's outbox)."""

    slicer: EventSlicer
    next_seq: int = 0
    position: int = 0  # of the next released event in the global order
    registry: int = -1  # registry records read at the last cut (-1: no cut yet)
    ready: list[Batch] = field(default_factory=list)


@dataclass
class Buffer:
    """One input partition: its K-slack buffer, a table of events with their input seq."""

    kslack: ColumnarKSlack
    last_input: float = field(default_factory=time.monotonic)  # for the idle timeout
    # Released, not yet sent (unpartitioned: the open batch); in the checkpoint, so a restart
    # sends what it holds.
    outbox: list[pa.Table] = field(default_factory=list)
    # JSON events not yet pushed: pushing one row at a time would cost as much as a batch.
    # Never in a checkpoint: it is pushed before every checkpoint.
    inbox: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)
    sent_at: float = field(default_factory=time.monotonic)  # when the outbox was last sent
    batcher: Batcher | None = None  # of an unpartitioned stream

    @property
    def outgoing(self) -> int:
        return sum(table.num_rows for table in self.outbox)


def load(value: Any) -> Buffer:
    if value is None:
        batcher = Batcher(EventSlicer(BATCH_EVENTS, BATCH_SPAN)) if UNPARTITIONED else None
        return Buffer(ColumnarKSlack(SLACK, STREAM.time_field), batcher=batcher)
    outbox = [table_of(value["outbox"])] if value["outbox"] else []
    if value.get("batcher") is not None:
        state = value["batcher"]
        ready = [Batch(b["seq"], b["registry_before"], b["registry"], table_of(b["events"]))
                 for b in state["ready"]]
        batcher = Batcher(EventSlicer(**state["slicer"]), state["next_seq"], state["position"],
                          state["registry"], ready)
    else:
        batcher = None
    return Buffer(ColumnarKSlack.restore(value["kslack"]), outbox=outbox, batcher=batcher)


def store(buffer: Buffer) -> dict[str, Any]:
    outbox = [row for table in buffer.outbox for row in arrow_events.events_from_batch(table)]
    batcher = buffer.batcher
    return {"kslack": buffer.kslack.snapshot(), "outbox": outbox,
            "batcher": None if batcher is None else {
                "slicer": dataclasses.asdict(batcher.slicer), "next_seq": batcher.next_seq,
                "position": batcher.position, "registry": batcher.registry,
                "ready": [{"seq": b.seq, "registry_before": b.registry_before,
                           "registry": b.registry,
                           "events": arrow_events.events_from_batch(b.events)}
                          for b in batcher.ready]}}


def table_of(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_batches([arrow_events.batch_from_events(rows)])


buffers = state_table(app, "buffers", INPUT,
                      "per input partition: K-slack buffers and the input offset they hold")
crashes = CrashRecord.from_env(config.data_dir)
states = PartitionStates(app, buffers, load, store, observe=metrics.checkpointed,
                         crashes=crashes, on_error=on_error_setting())
metrics.follow(lambda topic, partition: states.applied(partition, topic), crashes)
CRASH_ON, RAISE_ON = crash_test_marker(), crash_test_marker(TEST_RAISE_ENV)
buffered: dict[int, int] = {}  # per partition, for the buffer-size gauge
#: The query registry an unpartitioned stream's batches count the records of; set once it has
#: been read to its end, before which nothing is cut (module doc).
registry: list[RegistryWatcher] = []
registry_read = asyncio.Event()
if UNPARTITIONED and os.environ.get("SITUFLOW_REGISTRY") == "1":
    metrics.registry_synced = False

    @app.task
    async def follow_registry() -> None:
        async with RegistryWatcher(config.kafka) as watcher:
            await watcher.wait_synced()
            registry.append(watcher)
            metrics.registry_synced = True
            registry_read.set()
            await asyncio.Event().wait()  # follow until the app stops (cancels this task)
else:
    registry_read.set()


@app.agent(source)
async def reorder(stream: Any) -> None:
    await states.consume(stream, TICKS, on_message, on_tick, on_poison=poisoned)


async def on_message(event: Any) -> None:
    await registry_read.wait()
    metrics.messages_in("kslack", RAW).inc()
    if CRASH_ON is not None and CRASH_ON in (event.value or b""):
        os.kill(os.getpid(), signal.SIGKILL)  # TEST_CRASH_ENV: tests only
    try:
        await handle(event)
    finally:  # also when it failed: the message was handled (workers.failures)
        metrics.latency.observe(message_age(event.message, time.time()))


async def handle(event: Any) -> None:
    partition = event.message.partition
    buffer = states.get(partition)
    buffer.last_input = time.monotonic()
    states.changed(partition, buffer, event, await take_in(buffer, event))
    lingered = time.monotonic() - buffer.sent_at >= LINGER
    # A careful replay (workers.failures) pushes each event at once, so a failure is its own.
    if buffer.inbox and (states.due(partition) or lingered or len(buffer.inbox) >= INBOX_BATCH
                         or states.careful(partition)):
        states.changed(partition, buffer, deliveries=await push_inbox(buffer))
    if buffer.batcher is not None:
        if lingered:  # the inbox was pushed: its clock restarts
            buffer.sent_at = time.monotonic()
        if buffer.batcher.ready:
            await send_batches(partition, buffer)
    elif buffer.outgoing >= OUTPUT_BATCH or lingered:
        states.changed(partition, buffer, deliveries=await send_ordered(partition, buffer))
    set_buffered(partition, buffer.kslack.buffered)


async def take_in(buffer: Buffer, event: Any) -> list[Any]:
    """Decode a message: a JSON event waits in the inbox, an Arrow batch is pushed (after the
    inbox, to keep arrival order). Returns the deliveries of what went to the late and
    dead-letter topics (released events wait in the outbox)."""
    arrow = arrow_events.is_arrow(event.message.headers)
    try:
        if not arrow:
            record = decode_event(value_of(event), time_field=STREAM.time_field,
                                  time_unit=STREAM.time_unit)
            check_partition_key(record, lambda name: key_problem(name, record[name]))
            buffer.inbox.append((event, record))
            metrics.events_in("kslack", RAW).inc()
            return []
        batch = arrow_events.decode_batch(value_of(event), time_field=STREAM.time_field,
                                          time_unit=STREAM.time_unit)
        check_partition_key(batch.schema.names, lambda name: arrow_key_problem(name, batch))
    except InputError as error:
        return [await dead_letter(event, error.reason)]
    metrics.events_in("kslack", RAW).inc(batch.num_rows)
    seq = (event.message.offset << ROW_BITS) + np.arange(batch.num_rows, dtype=np.int64)
    table = pa.Table.from_batches([batch]).append_column(SEQ_FIELD, pa.array(seq))
    return [*await push_inbox(buffer), *await push(buffer, table, {}, event)]


async def push_inbox(buffer: Buffer) -> list[Any]:
    """Push the waiting JSON events as one table (whatever their attributes' types: columns
    that disagree are held as JSON text, :mod:`situflow.codecs.arrow_events`)."""
    entries, buffer.inbox = buffer.inbox, []
    if not entries:
        return []
    sources = {event.message.offset << ROW_BITS: event for event, _ in entries}
    return await push(buffer, json_table(entries), sources)


def json_table(entries: list[tuple[Any, dict[str, Any]]]) -> pa.Table:
    if RAISE_ON is not None and any(RAISE_ON in event.value for event, _ in entries):
        raise RuntimeError(f"{TEST_RAISE_ENV}: a bug while pushing the inbox")
    batch = arrow_events.batch_from_events([record for _, record in entries])
    seq = pa.array([event.message.offset << ROW_BITS for event, _ in entries], pa.int64())
    return pa.Table.from_batches([batch]).append_column(SEQ_FIELD, seq)


async def push(buffer: Buffer, table: pa.Table, sources: dict[int, Any],
               arrow_message: Any = None) -> list[Any]:
    """Push ``table`` into the K-slack buffer; late rows go to ``<stream>.late``: a JSON
    event's message unchanged (``sources`` by seq), an Arrow message's rows as Arrow; each
    with the DLQ headers, whose reason says how late against which released time."""
    before = buffer.kslack.released
    released, too_late = buffer.kslack.push(table)
    if released.num_rows:
        release(buffer, released)
    if not too_late.num_rows:
        return []
    metrics.late("kslack", LATE).inc(too_late.num_rows)
    times = too_late.column(STREAM.time_field).to_pylist()
    after = buffer.kslack.released
    if arrow_message is not None:
        rows = too_late.drop_columns([SEQ_FIELD]).combine_chunks().to_batches()[0]
        earliest = min(times)
        reason = (f"{len(times)} event(s) with event times {earliest}..{max(times)}: the "
                  f"earliest is {late_by(earliest, before, after)}")
        return [await late.send(key=arrow_message.key, value=arrow_events.encode_batch(rows),
                                partition=arrow_message.message.partition,
                                headers=[*arrow_events.HEADERS,
                                         *dlq_headers(arrow_message.message, reason)])]
    originals = [sources[seq] for seq in too_late.column(SEQ_FIELD).to_pylist()]
    return [await late.send(key=e.key, value=e.value, partition=e.message.partition,
                            headers=dlq_headers(e.message, f"event time {ts} is "
                                                f"{late_by(ts, before, after)}"))
            for e, ts in zip(originals, times, strict=True)]


def late_by(ts: int, before: int | None, after: int | None) -> str:
    """How late event time ``ts`` is, against the released time it came after: the one
    before the push if it was late already then, else the one the push reached."""
    against = before if before is not None and ts < before else after
    return f"{against - ts if against is not None else '?'} before the released time " \
           f"{against} (slack {SLACK})"


def value_of(event: Any) -> bytes:
    if event.value is None:
        raise InputError("empty message (null value)")
    return bytes(event.value)


def check_partition_key(names: Any, problem: Callable[[str], str | None]) -> None:
    """Raise InputError when a key field is missing, or ``problem(name)`` says its value is
    no single value (the typing rule, :mod:`situflow.codecs.event_types`): downstream state is
    split by them."""
    for name in STREAM.key_fields:
        if name not in names:
            raise InputError(f"missing partition attribute {name!r}")
        reason = problem(name)
        if reason is not None:
            raise InputError(reason)


async def poisoned(event: Any, failure: Failure) -> None:
    """A message found to fail while it was processed (workers.failures): to the DLQ."""
    metrics.processing_errors("kslack", RAW, "").inc()
    metrics.dlq("kslack", DLQ).inc()
    await dlq.send(key=event.key, value=event.value, headers=dlq_headers(
        event.message, f"processing failed: {describe(failure.exception)}", failure.exception))


async def dead_letter(event: Any, reason: str) -> Any:
    metrics.dlq("kslack", DLQ).inc()
    return await dlq.send(key=event.key, value=event.value,
                          headers=dlq_headers(event.message, reason))


async def send_ordered(partition: int, buffer: Buffer) -> list[Any]:
    """The outbox, in release order, as one Arrow message to the same partition number."""
    released, buffer.outbox = buffer.outbox, []
    buffer.sent_at = time.monotonic()
    if not released:
        return []
    table = arrow_events.concat(released).combine_chunks()
    count = table.num_rows
    deliveries = [await ordered.send(value=arrow_events.encode_batch(table.to_batches()[0]),
                                     partition=partition, headers=arrow_events.HEADERS)]
    metrics.messages_out("kslack", ORDERED).inc()
    metrics.events_out("kslack", ORDERED).inc(count)
    return deliveries


async def on_tick(partition: int) -> None:
    """Push the inbox, flush a partition idle long enough, send the outbox."""
    await registry_read.wait()
    buffer = states.get(partition)
    if buffer.inbox:
        states.changed(partition, buffer, deliveries=await push_inbox(buffer))
    idle = time.monotonic() - buffer.last_input
    if waiting(buffer) and idle >= IDLE_TIMEOUT and await caught_up(partition):
        # Whether a flush happens depends on timing, not on the input: store that it happened
        # before anything downstream can see it, so a restart cannot undo it (the events of a
        # flushed key that come later are late, before a crash as after).
        flushed = buffer.kslack.finish()
        if flushed is not None:
            release(buffer, flushed)
        if buffer.batcher is not None:
            buffer.batcher.slicer.close()
            end_batch(buffer, buffer.batcher)
        states.changed(partition, buffer)
        await states.checkpoint(partition)
    if buffer.batcher is not None and buffer.batcher.ready:
        await send_batches(partition, buffer)
    elif buffer.batcher is None and buffer.outbox:
        states.changed(partition, buffer, deliveries=await send_ordered(partition, buffer))
    set_buffered(partition, buffer.kslack.buffered)


def waiting(buffer: Buffer) -> bool:
    """Whether events wait for input that may not come: in the K-slack buffer, or in the open
    batch of an unpartitioned stream."""
    return bool(buffer.kslack.buffered or (buffer.batcher is not None and buffer.outbox))


def release(buffer: Buffer, released: pa.Table) -> None:
    """Released events wait in the outbox (unpartitioned: sliced into batches)."""
    if buffer.batcher is None:
        buffer.outbox.append(released)
    else:
        slice_released(buffer, buffer.batcher, released)


def slice_released(buffer: Buffer, batcher: Batcher, released: pa.Table) -> None:
    """Number released events by their global position and cut them into batches (module doc):
    complete batches become ready, the rest stays in the open batch (the outbox)."""
    start = batcher.position
    batcher.position += released.num_rows
    positions = pa.array(np.arange(start, batcher.position, dtype=np.int64))
    released = released.set_column(released.schema.get_field_index(SEQ_FIELD), SEQ_FIELD,
                                   positions)
    times = np.asarray(released.column(STREAM.time_field).to_numpy(), dtype=np.int64)
    done = 0
    for cut in batcher.slicer.cuts(times):
        if cut > done:
            buffer.outbox.append(released.slice(done, cut - done))
        end_batch(buffer, batcher)
        done = cut
    if done < released.num_rows:
        buffer.outbox.append(released.slice(done))


def end_batch(buffer: Buffer, batcher: Batcher) -> None:
    """The open batch, if any, is cut where the slicer says (or after it closed the batch): it
    gets the next number and is ready to send."""
    if not buffer.outbox:
        return
    events = arrow_events.concat(buffer.outbox).combine_chunks()
    buffer.outbox = []
    read = registry[0].position if registry else 0
    batcher.ready.append(Batch(batcher.next_seq, batcher.registry, read, events))
    batcher.next_seq += 1
    batcher.registry = read


async def send_batches(partition: int, buffer: Buffer) -> None:
    """Send the ready batches, each as one Arrow message to partition ``seq mod partitions``."""
    assert buffer.batcher is not None
    ready, buffer.batcher.ready = buffer.batcher.ready, []
    deliveries = []
    for batch in ready:
        headers = [*arrow_events.HEADERS, (BATCH_SEQ_HEADER, str(batch.seq).encode()),
                   (BATCH_REGISTRY_HEADER, str(batch.registry).encode()),
                   (BATCH_REGISTRY_BEFORE_HEADER, str(batch.registry_before).encode())]
        deliveries.append(await ordered.send(
            value=arrow_events.encode_batch(batch.events.to_batches()[0]),
            partition=batch.seq % STREAM.partitions, headers=headers))
        metrics.events_out("kslack", ORDERED).inc(batch.events.num_rows)
    metrics.messages_out("kslack", ORDERED).inc(len(ready))
    states.changed(partition, buffer, deliveries=deliveries)


async def caught_up(partition: int) -> bool:
    """Whether no input of ``partition`` waits, fetched or not.

    A lagging partition looks idle: the consumer may spend seconds on a large fetch of another
    partition. Flushing it then would turn its next events late, so idleness also requires the
    consumer to have fetched up to the high watermark and processed all it fetched. (tansu's
    high watermark can lag by one record batch; see :mod:`workers.broker`.)
    """
    tp = TP(RAW, partition)
    position = await app.consumer.position(tp)
    if position is None:
        return False
    fetched_all = position >= (app.consumer.highwater(tp) or 0)
    return fetched_all and states.applied(partition, RAW) + 1 >= position


def set_buffered(partition: int, count: int) -> None:
    metrics.buffered.inc(count - buffered.get(partition, 0))
    buffered[partition] = count


@app.timer(interval=2 * LINGER)
async def tick() -> None:
    """A tick to each partition of this worker with work waiting: they bound the time a
    released event waits in the outbox, and flush and checkpoint idle partitions."""
    now = time.monotonic()
    for partition in owned_partitions(app, RAW):
        if states.positioned(partition) and not states.due(partition):
            buffer = states.get(partition)
            unsent = buffer.outbox if buffer.batcher is None else buffer.batcher.ready
            lingering = (unsent or buffer.inbox) and now - buffer.sent_at >= LINGER
            idle = waiting(buffer) and now - buffer.last_input >= IDLE_TIMEOUT
            if not (lingering or idle):
                continue
        if states.want_tick(partition, now):
            await ticks.send(value=b"", partition=partition)


if __name__ == "__main__":
    run(app, config)
