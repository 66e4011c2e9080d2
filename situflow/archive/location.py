"""An archive wherever it lives: a local directory or an object store, read through pyarrow's
file systems.

:func:`open_archive` takes

- a plain path or ``file:///abs/path``: the local file system (tested);
- ``s3://bucket/prefix``: S3 or a compatible store; credentials from the AWS chain
  (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``, an instance role), region
  from ``AWS_DEFAULT_REGION`` or ``?region=``; ``?endpoint_override=host:port&scheme=http``
  for MinIO and the like;
- ``gs://bucket/prefix``: Google Cloud Storage; credentials from
  ``GOOGLE_APPLICATION_CREDENTIALS`` or the metadata server;
- ``hdfs://namenode:port/path``: HDFS through libhdfs; needs ``HADOOP_HOME``, ``JAVA_HOME``
  and ``CLASSPATH=$(hadoop classpath --glob)``; Kerberos through ``KRB5CCNAME``;

anything else :meth:`pyarrow.fs.FileSystem.from_uri` accepts works too. Spark's tasks open the
same URI, so every executor needs the same credentials.

The archiver writes on a local (or NFS) path only: its exactly-once rule needs hard links
(:mod:`situflow.archive.writer`). Readers, the index builds and ``situflow archive import``
work on any of these file systems; they write whole files under a temporary name and rename
them (an object store's rename is a copy, but a reader never sees half an object).

:class:`Archive` reads segments by their sidecars (:mod:`situflow.archive.blocks`) and reads
only the row groups and columns asked for, counting the compressed bytes of the column chunks
read in :attr:`Archive.bytes_read` (the thesis' primary-index I/O, C_PIO, in bytes).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from situflow.archive.blocks import (
    SIDECAR_SUFFIX,
    Block,
    file_blocks,
    parse_sidecar,
    sidecar_bytes,
    sidecar_name,
)
from situflow.archive.format import (
    ARCHIVE_SEQ,
    META_KEY,
    SEGMENT_SUFFIX,
    ArchiveError,
    SegmentMeta,
    drift,
    field_kind,
)
from situflow.archive.stream import STREAM_FILE, StreamSettings
from situflow.codecs import arrow_events
from situflow.kslack.positions import SEQ_FIELD

PARTITION_PREFIX = "partition="


@dataclass(frozen=True)
class SegmentInfo:
    """A segment: its path inside the archive's file system, its meta and its blocks;
    ``indexed`` is False when it has no sidecar (its blocks came from a scan)."""

    path: str
    meta: SegmentMeta
    blocks: list[Block]
    indexed: bool = True

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def open_archive(uri: str | os.PathLike[str]) -> Archive:
    """The archive at ``uri`` (a path or a URI; module doc). It need not exist yet."""
    text = os.fspath(uri)
    if "://" not in text:
        root = os.path.abspath(text)
        return Archive(pafs.LocalFileSystem(), root, Path(root).as_uri())
    try:
        fs, root = pafs.FileSystem.from_uri(text)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
        raise ArchiveError(f"archive {text}: cannot open ({exc})") from None
    return Archive(fs, root.rstrip("/") or "/", text)


def stream_settings(root: Archive | str | os.PathLike[str], topic: str) -> StreamSettings:
    """The settings of the stream archived as ``topic`` (``<root>/<topic>/_stream.json``)."""
    archive = root if isinstance(root, Archive) else open_archive(root)
    settings = archive.settings(topic)
    if settings is None:
        raise ArchiveError(f"{archive.uri}/{topic}: no {STREAM_FILE}: the archiver writes it "
                           "for <stream>.ordered, `situflow archive import` for imports")
    return settings


#: Parquet footers an :class:`Archive` keeps.
FOOTERS = 1024


class Archive:
    """The archive at ``root`` in file system ``fs`` (module doc)."""

    def __init__(self, fs: pafs.FileSystem, root: str, uri: str) -> None:
        self.fs = fs
        self.root = root
        self.uri = uri
        #: Compressed bytes of the column chunks read by :meth:`read_blocks` so far.
        self.bytes_read = 0
        # Segments never change once written: their info is read once.
        self._segments: dict[str, SegmentInfo] = {}
        self._settings: dict[str, StreamSettings | None] = {}
        # Parquet footers by (path, size, mtime): parsing one costs half a millisecond, and a
        # planner opens each segment and index part a few times (oldest dropped beyond FOOTERS).
        self._footers: dict[tuple[str, int, int], pq.FileMetaData] = {}

    def __repr__(self) -> str:
        return f"Archive({self.uri!r})"

    def path(self, *parts: str) -> str:
        return "/".join((self.root.rstrip("/"), *parts))

    def topics(self) -> list[str]:
        """The archived topics (directories not starting with ``_`` or ``.``)."""
        return [name for name in self.directories(self.root) if not name.startswith("_")]

    def partitions(self, topic: str) -> list[int]:
        names = self.directories(self.path(topic))
        return sorted(int(n.removeprefix(PARTITION_PREFIX)) for n in names
                      if n.startswith(PARTITION_PREFIX)
                      and n.removeprefix(PARTITION_PREFIX).isdigit())

    def settings(self, topic: str) -> StreamSettings | None:
        """The stream settings of ``topic`` (None if it has none)."""
        if topic not in self._settings:
            self._settings[topic] = self._read_settings(topic)
        return self._settings[topic]

    def _read_settings(self, topic: str) -> StreamSettings | None:
        try:
            with self.fs.open_input_stream(self.path(topic, STREAM_FILE)) as file:
                data = file.read()
        except FileNotFoundError:
            return None
        try:
            return StreamSettings.from_json(json.loads(data))
        except (ValueError, TypeError) as exc:
            raise ArchiveError(f"{self.path(topic, STREAM_FILE)}: unreadable ({exc})") from None

    def write_settings(self, topic: str, settings: StreamSettings) -> None:
        self._settings[topic] = settings
        self.write_file(self.path(topic, STREAM_FILE), settings.to_bytes())

    def time_field(self, topic: str) -> str:
        settings = self.settings(topic)
        return "ts" if settings is None else settings.time_field

    def segments(self, topic: str, partition: int) -> list[SegmentInfo]:
        """The segments of one topic partition in seq order. A segment without a sidecar is
        indexed by a scan (``ArchiveError`` if it is no readable segment)."""
        directory = self.path(topic, f"{PARTITION_PREFIX}{partition}")
        names = {info.base_name for info in self._list(directory)
                 if info.type == pafs.FileType.File and not info.base_name.startswith(".")}
        segments = sorted(n for n in names if n.endswith(SEGMENT_SUFFIX))
        result = []
        for name in segments:
            path = f"{directory}/{name}"
            info = self._segments.get(path)
            if info is None:
                info = self._segment(topic, path, sidecar_name(name) in names)
                self._segments[path] = info
            result.append(info)
        return result

    def blocks(self, topic: str, partition: int) -> list[Block]:
        """Every block of one topic partition, in seq order."""
        return [block for segment in self.segments(topic, partition) for block in segment.blocks]

    def read_blocks(self, topic: str, partition: int, blocks: Sequence[Block],
                    columns: Sequence[str] | None = None) -> pa.Table:
        """The rows of ``blocks`` (in seq order), only ``columns`` (None: all) plus the archive
        seq, the event time, the input seq and the stream's key attributes. An attribute a
        segment lacks is null in its rows; one two segments give different types is an
        ``ArchiveError``."""
        settings = self.settings(topic)
        time_field = "ts" if settings is None else settings.time_field
        wanted = None if columns is None else list(dict.fromkeys(
            [ARCHIVE_SEQ, time_field, SEQ_FIELD, *(settings.key_fields if settings else ()),
             *columns]))
        directory = self.path(topic, f"{PARTITION_PREFIX}{partition}")
        by_segment: dict[str, list[int]] = {}
        for block in sorted(set(blocks), key=lambda b: b.seq_min):
            by_segment.setdefault(block.segment, []).append(block.row_group)
        parts = [(name, self._read_row_groups(f"{directory}/{name}", groups, wanted))
                 for name, groups in by_segment.items()]
        table = _concat(parts, directory) if parts else self._empty(topic, partition, wanted)
        if wanted is not None:  # requested attributes no block has: null, as a missing one is
            missing = [c for c in wanted if c not in table.column_names and c != SEQ_FIELD]
            for name in missing:
                table = table.append_column(name, pa.nulls(table.num_rows))
        return table

    def read(self, topic: str, partition: int, lo: int | None = None, hi: int | None = None,
             columns: Sequence[str] | None = None) -> pa.Table:
        """The rows of one topic partition with ``lo <= time <= hi`` (None: unbounded), reading
        only the row groups whose time span overlaps the range."""
        table = self.read_blocks(topic, partition,
                                 _overlapping(self.blocks(topic, partition), lo, hi), columns)
        return self._in_range(topic, table, lo, hi)

    def read_segments(self, topic: str, partition: int, lo: int | None = None,
                      hi: int | None = None, columns: Sequence[str] | None = None
                      ) -> Iterator[pa.Table]:
        """:meth:`read`'s rows one segment at a time, for a partition that need not fit in
        memory (segments without rows in the range are skipped)."""
        for segment in self.segments(topic, partition):
            blocks = _overlapping(segment.blocks, lo, hi)
            if blocks:
                yield self._in_range(topic, self.read_blocks(topic, partition, blocks, columns),
                                     lo, hi)

    def _in_range(self, topic: str, table: pa.Table, lo: int | None, hi: int | None
                  ) -> pa.Table:
        if (lo is None and hi is None) or not table.num_rows:
            return table
        times = table.column(self.time_field(topic))
        bounds = ([] if lo is None else [pc.greater_equal(times, lo)]) + \
            ([] if hi is None else [pc.less_equal(times, hi)])
        return table.filter(bounds[0] if len(bounds) == 1 else pc.and_(*bounds))

    def write_file(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` whole: a temporary name, then a rename (module doc)."""
        directory, name = path.rsplit("/", 1)
        temporary = f"{directory}/.{name}.{uuid.uuid4().hex[:12]}.tmp"
        self.fs.create_dir(directory, recursive=True)
        with self.fs.open_output_stream(temporary) as file:
            file.write(data)
        self.fs.move(temporary, path)

    def directories(self, path: str) -> list[str]:
        """The names of the directories in ``path`` (none if it does not exist), sorted;
        hidden ones (``.``: temporary) left out."""
        return sorted(info.base_name for info in self._list(path)
                      if info.type == pafs.FileType.Directory
                      and not info.base_name.startswith("."))

    def _list(self, directory: str) -> list[pafs.FileInfo]:
        selector = pafs.FileSelector(directory, allow_not_found=True)
        return list(self.fs.get_file_info(selector))

    def _segment(self, topic: str, path: str, indexed: bool) -> SegmentInfo:
        name = path.rsplit("/", 1)[-1]
        if indexed:
            sidecar = path.removesuffix(SEGMENT_SUFFIX) + SIDECAR_SUFFIX
            with self.fs.open_input_stream(sidecar) as file:
                meta, blocks = parse_sidecar(file.read(), name, sidecar)
            return SegmentInfo(path, meta, blocks)
        parquet = self.parquet_file(path)
        try:
            meta = SegmentMeta(**json.loads((parquet.schema_arrow.metadata or {})[
                META_KEY.encode()]))
        except (KeyError, ValueError, TypeError):
            raise ArchiveError(f"{path}: no segment metadata ({META_KEY}): not written by the "
                               "archiver or `situflow archive import`") from None
        return SegmentInfo(path, meta, file_blocks(parquet, meta, name, self.time_field(topic)),
                           False)

    def parquet_file(self, path: str) -> pq.ParquetFile:
        try:
            info = self.fs.get_file_info(path)
            key = (path, info.size or 0, info.mtime_ns or 0)
            footer = self._footers.get(key)
            parquet = pq.ParquetFile(self.fs.open_input_file(path), metadata=footer)
            if footer is None:
                if len(self._footers) >= FOOTERS:
                    del self._footers[next(iter(self._footers))]
                self._footers[key] = parquet.metadata
            return parquet
        except (pa.ArrowInvalid, OSError) as exc:
            raise ArchiveError(f"{path} (seq from {_first_seq(path)}): truncated or corrupt "
                               f"segment ({exc}); restore it from a backup or re-archive the "
                               "topic from that seq") from None

    def _read_row_groups(self, path: str, row_groups: list[int],
                         wanted: list[str] | None) -> pa.Table:
        parquet = self.parquet_file(path)
        present = parquet.schema_arrow.names
        columns = None if wanted is None else [c for c in wanted if c in present]
        try:
            table = parquet.read_row_groups(row_groups, columns=columns)
        except (pa.ArrowInvalid, OSError) as exc:
            raise ArchiveError(f"{path} (seq from {_first_seq(path)}), row groups {row_groups}: "
                               f"truncated or corrupt segment ({exc})") from None
        self.bytes_read += compressed_bytes(parquet, row_groups, columns)
        return table

    def _empty(self, topic: str, partition: int, wanted: list[str] | None) -> pa.Table:
        """No rows, with the columns of the partition's last segment (if any)."""
        segments = self.segments(topic, partition)
        if not segments:
            return pa.table({ARCHIVE_SEQ: pa.array([], pa.int64()),
                             self.time_field(topic): pa.array([], pa.int64())})
        schema = self.parquet_file(segments[-1].path).schema_arrow
        if wanted is not None:
            schema = pa.schema([f for f in schema if f.name in wanted])
        return schema.empty_table()


