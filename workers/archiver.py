"""The archiver service: ``<stream>.ordered`` (and other topics) → Parquet segments, each row once.

Reads ``<stream>.ordered`` and the topics of ``SITUFLOW_ARCHIVE_TOPICS`` (JSON or Arrow
messages); writes segments under ``SITUFLOW_ARCHIVE_DIR`` in the format of
:mod:`situflow.archive`, and messages that do not decode, unchanged, to ``<stream>.dlq``.
State: per partition and topic, the next seq and the last offset archived (table ``archive``,
:mod:`workers.partitions`); the open segment's messages are acknowledged only once it is
written, which is what makes every row land in exactly one segment (:mod:`situflow.archive.log`).
Metrics besides every service's: ``situflow_archive_segments``, ``situflow_archive_bytes``,
``situflow_archive_adopted_segments`` (a crash's or a rebalance's trace) and
``situflow_archive_open_rows``. Settings (:mod:`situflow.settings`): ``SITUFLOW_ARCHIVE_DIR``,
``SITUFLOW_ARCHIVE_TOPICS``, ``SITUFLOW_ARCHIVE_SEGMENT_*`` and ``SITUFLOW_ARCHIVE_BLOCK_ROWS``
(rows per row group). It writes ``<stream>.ordered/_stream.json`` (:mod:`situflow.archive.stream`)
at start. Design: ARCHITECTURE.md#offline-path.

Run: ``situflow serve archiver``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import faust
from prometheus_client import Counter, Gauge

from situflow.archive import (
    PartitionArchive,
    Segment,
    SegmentPolicy,
    StreamSettings,
    decode_rows,
    open_archive,
)
from situflow.errors import InputError
from topics.catalog import stream_topics
from workers.app import (
    dlq_headers,
    make_app,
    message_age,
    owned_partitions,
    run,
    state_table,
)
from workers.metrics import ServiceMetrics
from workers.partitions import PartitionStates
from workers.settings import ServiceConfig


def build_app(config: ServiceConfig) -> faust.App:
    """The Faust app of the archiver (see the module doc)."""
    stream, settings = config.stream, config.settings
    root = Path(settings.archive_dir)
    policy = SegmentPolicy(settings.archive_segment_rows, settings.archive_segment_span,
                           settings.archive_segment_seconds, settings.archive_block_rows)
    _, ordered_name, _, dlq_name = (spec.name for spec in stream_topics(stream))
    # How the offline path reads the stream's events: as the services do.
    open_archive(root).write_settings(ordered_name, StreamSettings(
        stream.name, stream.time_field, stream.time_unit, key_fields=stream.key_fields))
    inputs = tuple(dict.fromkeys((ordered_name, *settings.archive_topics)))
    app = make_app(f"situflow-archiver-{stream.name}", config)
    metrics = ServiceMetrics(app, "archiver", inputs=inputs,
                             stall_timeout=config.settings.stall_timeout)
    segments = Counter("situflow_archive_segments", "Parquet segments written",
                       ["service", "topic"], registry=metrics.registry).labels
    segment_bytes = Counter("situflow_archive_bytes", "Bytes of the Parquet segments written",
                            ["service", "topic"], registry=metrics.registry).labels
    adopted = Counter("situflow_archive_adopted_segments", "Segments found written beyond the "
                      "checkpoint (after a crash or by a worker that lost the partition) and "
                      "adopted instead of written again", ["service", "topic"],
                      registry=metrics.registry).labels
    open_rows = Gauge("situflow_archive_open_rows", "Rows in this worker's open segments, "
                      "written at the next roll", ["service"], registry=metrics.registry)
    metrics.outputs(dlq=[dlq_name])
    for topic in inputs:  # at zero, so that the dashboards' rates exist (workers.metrics)
        segments("archiver", topic)
        segment_bytes("archiver", topic)
        adopted("archiver", topic)
    open_rows.labels("archiver")
    ticks_name = f"{app.conf.id}-ticks"
    # internal=True: Faust creates the ticks topic, co-partitioned with the inputs, before it
    # subscribes; existing topics are left as they are.
    source = app.topic(*inputs, ticks_name, internal=True, partitions=stream.partitions,
                       key_serializer="raw", value_serializer="raw", retention=3600.0)
    ticks = app.topic(ticks_name, key_serializer="raw", value_serializer="raw")
    dlq = app.topic(dlq_name, key_serializer="raw", value_serializer="raw")
    table = state_table(app, "archive", config,
                        "per partition and topic: next seq and last offset archived")
    states = PartitionStates(app, table, PartitionArchive.restore, PartitionArchive.snapshot,
                             settings.checkpoint_interval, observe=metrics.checkpointed)
    # The input lag (messages not yet in the archive's state) and stalls, as every service's.
    metrics.follow(lambda topic, partition: states.applied(partition, topic), None)

    @app.agent(source)
    async def archive(stream_: Any) -> None:
        await states.consume(stream_, ticks_name, on_message, on_tick)

    async def on_message(event: Any) -> None:
        partition = event.message.partition
        archive = states.get(partition)
        written = await archive_message(archive, event)
        metrics.latency.observe(message_age(event.message, time.time()))
        await after(partition, archive, written)

    async def on_tick(partition: int) -> None:
        archive = states.get(partition)
        await after(partition, archive, [s for log in archive.logs.values() for s in log.expire()])

    async def after(partition: int, archive: PartitionArchive, written: list[Segment]) -> None:
        for log in archive.logs.values():
            for done in log.take_done():
                states.hold(partition, done)
        if written:
            for segment in written:
                segments("archiver", segment.meta.topic).inc()
                segment_bytes("archiver", segment.meta.topic).inc(segment.size)
                metrics.events_out("archiver", segment.meta.topic).inc(segment.meta.rows)
            states.changed(partition, archive)
            await states.checkpoint(partition)  # soon after the files: they run ahead of it
        open_rows.labels("archiver").set(
            sum(log.open_rows for _, a in states.items() for log in a.logs.values()))

    async def archive_message(archive: PartitionArchive, event: Any) -> list[Segment]:
        message = event.message
        metrics.messages_in("archiver", message.topic).inc()
        log = archive.log(root, message.topic, message.partition, policy,
                          stream.time_field, lambda meta: adopted("archiver", meta.topic).inc())
        try:
            rows = decode_rows(event.value, message.headers, stream.time_field)
        except InputError as exc:
            metrics.dlq("archiver", dlq_name).inc()
            delivery = await dlq.send(key=event.key, value=event.value,
                                      headers=dlq_headers(message, exc.reason))
            states.changed(message.partition, archive, deliveries=[delivery])
            rows = None
        metrics.events_in("archiver", message.topic).inc(0 if rows is None else rows.num_rows)
        return log.add(message.offset, rows, event)

    @app.timer(interval=max(states.interval / 2, 0.25))
    async def tick() -> None:
        """A tick to each partition of this worker with a checkpoint due, a segment open too
        long or inputs to position, so that idle partitions roll, checkpoint, commit and
        resume too."""
        now = time.monotonic()
        for partition in owned_partitions(app, ordered_name):
            waiting = not states.positioned(partition) or states.due(partition) or \
                any(log.expired(now) for log in states.get(partition).logs.values())
            if waiting and states.want_tick(partition, now):
                await ticks.send(value=b"", partition=partition)

    return app


def main() -> None:
    config = ServiceConfig.from_env("archiver")
    run(build_app(config), config)


if __name__ == "__main__":
    main()
