"""Offline windowed aggregation on Spark (thesis §3.3; :mod:`situflow.offline.windows`).

For a COGRA query over a single-event pattern (:func:`situflow.offline.windows.index_refusal`
says which) the driver reads only the sidecars of the lightweight index and plans
(:func:`~situflow.offline.windows.plan_windows`): whole blocks inside one slice give their
statistics, blocks the statistics exclude are skipped, and the blocks that cross a slice bound
(or that the statistics cannot decide) are replayed. The replay is the only work on rows:

- few rows (at most :data:`DRIVER_ROWS`) are read on the driver with pyarrow: a Spark stage
  costs a scheduling round trip and a Python worker per task (about a second on ``local[*]``),
  while a few row groups read and aggregate in milliseconds;
- more go to Spark: one task per archive partition and segment reads its row groups (only the
  query's columns) and aggregates them per slice with numpy (``mapInArrow``), returning one
  small row per slice, never the events; the driver merges those partials with the blocks'.

The driver then slides the windows (two-stacks over the slices) and formats the results as
the COGRA operator does (``TrendResult.to_dict``), in window order. Tasks get plain data and
compile the query themselves (numba kernels do not travel by pickle).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from situflow.archive import ARCHIVE_SEQ, Archive, Block, StreamSettings, check_topic, open_archive
from situflow.kslack.positions import SEQ_FIELD
from situflow.languages import compile_query
from situflow.offline.windows import (
    Grouped,
    Method,
    WindowedAggregation,
    WindowPlan,
    evaluate,
    index_refusal,
    plan_windows,
)
from situflow.operator import QueryOptions
from situflow.trends.query import CompiledTrendQuery

#: Rows to replay up to which the driver reads them itself rather than start a Spark stage.
DRIVER_ROWS = 100_000


@dataclass(frozen=True)
class WindowJob:
    """What a task needs: plain, picklable data."""

    uri: str
    topic: str
    query_text: str
    options: QueryOptions
    settings: StreamSettings
    lo: int | None = None
    hi: int | None = None


@dataclass
class WindowRun:
    """A finished windowed aggregation: its results as JSON lines (window order), the plan,
    the archive's warnings, and the rows and bytes of segments read (sidecars not counted)."""

    lines: list[str]
    plan: WindowPlan
    warnings: list[str]
    rows_read: int
    bytes_read: int
    estimated_bytes: int

    def explain(self) -> str:
        """The plan, and the rows and bytes read against the estimate (``--explain``)."""
        return (f"{self.plan.explain()}\nread: {self.rows_read} rows, {self.bytes_read} bytes "
                f"(estimated {self.plan.rows_to_replay} rows, {self.estimated_bytes} bytes)")


_AGGREGATIONS: dict[WindowJob, WindowedAggregation] = {}


def answers(query_text: str, options: QueryOptions) -> bool:
    """Whether :func:`run_windows` answers the query (a windowed aggregation the lightweight
    index can answer); every other query takes the replay path of batch/offline.py."""
    compiled = compile_query(query_text, options)
    return isinstance(compiled, CompiledTrendQuery) and index_refusal(compiled) is None


def aggregation_of(job: WindowJob) -> WindowedAggregation:
    """The job's aggregation, compiled once per process."""
    if job not in _AGGREGATIONS:
        compiled = compile_query(job.query_text, job.options)
        assert isinstance(compiled, CompiledTrendQuery)
        _AGGREGATIONS[job] = WindowedAggregation(compiled, job.settings.time_field,
                                                 job.settings.id_field)
    return _AGGREGATIONS[job]