def build_blocks(archive: Archive, topic: str) -> list[str]:
    """Write the sidecars of ``topic``'s segments that have none (segments older than the
    lightweight index, or whose writer crashed before it); the paths written."""
    written = []
    time_field = archive.time_field(topic)
    for partition in archive.partitions(topic):
        for segment in archive.segments(topic, partition):
            if segment.indexed:
                continue
            path = segment.path.removesuffix(SEGMENT_SUFFIX) + SIDECAR_SUFFIX
            archive.write_file(path, sidecar_bytes(segment.meta, time_field, segment.blocks))
            archive._segments[segment.path] = SegmentInfo(segment.path, segment.meta,
                                                          segment.blocks)
            written.append(path)
    return written


def compressed_bytes(parquet: pq.ParquetFile, row_groups: Sequence[int],
                     columns: Sequence[str] | None = None) -> int:
    """The compressed size of the column chunks of ``columns`` (None: all) in ``row_groups``:
    the bytes a reader of them fetches."""
    total = 0
    for group in row_groups:
        chunks = parquet.metadata.row_group(group)
        total += sum(chunks.column(i).total_compressed_size for i in range(chunks.num_columns)
                     if columns is None or chunks.column(i).path_in_schema in columns)
    return total


def _first_seq(path: str) -> int | str:
    stem = path.rsplit("/", 1)[-1].removesuffix(SEGMENT_SUFFIX)
    return int(stem) if stem.isdigit() else stem


