"""Every Kafka topic situflow reads or writes, with its settings and message schema.

The names follow ARCHITECTURE.md (services and topics):

=========================  ==========  ===========================================================
topic                      written by  holds
=========================  ==========  ===========================================================
``<stream>``               producers   raw events, possibly out of order (JSON or Arrow IPC)
``<stream>.ordered``       kslack      the same events in event-time order per partition (an
                                       unpartitioned stream: in its one global order, cut into
                                       numbered batches spread over the partitions)
``<stream>.late``          kslack      events later than the K-slack bound, unchanged
``<topic>.dlq``            any service messages that could not be decoded, reason in headers
``situations``             deriver     per ordered message and query: *started*, *running* and
                                       *finished* situation records (an unpartitioned stream:
                                       the batch's situation batch, thesis §5.6.3), read by the
                                       matcher (``situations.dlq`` holds the messages it cannot
                                       read or merge)
``matches.<query>``        matcher     TPStream and SASE+ results of one query
``trends.<query>``         trends      COGRA results of one query
``errors.<query>``         deriver,    the messages one query failed on, with the exception in
                           matcher,    headers (:mod:`workers.failures`); the input message
                           trends      stays out of ``<stream>.dlq``: it is not at fault
``situflow.queries``       CLI         the query registry: compacted, keyed by query name
``situflow.queries.status`` services   per query its last failure, read by ``situflow query
                                       list``: compacted, keyed by query name
=========================  ==========  ===========================================================

Why these settings: ``<stream>.ordered`` and ``<stream>.late`` have as many partitions as
``<stream>`` because K-slack reorders per partition and keeps the key, so downstream state stays
co-partitioned with its input; so does ``situations``, which the deriver writes partition by
partition of ``<stream>.ordered`` and the matcher reads in one agent with ``<stream>.ordered``
(Faust co-partitions an agent's topics only if their partition counts are equal: one
``situations`` topic per stream, named by each catalog). ``situflow.queries`` has one partition
so that every service sees submits and deletes in the same order, and is compacted with
infinite retention so that a service that starts late still reads every live query (a delete
is a tombstone: the key with a null value). DLQ topics keep messages twice as long as data
topics, for a person to inspect them.

An *unpartitioned* stream (``StreamSpec(unpartitioned=True)``; thesis §5.6.3/§5.6.5) has no key
attributes: its queries may span every event, so it needs one global event-time order, and
``<stream>`` and ``<stream>.late`` have **one partition**, the one ordering point. K-slack cuts
the ordered stream into consecutive batches with dense numbers (header
:data:`BATCH_SEQ_HEADER`) and writes batch ``s`` to partition ``s mod partitions`` of
``<stream>.ordered``, so a deriver group derives them in parallel; each event's
:data:`SEQ_FIELD` is then its position in the global order. The deriver writes each TPStream
query's situation batches to one partition of ``situations`` (chosen by the query name), where
one matcher merges them in sequence.

Specs are plain frozen data; :func:`topics.create.create_topics` turns them into topics.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from enum import StrEnum

from situflow.codecs.arrow_events import CONTENT_TYPE as ARROW
from situflow.codecs.event_time import DEFAULT_TIME_FIELD, check_time_unit
from situflow.codecs.json_events import CONTENT_TYPE as JSON
from situflow.kslack.positions import ROW_BITS as ROW_BITS  # the column K-slack adds
from situflow.kslack.positions import SEQ_FIELD as SEQ_FIELD

DAY_MS = 24 * 60 * 60 * 1000
DEFAULT_RETENTION_MS = 7 * DAY_MS
DLQ_RETENTION_MS = 14 * DAY_MS
DEFAULT_PARTITIONS = 4

SITUATIONS = "situations"
QUERIES = "situflow.queries"
SERVICES = "situflow.services"

#: Headers of a dead-letter record; its key and value are the original message's, unchanged.
DLQ_REASON_HEADER = "situflow.error.reason"
DLQ_TOPIC_HEADER = "situflow.source.topic"
DLQ_PARTITION_HEADER = "situflow.source.partition"
DLQ_OFFSET_HEADER = "situflow.source.offset"
#: On a dead letter of one event of an ordered batch: its seq (``SEQ_FIELD``) in the batch.
SEQ_HEADER = "situflow.source.seq"

#: Headers of a batch of an unpartitioned stream's ``<stream>.ordered`` (decimal integers): its
#: number, and how many query registry records K-slack had read when it cut this batch and the
#: batch before (-1 before the first), which fixes the batch at which a query registered while
#: the stream runs begins (:mod:`workers.kslack`).
BATCH_SEQ_HEADER = "situflow.batch.seq"
BATCH_REGISTRY_HEADER = "situflow.batch.registry"
BATCH_REGISTRY_BEFORE_HEADER = "situflow.batch.registry-before"

# Kafka's rule for topic names: at most 249 of these characters, and not "." or "..".
_LEGAL_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


class TopicRole(StrEnum):
    """What a topic is for; services and the CLI select topics by role, not by name pattern."""

    INPUT = "input"
    ORDERED = "ordered"
    LATE = "late"
    DLQ = "dlq"
    SITUATIONS = "situations"
    MATCHES = "matches"
    TRENDS = "trends"
    QUERIES = "queries"
    ERRORS = "errors"
    STATUS = "status"
    SERVICES = "services"


class CleanupPolicy(StrEnum):
    """Kafka's ``cleanup.policy``: drop old segments, or keep the newest record per key."""

    DELETE = "delete"
    COMPACT = "compact"


