"""The K-slack service: raw ``<stream>`` → ``<stream>.ordered``, in event-time order per partition.

Reads JSON or Arrow events from ``<stream>``; reorders each input partition with
:class:`situflow.kslack.ColumnarKSlack` (SEMANTICS.md, K-slack) and writes the released events,
with their input position (:data:`situflow.kslack.SEQ_FIELD`), as Arrow batches to the same
partition number of ``<stream>.ordered``. Late events go to ``<stream>.late`` with a reason that
says how late; messages that do not decode or whose processing fails go to ``<stream>.dlq``.
An unpartitioned stream (``SITUFLOW_UNPARTITIONED=1``) is instead cut into numbered batches
spread over ``<stream>.ordered``'s partitions (:mod:`situflow.kslack.batches`, thesis §5.6.3).
State: per input partition a :class:`situflow.kslack.PartitionBuffer`, checkpointed to the
``buffers`` table (:mod:`workers.partitions`); an idle flush is checkpointed before it is sent.
Settings (:mod:`situflow.settings`): ``SITUFLOW_SLACK``, ``SITUFLOW_IDLE_TIMEOUT``, and for
unpartitioned streams ``SITUFLOW_BATCH_EVENTS``, ``SITUFLOW_BATCH_SPAN`` and ``SITUFLOW_REGISTRY``.
The input arrives in bundles, every record one fetch brought of a partition as one message
(:mod:`workers.bundles`), so that one event per message costs no Faust path per event.
Taking messages in: :mod:`workers.kslack_intake`; what goes out and its headers:
:mod:`workers.kslack_output`; when: :mod:`situflow.kslack.pacing`.
Metrics besides every service's: ``situflow_kslack_slack_seconds``, the slack in seconds. The
buffer has no limit: it holds the events within K of the latest time seen, so its span never
exceeds K, and what can grow is its count; the alert "K-slack buffer near its limit"
(docs/runbooks.md) compares that count with K's worth of input.

Design: ARCHITECTURE.md#the-services. Run: ``situflow serve kslack``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import signal
import time
from typing import Any

import faust
from prometheus_client import Gauge

from situflow.kslack.buffer import PartitionBuffer
from situflow.kslack.pacing import LINGER, idle, lingered, push_inbox_now, send_now
from topics.registry import RegistryProgress
from workers import bundles, faust_patches
from workers.app import make_app, message_age, owned_partitions, run, state_table
from workers.bundles import records_of
from workers.evaluation import check_stream
from workers.failures import CrashRecord
from workers.kslack_intake import KSlackIntake
from workers.kslack_output import KSlackOutput
from workers.metrics import ServiceMetrics
from workers.partitions import PartitionStates
from workers.settings import ServiceConfig


def build_app(config: ServiceConfig) -> faust.App:
    """The Faust app of K-slack (see the module doc)."""
    stream, settings = config.stream, config.settings
    raw = stream.name  # the input topic (topics.catalog.stream_topics)
    # The app's, the table's and the ticks' partitions are the input's (one if unpartitioned).
    inputs = dataclasses.replace(config, stream=dataclasses.replace(
        stream, partitions=stream.input_partitions))
    app = make_app(f"situflow-kslack-{stream.name}", inputs)
    app.conf.stream_buffer_maxsize = bundles.QUEUED  # of bundles: workers.bundles
    metrics = ServiceMetrics(app, "kslack", inputs=(raw,),
                             stall_timeout=config.settings.stall_timeout)
    ticks_name = f"{app.conf.id}-ticks"
    # internal=True: Faust creates the ticks topic (co-partitioned with the input) before it
    # subscribes; the raw topic exists (created from the catalog first) and is left as it is.
    source = app.topic(raw, ticks_name, internal=True, partitions=stream.input_partitions,
                       key_serializer="raw", value_serializer="raw", retention=3600.0)
    ticks = app.topic(ticks_name, key_serializer="raw", value_serializer="raw")
    faust_patches.bundle_topics(frozenset({raw}))
    output = KSlackOutput(app, metrics, stream)
    metrics.outputs(dlq=[output.dlq_name], late=[output.late_name])
    # The buffer has no size limit; the alert on it compares its fill with K's worth of input.
    Gauge("situflow_kslack_slack_seconds", "The slack K in seconds (SITUFLOW_SLACK times "
          "SITUFLOW_TIME_UNIT): how long an event waits in the buffer while event time keeps "
          "pace with the clock", ["service"], registry=metrics.registry
          ).labels("kslack").set(settings.slack * stream.time_unit)

    new_buffer = functools.partial(
        PartitionBuffer.of, slack=settings.slack, time_field=stream.time_field,
        batch_events=settings.batch_events if stream.unpartitioned else None,
        batch_span=settings.batch_span)

    crashes = CrashRecord(config.data_dir, settings.quarantine_after, settings.crash_window)
    states = PartitionStates(app, state_table(app, "buffers", inputs, "per input partition: "
                                              "K-slack buffers and the input offset they hold"),
                             new_buffer, PartitionBuffer.snapshot, settings.checkpoint_interval,
                             observe=metrics.checkpointed, crashes=crashes,
                             on_error=settings.on_error)
    metrics.follow(lambda topic, partition: states.applied(partition, topic), crashes)
    crash_on, raise_on = (None if marker is None else marker.encode()
                          for marker in (settings.test_crash_on, settings.test_raise_on))
    # The registry the batches count the records of; nothing is cut before it is read to its
    # end, so the counts never go back, also across restarts.
    registry = RegistryProgress(config.kafka, stream.unpartitioned and bool(settings.registry))
    if registry.followed:
        metrics.registry_synced = False

        def synced() -> None:
            metrics.registry_synced = True

        @app.task
        async def follow_registry() -> None:  # until the app stops (cancels this task)
            await registry.follow(on_read=synced)

    intake = KSlackIntake(output, metrics, stream, settings.slack, registry, raise_on)

    @app.agent(source)
    async def reorder(stream_: Any) -> None:
        await states.consume(stream_, ticks_name, on_message, on_tick, on_poison=output.poisoned)

    async def on_message(event: Any) -> None:
        await registry.read.wait()
        records = records_of(event)
        messages = [event] if records is None else records
        metrics.messages_in("kslack", raw).inc(len(messages))
        if crash_on is not None and any(crash_on in (m.value or b"") for m in messages):
            os.kill(os.getpid(), signal.SIGKILL)  # TEST_CRASH_ENV: tests only
        try:
            await handle(event)
        finally:  # also when it failed: the message was handled (workers.failures)
            metrics.latency.observe(message_age(event.message, time.time()))

    async def handle(event: Any) -> None:
        partition = event.message.partition
        buffer = states.get(partition)
        buffer.last_input = time.monotonic()
        states.changed(partition, buffer, event, await intake.take_in(buffer, event))
        waited = lingered(buffer, time.monotonic())
        # A careful replay (workers.failures) pushes each event at once: a failure is its own.
        if push_inbox_now(buffer, waited, states.due(partition), states.careful(partition)):
            states.changed(partition, buffer, deliveries=await intake.push_inbox(buffer))
        if buffer.batcher is not None and waited:  # the inbox was pushed: its clock restarts
            buffer.sent_at = time.monotonic()
        if send_now(buffer, waited):
            states.changed(partition, buffer, deliveries=await output.released(
                partition, buffer, time.monotonic()))
        metrics.set_buffered(partition, buffer.kslack.buffered)

    async def on_tick(partition: int) -> None:
        """Push the inbox, flush a partition idle long enough, send the outbox."""
        await registry.read.wait()
        buffer = states.get(partition)
        if buffer.inbox:
            states.changed(partition, buffer, deliveries=await intake.push_inbox(buffer))
        if idle(buffer, time.monotonic(), settings.idle_timeout) and \
                await states.fetched_all(partition, raw):
            # A flush depends on timing, not on the input: store that it happened before
            # anything downstream can see it, so a restart cannot undo it.
            buffer.flush(registry.records)
            states.changed(partition, buffer)
            await states.checkpoint(partition)
        if buffer.unsent:
            states.changed(partition, buffer, deliveries=await output.released(
                partition, buffer, time.monotonic()))
        metrics.set_buffered(partition, buffer.kslack.buffered)

    @app.timer(interval=2 * LINGER)
    async def tick() -> None:
        """A tick to each partition of this worker with work waiting: they bound the time a
        released event waits in the outbox, and flush and checkpoint idle partitions."""
        now = time.monotonic()
        for partition in owned_partitions(app, raw):
            if states.positioned(partition) and not states.due(partition) and not \
                    states.get(partition).needs_tick(now, LINGER, settings.idle_timeout):
                continue
            if states.want_tick(partition, now):
                await ticks.send(value=b"", partition=partition)

    return app


def main() -> None:
    config = ServiceConfig.from_env("kslack")
    check_stream(config)
    run(build_app(config), config)


if __name__ == "__main__":
    main()
