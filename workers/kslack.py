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

from faust.types import TP

from situflow.codecs import arrow_events
from situflow.codecs.errors import InputError
from situflow.codecs.json_events import decode_event, encode_event
from situflow.kslack import KSlack
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
LINGER = 0.02
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
    """One input partition: its K-slack buffer of ``[seq, event]`` items."""

    kslack: KSlack[list[Any]]
    offset: int = -1  # the last input offset processed
    last_input: float = field(default_factory=time.monotonic)  # for the idle timeout
    # Released, not yet sent; in the checkpoint, so a restart sends what it holds.
    outbox: list[list[Any]] = field(default_factory=list)
    sent_at: float = field(default_factory=time.monotonic)  # when the outbox was last sent


def load(value: Any) -> Buffer:
    if value is None:
        return Buffer(KSlack(SLACK))
    return Buffer(KSlack.restore(value["kslack"]), value["offset"], outbox=value["outbox"])


def store(buffer: Buffer) -> dict[str, Any]:
    return {"kslack": buffer.kslack.snapshot(), "offset": buffer.offset, "outbox": buffer.outbox}


buffers = state_table(app, "buffers", config,
                      "per input partition: K-slack buffers and the last offset processed")
states = PartitionStates(app, buffers, load, store, observe=metrics.checkpointed)
buffered: dict[int, int] = {}  # per partition, for the buffer-size gauge


@app.agent(source)
async def reorder(stream: Any) -> None:
    manual = stream.noack()
    async for event in manual.events():
        message = event.message
        partition = message.partition
        if message.topic == TICKS:
            states.tick_arrived(partition)
            await manual.ack(event)
            await on_tick(partition, manual)
            continue
        metrics.messages_in("kslack", RAW).inc()
        buffer = states.get(partition)
        buffer.last_input = time.monotonic()
        if message.offset <= buffer.offset:
            states.hold(partition, event)  # already in the checkpointed buffers
        else:
            deliveries = await reorder_message(buffer, event)
            buffer.offset = message.offset
            states.changed(partition, buffer, event, deliveries)
        if len(buffer.outbox) >= OUTPUT_BATCH or time.monotonic() - buffer.sent_at >= LINGER:
            states.changed(partition, buffer, deliveries=await send_ordered(partition, buffer))
        if states.due(partition):
            await states.checkpoint(partition, manual)
        set_buffered(partition, buffer.kslack.buffered)
        metrics.latency.observe(message_age(message, time.time()))


async def reorder_message(buffer: Buffer, event: Any) -> list[Any]:
    """Push the message's events into the buffers; returns the deliveries of what it sent to
    the late and dead-letter topics (released events wait in the outbox)."""
    message = event.message
    try:
        if event.value is None:
            raise InputError("empty message (null value)")
        arrow = arrow_events.is_arrow(message.headers)
        if arrow:
            batch = arrow_events.decode_batch(event.value, time_field=STREAM.time_field)
            records = arrow_events.events_from_batch(batch)
        else:
            records = [decode_event(event.value, time_field=STREAM.time_field)]
        for record in records:
            check_partition_key(record)
    except InputError as error:
        metrics.dlq("kslack", DLQ).inc()
        return [await dlq.send(key=event.key, value=event.value,
                               headers=dlq_headers(message, error.reason))]
    metrics.events_in("kslack", RAW).inc(len(records))
    too_late: list[dict[str, Any]] = []
    base = message.offset << ROW_BITS
    for row, record in enumerate(records):
        released, late_items = buffer.kslack.push(None, record[STREAM.time_field],
                                                  [base | row, record])
        buffer.outbox.extend(released)
        too_late.extend(record for _, record in late_items)
    if not too_late:
        return []
    metrics.late("kslack", LATE).inc(len(too_late))
    value = arrow_events.encode_batch(arrow_events.batch_from_events(too_late)) if arrow \
        else event.value
    headers = arrow_events.HEADERS if arrow else None
    return [await late.send(key=event.key, value=value, partition=message.partition,
                            headers=headers)]


def check_partition_key(event: dict[str, Any]) -> None:
    """Raise InputError when a key field is missing: downstream state is split by them."""
    for name in STREAM.key_fields:
        if name not in event:
            raise InputError(f"missing partition attribute {name!r}")


async def send_ordered(partition: int, buffer: Buffer) -> list[Any]:
    """The outbox, in release order, as one Arrow message to the same partition number (as
    JSON messages, one per event, if the events' attributes do not fit one Arrow schema)."""
    released, buffer.outbox = buffer.outbox, []
    buffer.sent_at = time.monotonic()
    if not released:
        return []
    rows = [{**record, SEQ_FIELD: seq} for seq, record in released]
    messages: list[tuple[bytes, list[tuple[str, bytes]] | None]]
    try:
        messages = [(arrow_events.encode_batch(arrow_events.batch_from_events(rows)),
                     arrow_events.HEADERS)]
    except InputError:
        messages = [(encode_event(row), None) for row in rows]
    deliveries = [await ordered.send(value=value, partition=partition, headers=headers)
                  for value, headers in messages]
    metrics.messages_out("kslack", ORDERED).inc(len(messages))
    metrics.events_out("kslack", ORDERED).inc(len(rows))
    return deliveries


async def on_tick(partition: int, stream: Any) -> None:
    """Flush a partition idle long enough; checkpoint it when due."""
    buffer = states.get(partition)
    idle = time.monotonic() - buffer.last_input
    if buffer.kslack.buffered and idle >= IDLE_TIMEOUT and await caught_up(partition, buffer):
        # Whether a flush happens depends on timing, not on the input: store that it happened
        # before anything downstream can see it, so a restart cannot undo it (the events of a
        # flushed key that come later are late, before a crash as after).
        buffer.outbox.extend(buffer.kslack.finish())
        states.changed(partition, buffer)
        await states.checkpoint(partition, stream)
    if buffer.outbox:
        states.changed(partition, buffer, deliveries=await send_ordered(partition, buffer))
    set_buffered(partition, buffer.kslack.buffered)
    if states.due(partition):
        await states.checkpoint(partition, stream)


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
            lingering = buffer.outbox and now - buffer.sent_at >= LINGER
            idle = buffer.kslack.buffered and now - buffer.last_input >= IDLE_TIMEOUT
            if not (lingering or idle):
                continue
        if states.want_tick(partition, now):
            await ticks.send(value=b"", partition=partition)


if __name__ == "__main__":
    run(app, config)
