"""The query registry: the live queries, kept in the compacted control topic ``situflow.queries``.

One record per query, keyed by the query's name (UTF-8); the value is a JSON object::

    {"name": "aggressive_drivers", "language": "tpstream", "text": "FROM cars ...",
     "id": "<canonical query id>", "source": "queries/aggressive.tps", "submitted_at": 1700000000000}

``id`` is the compiled query's ``query_id`` (a hash of its canonical text, so a re-submit that
only changes whitespace keeps it); ``source`` is the file it was submitted from, or null;
``submitted_at`` is epoch milliseconds. An optional ``stream`` object names the stream the
query was checked against at submit, ``{"name": "cars", "key_fields": ["car_id"],
"unpartitioned": false, "time_unit": 1.0}`` (records without it, or without a time unit,
still read).
A delete is a tombstone (the name with a null value), which compaction eventually turns into
nothing. The topic has one partition, so every reader
sees submits and deletes in the same order (:func:`topics.catalog.control_topic`).

Writers: :func:`submit` compiles the query first, so an invalid query is never written (its
``QueryError`` reaches the caller, which renders it ``FILE:line:col``), checks it against the
stream as the services will (:mod:`topics.query_checks`; a :class:`QueryRefused`), then creates
the query's output topic (``matches.<name>`` for TPStream and SASE+, ``trends.<name>`` for
COGRA), its error topic ``errors.<name>`` and the status topic, and writes the record unless
the name already holds the same query (a re-submit is a no-op); :func:`delete` writes the
tombstone. Readers: :func:`list_queries` once, and :class:`RegistryWatcher` for services,
which follow the topic while they run.

Reading "to the end" relies on the broker's ListOffsets(latest) answer. tansu 0.6 answers the
base offset of the newest record batch + 1, which is only right when that batch holds one record
(:mod:`workers.broker`). Every write here is one record, sent alone and awaited, so each is its
own batch and the answer is exact. A batch of several records from another writer makes the
answer point inside that batch; readers still apply the whole batch before they count as
synced, because a fetch returns whole batches. ``tests/integration/test_registry.py`` pins both.

**Status**: services write a query's failures (:mod:`workers.failures`) to the compacted topic
``<registry topic>.status``, one :class:`QueryStatus` per query name, which ``situflow query
list`` shows beside the query whose id it names (a re-submitted query starts with a clean slate).

The topic name is ``situflow.queries`` unless ``SITUFLOW_QUERIES_TOPIC`` names another (tests,
or several deployments sharing one Kafka); every function also takes ``topic=`` explicitly.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Self

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import ConsumerRecord

from situflow.errors import SituflowError
from situflow.languages import compile_query
from situflow.operator import QueryOptions
from situflow.settings import KafkaSettings, ServiceSettings
from topics.catalog import (
    QueryOutput,
    StreamSpec,
    TopicRole,
    TopicSpec,
    control_topic,
    error_topic,
    query_topic,
    status_topic,
)
from topics.create import create_topics
from topics.query_checks import check_query

ENV_TOPIC = ServiceSettings.variable("queries_topic")

#: Where each language's results go: sequence patterns emit matches, COGRA emits trends.
OUTPUT_ROLES: Mapping[str, TopicRole] = MappingProxyType({
    "tpstream": TopicRole.MATCHES,
    "sase": TopicRole.MATCHES,
    "cogra": TopicRole.TRENDS,
})

_PARTITION = 0  # the control topic has exactly one
_FIELDS: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "language": (str,),
    "text": (str,),
    "id": (str,),
    "source": (str, type(None)),
    "submitted_at": (int,),
}

logger = logging.getLogger(__name__)

class RegistryError(SituflowError):
    """A registry operation that cannot be done; the message says what to do instead."""


class InvalidQueryName(RegistryError):
    """A name that cannot be part of a topic name (the output topic is ``matches.<name>``)."""


class QueryNotRegistered(RegistryError):
    """``delete`` of a name that no live record has."""


class RegistryRecordError(RegistryError):
    """A control-topic record that is no query record (readers log and skip it)."""


class QueryRefused(RegistryError):
    """A query the stream does not allow (:mod:`topics.query_checks`); nothing was written."""


@dataclass(frozen=True)
class QueryRecord:
    """One registered query, as stored in the control topic (see the module doc)."""

    name: str
    language: str
    text: str
    query_id: str
    submitted_at: int
    source: str | None = None
    #: The stream it was checked against at submit (name, key fields, unpartitioned), if any.
    stream: StreamSpec | None = None
    #: Submitted with a backfill (``query submit --backfill-from``): the deriver begins each key
    #: of a TPStream query at a quiet event (batch/README.md, "Backfill").
    handoff: bool = False
    #: Where a reader found the record in the control topic (-1: not read from it). Services
    #: stamp their output with it so that a downstream service can tell whether it has read
    #: the same registration yet (:meth:`RegistryWatcher.reached`).
    offset: int = dataclasses.field(default=-1, compare=False)

    @property
    def output_topic(self) -> str:
        """``matches.<name>`` or ``trends.<name>``: where services write this query's results."""
        return query_topic(QueryOutput(self.name, OUTPUT_ROLES[self.language])).name


