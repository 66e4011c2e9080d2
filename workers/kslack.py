"""The K-slack service: raw ``<stream>`` → ``<stream>.ordered`` in event-time order per key.

Reads JSON events (ARCHITECTURE.md transport contract), reorders each partition key's events
with :class:`situflow.kslack.KSlack` (SEMANTICS.md, K-slack) and writes them, re-encoded with the
event time normalised to an integer, to the *same partition number* of ``<stream>.ordered``,
keyed by the partition key (a JSON array of the ``SITUFLOW_KEY_FIELDS`` values), so downstream
state stays co-partitioned with the input. Events older than what was already released go,
unchanged, to ``<stream>.late``; messages that do not decode go, unchanged, to ``<stream>.dlq``
with the reason in the headers. No input stops the service.

State: one K-slack buffer per partition key in the ``buffers`` table (RocksDB, changelogged),
with the input offset it holds and the output of the key's messages since the last commit.
After a crash, an input message the state already holds is not buffered twice; its output is
sent again instead, since it may not have reached the broker (at-least-once: the matcher drops
the repeats by (event time, input offset)).

Producers must key input messages so that one partition key stays in one partition (the
catalog's ``key_fields``): a key seen in two partitions gets two independent buffers.

Idle timeout (SEMANTICS.md: "an idle timeout and the end of input flush the buffer"): a Faust
table may only change while processing a message of its partition, so a timer writes a *tick*
to every partition of the internal topic ``<app>-ticks`` (co-partitioned with the input); a
tick on a partition that saw no input for ``SITUFLOW_IDLE_TIMEOUT`` seconds releases every
buffered event of that partition. Later events of those keys are then late, as the semantics
say.

Settings (besides :mod:`workers.app`): ``SITUFLOW_SLACK`` (K, in event-time units; default 0)
and ``SITUFLOW_IDLE_TIMEOUT`` (seconds; default 5). Run: ``python -m workers.kslack worker``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from faust.types import TP

from situflow.codecs.errors import InputError
from situflow.codecs.json_events import decode_event, encode_event
from situflow.kslack import KSlack
from topics.catalog import stream_topics
from workers.app import ServiceConfig, ServiceMetrics, dlq_headers, make_app, message_age

config = ServiceConfig.from_env("kslack")
SLACK = int(os.environ.get("SITUFLOW_SLACK", "0"))
IDLE_TIMEOUT = float(os.environ.get("SITUFLOW_IDLE_TIMEOUT", "5"))
STREAM = config.stream
if not STREAM.key_fields:
    sys.exit(f"situflow {config.service}: set SITUFLOW_KEY_FIELDS to the partition attributes; "
             "unpartitioned streams (thesis 5.6.3) are not supported by the services yet")
RAW, ORDERED, LATE, DLQ = (spec.name for spec in stream_topics(STREAM))

app = make_app(f"situflow-kslack-{STREAM.name}", config)
metrics = ServiceMetrics(app, "kslack")
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

buffers = app.Table("buffers", default=None, partitions=STREAM.partitions,
                    help="per partition key: K-slack snapshot and the input offset it holds")
keys_by_partition = app.Table("keys", default=None, partitions=STREAM.partitions,
                              help="per input partition: the partition keys seen in it")

# Wall-clock bookkeeping for the idle timeout; lost on restart on purpose (a restarted worker
# waits one full timeout before flushing).
started = time.monotonic()
last_input: dict[int, float] = {}
last_offset: dict[int, int] = {}
flushed: set[int] = set()
buffered: dict[str, int] = {}  # per key, for the buffer-size gauge


def partition_key(event: dict[str, Any]) -> str:
    """The JSON array of the key fields' values; raises InputError when one is missing."""
    missing = [f for f in STREAM.key_fields if f not in event]
    if missing:
        raise InputError(f"missing partition attribute {missing[0]!r}")
    return json.dumps([event[f] for f in STREAM.key_fields], separators=(",", ":"))


