"""The archiver service: ``<stream>.ordered`` (and other topics) → Parquet segments, each row once.

Layout (ARCHITECTURE.md, offline path)::

    <SITUFLOW_ARCHIVE_DIR>/<topic>/partition=<p>/<first seq, 20 digits>.parquet

A *segment* holds the rows of whole messages of one topic partition, in topic order. Each row
has the event's attributes (in JSON messages, nested values such as a result's ``values`` and
``bindings`` as JSON text), :data:`ARCHIVE_SEQ`, its dense sequence number in the topic
partition (0, 1, 2, … in topic order), and :data:`ARCHIVE_OFFSET`, the Kafka offset of its
message. The Parquet key-value metadata ``situflow.archive`` (:class:`SegmentMeta`) records the
seq and offset range and the event-time span, so a reader (and the index job of the offline
issue) finds segments without scanning them. The open segment is written when it holds
``SITUFLOW_ARCHIVE_SEGMENT_ROWS`` rows, when a message's first event falls in a later event-time
bucket (``ts // SITUFLOW_ARCHIVE_SEGMENT_SPAN``) than the segment's first event, when a
message's attributes cannot share the segment's schema, and when it has been open
``SITUFLOW_ARCHIVE_SEGMENT_SECONDS`` (a tick does it on idle partitions).

**Every row is archived exactly once, with a dense seq, across crashes** (``kill -9`` included):

1. The seq is a function of the topic alone: the rows of its messages in offset order,
   numbered from 0 (a message that does not decode has no rows and goes to ``<stream>.dlq``).
   Replaying the topic from any point where the archive ends numbers every row the same way.
2. The checkpointed state (:mod:`workers.partitions`, table ``archive``) holds, per topic
   partition, only the next seq and the last offset in a written segment. The open segment's
   rows are in memory, and its messages are not acknowledged until it is written: Faust never
   commits an offset past a row that is in no file, so a crash redelivers those messages.
3. A segment is written to a temporary file, fsynced, then *hard-linked* to its name, its first
   seq. The link fails when that name exists, so two files never start at the same seq. The
   directory is fsynced, the state is checkpointed, and then the messages are acknowledged.
   (So the archive needs a file system with hard links: any local one, or NFS.)
4. The files are the truth, which the state may lag: a crash between the link and the
   checkpoint leaves a segment that the state does not know. Before a segment opens, and when
   its link finds the name taken, the log *adopts* the segment named by its next seq: next seq
   and offset move past it, and the buffered messages it covers are dropped (their rows are in
   it). A redelivered message at or before the last archived offset is skipped.

So every segment starts where the one before ends, and every row of the topic is in exactly
one. This also holds against a worker that lost its partitions in a rebalance but still
writes (a "zombie"), provided all archiver workers share ``SITUFLOW_ARCHIVE_DIR`` (one volume
for the group, or a single worker): whoever links a seq first wins, the other adopts.

Costs: after a crash, up to one open segment per topic partition (at most
``SITUFLOW_ARCHIVE_SEGMENT_SECONDS`` of input) is consumed again. A temporary file
(``.<name>.<pid>.<hex>.tmp``) that a crash leaves behind is no segment: readers ignore it and
it may be deleted.

Metrics (besides those of every service, with ``events_out`` counting archived rows):
``situflow_archive_segments``, ``situflow_archive_bytes`` (per topic),
``situflow_archive_adopted_segments`` (step 4; each one is a crash's or a rebalance's trace)
and ``situflow_archive_open_rows``.

Settings (besides :mod:`workers.app`; ``SITUFLOW_KEY_FIELDS`` is not needed):

====================================  ===============================================================
``SITUFLOW_ARCHIVE_DIR``              archive root; default ``situflow-archive``
``SITUFLOW_ARCHIVE_TOPICS``           comma-separated extra topics to archive (JSON, e.g. the
                                      ``matches.<q>`` and ``trends.<q>`` result topics). They must
                                      exist and have the stream's partition count: Faust would
                                      create a missing one with a one-hour retention
``SITUFLOW_ARCHIVE_SEGMENT_ROWS``     rows that close a segment; default 100000
``SITUFLOW_ARCHIVE_SEGMENT_SPAN``     event-time bucket of a segment, in event-time units; default
                                      3600000 (an hour of epoch ms); 0 turns the time roll off
``SITUFLOW_ARCHIVE_SEGMENT_SECONDS``  seconds a segment stays open at most; default 60
====================================  ===============================================================

Run: ``python -m workers.archiver worker``.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import faust
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from prometheus_client import Counter, Gauge

from situflow.codecs import arrow_events
from situflow.errors import InputError, StateError
from topics.catalog import stream_topics
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

#: Columns the archiver adds to every row.
ARCHIVE_SEQ = "_situflow_archive_seq"
ARCHIVE_OFFSET = "_situflow_offset"
#: Parquet key-value metadata key of a segment's :class:`SegmentMeta` (JSON).
META_KEY = "situflow.archive"
SEGMENT_SUFFIX = ".parquet"
#: Rows per Parquet row group: the unit a reader of the offline path skips by statistics.
ROW_GROUP_ROWS = 65_536

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SegmentPolicy:
    """When the open segment is written (module doc): ``rows``, time ``span`` (0: never by
    time) and ``seconds`` open."""

    rows: int = 100_000
    span: int = 3_600_000
    seconds: float = 60.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SegmentPolicy:
        return cls(rows=int(env.get("SITUFLOW_ARCHIVE_SEGMENT_ROWS", cls.rows)),
                   span=int(env.get("SITUFLOW_ARCHIVE_SEGMENT_SPAN", cls.span)),
                   seconds=float(env.get("SITUFLOW_ARCHIVE_SEGMENT_SECONDS", cls.seconds)))

    def bucket(self, ts: int | None) -> int | None:
        """The event-time bucket of ``ts`` (None without a time or a span).

        >>> SegmentPolicy(span=100).bucket(250), SegmentPolicy(span=0).bucket(250)
        (2, None)
        """
        return None if ts is None or self.span <= 0 else ts // self.span


def segment_name(first_seq: int) -> str:
    """A segment's file name: its first seq, zero-padded so that names sort in seq order.

    >>> segment_name(42)
    '00000000000000000042.parquet'
    """
    return f"{first_seq:020d}{SEGMENT_SUFFIX}"


def partition_dir(root: Path, topic: str, partition: int) -> Path:
    return root / topic / f"partition={partition}"


def segment_paths(directory: Path) -> list[Path]:
    """The segments of one topic partition in seq order (temporary files are not segments)."""
    return sorted(p for p in directory.glob(f"*{SEGMENT_SUFFIX}") if not p.name.startswith("."))


@dataclass(frozen=True)
class SegmentMeta:
    """What a segment holds: rows ``first_seq`` up to (excluding) ``next_seq``, from the
    messages at ``first_offset``..``last_offset``, with event times ``min_ts``..``max_ts``."""

    topic: str
    partition: int
    first_seq: int
    next_seq: int
    first_offset: int
    last_offset: int
    min_ts: int | None = None
    max_ts: int | None = None

    @property
    def rows(self) -> int:
        return self.next_seq - self.first_seq


@dataclass(frozen=True)
class Segment:
    """A segment this process wrote, and its size in bytes."""

    meta: SegmentMeta
    path: Path
    size: int


def read_meta(path: Path) -> SegmentMeta:
    metadata = pq.read_schema(path).metadata or {}
    return SegmentMeta(**json.loads(metadata[META_KEY.encode()]))


def write_segment(directory: Path, table: pa.Table, meta: SegmentMeta) -> Segment:
    """Write ``table`` as the segment named by ``meta.first_seq``, durably and atomically.

    Raises ``FileExistsError`` (writing nothing) if that segment exists: a file is never
    replaced, so two writers of the same seq cannot both succeed (module doc, step 3).
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / segment_name(meta.first_seq)
    temporary = directory / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    table = table.replace_schema_metadata({META_KEY: json.dumps(asdict(meta))})
    try:
        with temporary.open("wb") as file:
            pq.write_table(table, file, row_group_size=ROW_GROUP_ROWS, compression="zstd")
            file.flush()
            os.fsync(file.fileno())
        os.link(temporary, path)  # unlike rename, fails if the name exists
    finally:
        temporary.unlink(missing_ok=True)
    _fsync_dir(directory)  # the name must be durable before a checkpoint counts on it
    return Segment(meta, path, path.stat().st_size)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_archive(root: Path, topic: str, partition: int) -> pa.Table:
    """Every archived row of one topic partition, in seq order (attributes missing from a
    segment are null; raises ``pyarrow.ArrowTypeError`` if segments give one two types)."""
    tables = [pq.read_table(path) for path in segment_paths(partition_dir(root, topic, partition))]
    if not tables:
        return pa.table({ARCHIVE_SEQ: pa.array([], pa.int64()),
                         ARCHIVE_OFFSET: pa.array([], pa.int64())})
    return pa.concat_tables(tables, promote_options="default")


