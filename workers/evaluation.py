"""What the evaluating services share: the deriver, the matcher and the trends service.

Each evaluates the queries of its languages over ``<stream>.ordered`` (the deriver: TPStream
into situation batches on the situations topic; the matcher: SASE+ into ``matches.<query>``,
and TPStream from the situation batches; trends: COGRA into ``trends.<query>``).
:class:`EvaluatingService` is their common wiring. Queries come from the query registry
(:mod:`topics.registry`; ``SITUFLOW_REGISTRY=1``, topic ``SITUFLOW_QUERIES_TOPIC``), followed
while the service runs: a submitted query is evaluated from the next message of each
partition on, a deleted one stops, a changed one starts afresh. A query may also come from a
file (``SITUFLOW_QUERY_FILE``, named by ``SITUFLOW_QUERY_NAME`` or else the file's stem, as
``situflow run`` names it, so both give the same result ids). A registered query this service
cannot evaluate is logged and counted (``situflow_query_errors``), and skipped.

Kafka's partitioning is the data parallelism: per ordered partition and query there is one core
operator over every key of the partition, exactly as ``situflow run`` evaluates the partition's
events. That requires every query to partition by (at least) the stream's key attributes
``SITUFLOW_KEY_FIELDS``, so that no query partition spans two Kafka partitions; a query that
does not is refused. Over an unpartitioned stream (``SITUFLOW_UNPARTITIONED=1``), whose ordered
partitions hold consecutive batches of one global order, the deriver and the matcher run every
TPStream query, partitioned or not, on those batches (thesis §5.6.3, :mod:`workers.kslack`);
SASE+ and COGRA queries are refused there, because their operators need each key's events in
one partition, in order, which only a keyed stream gives.

State: per input partition, each query's operator snapshot (with its query id, so a changed
query starts afresh) and, per key, the position (event time, input seq) of the last event
evaluated, checkpointed to one table (:mod:`workers.partitions`). K-slack releases a key's
events in strictly increasing position, so an event at or before its key's position is a
repeat after a crash and is skipped. A message is decoded only when a query reads it.

Delivery is **at least once**: every result carries its deterministic id
(:attr:`situflow.results.Match.result_id`, :attr:`situflow.results.TrendResult.result_id`) in
the value (``id``) and in the ``situflow.result.id`` header; consumers de-duplicate by it.
A message that does not decode or that an operator rejects goes to the dead-letter topic of
its input (``<stream>.dlq`` for ordered events) with the reason.

Processing errors (:mod:`workers.failures`): an exception while a message is handled restores
the partition from its checkpoint and replays without the message, which goes to its input's
DLQ with the exception in headers. An exception in one query's operator is that query's fault:
the partition replays skipping that query on that message, the message goes to the query's
error topic ``errors.<query>`` (not to the input DLQ), ``situflow_processing_errors_total``
counts it with the query's name, and the query is marked failed in the registry's status topic
(``situflow query list``), at most every :data:`STATUS_INTERVAL` seconds. From then on the
query runs on a copy of its operator (a snapshot round trip before each message, restored when
it raises), so that its later failures cost no replay; it still runs on every message, so a
transient fault recovers. ``SITUFLOW_TEST_FAIL_QUERY`` names a query whose operator raises on
every message: it is read only by the integration tests, which need a query that fails.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import faust
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from situflow.codecs import arrow_events
from situflow.codecs.event_types import carried, conform
from situflow.codecs.json_events import decode_event, encode_event
from situflow.errors import InputError, QueryError, SequenceError, SituflowError
from situflow.events import EventBatch
from situflow.lang.attributes import AttributeTypes
from situflow.operator import CompiledQuery, Operator, QueryOptions
from situflow.queries import compile_query
from topics.catalog import (
    SEQ_FIELD,
    SEQ_HEADER,
    QueryOutput,
    StreamSpec,
    TopicRole,
    error_topic,
    query_topic,
    status_topic,
    stream_topics,
)
from topics.create import create_topics
from topics.query_checks import check_query
from topics.registry import QueryRecord, QueryStatus, RegistryWatcher, encode_status, status_topic_name
from workers.app import (
    ServiceConfig,
    ServiceMetrics,
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
    crash_test_marker,
    describe,
    on_error_setting,
    plain,
)
from workers.partitions import PartitionStates

RESULT_ID_HEADER = "situflow.result.id"
#: Seconds a service waits for the registry to reach a registration that its input names.
REGISTRY_WAIT = 10.0
#: Seconds between two status records of one failing query (module doc).
STATUS_INTERVAL = 5.0
TEST_FAIL_QUERY = os.environ.get("SITUFLOW_TEST_FAIL_QUERY")  # module doc: tests only
#: Events a query evaluates before the attributes none of them carried are logged.
UNSEEN_AFTER = 1000
#: The operators to run on a message: (query name, (query id, operator)).
Operators = Sequence[tuple[str, tuple[str, Operator]]]
#: Sends what one query's operator gave for a message; returns the deliveries.
Emit = Callable[[str, str, Sequence[Any]], Awaitable[list[Any]]]

logger = logging.getLogger(__name__)


class Queries:
    """The queries a service evaluates, by name; ``version`` changes with every change.

    ``prepare`` turns a compiled query into what the service evaluates (the deriver and the
    matcher evaluate one half of a TPStream query each: :mod:`workers.situation_matching`).
    ``registered_at`` holds, per name, the registry offset of its registration (-1: from a
    file); a re-submit of the same text keeps the first.
    """

    def __init__(self, service: str, languages: frozenset[str], stream: StreamSpec,
                 prepare: Callable[[CompiledQuery], CompiledQuery] = lambda query: query):
        self.service = service
        self.languages = languages
        self.stream = stream
        self.prepare = prepare
        self.compiled: dict[str, CompiledQuery] = {}
        # Per query what it requires of its events' attributes (the typing rule).
        self.types: dict[str, AttributeTypes] = {}
        self.registered_at: dict[str, int] = {}
        self.version = 0
        #: Set once the queries are known: at once from a file, after reading the registry to
        #: its end when following it. No event is evaluated before (it would be lost to the
        #: queries, as its position is recorded as seen).
        self.known = asyncio.Event()
        self.registry: RegistryWatcher | None = None  # while following the registry

    def options(self, name: str) -> QueryOptions:
        """How the query ``name`` reads this service's stream (its time unit for durations)."""
        return QueryOptions(name=name, time_unit=self.stream.time_unit)

    def check(self, query: CompiledQuery) -> None:
        """Raise ``SituflowError`` unless this service can evaluate ``query``."""
        if query.language not in self.languages:
            raise SituflowError(f"the {self.service} service evaluates "
                                f"{'/'.join(sorted(self.languages))} queries, not {query.language}")
        check_query(query, self.stream)

    def add(self, query: CompiledQuery, registered_at: int = -1) -> None:
        self.check(query)
        current = self.compiled.get(query.name)
        if current is not None and current.query_id == query.query_id:
            return  # the same text again: it goes on from its first registration
        self.compiled[query.name] = self.prepare(query)
        self.types[query.name] = query.attribute_types.without(
            {self.stream.time_field, "type", "id"})
        self.registered_at[query.name] = registered_at
        self.version += 1

    def remove(self, name: str) -> None:
        self.registered_at.pop(name, None)
        self.types.pop(name, None)
        if self.compiled.pop(name, None) is not None:
            self.version += 1

    async def catch_up(self, offset: int) -> bool:
        """Whether the registration at registry ``offset`` was not read yet and now is: then
        the queries may have changed. False at once without a registry, when it was read, or
        when the registry holds no such record (a batch can name anything)."""
        registry = self.registry
        if registry is None or offset < registry.position:
            return False
        try:
            async with asyncio.timeout(REGISTRY_WAIT):
                return await registry.reached(offset)
        except TimeoutError:
            logger.warning("the registry has not reached offset %d after %gs", offset,
                           REGISTRY_WAIT)
            return False