@app.agent(source)
async def reorder(stream: Any) -> None:
    async for event in stream.events():
        message = event.message
        if message.topic == TICKS:
            await flush_if_idle(message.partition)
            continue
        metrics.messages_in("kslack", RAW).inc()
        last_input[message.partition] = time.monotonic()
        last_offset[message.partition] = message.offset
        flushed.discard(message.partition)
        try:
            if event.value is None:
                raise InputError("empty message (null value)")
            record = decode_event(event.value, time_field=STREAM.time_field)
            key = partition_key(record)
            encoded = encode_event(record).decode()
        except InputError as error:
            metrics.dlq("kslack", DLQ).inc()
            await dlq.send(key=event.key, value=event.value,
                           headers=dlq_headers(message, error.reason))
            continue

        state = buffers.get(key)
        if state is not None and message.offset <= state["offset"]:
            await resend(key, event, state["sent"])
            continue
        if state is None:
            await remember_key(message.partition, key)
        kslack = KSlack.restore(state["kslack"]) if state else KSlack[list[Any]](SLACK)
        released, too_late = kslack.push(key, record[STREAM.time_field], [message.offset, encoded])
        await send_ordered(key, message.partition, released)
        if too_late:
            await send_late(event)
        sent = [entry for entry in (state["sent"] if state else [])
                if entry[0] >= committed_offset(message.partition)]
        if released or too_late:
            sent.append([message.offset, released, bool(too_late)])
        buffers[key] = {"kslack": kslack.snapshot(), "offset": message.offset, "sent": sent}
        set_buffered(key, kslack.buffered)
        metrics.latency.observe(message_age(message, time.time()))


async def resend(key: str, event: Any, sent: list[list[Any]]) -> None:
    """A message redelivered after a crash: the buffer already holds its event, but what its
    processing released may not have reached the broker. ``sent`` keeps the output of every
    message after the committed offset (Faust flushes the producer before it commits), so that
    output is sent again; the matcher drops the repeats."""
    for offset, released, was_late in sent:
        if offset == event.message.offset:
            await send_ordered(key, event.message.partition, released)
            if was_late:
                await send_late(event)


def committed_offset(partition: int) -> int:
    """The input offset Faust last committed for ``partition`` (0 if unknown yet).

    Faust keeps it in ``Consumer._committed_offset`` and has no public accessor; without it
    ``sent`` entries would be kept until the key's next message, which is still correct.
    """
    committed = getattr(app.consumer, "_committed_offset", {}).get(TP(RAW, partition))
    return int(committed or 0)


async def send_late(event: Any) -> None:
    metrics.late("kslack", LATE).inc()
    await late.send(key=event.key, value=event.value, partition=event.message.partition)


async def remember_key(partition: int, key: str) -> None:
    known = keys_by_partition.get(partition) or []
    keys_by_partition[partition] = [*known, key]


async def send_ordered(key: str, partition: int, released: list[list[Any]],
                       wait: bool = False) -> None:
    """Released events, in order, to the same partition number; the header carries the input
    offset, which with the event time orders a key's events strictly (for the matcher)."""
    deliveries = [
        await ordered.send(key=key.encode(), value=encoded.encode(), partition=partition,
                           headers=[("situflow.source.offset", str(offset).encode())])
        for offset, encoded in released
    ]
    if wait:
        for delivery in deliveries:
            await delivery
    if released:
        metrics.messages_out("kslack", ORDERED).inc(len(released))


async def flush_if_idle(partition: int) -> None:
    """Release every buffered event of ``partition`` once its input has been idle long enough."""
    idle = time.monotonic() - last_input.get(partition, started)
    if partition in flushed or idle < IDLE_TIMEOUT or not await caught_up(partition):
        return
    for key in keys_by_partition.get(partition) or []:
        state = buffers.get(key)
        if state is None:
            continue
        kslack: KSlack[list[Any]] = KSlack.restore(state["kslack"])
        if not kslack.buffered:
            continue
        # Flushes are rare: wait until the broker has the events before the state says they
        # are gone (a crash in between re-flushes them when the tick is redelivered).
        await send_ordered(key, partition, kslack.finish(), wait=True)
        buffers[key] = {**state, "kslack": kslack.snapshot()}
        set_buffered(key, 0)
    flushed.add(partition)


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
    processed = last_offset.get(partition)
    fetched_all = position >= (app.consumer.highwater(tp) or 0)
    return fetched_all and (processed is None or processed + 1 >= position)


def set_buffered(key: str, count: int) -> None:
    metrics.buffered.inc(count - buffered.get(key, 0))
    buffered[key] = count


@app.timer(interval=max(IDLE_TIMEOUT / 4, 0.25))
async def tick() -> None:
    """One tick per partition; whichever worker owns the partition acts on it."""
    for partition in range(STREAM.partitions):
        await ticks.send(value=b"", partition=partition)


if __name__ == "__main__":
    app.main()
