"""The K-slack service: raw ``<stream>`` → ``<stream>.ordered``, in event-time order per partition.

Reads events as JSON (one per message) or Arrow IPC (many per message; ARCHITECTURE.md transport
contract), reorders each input partition's events with :class:`situflow.kslack.KSlack`
(SEMANTICS.md, K-slack) and writes them to the *same partition number* of ``<stream>.ordered``
as Arrow IPC batches, so downstream state stays co-partitioned with the input. The order is per
Kafka partition, not per key, because downstream each partition has one operator over all its
keys, whose windows and run expiry follow one event-time clock. Every released
event carries its input position in the :data:`topics.catalog.SEQ_FIELD` column. Events older
than what was already released go to ``<stream>.late`` (a JSON message unchanged, the late rows
of an Arrow message as an Arrow message); messages that do not decode go, unchanged, to
``<stream>.dlq`` with the reason in the headers. No input stops the service.

State: per input partition, its K-slack buffer, the events released but not yet
sent, and the last input offset processed, checkpointed to the ``buffers`` table (RocksDB,
changelogged) as :mod:`workers.partitions` explains. A redelivered message at or before that
offset is skipped. Replaying the input after a restart releases the same events in the same
order, so downstream recognises repeats by position; the one decision that depends on timing,
the idle flush, is checkpointed before its events are sent.

Producers must key input messages so that one partition key stays in one partition (the
catalog's ``key_fields``): the evaluating services keep a key's state in its partition.

Idle timeout (SEMANTICS.md: "an idle timeout and the end of input flush the buffer"): a tick on
a partition that saw no input for ``SITUFLOW_IDLE_TIMEOUT`` seconds, and whose input is all
consumed, releases every buffered event of that partition. Later events of that partition are
then late, as the semantics say.

Settings (besides :mod:`workers.app`): ``SITUFLOW_SLACK`` (K, in event-time units; default 0)
and ``SITUFLOW_IDLE_TIMEOUT`` (seconds; default 5). Run: ``python -m workers.kslack worker``.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from faust.types import TP

from situflow.codecs import arrow_events
from situflow.codecs.errors import InputError
from situflow.codecs.json_events import decode_event, encode_event
from situflow.kslack import ColumnarKSlack
from topics.catalog import ROW_BITS, SEQ_FIELD, stream_topics
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
if not STREAM.key_fields:
    sys.exit(f"situflow {config.service}: set SITUFLOW_KEY_FIELDS to the partition attributes; "
             "unpartitioned streams (thesis 5.6.3) are not supported by the services yet")
RAW, ORDERED, LATE, DLQ = (spec.name for spec in stream_topics(STREAM))

app = make_app(f"situflow-kslack-{STREAM.name}", config)
metrics = ServiceMetrics(app, "kslack", inputs=(RAW,))
TICKS = f"{app.conf.id}-ticks"

# internal=True: Faust creates the ticks topic (co-partitioned with the input) before it
# subscribes; the raw topic already exists (topics are created from the catalog first) and is
# left as it is.
source = app.topic(RAW, TICKS, internal=True, partitions=STREAM.partitions,
                   key_serializer="raw", value_serializer="raw", retention=3600.0)
ticks = app.topic(TICKS, key_serializer="raw", value_serializer="raw")
ordered = app.topic(ORDERED, key_serializer="raw", value_serializer="raw")
late = app.topic(LATE, key_serializer="raw", value_serializer="raw")
dlq = app.topic(DLQ, key_serializer="raw", value_serializer="raw")


@dataclass
class Buffer:
    """One input partition: its K-slack buffer, a table of events with their input seq."""

    kslack: ColumnarKSlack
    offset: int = -1  # the last input offset processed
    last_input: float = field(default_factory=time.monotonic)  # for the idle timeout
    # Released, not yet sent; in the checkpoint, so a restart sends what it holds.
    outbox: list[pa.Table] = field(default_factory=list)
    # JSON events not yet pushed: pushing one row at a time would cost as much as a batch.
    # Never in a checkpoint: it is pushed before every checkpoint.
    inbox: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)
    sent_at: float = field(default_factory=time.monotonic)  # when the outbox was last sent

    @property
    def outgoing(self) -> int:
        return sum(table.num_rows for table in self.outbox)


def load(value: Any) -> Buffer:
    if value is None:
        return Buffer(ColumnarKSlack(SLACK, STREAM.time_field))
    outbox = [arrow_events.batch_from_events(value["outbox"])] if value["outbox"] else []
    return Buffer(ColumnarKSlack.restore(value["kslack"]), value["offset"],
                  outbox=[pa.Table.from_batches([batch]) for batch in outbox])


def store(buffer: Buffer) -> dict[str, Any]:
    outbox = [row for table in buffer.outbox for row in table.to_pylist()]
    return {"kslack": buffer.kslack.snapshot(), "offset": buffer.offset, "outbox": outbox}


buffers = state_table(app, "buffers", config,
                      "per input partition: K-slack buffers and the last offset processed")
states = PartitionStates(app, buffers, load, store, observe=metrics.checkpointed)
buffered: dict[int, int] = {}  # per partition, for the buffer-size gauge


@app.agent(source)
async def reorder(stream: Any) -> None:
    await states.consume(stream, TICKS, on_message, on_tick)


async def on_message(event: Any) -> None:
    message = event.message
    partition = message.partition
    metrics.messages_in("kslack", RAW).inc()
    buffer = states.get(partition)
    buffer.last_input = time.monotonic()
    if message.offset <= buffer.offset:
        states.hold(partition, event)  # already in the checkpointed buffers
    else:
        deliveries = await take_in(buffer, event)
        buffer.offset = message.offset
        states.changed(partition, buffer, event, deliveries)
    lingered = time.monotonic() - buffer.sent_at >= LINGER
    if buffer.inbox and (states.due(partition) or lingered or len(buffer.inbox) >= INBOX_BATCH):
        states.changed(partition, buffer, deliveries=await push_inbox(buffer))
    if buffer.outgoing >= OUTPUT_BATCH or lingered:
        states.changed(partition, buffer, deliveries=await send_ordered(partition, buffer))
    set_buffered(partition, buffer.kslack.buffered)
    metrics.latency.observe(message_age(message, time.time()))


async def take_in(buffer: Buffer, event: Any) -> list[Any]:
    """Decode a message: a JSON event waits in the inbox, an Arrow batch is pushed (after the
    inbox, to keep arrival order). Returns the deliveries of what went to the late and
    dead-letter topics (released events wait in the outbox)."""
    arrow = arrow_events.is_arrow(event.message.headers)
    try:
        if not arrow:
            record = decode_event(value_of(event), time_field=STREAM.time_field)
            check_partition_key(record)
            buffer.inbox.append((event, record))
            metrics.events_in("kslack", RAW).inc()
            return []
        batch = arrow_events.decode_batch(value_of(event), time_field=STREAM.time_field)
        check_partition_key(batch.schema.names)
    except InputError as error:
        return [await dead_letter(event, error.reason)]
    metrics.events_in("kslack", RAW).inc(batch.num_rows)
    seq = (event.message.offset << ROW_BITS) + np.arange(batch.num_rows, dtype=np.int64)
    table = pa.Table.from_batches([batch]).append_column(SEQ_FIELD, pa.array(seq))
    return [*await push_inbox(buffer), *await push(buffer, table, {}, event)]


async def push_inbox(buffer: Buffer) -> list[Any]:
    """Push the waiting JSON events as one table; if their attributes conflict, one by one,
    so that only the conflicting events go to the dead-letter topic."""
    entries, buffer.inbox = buffer.inbox, []
    if not entries:
        return []
    sources = {event.message.offset << ROW_BITS: event for event, _ in entries}
    try:
        return await push(buffer, json_table(entries), sources)
    except (InputError, pa.ArrowInvalid, pa.ArrowTypeError):
        deliveries = []
        for entry in entries:
            try:
                deliveries += await push(buffer, json_table([entry]), sources)
            except (InputError, pa.ArrowInvalid, pa.ArrowTypeError) as error:
                deliveries.append(await dead_letter(
                    entry[0], f"attributes do not fit the buffered events: {error}"))
        return deliveries


def json_table(entries: list[tuple[Any, dict[str, Any]]]) -> pa.Table:
    batch = arrow_events.batch_from_events([record for _, record in entries])
    seq = pa.array([event.message.offset << ROW_BITS for event, _ in entries], pa.int64())
    return pa.Table.from_batches([batch]).append_column(SEQ_FIELD, seq)


async def push(buffer: Buffer, table: pa.Table, sources: dict[int, Any],
               arrow_message: Any = None) -> list[Any]:
    """Push ``table`` into the K-slack buffer; late rows go to ``<stream>.late``: a JSON
    event's message unchanged (``sources`` by seq), an Arrow message's rows as Arrow."""
    try:
        released, too_late = buffer.kslack.push(table)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
        if arrow_message is None:
            raise
        return [await dead_letter(arrow_message,
                                  f"attributes do not fit the buffered events: {error}")]
    if released.num_rows:
        buffer.outbox.append(released)
    if not too_late.num_rows:
        return []
    metrics.late("kslack", LATE).inc(too_late.num_rows)
    if arrow_message is not None:
        rows = too_late.drop_columns([SEQ_FIELD]).combine_chunks().to_batches()[0]
        return [await late.send(key=arrow_message.key, value=arrow_events.encode_batch(rows),
                                partition=arrow_message.message.partition,
                                headers=arrow_events.HEADERS)]
    originals = [sources[seq] for seq in too_late.column(SEQ_FIELD).to_pylist()]
    return [await late.send(key=e.key, value=e.value, partition=e.message.partition)
            for e in originals]


def value_of(event: Any) -> bytes:
    if event.value is None:
        raise InputError("empty message (null value)")
    return bytes(event.value)


def check_partition_key(names: Any) -> None:
    """Raise InputError when a key field is missing: downstream state is split by them."""
    for name in STREAM.key_fields:
        if name not in names:
            raise InputError(f"missing partition attribute {name!r}")


async def dead_letter(event: Any, reason: str) -> Any:
    metrics.dlq("kslack", DLQ).inc()
    return await dlq.send(key=event.key, value=event.value,
                          headers=dlq_headers(event.message, reason))


async def send_ordered(partition: int, buffer: Buffer) -> list[Any]:
    """The outbox, in release order, as one Arrow message to the same partition number (as
    JSON messages, one per event, if the events' attributes do not fit one Arrow schema)."""
    released, buffer.outbox = buffer.outbox, []
    buffer.sent_at = time.monotonic()
    if not released:
        return []
    messages: list[tuple[bytes, list[tuple[str, bytes]] | None]]
    try:
        table = pa.concat_tables(released, promote_options="permissive").combine_chunks()
        messages = [(arrow_events.encode_batch(table.to_batches()[0]), arrow_events.HEADERS)]
        count = table.num_rows
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        rows = [row for part in released for row in part.to_pylist()]
        messages = [(encode_event(row), None) for row in rows]
        count = len(rows)
    deliveries = [await ordered.send(value=value, partition=partition, headers=headers)
                  for value, headers in messages]
    metrics.messages_out("kslack", ORDERED).inc(len(messages))
    metrics.events_out("kslack", ORDERED).inc(count)
    return deliveries


async def on_tick(partition: int) -> None:
    """Push the inbox, flush a partition idle long enough, send the outbox."""
    buffer = states.get(partition)
    if buffer.inbox:
        states.changed(partition, buffer, deliveries=await push_inbox(buffer))
    idle = time.monotonic() - buffer.last_input
    if buffer.kslack.buffered and idle >= IDLE_TIMEOUT and await caught_up(partition, buffer):
        # Whether a flush happens depends on timing, not on the input: store that it happened
        # before anything downstream can see it, so a restart cannot undo it (the events of a
        # flushed key that come later are late, before a crash as after).
        flushed = buffer.kslack.finish()
        if flushed is not None:
            buffer.outbox.append(flushed)
        states.changed(partition, buffer)
        await states.checkpoint(partition)
    if buffer.outbox:
        states.changed(partition, buffer, deliveries=await send_ordered(partition, buffer))
    set_buffered(partition, buffer.kslack.buffered)


async def caught_up(partition: int, buffer: Buffer) -> bool:
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
    return fetched_all and buffer.offset + 1 >= position


def set_buffered(partition: int, count: int) -> None:
    metrics.buffered.inc(count - buffered.get(partition, 0))
    buffered[partition] = count


@app.timer(interval=2 * LINGER)
async def tick() -> None:
    """A tick to each partition of this worker with work waiting: they bound the time a
    released event waits in the outbox, and flush and checkpoint idle partitions."""
    now = time.monotonic()
    for partition in owned_partitions(app, RAW):
        if states.loaded(partition) and not states.due(partition):
            buffer = states.get(partition)
            lingering = (buffer.outbox or buffer.inbox) and now - buffer.sent_at >= LINGER
            idle = buffer.kslack.buffered and now - buffer.last_input >= IDLE_TIMEOUT
            if not (lingering or idle):
                continue
        if states.want_tick(partition, now):
            await ticks.send(value=b"", partition=partition)


if __name__ == "__main__":
    run(app, config)