@dataclass
class Evaluation:
    """One input partition: per query name its (query id, operator); per key its position."""

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


def check_stream(config: ServiceConfig) -> None:
    """Exit with what to set unless the stream is keyed or declared unpartitioned."""
    if not config.stream.key_fields and not config.stream.unpartitioned:
        sys.exit(f"situflow {config.service}: set SITUFLOW_KEY_FIELDS to the partition "
                 "attributes, or SITUFLOW_UNPARTITIONED=1 for a stream without (thesis 5.6.3)")


def read_query_file(queries: Queries, env: dict[str, str] | os._Environ[str]) -> None:
    """The query of ``SITUFLOW_QUERY_FILE``, if set; exits with a located error if it is bad."""
    path = env.get("SITUFLOW_QUERY_FILE")
    if not path:
        return
    file = Path(path)
    name = env.get("SITUFLOW_QUERY_NAME") or file.stem
    try:
        text = file.read_text()
        queries.add(compile_query(text, queries.options(name)))
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
        batch = arrow_events.decode_batch(event.value, time_field=stream.time_field,
                                          time_unit=stream.time_unit)
    else:
        batch = arrow_events.batch_from_events(
            [decode_event(event.value, time_field=stream.time_field,
                          time_unit=stream.time_unit)])
    if SEQ_FIELD not in batch.schema.names:
        raise InputError(f"an ordered event lacks its {SEQ_FIELD!r}: not written by K-slack")
    return batch