def decode_rows(value: bytes | None, headers: Any, time_field: str) -> pa.Table | None:
    """A message's events as a table (None if it holds none): an Arrow IPC stream (which must
    have ``time_field``, as every event batch does) or one JSON object.

    >>> decode_rows(b'{"ts": 3, "values": {"n": 1}}', None, "ts").to_pylist()
    [{'ts': 3, 'values': '{"n": 1}'}]
    """
    if value is None:
        raise InputError("empty message (null value)")
    if arrow_events.is_arrow(headers):
        batch = arrow_events.decode_batch(value, time_field=time_field)
        return pa.Table.from_batches([batch]) if batch.num_rows else None
    try:
        event = json.loads(value)
    except ValueError as exc:  # UnicodeDecodeError included
        raise InputError(f"invalid JSON: {exc}") from None
    if not isinstance(event, dict):
        raise InputError(f"expected a JSON object, got {type(event).__name__}")
    # Nested values as text: their shapes vary between results, a Parquet schema cannot.
    flat = {k: json.dumps(v) if isinstance(v, dict | list) else v for k, v in event.items()}
    return pa.Table.from_batches([arrow_events.batch_from_events([flat])])


def _time_column(table: pa.Table, time_field: str) -> pa.ChunkedArray | None:
    index = table.schema.get_field_index(time_field)
    if index < 0 or not pa.types.is_integer(table.schema.field(index).type):
        return None
    return table.column(index)


