"""Queries evaluated over ``<stream>.ordered``: the common part of the matcher and trends services.

Each service evaluates the queries of its languages (matcher: TPStream and SASE+ into
``matches.<query>``; trends: COGRA into ``trends.<query>``). Queries come from the query
registry (:mod:`topics.registry`; ``SITUFLOW_REGISTRY=1``, topic ``SITUFLOW_QUERIES_TOPIC``),
followed while the service runs: a submitted query is evaluated from the next message of each
partition on, a deleted one stops, a changed one starts afresh. A query may also come from a
file (``SITUFLOW_QUERY_FILE``, named by ``SITUFLOW_QUERY_NAME`` or else the file's stem, as
``situflow run`` names it, so both give the same result ids). A registered query this service
cannot evaluate is logged and counted (``situflow_query_errors``), and skipped.

Kafka's partitioning is the data parallelism: per ordered partition and query there is one core
operator over every key of the partition, exactly as ``situflow run`` evaluates the partition's
events. That requires every query to partition by (at least) the stream's key attributes
``SITUFLOW_KEY_FIELDS``, so that no query partition spans two Kafka partitions; a query that
does not is refused.

State: per ordered partition, each query's operator snapshot (with its query id, so a changed
query starts afresh) and, per key, the position (event time, input seq) of the last event
evaluated, checkpointed to the ``operators`` table (:mod:`workers.partitions`). K-slack releases
a key's events in strictly increasing position, so an event at or before its key's position
is a repeat after a crash and is skipped.

Delivery is **at least once**: every result carries its deterministic id
(:attr:`situflow.results.Match.result_id`, :attr:`situflow.results.TrendResult.result_id`) in
the value (``id``) and in the ``situflow.result.id`` header; consumers de-duplicate by it.
A message an operator rejects goes to ``<stream>.dlq`` with the reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import faust
import numpy as np
import pyarrow as pa

from situflow.codecs import arrow_events
from situflow.codecs.json_events import decode_event
from situflow.errors import InputError, QueryError, SituflowError
from situflow.events import EventBatch
from situflow.operator import CompiledQuery, Operator, QueryOptions
from situflow.queries import compile_query, partition_attributes
from topics.catalog import (
    SEQ_FIELD,
    QueryOutput,
    StreamSpec,
    TopicRole,
    query_topic,
    stream_topics,
)
from topics.registry import QueryRecord, RegistryWatcher
from workers.app import (
    ServiceConfig,
    ServiceMetrics,
    dlq_headers,
    make_app,
    message_age,
    owned_partitions,
    state_table,
)
from workers.partitions import PartitionStates

RESULT_ID_HEADER = "situflow.result.id"


class Queries:
    """The queries a service evaluates, by name; ``version`` changes with every change."""

    def __init__(self, service: str, languages: frozenset[str], key_fields: tuple[str, ...]):
        self.service = service
        self.languages = languages
        self.key_fields = key_fields
        self.compiled: dict[str, CompiledQuery] = {}
        self.version = 0
        #: Set once the queries are known: at once from a file, after reading the registry to
        #: its end when following it. No event is evaluated before (it would be lost to the
        #: queries, as its position is recorded as seen).
        self.known = asyncio.Event()

    def check(self, query: CompiledQuery) -> None:
        """Raise ``SituflowError`` unless this service can evaluate ``query``."""
        if query.language not in self.languages:
            raise SituflowError(f"the {self.service} service evaluates "
                                f"{'/'.join(sorted(self.languages))} queries, not {query.language}")
        missing = [f for f in self.key_fields if f not in partition_attributes(query)]
        if missing:
            raise SituflowError(
                f"query {query.name!r} must partition by the stream's key attributes "
                f"{', '.join(self.key_fields)} (missing: {', '.join(missing)}): a query "
                "partition may not span Kafka partitions")

    def add(self, query: CompiledQuery) -> None:
        self.check(query)
        self.compiled[query.name] = query
        self.version += 1

    def remove(self, name: str) -> None:
        if self.compiled.pop(name, None) is not None:
            self.version += 1


@dataclass
class Evaluation:
    """One ordered partition: per query name its (query id, operator); per key its position."""

    operators: dict[str, tuple[str, Operator]]
    positions: dict[str, list[int]]
    version: int = -1  # of the queries the operators were last synchronised with
    snapshots: dict[str, dict[str, Any]] = field(default_factory=dict)  # not yet restored

    def sync(self, queries: Queries) -> None:
        """Start operators for new queries (restored if the checkpoint has one), drop removed."""
        if self.version == queries.version:
            return
        for name in set(self.operators) - set(queries.compiled):
            del self.operators[name]
        for name, query in queries.compiled.items():
            current = self.operators.get(name)
            if current is not None and current[0] == query.query_id:
                continue
            stored = self.snapshots.pop(name, None)
            if stored is not None and stored["id"] == query.query_id:
                operator = query.restore(stored["operator"])
            else:
                operator = query.operator()
            self.operators[name] = (query.query_id, operator)
        self.version = queries.version


def load(value: Any) -> Evaluation:
    if value is None:
        return Evaluation({}, {})
    return Evaluation({}, value["positions"], snapshots=value["queries"])


def store(evaluation: Evaluation) -> dict[str, Any]:
    queries = {name: {"id": query_id, "operator": operator.snapshot()}
               for name, (query_id, operator) in evaluation.operators.items()}
    return {"queries": queries, "positions": evaluation.positions}


def read_query_file(queries: Queries, env: dict[str, str] | os._Environ[str]) -> None:
    """The query of ``SITUFLOW_QUERY_FILE``, if set; exits with a located error if it is bad."""
    path = env.get("SITUFLOW_QUERY_FILE")
    if not path:
        return
    file = Path(path)
    name = env.get("SITUFLOW_QUERY_NAME") or file.stem
    try:
        text = file.read_text()
        queries.add(compile_query(text, QueryOptions(name=name)))
    except OSError as exc:
        sys.exit(f"situflow {queries.service}: cannot read SITUFLOW_QUERY_FILE={file}: "
                 f"{exc.strerror}")
    except QueryError as exc:
        sys.exit(exc.render(str(file), text))
    except SituflowError as exc:
        sys.exit(f"situflow {queries.service}: {file}: {exc}")


def decode_ordered(event: Any, stream: StreamSpec) -> pa.RecordBatch:
    """A ``<stream>.ordered`` message's events with their input seq (an Arrow batch, or a JSON
    event that carries its seq as an attribute)."""
    if event.value is None:
        raise InputError("empty message (null value)")
    if arrow_events.is_arrow(event.message.headers):
        batch = arrow_events.decode_batch(event.value, time_field=stream.time_field)
    else:
        batch = arrow_events.batch_from_events(
            [decode_event(event.value, time_field=stream.time_field)])
    if SEQ_FIELD not in batch.schema.names:
        raise InputError(f"an ordered event lacks its {SEQ_FIELD!r}: not written by K-slack")
    return batch


def fresh_rows(positions: dict[str, list[int]], batch: pa.RecordBatch,
               stream: StreamSpec) -> pa.RecordBatch:
    """The rows after their key's position (a redelivery repeats the others); moves the
    positions on."""
    try:
        keys = zip(*(batch.column(f).to_pylist() for f in stream.key_fields), strict=True)
    except KeyError as exc:
        raise InputError(f"missing partition attribute {exc}") from None
    times = batch.column(stream.time_field).to_pylist()
    seqs = batch.column(SEQ_FIELD).to_pylist()
    keep = np.ones(batch.num_rows, dtype=bool)
    for row, (key, ts, seq) in enumerate(zip(keys, times, seqs, strict=True)):
        name = repr(key)
        last = positions.get(name)
        if last is not None and [ts, seq] <= last:
            keep[row] = False
        else:
            positions[name] = [ts, seq]
    return batch if keep.all() else batch.filter(pa.array(keep))


def evaluator_app(service: str, languages: Iterable[str],
                  output_role: TopicRole) -> tuple[faust.App, Queries, ServiceConfig]:
    """The Faust app of one evaluating service, its queries and settings (see the module
    doc)."""
    config = ServiceConfig.from_env(service)
    stream = config.stream
    if not stream.key_fields:
        sys.exit(f"situflow {service}: set SITUFLOW_KEY_FIELDS to the partition attributes; "
                 "unpartitioned streams (thesis 5.6.3) are not supported by the services yet")
    queries = Queries(service, frozenset(languages), stream.key_fields)
    read_query_file(queries, os.environ)
    _, ordered_name, _, dlq_name = (spec.name for spec in stream_topics(stream))

    app = make_app(f"situflow-{service}-{stream.name}", config)
    metrics = ServiceMetrics(app, service, inputs=(ordered_name,))
    ticks_name = f"{app.conf.id}-ticks"
    source = app.topic(ordered_name, ticks_name, internal=True, partitions=stream.partitions,
                       key_serializer="raw", value_serializer="raw", retention=3600.0)
    ticks = app.topic(ticks_name, key_serializer="raw", value_serializer="raw")
    dlq = app.topic(dlq_name, key_serializer="raw", value_serializer="raw")
    outputs: dict[str, Any] = {}
    table = state_table(app, "operators", config,
                        "per ordered partition: query operators and key positions")
    states = PartitionStates(app, table, load, store, observe=metrics.checkpointed)
    gauges: dict[int, tuple[int, int]] = {}  # per partition: open situations, partial matches

    def output(name: str) -> Any:
        topic = outputs.get(name)
        if topic is None:
            spec = query_topic(QueryOutput(name, role=output_role))
            topic = outputs[name] = app.topic(spec.name, key_serializer="raw",
                                              value_serializer="raw")
        return topic

    @app.agent(source)
    async def evaluate(stream_: Any) -> None:
        await states.consume(stream_, ticks_name, on_message)

    async def on_message(event: Any) -> None:
        await queries.known.wait()
        partition = event.message.partition
        metrics.messages_in(service, ordered_name).inc()
        evaluation = states.get(partition)
        evaluation.sync(queries)
        deliveries = await evaluate_message(evaluation, event)
        states.changed(partition, evaluation, event, deliveries)
        set_gauges(partition, evaluation)
        metrics.latency.observe(message_age(event.message, time.time()))

    async def evaluate_message(evaluation: Evaluation, event: Any) -> list[Any]:
        """Evaluate every query on the message's new events; the deliveries of what it sent."""
        try:
            batch = decode_ordered(event, stream)
            metrics.events_in(service, ordered_name).inc(batch.num_rows)
            batch = fresh_rows(evaluation.positions, batch, stream)
            if not batch.num_rows:
                return []
            seq = np.asarray(batch.column(SEQ_FIELD).to_numpy(), dtype=np.int64)
            events = EventBatch.from_arrow(batch.drop_columns([SEQ_FIELD]),
                                           time_field=stream.time_field, seq=seq)
        except InputError as exc:
            return [await dead_letter(event, exc.reason)]
        deliveries = []
        errors = []
        for name, (_, operator) in evaluation.operators.items():
            try:
                results = operator.process(events)
            except InputError as exc:
                errors.append(f"query {name}: {exc.reason}")
                continue
            except Exception as exc:  # an operator bug must not stop the partition
                app.log.exception("query %s failed on %s[%s]@%s", name, event.message.topic,
                                  event.message.partition, event.message.offset)
                errors.append(f"query {name}: internal error: {exc!r}")
                continue
            topic = output(name)
            for result in results:
                result_id = result.result_id
                values = result.to_dict()
                values["id"] = result_id
                key = values.get("key", values.get("group"))
                deliveries.append(await topic.send(
                    key=json.dumps(key).encode(), value=json.dumps(values).encode(),
                    headers=[(RESULT_ID_HEADER, result_id.encode())]))
            if results:
                metrics.messages_out(service, topic.get_topic_name()).inc(len(results))
                metrics.events_out(service, topic.get_topic_name()).inc(len(results))
        if errors:
            deliveries.append(await dead_letter(event, "; ".join(errors)))
        return deliveries

    async def dead_letter(event: Any, reason: str) -> Any:
        metrics.dlq(service, dlq_name).inc()
        return await dlq.send(key=event.key, value=event.value,
                              headers=dlq_headers(event.message, reason))

    def set_gauges(partition: int, evaluation: Evaluation) -> None:
        operators = [operator for _, operator in evaluation.operators.values()]
        opened = sum(int(getattr(op, "open_situations", 0)) for op in operators)
        partial = sum(op.live_partial_matches() for op in operators
                      if hasattr(op, "live_partial_matches"))
        old_open, old_partial = gauges.get(partition, (0, 0))
        metrics.open_situations.inc(opened - old_open)
        metrics.partial_matches.inc(partial - old_partial)
        gauges[partition] = (opened, partial)

    if os.environ.get("SITUFLOW_REGISTRY") == "1":
        follow_registry(app, config, queries, metrics)
    else:
        queries.known.set()
    metrics.health_details = lambda: {"queries": sorted(queries.compiled)}

    @app.timer(interval=max(states.interval / 2, 0.25))
    async def tick() -> None:
        """A tick to each partition of this worker with work to checkpoint, so that idle
        partitions checkpoint and commit too."""
        now = time.monotonic()
        for partition in owned_partitions(app, ordered_name):
            if states.due(partition) and states.want_tick(partition, now):
                await ticks.send(value=b"", partition=partition)

    return app, queries, config


def follow_registry(app: faust.App, config: ServiceConfig, queries: Queries,
                    metrics: ServiceMetrics) -> None:
    """Keep ``queries`` equal to the registry's queries of this service's languages; the
    service is not ready until it has read the registry to its end."""
    metrics.registry_synced = False

    async def on_change(name: str, record: QueryRecord | None) -> None:
        if record is None:
            queries.remove(name)
            app.log.info("query %s deleted", name)
            return
        if record.language not in queries.languages:
            queries.remove(name)  # the name may have held a query of ours before
            return
        try:
            queries.add(compile_query(record.text, QueryOptions(name=name)))
        except (QueryError, SituflowError) as exc:
            queries.remove(name)
            metrics.query_errors.inc()
            app.log.error("query %s is not evaluated: %s", name, exc)
            return
        app.log.info("query %s (%s) is evaluated", name, record.query_id)

    @app.task
    async def registry() -> None:
        async with RegistryWatcher(config.kafka, on_change=on_change) as watcher:
            await watcher.wait_synced()
            metrics.registry_synced = True
            queries.known.set()
            await asyncio.Event().wait()  # follow until the app stops (cancels this task)