def ordered_events(batch: pa.RecordBatch, stream: StreamSpec) -> EventBatch:
    """The events of a decoded ordered message, each with its input seq."""
    seq = np.asarray(batch.column(SEQ_FIELD).to_numpy(), dtype=np.int64)
    return EventBatch.from_arrow(batch.drop_columns([SEQ_FIELD]), time_field=stream.time_field,
                                 seq=seq)


def fresh_rows(positions: dict[str, list[int]], batch: pa.RecordBatch,
               stream: StreamSpec) -> pa.RecordBatch:
    """The rows after their key's position (a redelivery repeats the others); moves the
    positions on.

    Taken row by row, a row is fresh when its (time, seq) is after its key's position, which
    it then becomes: so a row is fresh exactly when it is after its key's position and after
    every earlier row of its key. That is a running maximum per key, computed for all rows at
    once; the Python work is per key (its name and position), not per row."""
    if not batch.num_rows:
        return batch
    names, group = key_groups(batch, stream.key_fields)
    ts, seq = (integer_column(batch, name) for name in (stream.time_field, SEQ_FIELD))
    stored = [(g, last) for g, last in enumerate(map(positions.get, names)) if last is not None]
    known = len(stored)
    last_positions = np.array([last for _, last in stored], dtype=np.int64).reshape(known, 2)
    # Each key's position goes before its rows, so that its running maximum starts there.
    all_group = np.concatenate([np.array([g for g, _ in stored], dtype=np.int64), group])
    all_ts = np.concatenate([last_positions[:, 0], ts])
    all_seq = np.concatenate([last_positions[:, 1], seq])
    # (time, seq) pairs as one rank each, equal pairs equal ranks.
    order = np.lexsort((all_seq, all_ts))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.cumsum((np.diff(all_ts[order], prepend=all_ts[order[0]]) != 0) |
                            (np.diff(all_seq[order], prepend=all_seq[order[0]]) != 0))
    # Offset by its key's number, a rank exceeds every rank of the keys before it, so one
    # running maximum in key-major order (rows in batch order) restarts at each key.
    by_key = np.argsort(all_group, kind="stable")
    keys = all_group[by_key]
    value = keys * (int(rank[order[-1]]) + 1) + rank[by_key]
    before = np.empty_like(value)
    before[0], before[1:] = -1, np.maximum.accumulate(value)[:-1]
    fresh = np.flatnonzero((value > before) & (by_key >= known))  # rows only, not positions
    rows = by_key[fresh] - known
    keep = np.zeros(batch.num_rows, dtype=bool)
    keep[rows] = True
    # A key's last fresh row is its new position.
    lasts = rows[np.diff(keys[fresh], append=-1) != 0]
    for row, t, s in zip(lasts.tolist(), ts[lasts].tolist(), seq[lasts].tolist(), strict=True):
        positions[names[group[row]]] = [t, s]
    return batch if keep.all() else batch.filter(pa.array(keep))