@dataclass
class _Pending:
    """A message of the open segment: its offset, its numbered rows (None: it has none) and
    what to acknowledge once they are written."""

    offset: int
    rows: pa.Table | None
    tokens: list[Any] = field(default_factory=list)


class SegmentLog:
    """One topic partition's archive: where the written segments end (``next_seq``,
    ``offset``) and the open segment. Messages must be added in offset order.

    :meth:`add` and :meth:`expire` return the segments they wrote; :meth:`take_done` the
    tokens of the messages now archived (or skipped), in order, to acknowledge.
    """

    def __init__(self, directory: Path, topic: str, partition: int, policy: SegmentPolicy,
                 time_field: str = "ts", next_seq: int = 0, offset: int = -1,
                 on_adopt: Callable[[SegmentMeta], None] | None = None) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.policy = policy
        self.time_field = time_field
        self.next_seq = next_seq  # of the first row in no written segment
        self.offset = offset  # the last offset in a written segment
        self._open: list[_Pending] = []
        self._schema: pa.Schema | None = None
        self._rows = 0
        self._bucket: int | None = None
        self._opened_at = 0.0
        self._done: list[Any] = []
        self.on_adopt = on_adopt  # told of every segment adopted

    def snapshot(self) -> dict[str, int]:
        return {"next_seq": self.next_seq, "offset": self.offset}

    @property
    def open_rows(self) -> int:
        return self._rows

    def add(self, offset: int, rows: pa.Table | None, token: Any,
            now: float | None = None) -> list[Segment]:
        """Archive the message at ``offset`` with ``rows`` (None: it has none)."""
        if not self._open:
            self._adopt_written()
        if offset <= self.offset:  # a redelivery of an archived message
            self._done.append(token)
            return []
        if self._open and offset <= self._open[-1].offset:  # a redelivery of a buffered one
            self._open[-1].tokens.append(token)
            return []
        if rows is None or not rows.num_rows:
            if self._open:
                self._open.append(_Pending(offset, None, [token]))
            else:  # nothing to write: archived as it is
                self.offset = offset
                self._done.append(token)
            return []
        written = []
        time_column = _time_column(rows, self.time_field)
        bucket = self.policy.bucket(None if time_column is None else time_column[0].as_py())
        schema = self._unified(rows.schema)
        if self._open and (schema is None or (bucket is not None and self._bucket is not None
                                              and bucket > self._bucket)):
            written += self.flush()
            schema = rows.schema
        if not self._open:
            self._opened_at = time.monotonic() if now is None else now
            self._bucket = bucket
        numbered = _numbered(rows, self.next_seq + self._rows, offset)
        self._open.append(_Pending(offset, numbered, [token]))
        self._schema = schema
        self._rows += rows.num_rows
        if self._rows >= self.policy.rows:
            written += self.flush()
        return written

    def expire(self, now: float | None = None) -> list[Segment]:
        """Write the open segment if it has been open long enough."""
        return self.flush() if self.expired(now) else []

    def expired(self, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        return bool(self._open) and now - self._opened_at >= self.policy.seconds

    def take_done(self) -> list[Any]:
        done, self._done = self._done, []
        return done

    def flush(self) -> list[Segment]:
        """Write the open segment (adopting, instead, a segment already written from the same
        seq: module doc, step 4)."""
        written = []
        while self._open:
            tables = [p.rows for p in self._open if p.rows is not None]
            table = pa.concat_tables(tables, promote_options="default")
            times = _time_column(table, self.time_field)
            span = None if times is None else pc.min_max(times)
            meta = SegmentMeta(self.topic, self.partition, self.next_seq,
                               self.next_seq + self._rows, self._open[0].offset,
                               self._open[-1].offset,
                               None if span is None else span["min"].as_py(),
                               None if span is None else span["max"].as_py())
            try:
                written.append(write_segment(self.directory, table, meta))
            except FileExistsError:
                self._adopt(read_meta(self.directory / segment_name(self.next_seq)))
                continue
            self._archived(meta, self._open)
            self._open, self._schema, self._rows = [], None, 0
        return written

    def _unified(self, schema: pa.Schema) -> pa.Schema | None:
        """The open segment's schema with ``schema``'s fields too; None if they conflict."""
        if self._schema is None:
            return schema
        try:
            return pa.unify_schemas([self._schema, schema], promote_options="default")
        except (pa.ArrowTypeError, pa.ArrowInvalid):
            return None

    def _adopt_written(self) -> None:
        """Move past the segments that start at ``next_seq``: written before a crash (or by
        another worker) after the state was checkpointed."""
        while (path := self.directory / segment_name(self.next_seq)).exists():
            self._adopt(read_meta(path))

    def _adopt(self, meta: SegmentMeta) -> None:
        if (meta.topic, meta.partition, meta.first_seq) != (self.topic, self.partition,
                                                             self.next_seq):
            raise StateError(
                f"archive segment {self.directory / segment_name(meta.first_seq)} holds "
                f"{meta.topic}[{meta.partition}] from seq {meta.first_seq}, expected "
                f"{self.topic}[{self.partition}] from seq {self.next_seq}: the archive belongs "
                "to another topic or state; move it away or point SITUFLOW_ARCHIVE_DIR elsewhere")
        logger.info("%s[%s]: adopting segment %s (seq %s-%s, offsets %s-%s), written after the "
                    "last checkpoint", self.topic, self.partition, segment_name(meta.first_seq),
                    meta.first_seq, meta.next_seq - 1, meta.first_offset, meta.last_offset)
        if self.on_adopt is not None:
            self.on_adopt(meta)
        covered = [p for p in self._open if p.offset <= meta.last_offset]
        rest = self._open[len(covered):]
        first = next((p.rows for p in rest if p.rows is not None), None)
        if first is not None and first.column(ARCHIVE_SEQ)[0].as_py() != meta.next_seq:
            raise StateError(
                f"archive segment {segment_name(meta.first_seq)} of {self.topic}[{self.partition}]"
                f" ends at seq {meta.next_seq} but the topic numbers the next row "
                f"{first.column(ARCHIVE_SEQ)[0].as_py()}: the topic changed under the archive")
        self._archived(meta, covered)
        self._open = rest
        self._rows = sum(p.rows.num_rows for p in rest if p.rows is not None)
        if first is None:  # no rows left: the remaining messages are archived as they are
            self._archived(meta, rest)
            self.offset = max([self.offset, *(p.offset for p in rest)])
            self._open, self._schema = [], None

    def _archived(self, meta: SegmentMeta, messages: list[_Pending]) -> None:
        self.next_seq = max(self.next_seq, meta.next_seq)
        self.offset = max(self.offset, meta.last_offset)
        for pending in messages:
            self._done.extend(pending.tokens)


def _numbered(rows: pa.Table, first_seq: int, offset: int) -> pa.Table:
    """``rows`` with their seq and message offset (replacing columns of those names)."""
    rows = rows.drop_columns([c for c in (ARCHIVE_SEQ, ARCHIVE_OFFSET) if c in rows.column_names])
    seq = pa.array(range(first_seq, first_seq + rows.num_rows), pa.int64())
    return rows.append_column(ARCHIVE_SEQ, seq).append_column(
        ARCHIVE_OFFSET, pa.array([offset] * rows.num_rows, pa.int64()))


@dataclass
class PartitionArchive:
    """One partition number: a log per archived topic (created when the topic is first seen)
    and the checkpoint's positions of every topic."""

    stored: dict[str, dict[str, int]]
    logs: dict[str, SegmentLog] = field(default_factory=dict)


def load(value: Any) -> PartitionArchive:
    return PartitionArchive({} if value is None else value["topics"])


def store(archive: PartitionArchive) -> dict[str, Any]:
    return {"topics": {**archive.stored,
                       **{topic: log.snapshot() for topic, log in archive.logs.items()}}}


@dataclass(frozen=True)
class ArchiveSettings:
    """Where the archive goes, which extra topics it follows and when segments roll."""

    root: Path
    topics: tuple[str, ...]
    policy: SegmentPolicy

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ArchiveSettings:
        env = os.environ if env is None else env
        topics = tuple(t.strip() for t in env.get("SITUFLOW_ARCHIVE_TOPICS", "").split(",")
                       if t.strip())
        return cls(Path(env.get("SITUFLOW_ARCHIVE_DIR", "situflow-archive")), topics,
                   SegmentPolicy.from_env(env))


def archiver_app(config: ServiceConfig, settings: ArchiveSettings) -> faust.App:
    """The Faust app of the archiver (see the module doc)."""
    stream = config.stream
    _, ordered_name, _, dlq_name = (spec.name for spec in stream_topics(stream))
    inputs = tuple(dict.fromkeys((ordered_name, *settings.topics)))
    app = make_app(f"situflow-archiver-{stream.name}", config)
    metrics = ServiceMetrics(app, "archiver", inputs=inputs)
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
    ticks_name = f"{app.conf.id}-ticks"
    # internal=True: Faust creates the ticks topic, co-partitioned with the inputs, before it
    # subscribes; existing topics are left as they are.
    source = app.topic(*inputs, ticks_name, internal=True, partitions=stream.partitions,
                       key_serializer="raw", value_serializer="raw", retention=3600.0)
    ticks = app.topic(ticks_name, key_serializer="raw", value_serializer="raw")
    dlq = app.topic(dlq_name, key_serializer="raw", value_serializer="raw")
    table = state_table(app, "archive", config,
                        "per partition and topic: next seq and last offset archived")
    states = PartitionStates(app, table, load, store, observe=metrics.checkpointed)

    def log_of(archive: PartitionArchive, topic: str, partition: int) -> SegmentLog:
        log = archive.logs.get(topic)
        if log is None:
            position = archive.stored.get(topic, {})
            log = archive.logs[topic] = SegmentLog(
                partition_dir(settings.root, topic, partition), topic, partition,
                settings.policy, stream.time_field, position.get("next_seq", 0),
                position.get("offset", -1),
                on_adopt=lambda meta: adopted("archiver", meta.topic).inc())
        return log

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
            await states.checkpoint(partition)  # soon after the files (step 4)
        open_rows.labels("archiver").set(
            sum(log.open_rows for _, a in states.items() for log in a.logs.values()))

    async def archive_message(archive: PartitionArchive, event: Any) -> list[Segment]:
        message = event.message
        metrics.messages_in("archiver", message.topic).inc()
        log = log_of(archive, message.topic, message.partition)
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


if __name__ == "__main__":
    config = ServiceConfig.from_env("archiver")
    run(archiver_app(config, ArchiveSettings.from_env()), config)