@dataclass(frozen=True)
class MessageSchema:
    """What a key or value holds: a description for people, and the content types accepted."""

    description: str
    content_types: tuple[str, ...] = (JSON,)


@dataclass(frozen=True)
class TopicSpec:
    """One topic as it should exist on the broker, and what its messages look like.

    ``retention_ms`` of ``None`` leaves the broker's default, ``-1`` keeps messages forever.
    ``time_field`` names the event-time attribute of event topics (``None`` for the others).
    """

    name: str
    role: TopicRole
    key: MessageSchema
    value: MessageSchema
    partitions: int = DEFAULT_PARTITIONS
    replication_factor: int = 1
    cleanup_policy: CleanupPolicy = CleanupPolicy.DELETE
    retention_ms: int | None = DEFAULT_RETENTION_MS
    time_field: str | None = None

    def __post_init__(self) -> None:
        check_name(self.name)
        if self.partitions < 1 or self.replication_factor < 1:
            raise ValueError(f"topic {self.name!r}: partitions and replication must be >= 1")

    def configs(self) -> dict[str, str]:
        """Topic-level configs for CreateTopics (the Kafka config names)."""
        configs = {"cleanup.policy": self.cleanup_policy.value}
        if self.retention_ms is not None:
            configs["retention.ms"] = str(self.retention_ms)
        return configs


@dataclass(frozen=True)
class StreamSpec:
    """An input stream: its raw topic name and how to read its events.

    ``key_fields`` are the partition attributes producers key messages by (empty: any key,
    round-robin), so that partitioned queries find each key's events in one partition. An
    ``unpartitioned`` stream has none: its input has one partition, and ``partitions`` is the
    number of partitions its batches are spread over (see the module doc).
    """

    name: str
    time_field: str = DEFAULT_TIME_FIELD
    partitions: int = DEFAULT_PARTITIONS
    key_fields: tuple[str, ...] = ()
    retention_ms: int | None = DEFAULT_RETENTION_MS
    unpartitioned: bool = False
    # Seconds per event-time tick: the one event-time rule (situflow.codecs.event_time).
    time_unit: float = 1.0

    def __post_init__(self) -> None:
        check_name(self.name)
        check_time_unit(self.time_unit)
        if self.unpartitioned and self.key_fields:
            raise ValueError(f"stream {self.name!r}: an unpartitioned stream has no key "
                             f"attributes (got {', '.join(self.key_fields)})")

    @property
    def input_partitions(self) -> int:
        """Partitions of ``<stream>`` and ``<stream>.late``: one for an unpartitioned stream,
        whose global event-time order has one ordering point."""
        return 1 if self.unpartitioned else self.partitions


@dataclass(frozen=True)
class QueryOutput:
    """A registered query's output topic: ``matches.<id>`` (TPStream, SASE+) or ``trends.<id>``."""

    query_id: str
    role: TopicRole = TopicRole.MATCHES
    partitions: int = DEFAULT_PARTITIONS

    def __post_init__(self) -> None:
        if self.role not in (TopicRole.MATCHES, TopicRole.TRENDS):
            raise ValueError(f"query output role must be matches or trends, not {self.role}")
        check_name(f"{self.role.value}.{self.query_id}")


