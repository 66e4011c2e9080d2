"""Secondary indexes of the archive, built on Spark (thesis §3.2, §3.4.1; research §4.1).

The format and the per-partition work are the core's (:mod:`situflow.archive.secondary`);
this job distributes them. One build of attributes ``a, b, ...``:

1. the driver reads each attribute's manifest (what it covers, each key's next ``key_seq``)
   and makes one task per (attribute, archive partition) with segments after ``covered``;
2. each task computes the index rows of its partition's new segments
   (:func:`~situflow.archive.secondary.partition_rows`: per-key dense ``key_seq`` continued
   from the manifest) and writes them sorted by value as one part file
   (:func:`~situflow.archive.secondary.write_part`), returning the file's manifest entry and
   where the partition's index now stands;
3. the driver commits each attribute's new files in one manifest rewrite
   (:func:`~situflow.archive.secondary.commit_build`), so a reader sees the old index or the
   new one, never files the manifest does not name.

A task per partition keeps ``key_seq`` sequential within a partition (it counts on from the
previous segment's) while partitions and attributes build in parallel.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from situflow.archive import Archive, open_archive, stream_settings
from situflow.archive.format import ArchiveError
from situflow.archive.secondary import (
    attribute_kind_in,
    commit_build,
    list_indexes,
    partition_rows,
    read_manifest,
    write_part,
)

#: What a task returns: the part file's manifest entry and the partition's new ``covered``
#: and ``key_next`` (JSON), or no part when no new event had a value.
WRITTEN_SCHEMA = "task int, part string, next_seq long, key_next string"


@dataclass(frozen=True)
class PartTask:
    """Index ``attribute`` in ``partition`` from seq ``covered`` on, into part ``name``."""

    attribute: str
    kind: str
    partition: int
    covered: int
    key_next: dict[str, int]
    name: str


def build_indexes(spark: Any, uri: str, topic: str, attributes: Sequence[str]) -> dict[str, int]:
    """Build or extend the secondary indexes of ``attributes`` of ``topic`` on Spark: index
    rows for the segments written since each index's last build. The new rows per attribute."""
    archive = open_archive(uri)
    key_fields = stream_settings(archive, topic).key_fields
    tasks: list[PartTask] = []
    kinds, manifests = {}, {}
    for attribute in dict.fromkeys(attributes):
        manifest = read_manifest(archive, topic, attribute) or {}
        kinds[attribute] = index_kind(archive, topic, attribute, manifest)
        manifests[attribute] = manifest
        build = manifest.get("builds", 0) + 1
        for partition in archive.partitions(topic):
            covered = int(manifest.get("covered", {}).get(str(partition), 0))
            if any(s.meta.next_seq > covered for s in archive.segments(topic, partition)):
                tasks.append(PartTask(attribute, kinds[attribute], partition, covered,
                                      manifest.get("key_next", {}).get(str(partition), {}),
                                      f"part-{build:05d}-{partition:05d}.parquet"))
    if not tasks:
        return dict.fromkeys(attributes, 0)

    def build_parts(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        source = open_archive(uri)
        for batch in batches:
            for task_id in batch.column(0).to_pylist():
                task = tasks[task_id]
                rows = partition_rows(source, topic, task.partition, task.attribute, task.kind,
                                      key_fields, task.covered, task.key_next)
                part = (write_part(source, topic, task.attribute, task.name, rows.rows)
                        if rows.rows.num_rows else None)
                yield pa.RecordBatch.from_pylist(
                    [{"task": task_id, "part": json.dumps(part), "next_seq": rows.next_seq,
                      "key_next": json.dumps(rows.key_next)}],
                    schema=pa.schema([("task", pa.int32()), ("part", pa.string()),
                                      ("next_seq", pa.int64()), ("key_next", pa.string())]))

    slots = min(len(tasks), spark.sparkContext.defaultParallelism)
    written = spark.range(len(tasks), numPartitions=slots).mapInArrow(
        build_parts, WRITTEN_SCHEMA).toArrow().to_pylist()
    added = dict.fromkeys(attributes, 0)
    for attribute in kinds:
        done = [(tasks[w["task"]], w) for w in written if tasks[w["task"]].attribute == attribute]
        if not done:
            continue
        parts = [json.loads(w["part"]) for _, w in done if w["part"] != "null"]
        commit_build(archive, topic, attribute, kinds[attribute], parts,
                     {t.partition: w["next_seq"] for t, w in done},
                     {t.partition: json.loads(w["key_next"]) for t, w in done})
        added[attribute] = sum(p["rows"] for p in parts)
    return added


def index_kind(archive: Archive, topic: str, attribute: str, manifest: dict[str, Any]) -> str:
    """The kind of ``attribute``'s index: the archive's, which must be the existing index's."""
    kind = attribute_kind_in(archive, topic, attribute)
    if kind == "null":  # no value yet: keep the index's kind, or guess a number
        kind = manifest.get("kind", "number")
    if manifest and manifest["kind"] != kind:
        raise ArchiveError(f"index of {attribute!r} on {topic} holds {manifest['kind']}s but the "
                           f"archive now has {kind}s: delete its directory and build it again")
    return kind


def index_files(archive: Archive, topic: str, attribute: str) -> list[str]:
    """The paths of the part files an index's manifest names."""
    from situflow.archive.secondary import index_dir

    manifest = read_manifest(archive, topic, attribute) or {}
    return [f"{index_dir(archive, topic, attribute)}/{part['name']}"
            for part in manifest.get("files", [])]


def read_index(archive: Archive, topic: str, attribute: str) -> pa.Table:
    """Every row of an index (its part files in manifest order)."""
    tables = []
    for path in index_files(archive, topic, attribute):
        with archive.fs.open_input_file(path) as f:
            tables.append(pq.read_table(f))
    return pa.concat_tables(tables)


def index_listing(uri: str) -> str:
    """``situflow index list``: one line per index, with how current it is."""
    rows = list_indexes(open_archive(uri))
    if not rows:
        return f"(no secondary indexes in {uri})"
    header = ("topic", "attribute", "kind", "rows", "files", "bytes", "built", "status")
    table = [header, *[tuple(str(row[c]) for c in header) for row in rows]]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
                     for line in table)
