"""The archive: Parquet segments of Kafka topics, each row once, for the offline path.

Layout (ARCHITECTURE.md, offline path)::

    <root>/<topic>/partition=<p>/<first seq, 20 digits>.parquet

A *segment* holds the rows of whole messages of one topic partition, in topic order. Each row
has the event's attributes (nested JSON values as JSON text, :func:`decode_rows`),
:data:`ARCHIVE_SEQ`, its dense sequence number in the topic partition (0, 1, 2, … in topic
order), and :data:`ARCHIVE_OFFSET`, the Kafka offset of its message. The Parquet key-value
metadata :data:`META_KEY` holds the segment's :class:`SegmentMeta` as JSON (seq and offset
range, event-time span), so a reader finds segments without scanning them. Segment names never
repeat and are never replaced; a file whose name starts with ``.`` is a writer's temporary file,
not a segment. :class:`SegmentLog` (``log.py``) is the writer side and its exactly-once
guarantee; :func:`read_archive` the reader side. This package imports no Kafka client: the
archiver service (:mod:`workers.archiver`) feeds it, the offline jobs read it.

For the offline path (thesis chapter 3) the archive is indexed: each row group of a segment is
a *block* of the lightweight index, whose aggregates a sidecar keeps (:mod:`.blocks`);
:func:`open_archive` reads an archive on any pyarrow file system by blocks and columns
(:mod:`.location`); ``_stream.json`` says how to read a stream's events (:mod:`.stream`);
:mod:`.checks` names what is wrong with an archive.
"""

from situflow.archive.blocks import AttrStats, Block
from situflow.archive.checks import check_topic
from situflow.archive.format import (
    ARCHIVE_OFFSET,
    ARCHIVE_SEQ,
    META_KEY,
    ArchiveError,
    SegmentMeta,
    SegmentPolicy,
    decode_rows,
    partition_dir,
    read_meta,
    segment_name,
    segment_paths,
)
from situflow.archive.location import Archive, SegmentInfo, build_blocks, open_archive, stream_settings
from situflow.archive.log import PartitionArchive, SegmentLog
from situflow.archive.reader import read_archive
from situflow.archive.stream import StreamSettings, ordered_topic
from situflow.archive.writer import Segment, write_segment

__all__ = [
    "ARCHIVE_OFFSET",
    "ARCHIVE_SEQ",
    "META_KEY",
    "Archive",
    "ArchiveError",
    "AttrStats",
    "Block",
    "PartitionArchive",
    "Segment",
    "SegmentInfo",
    "SegmentLog",
    "SegmentMeta",
    "SegmentPolicy",
    "StreamSettings",
    "build_blocks",
    "check_topic",
    "decode_rows",
    "open_archive",
    "ordered_topic",
    "partition_dir",
    "read_archive",
    "read_meta",
    "segment_name",
    "segment_paths",
    "stream_settings",
    "write_segment",
]