@dataclass(frozen=True)
class Catalog:
    """The whole topic set of one deployment; :meth:`topics` lists it for creation."""

    streams: tuple[StreamSpec, ...] = ()
    queries: tuple[QueryOutput, ...] = ()
    situations_partitions: int = DEFAULT_PARTITIONS
    replication_factor: int = 1
    situations: str = SITUATIONS
    services: str = SERVICES

    def topics(self) -> list[TopicSpec]:
        """Control topic, services topic, ``situations`` and its DLQ, each stream's four
        topics, each query's output."""
        situations = situations_topic(self.situations_partitions, self.replication_factor,
                                      self.situations)
        specs = [control_topic(self.replication_factor),
                 services_topic(self.services, self.replication_factor),
                 situations, dlq_topic(situations)]
        for stream in self.streams:
            specs.extend(stream_topics(stream, self.replication_factor))
        specs.extend(query_topic(q, self.replication_factor) for q in self.queries)
        return specs

    def stream(self, name: str) -> StreamSpec:
        for stream in self.streams:
            if stream.name == name:
                return stream
        raise KeyError(f"no stream {name!r} in the topic catalog")


def check_name(name: str) -> str:
    """Raise ValueError unless ``name`` is a legal Kafka topic name."""
    if not _LEGAL_NAME.fullmatch(name) or name in (".", ".."):
        raise ValueError(
            f"illegal topic name {name!r}: use 1-249 letters, digits, '.', '_' or '-'"
        )
    return name


def _event_value(time_field: str, ordered: bool) -> MessageSchema:
    order = "in event-time order per partition" if ordered else "in any order"
    return MessageSchema(
        f"one event per JSON object, or many per Arrow IPC stream (header content-type), "
        f"{order}; event time in {time_field!r} (integer, or ISO-8601 string = epoch ms)",
        (JSON, ARROW),
    )


def stream_topics(stream: StreamSpec, replication_factor: int = 1) -> list[TopicSpec]:
    """``<stream>``, ``<stream>.ordered``, ``<stream>.late`` and ``<stream>.dlq``."""
    if stream.unpartitioned:
        key = MessageSchema("any, or null (one partition: the stream's one global order)")
    elif stream.key_fields:
        key = MessageSchema(f"the values of {', '.join(stream.key_fields)} as a JSON array")
    else:
        key = MessageSchema("any, or null (round-robin)")

    def event_topic(name: str, role: TopicRole) -> TopicSpec:
        ordered = role is TopicRole.ORDERED
        if ordered and stream.unpartitioned:
            value = MessageSchema(
                f"one batch of consecutive events of the global event-time order per Arrow IPC "
                f"message, batch s in partition s mod {stream.partitions}; headers "
                f"{BATCH_SEQ_HEADER} (s), {BATCH_REGISTRY_HEADER} and "
                f"{BATCH_REGISTRY_BEFORE_HEADER}; {SEQ_FIELD} = position in the global order",
                (ARROW,))
        else:
            value = _event_value(stream.time_field, ordered)
        return TopicSpec(
            name, role, key=key, value=value,
            partitions=stream.partitions if ordered else stream.input_partitions,
            replication_factor=replication_factor,
            retention_ms=stream.retention_ms, time_field=stream.time_field,
        )

    raw = event_topic(stream.name, TopicRole.INPUT)
    return [
        raw,
        event_topic(f"{stream.name}.ordered", TopicRole.ORDERED),
        event_topic(f"{stream.name}.late", TopicRole.LATE),
        dlq_topic(raw),
    ]


def dlq_topic(source: TopicSpec) -> TopicSpec:
    """``<topic>.dlq``: the original key and bytes, with the reason in the DLQ headers.

    One partition: bad messages are few, and a person reads them in arrival order.
    """
    return TopicSpec(
        f"{source.name}.dlq",
        TopicRole.DLQ,
        key=MessageSchema("the original key, unchanged"),
        value=MessageSchema(
            f"the original bytes, unchanged; headers {DLQ_REASON_HEADER}, {DLQ_TOPIC_HEADER}, "
            f"{DLQ_PARTITION_HEADER}, {DLQ_OFFSET_HEADER}",
            ("application/octet-stream",),
        ),
        partitions=1,
        replication_factor=source.replication_factor,
        retention_ms=DLQ_RETENTION_MS,
    )


def situations_topic(
    partitions: int = DEFAULT_PARTITIONS, replication_factor: int = 1, name: str = SITUATIONS
) -> TopicSpec:
    """``situations``: situation records, partition by partition of ``<stream>.ordered``, or
    an unpartitioned stream's situation batches, each query's in one partition.

    ``partitions`` must be the stream's (see the module doc). ``name`` renames it
    (``SITUFLOW_SITUATIONS_TOPIC`` of the deriver and the matcher, e.g. one per stream).
    """
    return TopicSpec(
        name,
        TopicRole.SITUATIONS,
        key=MessageSchema("the query name as a JSON string"),
        value=MessageSchema(
            "JSON object {query, query_id, registered_at, rows: [...]} "
            "(situflow.tpstream.split.messages.SituationMessage); a record is a row [kind "
            "(started|running|finished), key, situation, ts, te (null while open), at, seq, "
            "aggregate values]. An unpartitioned stream's: {query, query_id, "
            "registered_at, starts, batch: {seq, query_id, records, head, tail, span}} "
            "(situflow.tpstream.split.batches.SituationBatch)"
        ),
        partitions=partitions,
        replication_factor=replication_factor,
    )


