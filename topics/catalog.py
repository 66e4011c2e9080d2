"""Every Kafka topic situflow reads or writes, with its settings and message schema.

The names follow ARCHITECTURE.md (services and topics):

=========================  ==========  ===========================================================
topic                      written by  holds
=========================  ==========  ===========================================================
``<stream>``               producers   raw events, possibly out of order (JSON or Arrow IPC)
``<stream>.ordered``       kslack      the same events in event-time order per partition
``<stream>.late``          kslack      events later than the K-slack bound, unchanged
``<topic>.dlq``            any service messages that could not be decoded, reason in headers
``situations``             deriver     situation batches: *started*, *running* and *finished*
                                       situation records, read by the matcher
                                       (``situations.dlq`` holds the batches it cannot read)
``matches.<query>``        matcher     TPStream and SASE+ results of one query
``trends.<query>``         trends      COGRA results of one query
``situflow.queries``       CLI         the query registry: compacted, keyed by query name
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

Specs are plain frozen data; :func:`topics.create.create_topics` turns them into topics.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from situflow.codecs.arrow_events import CONTENT_TYPE as ARROW
from situflow.codecs.json_events import CONTENT_TYPE as JSON
from situflow.codecs.json_events import DEFAULT_TIME_FIELD

DAY_MS = 24 * 60 * 60 * 1000
DEFAULT_RETENTION_MS = 7 * DAY_MS
DLQ_RETENTION_MS = 14 * DAY_MS
DEFAULT_PARTITIONS = 4

SITUATIONS = "situations"
QUERIES = "situflow.queries"

#: Headers of a dead-letter record; its key and value are the original message's, unchanged.
DLQ_REASON_HEADER = "situflow.error.reason"
DLQ_TOPIC_HEADER = "situflow.source.topic"
DLQ_PARTITION_HEADER = "situflow.source.partition"
DLQ_OFFSET_HEADER = "situflow.source.offset"

#: Column K-slack adds to ``<stream>.ordered``: the event's input position, ``offset << 20 | row``
#: (row within an Arrow message, 0 for JSON). With the event time it orders a key's events
#: strictly, so a service recognises events it has already seen after a redelivery.
SEQ_FIELD = "_situflow_seq"
ROW_BITS = 20

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
    round-robin), so that partitioned queries find each key's events in one partition.
    """

    name: str
    time_field: str = DEFAULT_TIME_FIELD
    partitions: int = DEFAULT_PARTITIONS
    key_fields: tuple[str, ...] = ()
    retention_ms: int | None = DEFAULT_RETENTION_MS

    def __post_init__(self) -> None:
        check_name(self.name)


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

    def topics(self) -> list[TopicSpec]:
        """Control topic, ``situations`` and its DLQ, each stream's four topics, each query's
        output."""
        situations = situations_topic(self.situations_partitions, self.replication_factor,
                                      self.situations)
        specs = [control_topic(self.replication_factor), situations, dlq_topic(situations)]
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
    key = MessageSchema(
        f"the values of {', '.join(stream.key_fields)} as a JSON array"
        if stream.key_fields else "any, or null (round-robin)"
    )

    def event_topic(name: str, role: TopicRole) -> TopicSpec:
        return TopicSpec(
            name, role, key=key, value=_event_value(stream.time_field, role is TopicRole.ORDERED),
            partitions=stream.partitions, replication_factor=replication_factor,
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
    """``situations``: situation batches, partition by partition of ``<stream>.ordered``.

    ``partitions`` must be the stream's (see the module doc). ``name`` renames it
    (``SITUFLOW_SITUATIONS_TOPIC`` of the deriver and the matcher, e.g. one per stream).
    """
    return TopicSpec(
        name,
        TopicRole.SITUATIONS,
        key=MessageSchema("the query name as a JSON string"),
        value=MessageSchema(
            "JSON object {query, query_id, registered_at, records: [...]} "
            "(workers.situation_matching.SituationBatch); a record: query, key, situation, kind "
            "(started|running|finished), ts, te (null while open), at, seq, aggregate values, "
            "id (deterministic)"
        ),
        partitions=partitions,
        replication_factor=replication_factor,
    )


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
            "JSON object {name, language, text, id, source, submitted_at} (topics.registry); "
            "null deletes the query"
        ),
        partitions=1,
        replication_factor=replication_factor,
        cleanup_policy=CleanupPolicy.COMPACT,
        retention_ms=-1,
    )