def _overlapping(blocks: Sequence[Block], lo: int | None, hi: int | None) -> list[Block]:
    """The ``blocks`` whose time span overlaps ``lo..hi`` (None: unbounded)."""
    return [b for b in blocks if (lo is None or b.ts_max >= lo) and (hi is None or b.ts_min <= hi)]


def _concat(parts: list[tuple[str, pa.Table]], directory: str) -> pa.Table:
    """One table of the segments' rows, columns unified as the services unify messages
    (:func:`situflow.codecs.arrow_events.concat`: integers beside floats are floats, JSON text
    beside text is JSON text); an attribute of two kinds (a number in one segment, a string in
    another) is schema drift, which names both segments."""
    seen: dict[str, tuple[str, pa.Field]] = {}
    for name, table in parts:
        for column in table.schema:
            first = seen.setdefault(column.name, (name, column))
            if drift(field_kind(first[1]), field_kind(column)):
                raise ArchiveError(
                    f"{directory}: attribute {column.name!r} is {first[1].type} in segment "
                    f"{first[0]} (seq from {_first_seq(first[0])}) but {column.type} in "
                    f"segment {name} (seq from {_first_seq(name)}): schema drift; re-import "
                    "one of them with the attribute converted")
    try:
        return arrow_events.concat([table for _, table in parts])
    except arrow_events.BUILD_ERRORS as exc:
        raise ArchiveError(f"{directory}: segments {', '.join(n for n, _ in parts)} cannot be "
                           f"read together ({exc})") from None