def situations_partition(query: str, partitions: int) -> int:
    """The partition of ``situations`` that holds every situation batch of unpartitioned query
    ``query``, so that one matcher merges them: a hash of the name, the same in every process."""
    return zlib.crc32(query.encode()) % partitions


def query_topic(output: QueryOutput, replication_factor: int = 1) -> TopicSpec:
    """``matches.<query>`` or ``trends.<query>``: JSON results as in the CLI contract, plus id."""
    if output.role is TopicRole.MATCHES:
        value = ("JSON result {query, key, ts, emitted_at, values, bindings, id}; "
                 "id = hash of query id, key and constituent ids, for de-duplication")
    else:
        value = ("JSON result {query, group, window_start, window_end, values, id}; "
                 "id = hash of query id, group and window, for de-duplication")
    return TopicSpec(
        f"{output.role.value}.{output.query_id}",
        output.role,
        key=MessageSchema("the partition key (matches) or group (trends) as a JSON array"),
        value=MessageSchema(value),
        partitions=output.partitions,
        replication_factor=replication_factor,
    )


def control_topic(replication_factor: int = 1) -> TopicSpec:
    """``situflow.queries``: one partition, compacted, kept forever (see the module doc)."""
    return TopicSpec(
        QUERIES,
        TopicRole.QUERIES,
        key=MessageSchema("the query name, UTF-8", ("text/plain",)),
        value=MessageSchema(
            "JSON object {name, language, text, id, source, submitted_at, stream?} "
            "(topics.registry); "
            "null deletes the query"
        ),
        partitions=1,
        replication_factor=replication_factor,
        cleanup_policy=CleanupPolicy.COMPACT,
        retention_ms=-1,
    )


def error_topic(query: str, replication_factor: int = 1) -> TopicSpec:
    """``errors.<query>``: the messages the query failed on, unchanged, with the DLQ headers
    and the exception's (:mod:`workers.failures`). One partition, kept as long as DLQs."""
    return TopicSpec(
        f"errors.{query}",
        TopicRole.ERRORS,
        key=MessageSchema("the original key, unchanged"),
        value=MessageSchema(
            f"the original bytes, unchanged; headers {DLQ_REASON_HEADER}, {DLQ_TOPIC_HEADER}, "
            f"{DLQ_PARTITION_HEADER}, {DLQ_OFFSET_HEADER}, situflow.error.class, "
            "situflow.error.message, situflow.error.query", ("application/octet-stream",)),
        partitions=1,
        replication_factor=replication_factor,
        retention_ms=DLQ_RETENTION_MS,
    )


def status_topic(name: str, replication_factor: int = 1) -> TopicSpec:
    """``<registry>.status``: per query name its last failure (topics.registry.QueryStatus);
    one partition, compacted, kept forever like the registry it describes."""
    return TopicSpec(
        name,
        TopicRole.STATUS,
        key=MessageSchema("the query name, UTF-8", ("text/plain",)),
        value=MessageSchema("JSON object {name, id, state, service, error, at} "
                            "(topics.registry.QueryStatus)"),
        partitions=1,
        replication_factor=replication_factor,
        cleanup_policy=CleanupPolicy.COMPACT,
        retention_ms=-1,
    )


def services_topic(name: str = SERVICES, replication_factor: int = 1) -> TopicSpec:
    """``situflow.services``: each running service worker's announcement, re-sent every few
    seconds and deleted (a tombstone) when it stops cleanly (topics.announcements), which
    ``situflow status`` reads to find the workers of a deployment. One partition, compacted:
    the newest announcement per worker is all a reader needs. ``name`` renames it
    (``SITUFLOW_SERVICES_TOPIC``, e.g. one per deployment sharing a Kafka)."""
    return TopicSpec(
        name,
        TopicRole.SERVICES,
        key=MessageSchema("the worker id <service>@<host>:<web port>, UTF-8", ("text/plain",)),
        value=MessageSchema("JSON object {service, stream, url, host, pid, started_at, "
                            "last_seen, version} (topics.announcements); null: the worker "
                            "stopped"),
        partitions=1,
        replication_factor=replication_factor,
        cleanup_policy=CleanupPolicy.COMPACT,
        retention_ms=-1,
    )