def run_windows(spark: Callable[[], Any], job: WindowJob, *, method: Method = "auto",
                allow_gaps: bool = False, driver_rows: int = DRIVER_ROWS) -> WindowRun:
    """Answer ``job`` (a query :func:`answers`) from the lightweight index plus a replay of
    partial blocks. ``spark()`` gives the Spark session; it is called (and a session started)
    only when more than ``driver_rows`` rows are to be replayed. Bad archives raise
    ``ArchiveError`` naming files and seq ranges; ``allow_gaps`` proceeds past seq gaps with
    a warning in :attr:`WindowRun.warnings`."""
    aggregation = aggregation_of(job)
    archive = open_archive(job.uri)
    attributes = [c for c in aggregation.columns
                  if c not in (aggregation.time_field, aggregation.type_field)]
    warnings = check_topic(archive, job.topic, allow_gaps=allow_gaps, attributes=attributes,
                             lo=job.lo, hi=job.hi)
    blocks = {p: archive.blocks(job.topic, p) for p in archive.partitions(job.topic)}
    plan = plan_windows(aggregation, blocks, lo=job.lo, hi=job.hi, method=method)
    tasks = [(p, tuple(segment_blocks)) for p, bs in sorted(plan.replay.items())
             for segment_blocks in _by_segment(bs)]
    if plan.rows_to_replay <= driver_rows:
        replayed = [_replay(archive, job, aggregation, p, bs) for p, bs in tasks]
        rows_read, bytes_read = plan.rows_to_replay, archive.bytes_read
    else:
        replayed, rows_read, bytes_read = _replay_on_spark(spark(), job, tasks)
    results = evaluate(aggregation, plan, replayed)
    return WindowRun([json.dumps(r.to_dict()) for r in results], plan, warnings, rows_read,
                     bytes_read, windows_bytes_read(archive, job.topic, plan, aggregation))


def _by_segment(blocks: Sequence[Block]) -> list[list[Block]]:
    groups: dict[str, list[Block]] = {}
    for block in blocks:
        groups.setdefault(block.segment, []).append(block)
    return list(groups.values())


def _replay(archive: Archive, job: WindowJob, aggregation: WindowedAggregation, partition: int,
            blocks: Sequence[Block]) -> Grouped:
    table = archive.read_blocks(job.topic, partition, blocks, aggregation.columns)
    return aggregation.rows(table, job.lo, job.hi)


def _replay_on_spark(spark: Any, job: WindowJob, tasks: list[tuple[int, tuple[Block, ...]]]
                     ) -> tuple[list[Grouped], int, int]:
    """The partials of ``tasks`` (partition, blocks of one segment), one Spark task each."""
    measures = aggregation_of(job).measures
    width = len(measures.roles)
    schema = ", ".join(["group string", "slice long", *(f"v{v} double" for v in range(width))])
    rows_read = spark.sparkContext.accumulator(0)
    bytes_read = spark.sparkContext.accumulator(0)

    def replay_tasks(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        aggregation = aggregation_of(job)
        archive = open_archive(job.uri)
        for batch in batches:
            for task_id in batch.column(0).to_pylist():
                partition, blocks = tasks[task_id]
                before = archive.bytes_read
                partials = _replay(archive, job, aggregation, partition, blocks)
                bytes_read.add(archive.bytes_read - before)
                rows_read.add(sum(b.count for b in blocks))
                yield from partials.to_arrow(width).to_batches()

    ids = spark.range(len(tasks), numPartitions=min(len(tasks),
                                                    spark.sparkContext.defaultParallelism))
    # The tasks' slices meet where a slice spans segments or partitions: from_arrow combines.
    partials = Grouped.from_arrow(ids.mapInArrow(replay_tasks, schema).toArrow(), measures.kinds)
    return [partials], rows_read.value, bytes_read.value


def windows_bytes_read(archive: Archive, topic: str, plan: WindowPlan,
                       aggregation: WindowedAggregation) -> int:
    """The compressed bytes of the column chunks ``plan`` replays (from the Parquet footers,
    without reading rows): for bench/offline.py, against the same for
    ``plan_windows(..., method="replay")`` (full replay)."""
    settings = archive.settings(topic)
    # What Archive.read_blocks reads besides the query's columns.
    wanted = {ARCHIVE_SEQ, SEQ_FIELD, aggregation.time_field, *aggregation.columns,
              *(settings.key_fields if settings else ())}
    total = 0
    for partition, blocks in plan.replay.items():
        for segment in archive.segments(topic, partition):
            groups = {b.row_group for b in blocks if b.segment == segment.name}
            if not groups:
                continue
            metadata = archive.parquet_file(segment.path).metadata
            for group in groups:
                chunks = metadata.row_group(group)
                total += sum(chunks.column(i).total_compressed_size
                             for i in range(chunks.num_columns)
                             if chunks.column(i).path_in_schema in wanted)
    return total