def key_groups(batch: pa.RecordBatch, fields: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The batch's keys, each named by ``repr`` of the tuple of its values (as positions are
    checkpointed), and each row's key number (keys numbered in order of first row). Values
    with one ``repr`` are one key value."""
    group = np.zeros(batch.num_rows, dtype=np.int64)
    values: list[tuple[list[Any], np.ndarray]] = []
    for name in fields:
        try:
            column = batch.column(name)
        except KeyError:
            raise InputError(f"missing partition attribute {name!r}") from None
        if arrow_events.is_json_text(batch.schema.field(name)):  # the values, not their text
            distinct, indices = arrow_events.values_of(batch, name), np.arange(batch.num_rows)
        else:
            try:
                encoded = pc.dictionary_encode(column, null_encoding="encode")
                distinct, indices = encoded.dictionary.to_pylist(), encoded.indices.to_numpy()
            except pa.ArrowNotImplementedError:  # nested values: each row is its own entry
                distinct, indices = column.to_pylist(), np.arange(batch.num_rows)
        by_repr: dict[str, int] = {}
        same = np.array([by_repr.setdefault(repr(v), i) for i, v in enumerate(distinct)],
                        dtype=np.int64)
        if values or len(by_repr) < len(distinct):  # (NaNs Arrow tells apart are one "nan")
            # Numbered densely again, in order of first row, so that no product overflows.
            combined = pc.dictionary_encode(pa.array(group * len(distinct) + same[indices]))
            group = combined.indices.to_numpy().astype(np.int64)
        else:
            group = indices.astype(np.int64)
        values.append((distinct, indices))
    firsts = np.flatnonzero(np.diff(np.maximum.accumulate(group), prepend=-1) > 0)
    at_firsts = [[distinct[i] for i in indices[firsts].tolist()] for distinct, indices in values]
    names = [repr(key) for key in zip(*at_firsts, strict=True)]
    return names, group


def integer_column(batch: pa.RecordBatch, name: str) -> np.ndarray:
    column = batch.column(name)
    if not pa.types.is_integer(column.type) or column.null_count:
        raise InputError(f"{name!r} must be integers without nulls, not {column.type}")
    return np.asarray(column.to_numpy(), dtype=np.int64)


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
        self.queries = queries = Queries(service, frozenset(languages), stream, prepare)
        read_query_file(queries, os.environ)
        _, self.ordered, _, dlq_name = (spec.name for spec in stream_topics(stream))
        self.app = app = make_app(f"situflow-{service}-{stream.name}", config)
        self.inputs = (self.ordered, *inputs) if events else inputs
        self.metrics = metrics = ServiceMetrics(app, service, inputs=self.inputs)
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
        # Per query the attributes it uses that no event carried yet, and the events it saw.
        self.unseen: dict[str, set[str]] = {}
        self.events_seen: dict[str, int] = {}
        self.unseen_logged: set[str] = set()
        self.status_sent: dict[str, float] = {}  # query name -> monotonic time
        self.status = self.topic(status_topic_name())
        crashes = CrashRecord.from_env(config.data_dir)
        self.states = PartitionStates(
            app, state_table(app, table, config, "per input partition: query operators and key "
                             "positions"), load, store, observe=metrics.checkpointed,
            crashes=crashes, on_error=on_error_setting())
        metrics.follow(lambda topic, partition: self.states.applied(partition, topic), crashes)
        self.crash_on = crash_test_marker()
        if os.environ.get("SITUFLOW_REGISTRY") == "1":
            follow_registry(app, config, queries, metrics)
        else:
            queries.known.set()
        metrics.health_details = lambda: {"queries": sorted(queries.compiled)}
        app.timer(interval=max(self.states.interval / 2, 0.25))(self.tick)

    def topic(self, name: str) -> Any:
        return self.app.topic(name, key_serializer="raw", value_serializer="raw")

    def operators(self) -> list[Operator]:
        """Every operator of this worker's partitions (for the gauges, read when scraped)."""
        return [op for _, evaluation in self.states.items()
                for _, op in evaluation.operators.values()]

    def evaluate_with(self, evaluate: Callable[[Evaluation, Any], Awaitable[list[Any]]]) -> None:
        """Start the agent: ``evaluate(evaluation, event)`` handles each input message against
        its partition's evaluation (synchronised with the queries) and returns the deliveries
        of what it sent; the partition checkpoints as :mod:`workers.partitions` says."""
        service, queries, states, metrics = self.service, self.queries, self.states, self.metrics

        async def on_message(event: Any) -> None:
            await queries.known.wait()
            partition = event.message.partition
            if self.crash_on is not None and self.crash_on in (event.value or b""):
                os.kill(os.getpid(), signal.SIGKILL)  # TEST_CRASH_ENV: tests only
            metrics.messages_in(service, event.message.topic).inc()
            try:
                evaluation = states.get(partition)
                evaluation.sync(queries)
                deliveries = await evaluate(evaluation, event)
                states.changed(partition, evaluation, event, deliveries)
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

    def new_events(self, evaluation: Evaluation, event: Any) -> EventBatch | None:
        """The events of an ordered message after their key's position (None: all repeats);
        ``InputError`` if it does not decode."""
        batch = decode_ordered(event, self.stream)
        self.metrics.events_in(self.service, self.ordered).inc(batch.num_rows)
        batch = fresh_rows(evaluation.positions, batch, self.stream)
        return ordered_events(batch, self.stream) if batch.num_rows else None

    async def evaluate_events(self, evaluation: Evaluation, event: Any, operators: Operators,
                              emit: Emit) -> list[Any]:
        """Run ``operators`` on the ordered message's new events and ``emit`` each one's
        output; the deliveries. A message no operator reads is not decoded."""
        if not operators:
            return []
        try:
            events = self.new_events(evaluation, event)
        except InputError as exc:
            return [await self.dead_letter(event, exc.reason)]
        if events is None:
            return []
        deliveries, errors = [], []
        for name, (query_id, operator) in operators:
            accepted, rejected = await self.typed(name, event, events)
            deliveries += rejected
            output, error = await self.run(evaluation, name, event,
                                           partial(operator.process, accepted))
            if error:
                errors.append(error)
            deliveries += await emit(name, query_id, output)
        if errors:
            deliveries.append(await self.dead_letter(event, "; ".join(errors)))
        return deliveries

    async def typed(self, name: str, event: Any, events: EventBatch
                    ) -> tuple[EventBatch, list[Any]]:
        """The events of a message that follow query ``name``'s typing rule
        (:mod:`situflow.codecs.event_types`), and the deliveries of the others to the DLQ."""
        accepted = conform(events, self.queries.types[name])
        deliveries = [await self.reject(event, events, seq, f"query {name}: {reason}")
                      for seq, reason in accepted.rejected]
        self.observe_attributes(name, accepted.batch)
        return accepted.batch, deliveries

    async def reject(self, event: Any, events: EventBatch, seq: int, reason: str) -> Any:
        """Send one event that breaks a query's typing rule (:mod:`situflow.codecs.event_types`)
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
        :data:`UNSEEN_AFTER` events without one."""
        unseen = self.unseen.setdefault(name, set(self.queries.types[name].used))
        if not unseen:
            return
        unseen -= carried(events, unseen)
        seen = self.events_seen[name] = self.events_seen.get(name, 0) + len(events)
        self.metrics.unseen_attributes(self.service, name).set(len(unseen))
        if unseen and seen >= UNSEEN_AFTER and name not in self.unseen_logged:
            self.unseen_logged.add(name)
            self.app.log.warning("query %s uses %s, which none of its first %d events carried "
                                 "(a typo?)", name, ", ".join(sorted(unseen)), seen)

    async def run(self, evaluation: Evaluation, name: str, event: Any,
                  process: Callable[[], Sequence[Any]]) -> tuple[Sequence[Any], str | None]:
        """``process()``'s output, or the reason the message is to be dead-lettered (an input
        the operator rejects). Anything else an operator raises is the query's failure
        (module doc): skipped on a replay, restored from the copy of a failing query, or else
        raised as :class:`QueryFailed` for the partition to replay."""
        for failure in self.states.failures(event):
            if failure.query == name:
                await self.query_failed(name, event, failure.exception)
                return [], None
        current = evaluation.operators.get(name)
        copy = None
        if current is not None and self.failing.get(name) == current[0]:
            copy = json.loads(json.dumps(current[1].snapshot(), default=plain))
        try:
            if name == TEST_FAIL_QUERY:
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
            evaluation.operators[name] = (current[0], self.queries.compiled[name].restore(copy))
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
            result_id = result.result_id
            values = result.to_dict()
            values["id"] = result_id
            key = values.get("key", values.get("group"))
            deliveries.append(await topic.send(
                key=json.dumps(key).encode(), value=json.dumps(values).encode(),
                headers=[(RESULT_ID_HEADER, result_id.encode())]))
        self.metrics.messages_out(self.service, topic.get_topic_name()).inc(len(results))
        self.metrics.events_out(self.service, topic.get_topic_name()).inc(len(results))
        return deliveries

    async def dead_letter(self, event: Any, reason: str, dlq: Any = None) -> Any:
        """Send the message to ``dlq`` (default ``<stream>.dlq``) with the reason."""
        dlq = self.dlq if dlq is None else dlq
        self.metrics.dlq(self.service, dlq.get_topic_name()).inc()
        return await dlq.send(key=event.key, value=event.value,
                              headers=dlq_headers(event.message, reason))


def check_time_unit_of(record: QueryRecord, stream: StreamSpec) -> None:
    """Raise unless ``record`` was submitted for ``stream``'s time unit (if it names one): its
    durations would mean other times here than were checked at submit."""
    if record.stream is not None and record.stream.time_unit != stream.time_unit:
        raise SituflowError(
            f"it was submitted for a stream of {record.stream.time_unit:g} s per tick, and "
            f"{stream.name!r} has {stream.time_unit:g} (SITUFLOW_TIME_UNIT); submit it again "
            "with the stream's time unit")


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
            check_time_unit_of(record, queries.stream)
            queries.add(compile_query(record.text, queries.options(name)), record.offset)
        except (QueryError, SituflowError) as exc:
            queries.remove(name)
            metrics.query_errors.inc()
            app.log.error("query %s is not evaluated: %s", name, exc)
            return
        app.log.info("query %s (%s) is evaluated", name, record.query_id)

    @app.task
    async def registry() -> None:
        async with RegistryWatcher(config.kafka, on_change=on_change) as watcher:
            queries.registry = watcher
            await watcher.wait_synced()
            metrics.registry_synced = True
            queries.known.set()
            await asyncio.Event().wait()  # follow until the app stops (cancels this task)
