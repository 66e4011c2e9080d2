"""One topic partition's segment log: every row archived exactly once, with a dense seq, across
crashes (``kill -9`` included) and competing writers.

1. The seq is a function of the topic alone: the rows of its messages in offset order, numbered
   from 0 (a message that does not decode has no rows). Replaying the topic from any point where
   the archive ends numbers every row the same way.
2. The checkpointed state (:meth:`SegmentLog.snapshot`) holds only the next seq and the last
   offset in a written segment. The open segment's rows are in memory and its messages are
   handed back for acknowledgement (:meth:`SegmentLog.take_done`) only once they are written,
   so a crash redelivers them.
3. A segment is written under its first seq by :func:`~situflow.archive.writer.write_segment`,
   which never replaces a file: two files never start at the same seq.
4. The files are the truth, which the state may lag (a crash between a segment and the
   checkpoint). Before a segment opens, and when its name is taken, the log *adopts* the segment
   named by its next seq: next seq and offset move past it, and the buffered messages it covers
   are dropped (their rows are in it). A redelivered message at or before the last archived
   offset is skipped.

So every segment starts where the one before ends, and every row of the topic is in exactly one,
also against a worker that lost its partition but still writes, provided all writers share the
root: whoever links a seq first wins, the other adopts. A crash costs at most one open segment
of input consumed again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from situflow.archive.format import (
    ARCHIVE_OFFSET,
    ARCHIVE_SEQ,
    SegmentMeta,
    SegmentPolicy,
    partition_dir,
    read_meta,
    segment_name,
    time_column,
)
from situflow.archive.writer import Segment, ensure_sidecar, write_segment
from situflow.errors import StateError

logger = logging.getLogger(__name__)


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
        times = time_column(rows, self.time_field)
        bucket = self.policy.bucket(None if times is None else times[0].as_py())
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
            times = time_column(table, self.time_field)
            span = None if times is None else pc.min_max(times)
            meta = SegmentMeta(self.topic, self.partition, self.next_seq,
                               self.next_seq + self._rows, self._open[0].offset,
                               self._open[-1].offset,
                               None if span is None else span["min"].as_py(),
                               None if span is None else span["max"].as_py())
            try:
                written.append(write_segment(self.directory, table, meta,
                                             block_rows=self.policy.block_rows,
                                             time_field=self.time_field))
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
        # Its writer may have crashed between the segment and its block index.
        ensure_sidecar(self.directory / segment_name(meta.first_seq), self.time_field)
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
    """One partition number's archive state: a log per archived topic (opened when the topic
    is first seen) and the checkpointed positions of every topic."""

    stored: dict[str, dict[str, int]]
    logs: dict[str, SegmentLog] = field(default_factory=dict)

    @classmethod
    def restore(cls, snapshot: Any) -> PartitionArchive:
        """From :meth:`snapshot`'s value (None: nothing archived yet)."""
        return cls({} if snapshot is None else snapshot["topics"])

    def snapshot(self) -> dict[str, Any]:
        return {"topics": {**self.stored,
                           **{topic: log.snapshot() for topic, log in self.logs.items()}}}

    def log(self, root: Path, topic: str, partition: int, policy: SegmentPolicy,
            time_field: str, on_adopt: Callable[[SegmentMeta], None] | None = None
            ) -> SegmentLog:
        """The log of ``topic``, opened at its stored position the first time."""
        log = self.logs.get(topic)
        if log is None:
            position = self.stored.get(topic, {})
            log = self.logs[topic] = SegmentLog(
                partition_dir(root, topic, partition), topic, partition, policy, time_field,
                position.get("next_seq", 0), position.get("offset", -1), on_adopt=on_adopt)
        return log
