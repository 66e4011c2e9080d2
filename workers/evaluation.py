"""The evaluating services' shared Faust wiring: the deriver, the matcher and the trends service.

Reads ``<stream>.ordered`` (and a service's further inputs, co-partitioned with it) and the
query registry (:mod:`topics.registry`, ``SITUFLOW_REGISTRY=1``) or ``SITUFLOW_QUERY_FILE``.
Writes each query's results with their deterministic id (value ``id`` and header
``situflow.result.id``: at least once, consumers de-duplicate), rejected input to its DLQ,
a failing query's messages to ``errors.<query>`` and its status to the registry.
State: per input partition a :class:`situflow.runtime.PartitionOperators`, checkpointed by
:mod:`workers.partitions`; the query set and the de-duplication are the core's
(:mod:`situflow.runtime`). Failures: :mod:`workers.failures`; a failing query runs on a copy
of its operator from then on. ``SITUFLOW_TEST_FAIL_QUERY`` names a query whose operator
always raises (integration tests only).
Design: ARCHITECTURE.md, "The services".
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import partial
from typing import Any

import numpy as np

from situflow.codecs.json_events import encode_event
from situflow.errors import InputError, SequenceError
from situflow.event_types import conform
from situflow.events import EventBatch
from situflow.operator import CompiledQuery, Operator
from situflow.runtime import (
    OrderedLayout,
    PartitionOperators,
    UnseenAttributes,
    decode_ordered,
    fresh_rows,
    ordered_events,
)
from topics.catalog import (
    SEQ_FIELD,
    SEQ_HEADER,
    QueryOutput,
    TopicRole,
    error_topic,
    query_topic,
    status_topic,
    stream_topics,
)
from topics.create import create_topics
from topics.registry import (
    QueryStart,
    QueryStatus,
    encode_start,
    encode_status,
    status_topic_name,
)
from workers.app import (
    dlq_headers,
    make_app,
    message_age,
    owned_partitions,
    state_table,
)
from workers.failures import (
    CrashRecord,
    Failure,
    QueryFailed,
    describe,
    plain,
)
from workers.metrics import QueryStats, ServiceMetrics
from workers.partitions import PartitionStates
from workers.query_source import ServiceQueries, follow_registry, read_query_file
from workers.settings import ServiceConfig

RESULT_ID_HEADER = "situflow.result.id"
#: Seconds between two status records of one failing query (module doc).
STATUS_INTERVAL = 5.0
#: The operators to run on a message: (query name, (query id, operator)).
Operators = Sequence[tuple[str, tuple[str, Operator]]]
#: Sends what one query's operator gave for a message; returns the deliveries.
Emit = Callable[[str, str, Sequence[Any]], Awaitable[list[Any]]]
#: The events of a message that one query evaluates (all of them unless a service says).
Select = Callable[[PartitionOperators, str, EventBatch], EventBatch]


def encode_result(result: Any) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """The (key, value, headers) of one result in its output topic: the JSON record with its
    id, keyed by its partition key or group; the backfill (``batch/backfill.py``) sends the
    same, so consumers de-duplicate across both."""
    result_id = result.result_id
    values = result.to_dict()
    values["id"] = result_id
    key = values.get("key", values.get("group"))
    return (json.dumps(key).encode(), json.dumps(values).encode(),
            [(RESULT_ID_HEADER, result_id.encode())])


def check_stream(config: ServiceConfig) -> None:
    """Exit with what to set unless the stream is keyed or declared unpartitioned."""
    if not config.stream.key_fields and not config.stream.unpartitioned:
        sys.exit(f"situflow {config.service}: set SITUFLOW_KEY_FIELDS to the partition "
                 "attributes, or SITUFLOW_UNPARTITIONED=1 for a stream without (thesis 5.6.3)")


class EvaluatingService:
    """The Faust app of one evaluating service and its wiring (module doc): its queries (made
    by ``prepare``), ``<stream>.ordered`` and any further ``inputs`` (co-partitioned with it)
    as one stream of messages, the per-partition state in ``table``, the ``<stream>.dlq``
    topic, and ticks that checkpoint idle partitions. :meth:`evaluate_with` starts the agent;
    :meth:`evaluate_events` and :meth:`send_results` are the usual steps of a message.
    ``events=False``: the service reads only ``inputs``, not ``<stream>.ordered``."""

    def __init__(self, config: ServiceConfig, languages: Iterable[str], table: str, *,
                 prepare: Callable[[CompiledQuery], CompiledQuery] = lambda query: query,
                 inputs: tuple[str, ...] = (), output_role: TopicRole = TopicRole.MATCHES,
                 events: bool = True):
        self.service = service = config.service
        self.config = config
        self.stream = stream = config.stream
        check_stream(config)
        self.queries = queries = ServiceQueries(service, frozenset(languages), stream, prepare,
                                                config.settings.device)
        self.layout = OrderedLayout(stream.time_field, stream.key_fields, SEQ_FIELD,
                                    stream.time_unit)
        settings = config.settings
        self.fail_query = settings.test_fail_query  # module doc: integration tests only
        read_query_file(queries, settings.query_file, settings.query_name)
        _, self.ordered, _, dlq_name = (spec.name for spec in stream_topics(stream))
        self.app = app = make_app(f"situflow-{service}-{stream.name}", config)
        self.inputs = (self.ordered, *inputs) if events else inputs
        self.metrics = metrics = ServiceMetrics(app, service, inputs=self.inputs,
                                                stall_timeout=settings.stall_timeout)
        metrics.outputs(dlq=[dlq_name])
        metrics.registry.register(QueryStats(service, self.query_operators))
        self.ticks_name = f"{app.conf.id}-ticks"
        self.source = app.topic(*self.inputs, self.ticks_name, internal=True,
                                partitions=stream.partitions, key_serializer="raw",
                                value_serializer="raw", retention=3600.0)
        self.ticks = self.topic(self.ticks_name)
        self.dlq = self.topic(dlq_name)
        self.output_role = output_role
        self.outputs: dict[str, Any] = {}
        self.errors: dict[str, Any] = {}  # per query its error topic, once created
        self.failing: dict[str, str] = {}  # query name -> id of a query that failed (module doc)
        self.unseen = UnseenAttributes()
        self.status_sent: dict[str, float] = {}  # query name -> monotonic time
        self.status = self.topic(status_topic_name())
        self.begun: set[tuple[str, str, int]] = set()  # (query, id, partition): note_start
        crashes = CrashRecord(config.data_dir, settings.quarantine_after, settings.crash_window)
        self.states = PartitionStates(
            app, state_table(app, table, config, "per input partition: query operators and key "
                             "positions"), PartitionOperators.decode,
            PartitionOperators.encode, observe=metrics.checkpointed,
            crashes=crashes, on_error=settings.on_error,
            interval=settings.checkpoint_interval)
        metrics.follow(lambda topic, partition: self.states.applied(partition, topic), crashes)
        self.crash_on = settings.test_crash_on.encode() if settings.test_crash_on else None
        if settings.registry:
            follow_registry(app, config, queries, metrics)
        else:
            queries.known.set()
        metrics.health_details = lambda: {"queries": sorted(queries.compiled)}
        app.timer(interval=max(self.states.interval / 2, 0.25))(self.tick)

    def topic(self, name: str) -> Any:
        return self.app.topic(name, key_serializer="raw", value_serializer="raw")

    def operators(self) -> list[Operator]:
        """Every operator of this worker's partitions (for the gauges, read when scraped)."""
        return [op for _, state in self.states.items()
                for _, op in state.operators.values()]

    def query_operators(self) -> list[tuple[str, Operator]]:
        """(query name, operator) for every operator of this worker's partitions."""
        return [(name, op) for _, state in self.states.items()
                for name, (_, op) in state.operators.items()]

    def stat(self, name: str) -> int:
        """The operators' ``stats()[name]`` summed over this worker's partitions (a gauge)."""
        return sum(op.stats().get(name, 0) for op in self.operators())

    def evaluate_with(self, evaluate: Callable[[PartitionOperators, Any], Awaitable[list[Any]]]) -> None:
        """Start the agent: ``evaluate(state, event)`` handles each input message against
        its partition's state (synchronised with the queries) and returns the deliveries
        of what it sent; the partition checkpoints as :mod:`workers.partitions` says."""
        service, queries, states, metrics = self.service, self.queries, self.states, self.metrics

        async def on_message(event: Any) -> None:
            await queries.known.wait()
            partition = event.message.partition
            if self.crash_on is not None and self.crash_on in (event.value or b""):
                os.kill(os.getpid(), signal.SIGKILL)  # TEST_CRASH_ENV: tests only
            metrics.messages_in(service, event.message.topic).inc()
            try:
                state = states.get(partition)
                state.sync(queries)
                deliveries = await evaluate(state, event)
                states.changed(partition, state, event, deliveries)
            finally:  # also when it failed: the message was handled (workers.failures)
                metrics.latency.observe(message_age(event.message, time.time()))

        async def agent(stream_: Any) -> None:
            await states.consume(stream_, self.ticks_name, on_message, on_poison=self.poisoned)

        self.app.agent(self.source, name=f"{self.app.conf.id}-evaluate")(agent)

    async def tick(self) -> None:
        """A tick to each partition of this worker with work to checkpoint or inputs to
        position, so that idle partitions checkpoint, commit and resume too."""
        now = time.monotonic()
        states = self.states
        for partition in owned_partitions(self.app, self.inputs[0]):
            if (states.due(partition) or not states.positioned(partition)) and \
                    states.want_tick(partition, now):
                await self.ticks.send(value=b"", partition=partition)

    def new_events(self, state: PartitionOperators, event: Any) -> EventBatch | None:
        """The events of an ordered message after their key's position (None: all repeats);
        ``InputError`` if it does not decode."""
        batch = decode_ordered(event.value, event.message.headers, self.layout)
        self.metrics.events_in(self.service, self.ordered).inc(batch.num_rows)
        batch = fresh_rows(state.positions, batch, self.layout)
        return ordered_events(batch, self.layout) if batch.num_rows else None

    async def evaluate_events(self, state: PartitionOperators, event: Any, operators: Operators,
                              emit: Emit, select: Select | None = None) -> list[Any]:
        """Run ``operators`` on the ordered message's new events (each query on those
        ``select`` keeps of its typed events) and ``emit`` each one's output; the deliveries.
        A message no operator reads is not decoded."""
        if not operators:
            return []
        try:
            events = self.new_events(state, event)
        except InputError as exc:
            return [await self.dead_letter(event, exc.reason)]
        if events is None:
            return []
        first_time = int(events.ts.min())
        for name, (query_id, _) in operators:
            begun = state.begin(name, first_time)
            await self.note_start(name, query_id, event.message, begun)
        deliveries, errors = [], []
        for name, (query_id, operator) in operators:
            accepted, rejected = await self.typed(name, event, events)
            deliveries += rejected
            if select is not None:
                accepted = select(state, name, accepted)
            output, error = await self.run(state, name, event,
                                           partial(operator.process, accepted))
            if error:
                errors.append(error)
            deliveries += await emit(name, query_id, output)
        if errors:
            deliveries.append(await self.dead_letter(event, "; ".join(errors)))
        return deliveries

    async def note_start(self, name: str, query_id: str, message: Any, time: int) -> None:
        """Record, once per query and partition in this process, the offset of the first
        message evaluated for it and the ``time`` its operator began at
        (:class:`topics.registry.QueryStart`): the backfill hands off there. A restarted
        worker records a later offset (readers take the earliest) and the time its checkpoint
        kept, or a later one when it had none (readers of times take the latest)."""
        begun = (name, query_id, message.partition)
        if begun in self.begun:
            return
        self.begun.add(begun)
        key, value = encode_start(QueryStart(name, query_id, message.partition, message.offset,
                                             self.service, time))
        await self.status.send(key=key, value=value)

    async def typed(self, name: str, event: Any, events: EventBatch
                    ) -> tuple[EventBatch, list[Any]]:
        """The events of a message that follow query ``name``'s typing rule
        (:mod:`situflow.event_types`), and the deliveries of the others to the DLQ."""
        accepted = conform(events, self.queries.types[name])
        deliveries = [await self.reject(event, events, seq, f"query {name}: {reason}")
                      for seq, reason in accepted.rejected]
        self.observe_attributes(name, accepted.batch)
        return accepted.batch, deliveries

    async def reject(self, event: Any, events: EventBatch, seq: int, reason: str) -> Any:
        """Send one event that breaks a query's typing rule (:mod:`situflow.event_types`)
        to ``<stream>.dlq`` alone, as a JSON event, with the reason; the message's other events
        are evaluated."""
        i = int(np.flatnonzero(events.seq == seq)[0])
        record = events.record(i, self.stream.time_field)
        self.metrics.dlq(self.service, self.dlq.get_topic_name()).inc()
        headers = [*dlq_headers(event.message, reason), (SEQ_HEADER, str(seq).encode())]
        return await self.dlq.send(key=event.key, value=encode_event(record), headers=headers)

    def observe_attributes(self, name: str, events: EventBatch) -> None:
        """Count the attributes query ``name`` uses that no event has carried yet (a typo
        yields nothing, silently): a gauge, and a log line once it has seen
        :attr:`UnseenAttributes.report_after` events without one."""
        remaining = self.unseen.observe(name, self.queries.types[name].used, events)
        if remaining is None:
            return
        self.metrics.unseen_attributes(self.service, name).set(remaining)
        if unseen := self.unseen.to_report(name):
            self.app.log.warning("query %s uses %s, which none of its first %d events carried "
                                 "(a typo?)", name, ", ".join(unseen), self.unseen.events_seen[name])

    async def run(self, state: PartitionOperators, name: str, event: Any,
                  process: Callable[[], Sequence[Any]]) -> tuple[Sequence[Any], str | None]:
        """``process()``'s output, or the reason the message is to be dead-lettered (an input
        the operator rejects). Anything else an operator raises is the query's failure
        (module doc): skipped on a replay, restored from the copy of a failing query, or else
        raised as :class:`QueryFailed` for the partition to replay."""
        for failure in self.states.failures(event):
            if failure.query == name:
                await self.query_failed(name, event, failure.exception)
                return [], None
        current = state.operators.get(name)
        copy = None
        if current is not None and self.failing.get(name) == current[0]:
            copy = json.loads(json.dumps(current[1].snapshot(), default=plain))
        try:
            if name == self.fail_query:
                raise RuntimeError(f"SITUFLOW_TEST_FAIL_QUERY={name}")
            return process(), None
        except InputError as exc:
            return [], f"query {name}: {exc.reason}"
        except SequenceError as exc:
            self.app.log.error("query %s: %s", name, exc)
            return [], f"query {name}: {exc}"
        except Exception as exc:
            if current is None or copy is None:
                raise QueryFailed(name, exc) from exc
            state.operators[name] = (current[0], self.queries.compiled[name].restore(copy))
            await self.query_failed(name, event, exc)
            return [], None

    async def query_failed(self, name: str, event: Any, exc: BaseException) -> None:
        """Report query ``name``'s failure on ``event`` (module doc): its error topic, the
        processing-errors counter, its status; it runs on a copy from now on."""
        message = event.message
        query = self.queries.compiled.get(name)
        query_id = "" if query is None else query.query_id
        self.failing[name] = query_id
        self.metrics.processing_errors(self.service, message.topic, name).inc()
        topic = self.errors.get(name)
        if topic is None:
            spec = error_topic(name)
            await self.create(spec, status_topic(status_topic_name()))
            topic = self.errors[name] = self.topic(spec.name)
        await topic.send(key=event.key, value=event.value, headers=dlq_headers(
            message, f"query {name} failed: {describe(exc)}", exc, name))
        now = time.monotonic()
        if now - self.status_sent.get(name, -STATUS_INTERVAL) >= STATUS_INTERVAL:
            self.status_sent[name] = now
            self.app.log.error("query %s failed on %s[%s]@%s: %s (its failures are in %s, "
                               "logged every %gs)", name, message.topic, message.partition,
                               message.offset, describe(exc), topic.get_topic_name(),
                               STATUS_INTERVAL)
            key, value = encode_status(QueryStatus(name, query_id, describe(exc),
                                                   time.time_ns() // 1_000_000, self.service))
            await self.status.send(key=key, value=value)

    async def create(self, *specs: Any) -> None:
        """Create topics this service writes that may not exist yet (a query from a file was
        never submitted); a refusal is logged, and the send goes on (Kafka may create it)."""
        try:
            await create_topics(self.config.kafka, list(specs))
        except Exception as exc:  # a broker that refuses: the error records still try
            self.app.log.error("cannot create %s: %s", ", ".join(s.name for s in specs), exc)

    async def poisoned(self, event: Any, failure: Failure) -> None:
        """A message found to fail (not a query's fault): to its input's DLQ, counted."""
        topic = event.message.topic
        dlq = self.dlq if topic == self.ordered else self.topic(f"{topic}.dlq")
        self.metrics.processing_errors(self.service, topic, "").inc()
        self.metrics.dlq(self.service, dlq.get_topic_name()).inc()
        await dlq.send(key=event.key, value=event.value, headers=dlq_headers(
            event.message, f"processing failed: {describe(failure.exception)}",
            failure.exception))

    async def send_results(self, name: str, query_id: str, results: Sequence[Any]) -> list[Any]:
        """Send one query's results to its output topic, each with its id; the deliveries."""
        if not results:
            return []
        topic = self.outputs.get(name)
        if topic is None:
            spec = query_topic(QueryOutput(name, role=self.output_role))
            topic = self.outputs[name] = self.topic(spec.name)
        deliveries = []
        for result in results:
            key, value, headers = encode_result(result)
            deliveries.append(await topic.send(key=key, value=value, headers=headers))
        self.metrics.messages_out(self.service, topic.get_topic_name()).inc(len(results))
        self.metrics.events_out(self.service, topic.get_topic_name()).inc(len(results))
        return deliveries

    async def dead_letter(self, event: Any, reason: str, dlq: Any = None) -> Any:
        """Send the message to ``dlq`` (default ``<stream>.dlq``) with the reason."""
        dlq = self.dlq if dlq is None else dlq
        self.metrics.dlq(self.service, dlq.get_topic_name()).inc()
        return await dlq.send(key=event.key, value=event.value,
                              headers=dlq_headers(event.message, reason))