#: ``on_change(name, record)``: a query was submitted or replaced (``record``) or deleted (None).
OnChange = Callable[[str, QueryRecord | None], Awaitable[None]]


def registry_topic() -> str:
    """The control topic's name: ``$SITUFLOW_QUERIES_TOPIC``, else ``situflow.queries``."""
    return ServiceSettings.from_env().queries_topic


def registry_spec(topic: str | None = None, replication_factor: int = 1) -> TopicSpec:
    """The catalog's control topic, under ``topic`` (default: :func:`registry_topic`)."""
    return dataclasses.replace(control_topic(replication_factor), name=topic or registry_topic())


def encode_record(record: QueryRecord) -> tuple[bytes, bytes]:
    """The (key, value) of ``record`` in the control topic."""
    value: dict[str, Any] = {
        "name": record.name,
        "language": record.language,
        "text": record.text,
        "id": record.query_id,
        "source": record.source,
        "submitted_at": record.submitted_at,
    }
    if record.stream is not None:
        value["stream"] = {"name": record.stream.name,
                           "key_fields": list(record.stream.key_fields),
                           "unpartitioned": record.stream.unpartitioned,
                           "time_unit": record.stream.time_unit}
    if record.handoff:
        value["handoff"] = True
    return record.name.encode(), json.dumps(value).encode()


def encode_tombstone(name: str) -> tuple[bytes, None]:
    """The (key, value) that deletes ``name``."""
    return name.encode(), None


def decode_record(key: bytes | None, value: bytes | None) -> tuple[str, QueryRecord | None]:
    """The name and record of a control-topic message (None for a tombstone).

    Raises :class:`RegistryRecordError` saying what is wrong with anything else.
    """
    if key is None:
        raise RegistryRecordError("record without a key (the key is the query name)")
    try:
        name = key.decode()
    except UnicodeDecodeError:
        raise RegistryRecordError(f"key {key!r} is not UTF-8") from None
    if value is None:
        return name, None
    try:
        fields = json.loads(value)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RegistryRecordError(f"query {name!r}: value is not JSON ({exc})") from None
    if not isinstance(fields, dict):
        raise RegistryRecordError(f"query {name!r}: value is not a JSON object")
    for field, types in _FIELDS.items():
        given = fields.get(field)
        if not isinstance(given, types) or isinstance(given, bool):
            raise RegistryRecordError(f"query {name!r}: field {field!r} is missing or mistyped")
    if fields["name"] != name:
        raise RegistryRecordError(f"query {name!r}: value names {fields['name']!r}")
    if fields["language"] not in OUTPUT_ROLES:
        raise RegistryRecordError(f"query {name!r}: unknown language {fields['language']!r}")
    return name, QueryRecord(
        name, fields["language"], fields["text"], fields["id"], fields["submitted_at"],
        fields["source"], _stream(name, fields.get("stream")), fields.get("handoff") is True,
    )


