"""Secondary indexes of the archive (thesis §3.2, §3.4.1): per attribute, the triples
(value, seq, t) sorted by value, so that a range query finds a symbol's candidates without
reading the archive, and their seq and time check a pattern's distance constraints.

Layout, per archived topic and attribute::

    <root>/_index/<topic>/<attribute>/part-<build>-<n>.parquet
    <root>/_index/<topic>/<attribute>/_manifest.json

Each part file is sorted by ``value`` and written in row groups of :data:`INDEX_GROUP_ROWS`
rows, so a range query reads only the row groups whose value statistics overlap it (the LSM
range query of the thesis becomes a pruned scan). Columns (:data:`INDEX_SCHEMA`): ``value``
(float64 for numbers, string for strings), ``seq`` (archive seq), ``ts``, ``partition``,
``segment`` and ``row_group`` (where the event is: the thesis' pointer into the primary index),
``key`` (the PARTITION BY key as a JSON array, :func:`key_text`; null for a stream without keys)
and ``key_seq``, the event's position among the events of its key in its partition, dense from
0 (the seq adjacency (C3) is checked on within a key; equal to ``seq`` without keys). Only events
with a value are indexed: a missing value satisfies no range.

Numbers are stored as float64: integers beyond 2^53 round to the nearest float64. Rounding is
monotone, so :meth:`SecondaryIndex.lookup` compares against the bounds rounded the same way and
closes a strict bound that rounding moved: lookups stay a superset of the events in the range,
never fewer (the replay checks the exact predicate). Booleans and nested values (JSON text) are
refused: a range over them means nothing.

The manifest (``_manifest.json``, written whole by write-then-rename after the part files) says
what the index covers: per archive partition the next seq not indexed (``covered``) and the next
``key_seq`` of every key (``key_next``), so a build indexes only the segments written since.
Builds of one attribute must not run concurrently. :func:`build_index` builds in-process;
a Spark build (``batch/``) may run :func:`partition_rows` per archive partition in its tasks,
sort and write with :func:`write_part`, and commit with :func:`commit_build`. The reader also
reads manifests whose ``files`` are bare file names (no sizes or quantiles: estimates then come
from the part files' row-group statistics) and continues key_seq after a build that kept no
``key_next`` by counting the earlier events' keys.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from situflow.archive.format import ARCHIVE_SEQ, ArchiveError, field_kind
from situflow.archive.location import Archive, compressed_bytes
from situflow.archive.ranges import Condition, Range

INDEX_DIR = "_index"
MANIFEST = "_manifest.json"
#: Rows per row group of an index file: the unit a range query skips by value statistics.
INDEX_GROUP_ROWS = 8192
#: Boundaries of the equi-depth histogram the manifest keeps per part file (for estimates).
HISTOGRAM_BUCKETS = 64


def index_schema(kind: str) -> pa.Schema:
    """The columns of an index of ``kind`` ("number" or "string")."""
    return pa.schema([("value", pa.float64() if kind == "number" else pa.string()),
                      ("seq", pa.int64()), ("ts", pa.int64()), ("partition", pa.int32()),
                      ("segment", pa.string()), ("row_group", pa.int32()),
                      ("key", pa.string()), ("key_seq", pa.int64())])


def key_text(values: Sequence[Any]) -> str:
    """The ``key`` of an event with PARTITION BY values ``values``.

    >>> key_text(("car 7", 3))
    '["car 7", 3]'
    """
    return json.dumps(list(values))


@dataclass(frozen=True)
class IndexBuild:
    """What a build added: ``rows`` index rows in ``files``, covering up to ``covered``."""

    attribute: str
    kind: str
    files: list[str]
    rows: int
    covered: dict[int, int]


@dataclass
class PartitionRows:
    """The index rows of one archive partition's new segments, in seq order, and where the
    index of that partition stands after them."""

    rows: pa.Table
    next_seq: int
    key_next: dict[str, int] = field(default_factory=dict)


def index_dir(archive: Archive, topic: str, attribute: str) -> str:
    return archive.path(INDEX_DIR, topic, attribute)


def read_manifest(archive: Archive, topic: str, attribute: str) -> dict[str, Any] | None:
    path = f"{index_dir(archive, topic, attribute)}/{MANIFEST}"
    try:
        with archive.fs.open_input_stream(path) as file:
            return dict(json.loads(file.read()))
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise ArchiveError(f"{path}: unreadable manifest ({exc}); delete the index directory "
                           "and build it again") from None


def attribute_kind_in(archive: Archive, topic: str, attribute: str) -> str:
    """Whether ``attribute`` holds numbers or strings in ``topic``'s segments ("null" if no
    segment has a value yet); ``ArchiveError`` if no segment has it, or for booleans and other
    types an index cannot order."""
    kinds: dict[str, str] = {}
    for partition in archive.partitions(topic):
        for segment in archive.segments(topic, partition):
            schema = archive.parquet_file(segment.path).schema_arrow
            if attribute in schema.names:
                kinds.setdefault(field_kind(schema.field(attribute)), segment.path)
    if not kinds:
        raise ArchiveError(f"{archive.path(topic)}: no segment has attribute {attribute!r}: "
                           "nothing to index")
    if len(kinds) > 1:
        kinds.pop("null", None)  # segments where every value is missing
    if len(kinds) > 1 or not {"number", "string", "null"} >= kinds.keys():
        found = ", ".join(f"{kind} in {path}" for kind, path in kinds.items())
        raise ArchiveError(f"attribute {attribute!r} of {topic} cannot be indexed: an index "
                           f"orders numbers or strings, found {found}")
    return next(iter(kinds))


def partition_rows(archive: Archive, topic: str, partition: int, attribute: str, kind: str,
                   key_fields: Sequence[str] = (), covered: int = 0,
                   key_next: Mapping[str, int] | None = None) -> PartitionRows:
    """The index rows of ``partition``'s segments from seq ``covered`` on (the work of one
    Spark task): every event with a value of ``attribute``, with its key and key_seq counted
    on from ``key_next``."""
    key_next = dict(key_next or {})
    parts, next_seq = [], covered
    time_field = archive.time_field(topic)
    for segment in archive.segments(topic, partition):
        if segment.meta.next_seq <= covered:
            continue
        if segment.meta.first_seq < covered:
            raise ArchiveError(f"{segment.path}: seq {segment.meta.first_seq}.."
                               f"{segment.meta.next_seq - 1} straddles the index's end "
                               f"{covered}: the archive changed under the index; rebuild it")
        table = archive.read_blocks(topic, partition, segment.blocks, [attribute, *key_fields])
        parts.append(_rows(table, segment.name, segment.blocks, partition, attribute, kind,
                           time_field, key_fields, key_next))
        next_seq = segment.meta.next_seq
    rows = pa.concat_tables(parts) if parts else index_schema(kind).empty_table()
    return PartitionRows(rows, next_seq, key_next)


def write_part(archive: Archive, topic: str, attribute: str, name: str, rows: pa.Table
               ) -> dict[str, Any]:
    """Write ``rows`` sorted by value as part file ``name``; its manifest entry."""
    rows = rows.sort_by([("value", "ascending"), ("partition", "ascending"),
                         ("seq", "ascending")])
    directory = index_dir(archive, topic, attribute)
    sink = pa.BufferOutputStream()
    pq.write_table(rows, sink, row_group_size=INDEX_GROUP_ROWS, compression="zstd")
    data = sink.getvalue().to_pybytes()
    archive.write_file(f"{directory}/{name}", data)
    values = rows.column("value").to_numpy(zero_copy_only=False)
    return {"name": name, "rows": rows.num_rows, "bytes": len(data),
            "quantiles": [[p, _plain(values[p])] for p in quantile_positions(len(values))]}


def quantile_positions(rows: int) -> list[int]:
    """Positions (in value order) of the values the manifest keeps for estimates: the bounds of
    an equi-depth histogram of :data:`HISTOGRAM_BUCKETS` buckets, refined towards both ends at
    positions 1, 2, 4, … from the first and the last value. Selective predicates ask for a tail
    (``speed > 200``), which an equi-depth bucket of 1/64 of the rows overestimates by orders of
    magnitude; the refined ends bound a tail of k rows within a factor of two."""
    if rows == 0:
        return []
    positions = {round(p) for p in np.linspace(0, rows - 1,
                                                min(rows, HISTOGRAM_BUCKETS + 1))}
    step = 1
    while step < rows / HISTOGRAM_BUCKETS:
        positions |= {step, rows - 1 - step}
        step *= 2
    return sorted(positions)


def commit_build(archive: Archive, topic: str, attribute: str, kind: str,
                 parts: Iterable[dict[str, Any]], covered: Mapping[int, int],
                 key_next: Mapping[int, Mapping[str, int]]) -> IndexBuild:
    """Add ``parts`` to the manifest with the new ``covered`` and ``key_next`` (write-then-
    rename: a build that fails before leaves the index as it was, plus unlisted files)."""
    previous = read_manifest(archive, topic, attribute) or {}
    parts = list(parts)
    manifest = {
        "attribute": attribute, "kind": kind, "built": datetime.now(UTC).isoformat(),
        # Builds so far: the Spark build names its part files by it.
        "builds": previous.get("builds", 0) + 1,
        "rows": previous.get("rows", 0) + sum(p["rows"] for p in parts),
        "files": previous.get("files", []) + parts,
        "covered": {**previous.get("covered", {}), **{str(p): s for p, s in covered.items()}},
        "key_next": {**previous.get("key_next", {}),
                     **{str(p): dict(k) for p, k in key_next.items()}},
    }
    archive.write_file(f"{index_dir(archive, topic, attribute)}/{MANIFEST}",
                       json.dumps(manifest).encode())
    return IndexBuild(attribute, kind, [p["name"] for p in parts],
                      sum(p["rows"] for p in parts), {int(p): s for p, s in covered.items()})


def build_index(archive: Archive, topic: str, attribute: str, *,
                key_fields: Sequence[str] = ()) -> IndexBuild:
    """Index ``attribute`` of ``topic`` for the segments written since the last build, in
    this process (module doc)."""
    previous = read_manifest(archive, topic, attribute) or {}
    kind = attribute_kind_in(archive, topic, attribute)
    if kind == "null":  # no value yet: nothing to order, the kind to come is unknown
        kind = previous.get("kind", "number")
    if previous and previous["kind"] != kind:
        raise ArchiveError(f"index of {attribute!r} on {topic} holds {previous['kind']}s but "
                           f"the archive now has {kind}s: delete "
                           f"{index_dir(archive, topic, attribute)} and build it again")
    build = datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
    covered, key_next, tables = {}, {}, []
    for partition in archive.partitions(topic):
        start = int(previous.get("covered", {}).get(str(partition), 0))
        counts = previous.get("key_next", {}).get(str(partition))
        if counts is None and key_fields and start:  # a manifest without key counts
            counts = prior_key_counts(archive, topic, partition, key_fields, start)
        result = partition_rows(archive, topic, partition, attribute, kind, key_fields, start,
                                counts)
        covered[partition], key_next[partition] = result.next_seq, result.key_next
        tables.append(result.rows)
    rows = pa.concat_tables(tables) if tables else index_schema(kind).empty_table()
    parts = [write_part(archive, topic, attribute, f"part-{build}-00000.parquet", rows)] \
        if rows.num_rows else []
    return commit_build(archive, topic, attribute, kind, parts, covered, key_next)


def prior_key_counts(archive: Archive, topic: str, partition: int, key_fields: Sequence[str],
                     end: int) -> dict[str, int]:
    """Per key, the events of ``partition`` before seq ``end``: where its key_seq continues
    (reads only the key columns)."""
    counts: dict[str, int] = {}
    blocks = [b for b in archive.blocks(topic, partition) if b.seq_max < end]
    if blocks:
        texts, inverse = key_groups(archive.read_blocks(topic, partition, blocks, key_fields),
                                    key_fields)
        for text, count in zip(texts, np.bincount(inverse, minlength=len(texts)), strict=True):
            counts[text] = int(count)
    return counts


class SecondaryIndex:
    """A built index of one attribute of one topic (module doc)."""

    def __init__(self, archive: Archive, topic: str, attribute: str,
                 manifest: dict[str, Any]) -> None:
        self.archive = archive
        self.topic = topic
        self.attribute = attribute
        self.kind: str = manifest["kind"]
        self.manifest = manifest
        # A build may list file names only; commit_build adds sizes and quantiles.
        self.parts: list[dict[str, Any]] = [{"name": f} if isinstance(f, str) else f
                                            for f in manifest["files"]]
        #: Compressed bytes of the index's column chunks read by :meth:`lookup` so far.
        self.bytes_read = 0

    @classmethod
    def open(cls, archive: Archive, topic: str, attribute: str) -> SecondaryIndex | None:
        """The index of ``attribute`` on ``topic`` (None if there is none)."""
        manifest = read_manifest(archive, topic, attribute)
        return None if manifest is None else cls(archive, topic, attribute, manifest)

    @property
    def rows(self) -> int:
        return int(self.manifest["rows"])

    @property
    def bytes(self) -> int:
        return sum(int(part["bytes"]) if "bytes" in part else
                   self.archive.fs.get_file_info(self._path(part)).size for part in self.parts)

    @property
    def covered(self) -> dict[int, int]:
        """Per archive partition, the first seq the index does not cover."""
        return {int(p): int(s) for p, s in self.manifest["covered"].items()}

    def lookup(self, condition: Condition) -> pa.Table:
        """The index rows whose value satisfies ``condition`` (the union of its ranges), from
        the row groups whose statistics overlap it, sorted by (partition, key, key_seq)."""
        tables = []
        for part in self.parts:
            parquet = self.archive.parquet_file(self._path(part))
            groups = [g for g in range(parquet.metadata.num_row_groups)
                      if self._may_hold(parquet.metadata.row_group(g), condition)]
            if not groups:
                continue
            table = parquet.read_row_groups(groups)
            self.bytes_read += compressed_bytes(parquet, groups)
            tables.append(table.filter(self._mask(table.column("value"), condition)))
        result = pa.concat_tables(tables) if tables else index_schema(self.kind).empty_table()
        return result.sort_by([("partition", "ascending"), ("key", "ascending"),
                               ("key_seq", "ascending")])

    def estimate(self, condition: Condition) -> int:
        """The rows :meth:`lookup` would give, from the quantiles the manifest keeps, or
        the part files' row-group statistics where it has none (values uniform within a
        bucket), without reading index values."""
        ranges = [r for r in map(self._range, condition.ranges) if _comparable(r, self.kind)]
        total = 0.0
        for part in self.parts:
            for low, high, rows in self._buckets(part):
                total += rows * max((_overlap(r, low, high) for r in ranges), default=0.0)
        return round(total)

    def _buckets(self, part: dict[str, Any]) -> list[tuple[Any, Any, float]]:
        """``(low, high, rows)`` value buckets of a part file: between kept quantiles (the rows
        between two kept positions), an older build's equi-depth histogram, or the part's
        row-group statistics."""
        quantiles = part.get("quantiles")
        if quantiles:
            # Each kept value is a bucket of its own, the rows between two of them a bucket
            # of the values between: a tail of a few rows is then counted exactly.
            first = quantiles[0][1]
            buckets = [(first, first, float(part["rows"] - quantiles[-1][0]))]
            for (start, low), (end, high) in pairwise(quantiles):
                buckets += [(low, high, float(end - start - 1)), (high, high, 1.0)]
            return buckets
        bounds = part.get("histogram")
        if bounds is not None:
            if len(bounds) == 1:
                return [(bounds[0], bounds[0], float(part["rows"]))]
            per_bucket = part["rows"] / (len(bounds) - 1)
            return [(low, high, per_bucket) for low, high in pairwise(bounds)]
        metadata = self.archive.parquet_file(self._path(part)).metadata
        buckets = []
        for group in map(metadata.row_group, range(metadata.num_row_groups)):
            stats = group.column(0).statistics
            if stats is not None and stats.has_min_max:
                buckets.append((stats.min, stats.max, float(group.num_rows)))
        return buckets

    def _path(self, part: dict[str, Any]) -> str:
        return f"{index_dir(self.archive, self.topic, self.attribute)}/{part['name']}"

    def _range(self, wanted: Range) -> Range:
        """``wanted`` against this index's stored values: float64-rounded number bounds, a
        strict bound closed where rounding moved it (module doc)."""
        if self.kind != "number":
            return wanted
        low, low_closed = _rounded(wanted.low, wanted.low_closed)
        high, high_closed = _rounded(wanted.high, wanted.high_closed)
        return Range(wanted.attribute, low, high, low_closed, high_closed)

    def _may_hold(self, group: pq.RowGroupMetaData, condition: Condition) -> bool:
        stats = group.column(0).statistics
        if stats is None or not stats.has_min_max:
            return True
        return any(self._range(r).overlaps(stats.min, stats.max) for r in condition.ranges)

    def _mask(self, values: pa.ChunkedArray, condition: Condition) -> pa.ChunkedArray:
        mask = pa.chunked_array([pa.array(np.zeros(len(values), bool))])
        for wanted in map(self._range, condition.ranges):
            if not _comparable(wanted, self.kind):
                continue  # a string bound on numbers or the reverse: the comparison is false
            term = pa.chunked_array([pa.array(np.ones(len(values), bool))])
            if wanted.low is not None:
                term = pc.and_(term, (pc.greater_equal if wanted.low_closed else pc.greater)(
                    values, wanted.low))
            if wanted.high is not None:
                term = pc.and_(term, (pc.less_equal if wanted.high_closed else pc.less)(
                    values, wanted.high))
            mask = pc.or_(mask, term)
        return mask


def list_indexes(archive: Archive) -> list[dict[str, Any]]:
    """One row per index of the archive: topic, attribute, kind, rows, files, bytes and how
    current it is (``current`` or ``N segments behind``)."""
    rows = []
    for topic in archive.directories(archive.path(INDEX_DIR)):
        for attribute in archive.directories(archive.path(INDEX_DIR, topic)):
            index = SecondaryIndex.open(archive, topic, attribute)
            if index is None:
                continue
            covered = index.covered
            behind = sum(1 for p in archive.partitions(topic)
                         for s in archive.segments(topic, p)
                         if s.meta.first_seq >= covered.get(p, 0))
            rows.append({"topic": topic, "attribute": attribute, "kind": index.kind,
                         "rows": index.rows, "files": len(index.parts),
                         "bytes": index.bytes, "built": index.manifest["built"],
                         "status": "current" if not behind else
                         f"{behind} segment{'' if behind == 1 else 's'} behind"})
    return rows


def _rows(table: pa.Table, segment: str, blocks: Sequence[Any], partition: int,
          attribute: str, kind: str, time_field: str, key_fields: Sequence[str],
          key_next: dict[str, int]) -> pa.Table:
    """The index rows of one segment's events (``table``, in seq order)."""
    seq = table.column(ARCHIVE_SEQ).to_numpy()
    row_groups = np.repeat(np.array([b.row_group for b in blocks], np.int32),
                           [b.count for b in blocks])
    if key_fields:
        keys, key_seq = _key_seq(table, key_fields, key_next)
    else:
        keys, key_seq = pa.nulls(table.num_rows, pa.string()), seq
    values = _values(table.column(attribute), attribute, segment, kind)
    rows = pa.table([values, seq, table.column(time_field).cast(pa.int64()),
                     pa.array(np.full(table.num_rows, partition, np.int32)),
                     pa.array([segment] * table.num_rows, pa.string()), row_groups, keys,
                     pa.array(key_seq, pa.int64())], schema=index_schema(kind))
    return rows.filter(pc.is_valid(rows.column("value")))


def key_groups(table: pa.Table, key_fields: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The distinct keys of ``table``'s rows (:func:`key_text`, in no particular order) and
    each row's index among them; vectorized per column, Python per distinct key only."""
    codes = np.zeros(table.num_rows, np.int64)
    for name in key_fields:
        encoded = pc.dictionary_encode(table.column(name)).combine_chunks()
        width = len(encoded.dictionary) + 1
        indices = encoded.indices.fill_null(width - 1).to_numpy(zero_copy_only=False)
        codes = codes * width + indices
    _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    columns = [table.column(name) for name in key_fields]
    texts = [key_text([c[int(i)].as_py() for c in columns]) for i in first]
    return texts, np.asarray(inverse).reshape(-1)


def _key_seq(table: pa.Table, key_fields: Sequence[str], key_next: dict[str, int]
             ) -> tuple[pa.Array, np.ndarray]:
    """Each row's key text and its dense position among its key's rows, continuing from
    ``key_next`` (which it advances)."""
    texts, inverse = key_groups(table, key_fields)
    counts = np.bincount(inverse, minlength=len(texts))
    order = np.argsort(inverse, kind="stable")
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    rank = np.empty(table.num_rows, np.int64)
    rank[order] = np.arange(table.num_rows) - np.repeat(starts, counts)
    offsets = np.array([key_next.get(t, 0) for t in texts], np.int64)
    for text, count, offset in zip(texts, counts, offsets, strict=True):
        key_next[text] = int(offset + count)
    return pa.array(texts, pa.string()).take(pa.array(inverse)), rank + offsets[inverse]


def _values(column: pa.ChunkedArray, attribute: str, segment: str, kind: str) -> pa.Array:
    if kind == "number":
        if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)
                or pa.types.is_null(column.type)):
            raise ArchiveError(f"segment {segment}: attribute {attribute!r} is {column.type}, "
                               "not a number")
        return column.cast(pa.float64(), safe=False).combine_chunks()  # rounds beyond 2^53
    strings = column.cast(pa.string()).combine_chunks()
    nested = pc.or_(pc.starts_with(strings, "{"), pc.starts_with(strings, "["))
    if pc.any(nested).as_py():
        raise ArchiveError(f"segment {segment}: attribute {attribute!r} holds nested values "
                           "(JSON text): an index orders numbers or strings only")
    return strings


def _rounded(bound: Any, closed: bool) -> tuple[Any, bool]:
    if isinstance(bound, bool) or not isinstance(bound, int | float):
        return bound, closed
    rounded = float(bound)
    return rounded, closed or rounded != bound


def _comparable(wanted: Range, kind: str) -> bool:
    def fits(bound: Any) -> bool:
        if bound is None:
            return True
        number = isinstance(bound, int | float) and not isinstance(bound, bool)
        return number if kind == "number" else isinstance(bound, str)
    return fits(wanted.low) and fits(wanted.high)


def _overlap(wanted: Range, low: Any, high: Any) -> float:
    """The share of a histogram bucket ``[low, high]`` inside ``wanted`` (uniform values)."""
    if not wanted.overlaps(low, high):
        return 0.0
    if low == high or not isinstance(low, float):  # a point, or strings: all or half
        return 1.0 if wanted.contains(low) and wanted.contains(high) else 0.5
    start = low if wanted.low is None else max(low, wanted.low)
    end = high if wanted.high is None else min(high, wanted.high)
    return float(min(1.0, max(0.0, (end - start) / (high - low))))


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