def _stream(name: str, given: Any) -> StreamSpec | None:
    if given is None:
        return None
    try:
        return StreamSpec(given["name"], key_fields=tuple(given.get("key_fields", ())),
                          unpartitioned=bool(given.get("unpartitioned", False)),
                          time_unit=float(given.get("time_unit", 1.0)))
    except (TypeError, KeyError, ValueError) as exc:
        raise RegistryRecordError(f"query {name!r}: field 'stream' is not a stream "
                                  f"({exc})") from None


async def submit(
    kafka: str | KafkaSettings,
    text: str,
    *,
    name: str,
    source_path: str | None = None,
    topic: str | None = None,
    replication_factor: int = 1,
    stream: StreamSpec | None = None,
    handoff: bool = False,
) -> QueryRecord:
    """Validate ``text`` (against ``stream`` if given), create its output and error topics,
    register it as ``name`` (``handoff``: with a backfill, :attr:`QueryRecord.handoff`);
    return the record.

    A query error (:class:`situflow.errors.QueryError`) or a :class:`QueryRefused` propagates
    before anything is written. Submitting a registered name replaces its query. Returns once
    the broker acknowledged.

    Submitting again what ``name`` already holds (the same query id, so also a reformatted
    text, for the same stream) writes nothing and returns the registered record, whose
    ``offset`` (not -1) tells it apart: a deployment's registration job re-runs at every
    upgrade, and each re-run would otherwise add a record that changes nothing.
    """
    # Durations are converted with the stream's time unit, as the services will.
    time_unit = 1.0 if stream is None else stream.time_unit
    compiled = compile_query(text, QueryOptions(name=name, time_unit=time_unit))
    if stream is not None:
        try:
            check_query(compiled, stream)
        except SituflowError as exc:
            raise QueryRefused(str(exc)) from None
    try:
        output = QueryOutput(name, OUTPUT_ROLES[compiled.language])
    except ValueError:
        raise InvalidQueryName(
            f"query name {name!r} cannot name a topic: use letters, digits, '.', '_' or '-'"
        ) from None
    settings, topic = _settings(kafka), topic or registry_topic()
    await create_topics(settings, [registry_spec(topic, replication_factor),
                                   query_topic(output, replication_factor),
                                   error_topic(name, replication_factor),
                                   status_topic(status_topic_name(topic), replication_factor)])
    registered = (await list_queries(settings, topic=topic)).get(name)
    if registered is not None and (registered.query_id, registered.language, registered.stream,
                                   registered.handoff) == (compiled.query_id, compiled.language,
                                                           stream, handoff):
        return registered
    record = QueryRecord(name, compiled.language, text, compiled.query_id,
                         time.time_ns() // 1_000_000, source_path, stream, handoff)
    await _write(settings, topic, *encode_record(record))
    return record


async def delete(
    kafka: str | KafkaSettings, name: str, *, topic: str | None = None
) -> QueryRecord:
    """Unregister ``name`` (a tombstone) and return its last record.

    Raises :class:`QueryNotRegistered` if no live record has that name. The output topic stays:
    consumers may still be reading it.
    """
    settings = _settings(kafka)
    registered = await list_queries(settings, topic=topic)
    if name not in registered:
        listed = ", ".join(sorted(registered)) or "none"
        raise QueryNotRegistered(f"no query named {name!r} is registered (registered: {listed})")
    await _write(settings, topic or registry_topic(), *encode_tombstone(name))
    return registered[name]


async def list_queries(
    kafka: str | KafkaSettings, *, topic: str | None = None
) -> dict[str, QueryRecord]:
    """The live queries by name: the control topic read from its beginning to its end.

    Creates the (empty) topic if it is missing, as :meth:`RegistryWatcher.start` does.
    """
    async with RegistryWatcher(kafka, topic=topic) as watcher:
        await watcher.wait_synced()
        return dict(watcher.queries)


@dataclass(frozen=True)
class QueryStatus:
    """A query's last failure, as services write it to the status topic (module doc):
    ``state`` is ``failed``, ``error`` the exception's class and message, ``at`` epoch ms."""

    name: str
    query_id: str
    error: str
    at: int
    service: str
    state: str = "failed"


def status_topic_name(topic: str | None = None) -> str:
    """The status topic of registry ``topic``: ``<registry topic>.status``."""
    return f"{topic or registry_topic()}.status"


def encode_status(status: QueryStatus) -> tuple[bytes, bytes]:
    value = {"name": status.name, "id": status.query_id, "state": status.state,
             "service": status.service, "error": status.error, "at": status.at}
    return status.name.encode(), json.dumps(value).encode()


def decode_status(value: bytes | None) -> QueryStatus | None:
    """The status in a status-topic value; None for a tombstone or anything unreadable."""
    try:
        fields = json.loads(value) if value is not None else None
        return None if fields is None else QueryStatus(
            str(fields["name"]), str(fields["id"]), str(fields["error"]), int(fields["at"]),
            str(fields["service"]), str(fields["state"]))
    except (ValueError, KeyError, TypeError):
        return None


async def read_statuses(kafka: str | KafkaSettings, *, topic: str | None = None
                        ) -> dict[str, QueryStatus]:
    """The last status of each query name: the status topic of registry ``topic`` read to
    its end (created if missing, as the registry is)."""
    statuses: dict[str, QueryStatus] = {}
    for message in await _status_records(_settings(kafka), topic):
        status = decode_status(message.value)
        if message.key is not None and status is not None:
            statuses[message.key.decode(errors="replace")] = status
    return statuses


@dataclass(frozen=True)
class QueryStart:
    """Where a service began to evaluate query ``query_id`` on one partition of
    ``<stream>.ordered``: the offset of the first message it evaluated it on, and the time its
    operator began at (of the first event it evaluated; a restored checkpoint keeps the earlier
    one). The backfill's hand-off (batch/README.md, "Backfill") reads it from the status topic,
    under the key ``<name>/start/<partition>``, which :func:`read_statuses` skips."""

    name: str
    query_id: str
    partition: int
    offset: int
    service: str
    time: int | None = None


def encode_start(start: QueryStart) -> tuple[bytes, bytes]:
    value = {"name": start.name, "id": start.query_id, "partition": start.partition,
             "offset": start.offset, "service": start.service, "time": start.time}
    return f"{start.name}/start/{start.partition}".encode(), json.dumps(value).encode()


async def read_starts(kafka: str | KafkaSettings, name: str, query_id: str, *,
                      topic: str | None = None, service: str | None = None,
                      latest: bool = False) -> dict[int, int]:
    """Per partition of the ordered topic, the earliest offset from which a service (or only
    ``service``) evaluates query ``name`` with id ``query_id``, or with ``latest`` the latest
    such offset (:class:`QueryStart`; partitions not begun are absent)."""
    pick = max if latest else min
    starts: dict[int, int] = {}
    for start in await _starts(_settings(kafka), name, query_id, topic):
        if service is None or start.service == service:
            starts[start.partition] = pick(start.offset,
                                           starts.get(start.partition, start.offset))
    return starts


async def read_start_times(kafka: str | KafkaSettings, name: str, query_id: str, *,
                           topic: str | None = None) -> dict[int, int]:
    """Per partition of the ordered topic, the latest time a service's operator of query
    ``name`` with id ``query_id`` began at (records without a time, or partitions not begun,
    are absent)."""
    times: dict[int, int] = {}
    for start in await _starts(_settings(kafka), name, query_id, topic):
        if start.time is not None:
            times[start.partition] = max(start.time, times.get(start.partition, start.time))
    return times


async def _starts(settings: KafkaSettings, name: str, query_id: str, topic: str | None
                  ) -> list[QueryStart]:
    """The :class:`QueryStart` records of query ``name`` with id ``query_id``."""
    starts = []
    for message in await _status_records(settings, topic):
        try:
            fields = json.loads(message.value) if message.value is not None else None
            if not isinstance(fields, dict) or "offset" not in fields or \
                    fields.get("name") != name or fields.get("id") != query_id:
                continue
            time = fields.get("time")
            starts.append(QueryStart(name, query_id, int(fields["partition"]),
                                     int(fields["offset"]), str(fields.get("service", "")),
                                     None if time is None else int(time)))
        except (ValueError, KeyError, TypeError):
            continue  # another record of the status topic
    return starts


async def _status_records(settings: KafkaSettings, topic: str | None
                          ) -> list[ConsumerRecord[Any, Any]]:
    """Every record of the status topic of registry ``topic``, read to its end (the topic is
    created if missing, as the registry is)."""
    return await read_control_topic(settings, status_topic(status_topic_name(topic)))


async def read_control_topic(settings: KafkaSettings, spec: TopicSpec
                             ) -> list[ConsumerRecord[Any, Any]]:
    """Every record of the one-partition topic ``spec``, read from its beginning to its end
    (created if missing: a broker that auto-creates it on read would not compact it)."""
    await create_topics(settings, [spec])
    consumer = AIOKafkaConsumer(**settings.client_kwargs(), group_id=None,
                                enable_auto_commit=False)
    partition = TopicPartition(spec.name, _PARTITION)
    records: list[ConsumerRecord[Any, Any]] = []
    await consumer.start()
    try:
        consumer.assign([partition])
        await consumer.seek_to_beginning(partition)
        end = (await consumer.end_offsets([partition]))[partition]
        while await consumer.position(partition) < end:
            fetched = await consumer.getmany(partition, timeout_ms=500)
            records.extend(fetched.get(partition, ()))
    finally:
        await consumer.stop()
    return records


async def _write(settings: KafkaSettings, topic: str, key: bytes, value: bytes | None) -> None:
    # One record per producer and send: each write is its own batch (see the module doc).
    producer = AIOKafkaProducer(**settings.client_kwargs(), acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(topic, value, key=key, partition=_PARTITION)
    finally:
        await producer.stop()


def _settings(kafka: str | KafkaSettings) -> KafkaSettings:
    return KafkaSettings(kafka) if isinstance(kafka, str) else kafka


class RegistryWatcher:
    """Follows the control topic and keeps the live queries, for a service that evaluates them.

    It reads with no consumer group, from the beginning, so every instance sees every query::

        async def on_change(name: str, record: QueryRecord | None) -> None:
            ...  # start, replace (record) or stop (None) evaluating `name`

        async with RegistryWatcher(settings, on_change=on_change) as watcher:
            await watcher.wait_synced()  # every query registered before start is known
            ...

    ``on_change`` is awaited in topic order for each change, including those read while
    catching up, before :meth:`wait_synced` returns; an exception it raises is logged and the
    watcher goes on. Records that are no query record are logged and skipped. :meth:`start`
    creates the control topic if it is missing, because a broker that auto-creates topics on
    read would make it uncompacted.
    """

    def __init__(
        self,
        kafka: str | KafkaSettings,
        *,
        topic: str | None = None,
        on_change: OnChange | None = None,
        poll_timeout_ms: int = 500,
    ) -> None:
        self.topic = topic or registry_topic()
        self._settings = _settings(kafka)
        self._on_change = on_change
        self._poll_timeout_ms = poll_timeout_ms
        self._partition = TopicPartition(self.topic, _PARTITION)
        self._queries: dict[str, QueryRecord] = {}
        self._synced = asyncio.Event()
        self._position = 0  # the offset after the last record applied
        self._progress = asyncio.Condition()
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def queries(self) -> Mapping[str, QueryRecord]:
        """The live queries by name (a read-only view that follows the topic)."""
        return MappingProxyType(self._queries)

    @property
    def position(self) -> int:
        """The offset after the last record applied: every record before it is known."""
        return self._position

    async def reached(self, offset: int) -> bool:
        """Return once the record at ``offset`` and every one before it have been applied:
        True, or False at once if the topic holds no record at ``offset`` (yet)."""
        if offset >= self._position:
            assert self._consumer is not None, "the watcher is not running"
            end = (await self._consumer.end_offsets([self._partition]))[self._partition]
            if offset >= end:
                return False
        async with self._progress:
            await self._progress.wait_for(lambda: self._position > offset)
        return True

    async def start(self) -> Self:
        await create_topics(self._settings, [registry_spec(self.topic)])
        consumer = AIOKafkaConsumer(
            **self._settings.client_kwargs(), group_id=None, enable_auto_commit=False
        )
        await consumer.start()
        try:
            consumer.assign([self._partition])
            await consumer.seek_to_beginning(self._partition)
            end = (await consumer.end_offsets([self._partition]))[self._partition]
        except BaseException:
            await consumer.stop()
            raise
        self._consumer = consumer
        self._task = asyncio.create_task(self._follow(consumer, end), name=f"watch {self.topic}")
        return self

    async def wait_synced(self) -> None:
        """Return once every record written before :meth:`start` has been applied.

        Raises what stopped the watcher if it failed before that.
        """
        if self._task is None:
            raise RegistryError("the registry watcher is not running: call start() first")
        synced = asyncio.ensure_future(self._synced.wait())
        try:
            await asyncio.wait({synced, self._task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            synced.cancel()
        if not self._synced.is_set():
            self._task.result()  # raises the failure
            raise RegistryError(f"the registry watcher of {self.topic!r} stopped before syncing")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await consumer.stop()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def _follow(self, consumer: AIOKafkaConsumer, end: int) -> None:
        while True:
            if not self._synced.is_set() and await consumer.position(self._partition) >= end:
                self._synced.set()
            fetched = await consumer.getmany(self._partition, timeout_ms=self._poll_timeout_ms)
            for message in fetched.get(self._partition, ()):
                await self._apply(message)
                async with self._progress:
                    self._position = message.offset + 1
                    self._progress.notify_all()

    async def _apply(self, message: ConsumerRecord[Any, Any]) -> None:
        try:
            name, record = decode_record(message.key, message.value)
        except RegistryRecordError as exc:
            logger.warning("skipped %s offset %d: %s", self.topic, message.offset, exc)
            return
        if record is not None:
            record = dataclasses.replace(record, offset=message.offset)
        if self._queries.get(name) == record:
            return  # a tombstone of an unknown name, or a duplicate after a retried send
        if record is None:
            del self._queries[name]
        else:
            self._queries[name] = record
        if self._on_change is not None:
            try:
                await self._on_change(name, record)
            except Exception:
                logger.exception("on_change(%r) failed; the registry watcher goes on", name)


class RegistryProgress:
    """How much of the registry a service has read, for one that counts its records (the
    K-slack batches of an unpartitioned stream): nothing waits on :attr:`read` once
    :meth:`follow` has read the registry to its end (at once if it is not ``followed``), and
    :attr:`records` only grows, also across restarts, since it starts from the end."""

    def __init__(self, kafka: str | KafkaSettings, followed: bool) -> None:
        self.kafka, self.followed = kafka, followed
        self.read = asyncio.Event()
        self._watcher: RegistryWatcher | None = None
        if not followed:
            self.read.set()

    @property
    def records(self) -> int:
        """The records read (0 before the registry is read to its end, or not followed)."""
        return self._watcher.position if self._watcher is not None else 0

    async def follow(self, on_read: Callable[[], None]) -> None:
        """Read the registry to its end, call ``on_read``, set :attr:`read`, then follow it
        until cancelled."""
        async with RegistryWatcher(self.kafka) as watcher:
            await watcher.wait_synced()
            self._watcher = watcher
            on_read()
            self.read.set()
            await asyncio.Event().wait()
