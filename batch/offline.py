"""An offline query over the archive on Spark: index-pruned replay (thesis §3.4; research §4.2).

The driver compiles the query, checks the archive and plans
(:func:`situflow.offline.planner.plan`: indexes chosen by cost, Alg. 3.1 replay intervals
widened for TPStream and COGRA, the row groups they need). Then one Spark job:

1. *read*: one task per archive partition and segment reads, with pyarrow, only the planned
   row groups and only the query's columns, and tags each row with the replay range it falls
   in (``mapInArrow``; ranges of a partition are disjoint). pyarrow rather than Spark's Parquet
   reader because the plan names row groups: Spark selects row groups by pushed-down
   statistics only, so it would also read the row groups between the ranges;
2. *replay*: ``groupBy(partition, range).applyInArrow`` hands each range's events, as one
   Arrow table, to :func:`situflow.offline.replay.replay`: a fresh operator per range, never a
   concatenated pruned stream (AT-08). A range of a full replay (a plain interval: the query
   has nothing to prune by, or ``--indexes none``) goes to
   :func:`~situflow.offline.replay.full_replay`, which keeps every result as ``situflow run``;
3. Spark sorts the results into full-replay order and the driver streams them to the output,
   de-duplicated by result id (:func:`full_replay_order`).

Tasks get plain data (:class:`OfflineJob`) and compile the query themselves, once per Python
worker: a compiled query holds numba kernels, which do not travel by pickle.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa

from situflow.archive import (
    ARCHIVE_SEQ,
    Archive,
    ArchiveError,
    Block,
    StreamSettings,
    check_topic,
    open_archive,
    stream_settings,
)
from situflow.kslack.positions import SEQ_FIELD
from situflow.languages import compile_query
from situflow.offline.intervals import Interval
from situflow.offline.planner import plan
from situflow.offline.queries import OfflineQuery, offline_query
from situflow.offline.replay import ReplayRange, full_replay, replay, result_rows
from situflow.operator import QueryOptions

#: Columns the read stage adds: the archive partition and the interval index of each row.
PARTITION = "_situflow_partition"
INTERVAL = "_situflow_interval"
#: The result columns of the replay stage (:func:`result_rows`, plus where each came from;
#: ``order_ts`` is the running maximum of the emission time within the range).
RESULT_SCHEMA = ("result_id string, order_ts long, order_seq long, json string, "
                 f"{PARTITION} int, {INTERVAL} int")


#: Rows per sorted chunk of results that the driver fetches (with the next one prefetched).
CHUNK_ROWS = 50_000
#: The ranges to replay per archive partition.
Ranges = Mapping[int, Sequence[Interval]]


@dataclass(frozen=True)
class OfflineJob:
    """What a task needs to read and replay: plain, picklable data."""

    uri: str
    topic: str
    query_text: str
    options: QueryOptions
    settings: StreamSettings


@dataclass(frozen=True)
class OfflineRequest:
    """An offline query as the command line gives it."""

    uri: str
    stream: str
    query_text: str
    name: str
    lo: int | None = None
    hi: int | None = None
    indexes: str | list[str] = "auto"
    allow_gaps: bool = False


@dataclass(frozen=True)
class ReadTask:
    """One read task: row groups of one segment and the intervals of their partition."""

    partition: int
    blocks: tuple[Block, ...]


@dataclass
class OfflineRun:
    """A finished offline query: its results (JSON lines, full-replay order; from Spark a
    stream, read once) and the numbers ``--explain`` compares with the plan's estimate."""

    lines: Iterable[str]
    rows_read: int
    bytes_read: int
    intervals: Ranges = field(default_factory=dict)


_OFFLINE: dict[OfflineJob, OfflineQuery] = {}
_ARCHIVES: dict[str, Archive] = {}


def offline_of(job: OfflineJob) -> OfflineQuery:
    """The job's compiled offline query, compiled once per process."""
    if job not in _OFFLINE:
        _OFFLINE[job] = offline_query(compile_query(job.query_text, job.options), job.settings)
    return _OFFLINE[job]


def archive_of(uri: str) -> Archive:
    if uri not in _ARCHIVES:
        _ARCHIVES[uri] = open_archive(uri)
    return _ARCHIVES[uri]


def event_columns(offline: OfflineQuery, available: Sequence[str]) -> list[str] | None:
    """The columns to read: the query's attributes and those that place and name an event
    (None: all)."""
    if offline.columns is None:
        return None
    s = offline.settings
    wanted = [*offline.columns, s.time_field, s.type_field, s.id_field, *s.key_fields, SEQ_FIELD]
    return [c for c in dict.fromkeys(wanted) if c in available]


def query_attributes(offline: OfflineQuery) -> list[str]:
    """The event attributes the query reads (not the time, type, id or seq fields, which an
    event may lack): an archive without one of them is an error."""
    s = offline.settings
    bookkeeping = {s.time_field, s.type_field, s.id_field, SEQ_FIELD, ARCHIVE_SEQ}
    return sorted(set(offline.columns or ()) - bookkeeping)


def tag_rows(table: pa.Table, ranges: Sequence[Interval], time_field: str) -> pa.Table:
    """The rows of ``table`` that fall in one of the (disjoint) ``ranges``, each with the index
    of its range (:data:`INTERVAL`)."""
    if not ranges:
        return table.slice(0, 0).append_column(INTERVAL, pa.array([], pa.int32()))
    ts = table.column(time_field).to_numpy(zero_copy_only=False).astype(np.int64)
    order = sorted(range(len(ranges)), key=lambda i: ranges[i].lo)
    los = np.array([ranges[i].lo for i in order], dtype=np.int64)
    his = np.array([ranges[i].hi for i in order], dtype=np.int64)
    at = np.searchsorted(los, ts, side="right") - 1
    rows = np.flatnonzero((at >= 0) & (ts <= his[np.maximum(at, 0)]))
    ids = np.array(order, dtype=np.int32)[at[rows]]
    return table.take(rows).append_column(INTERVAL, pa.array(ids, pa.int32()))


def disjoint(ranges: Sequence[Interval]) -> bool:
    """Whether no two ``ranges`` share a time (so each row belongs to one range at most).

    >>> disjoint([Interval(0, 4), Interval(5, 9)]), disjoint([Interval(0, 5), Interval(5, 9)])
    (True, False)
    """
    ordered = sorted(ranges, key=lambda r: r.lo)
    return all(a.hi < b.lo for a, b in itertools.pairwise(ordered))


def spark_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with the types Spark lacks replaced by ones it has (the replay stage casts
    back to ``schema``, whose field metadata marks JSON text)."""
    fields = []
    for f in schema:
        t = f.type
        if pa.types.is_null(t) or pa.types.is_large_string(t) or pa.types.is_dictionary(t):
            t = pa.string()
        elif pa.types.is_unsigned_integer(t) or pa.types.is_timestamp(t):
            t = pa.int64()
        elif pa.types.is_large_binary(t):
            t = pa.binary()
        fields.append(pa.field(f.name, t))
    return pa.schema(fields)


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with exactly ``schema``'s columns (missing ones null) in its types."""
    columns = [table.column(f.name).cast(f.type) if f.name in table.schema.names
               else pa.nulls(table.num_rows, f.type) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def run_offline(spark: Any, job: OfflineJob, intervals: Ranges,
                blocks: Mapping[int, Sequence[Block]], columns: list[str] | None) -> OfflineRun:
    """Read ``blocks`` and replay each of the ``intervals`` with a fresh operator, on Spark;
    results de-duplicated by result id, in full-replay order."""
    archive = archive_of(job.uri)
    tasks: list[ReadTask] = []
    for partition, partition_intervals in sorted(intervals.items()):
        if not disjoint(partition_intervals):
            raise ValueError(f"replay ranges of partition {partition} overlap: an event would be "
                             "replayed twice")
        by_segment: dict[str, list[Block]] = {}
        for block in blocks.get(partition, ()):
            by_segment.setdefault(block.segment, []).append(block)
        tasks += [ReadTask(partition, tuple(b)) for b in by_segment.values()]
    if not tasks:
        return OfflineRun([], 0, 0, intervals)
    events_schema = read_schema(archive, job.topic, columns)
    transfer_schema = spark_schema(events_schema)
    read_schema_spark = _spark_struct(transfer_schema.append(pa.field(PARTITION, pa.int32()))
                                      .append(pa.field(INTERVAL, pa.int32())))
    rows_read = spark.sparkContext.accumulator(0)
    bytes_read = spark.sparkContext.accumulator(0)

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        source = archive_of(job.uri)
        for batch in batches:
            for task_id in batch.column(0).to_pylist():
                task = tasks[task_id]
                before = source.bytes_read
                table = source.read_blocks(job.topic, task.partition, task.blocks, columns)
                bytes_read.add(source.bytes_read - before)
                rows_read.add(table.num_rows)
                tagged = tag_rows(conform(table, transfer_schema), intervals[task.partition],
                                  job.settings.time_field)
                tagged = tagged.add_column(tagged.num_columns - 1, PARTITION,
                                           pa.array(np.full(tagged.num_rows, task.partition),
                                                    pa.int32()))
                yield from tagged.to_batches()

    def replay_group(group: pa.Table) -> pa.Table:
        partition = group.column(PARTITION)[0].as_py()
        index = group.column(INTERVAL)[0].as_py()
        events = conform(group.sort_by(ARCHIVE_SEQ), events_schema)
        query = offline_of(job)
        interval = intervals[partition][index]
        found = (replay(query, events, [interval]) if isinstance(interval, ReplayRange)
                 else full_replay(query, events))
        results = result_rows(found)
        # The running maximum: what the partitions are merged by (full_replay_order).
        results = results.set_column(1, "order_ts", pa.array(
            np.maximum.accumulate(results.column("order_ts").to_numpy()), pa.int64()))
        n = results.num_rows
        return (results.append_column(PARTITION, pa.array(np.full(n, partition), pa.int32()))
                .append_column(INTERVAL, pa.array(np.full(n, index), pa.int32())))

    ids = spark.range(len(tasks), numPartitions=min(len(tasks), spark.sparkContext.defaultParallelism))
    events = ids.mapInArrow(read, read_schema_spark)
    results = events.groupBy(PARTITION, INTERVAL).applyInArrow(replay_group, RESULT_SCHEMA)
    lines = full_replay_order(results)  # runs the replay: the accumulators are final
    return OfflineRun(lines, rows_read.value, bytes_read.value, intervals)


def full_replay_order(results: Any) -> Iterator[str]:
    """The JSON lines of ``results`` (a DataFrame of :data:`RESULT_SCHEMA`), streamed to the
    driver: per partition in full-replay order (by range, then as emitted:
    :func:`situflow.offline.replay.result_rows`), partitions merged by emission time (the
    services order no results across partitions). A result id one range gave is dropped from
    the later ones; a range keeps its own repeats (a full replay emits them too).

    Spark sorts them and finds the ids that more than one range gave; the driver holds those
    ids and one sorted chunk of about :data:`CHUNK_ROWS` rows (two while the next is fetched).
    The results are computed (and kept on the executors) before this returns. Results of one
    chunk are ordered on the driver instead (:func:`_ordered_on_driver`)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    # Read three times (the groups' bounds, the ids of several ranges, the sorted lines): kept
    # on the executors, so the archive is read and replayed once.
    results = results.persist(StorageLevel.MEMORY_AND_DISK)
    groups = results.groupBy(PARTITION, INTERVAL).agg(
        F.max("order_ts").alias("last"), F.count("*").alias("rows")).collect()
    if not groups:
        results.unpersist()
        return iter(())
    # The merge by emission time was heapq.merge over each partition's results in full-replay
    # order; its order is the sort by the running maximum of the emission time along each
    # partition (ties: by partition, then full-replay order), which Spark can compute: the
    # maximum within a range (the replay stage's order_ts) raised to that of the partition's
    # earlier ranges.
    floors: list[tuple[int, int, int | None]] = []
    previous: dict[int, int] = {}
    for g in sorted(groups, key=lambda g: (g[PARTITION], g[INTERVAL])):
        partition = g[PARTITION]
        floors.append((partition, g[INTERVAL], previous.get(partition)))  # greatest skips None
        previous[partition] = max(previous.get(partition, g["last"]), g["last"])
    total = sum(g["rows"] for g in groups)
    if total <= CHUNK_ROWS:
        return _ordered_on_driver(results, floors)
    floor = results.sparkSession.createDataFrame(
        floors, f"{PARTITION} int, {INTERVAL} int, floor long")
    # An id is dropped only where more than one range gave it: only those ids go to the driver.
    repeated = results.groupBy("result_id").agg(
        F.countDistinct(PARTITION, INTERVAL).alias("ranges")).where("ranges > 1")
    collided = {row.result_id for row in repeated.toLocalIterator()}
    order = [F.greatest("order_ts", "floor"), PARTITION, INTERVAL, "order_seq"]
    chunks = -(-total // CHUNK_ROWS)
    ordered = (results.join(F.broadcast(floor), [PARTITION, INTERVAL])
               .repartitionByRange(chunks, *order).sortWithinPartitions(*order)
               .select(PARTITION, INTERVAL, "result_id", "json"))
    return _deduplicated(ordered.toLocalIterator(prefetchPartitions=True), collided, results)


def _ordered_on_driver(results: Any, floors: list[tuple[int, int, int | None]]
                       ) -> Iterator[str]:
    """:func:`full_replay_order` for results of one chunk: collected and ordered on the driver,
    which saves the two jobs (ids of several ranges, the sort) that cost a selective query
    most of its run."""
    floor = {(partition, index): low for partition, index, low in floors}
    rows = results.select(PARTITION, INTERVAL, "result_id", "order_ts", "order_seq",
                          "json").collect()
    ranges: dict[str, set[tuple[int, int]]] = {}
    for row in rows:
        ranges.setdefault(row.result_id, set()).add((row[PARTITION], row[INTERVAL]))
    collided = {result_id for result_id, seen in ranges.items() if len(seen) > 1}

    def order(row: Any) -> tuple[int, int, int, int]:
        low = floor[row[PARTITION], row[INTERVAL]]
        return (row.order_ts if low is None else max(row.order_ts, low), row[PARTITION],
                row[INTERVAL], row.order_seq)

    return _deduplicated(iter(sorted(rows, key=order)), collided, results)


def _deduplicated(rows: Iterator[Any], collided: set[str], results: Any) -> Iterator[str]:
    """The lines of ``rows`` (in output order) without those of an id that an earlier range
    gave (``collided``: the ids of several ranges); ``results`` unpersisted at the end."""
    first: dict[str, tuple[int, int]] = {}
    try:
        for row in rows:
            if row.result_id in collided and \
                    first.setdefault(row.result_id, (row[PARTITION], row[INTERVAL])) != \
                    (row[PARTITION], row[INTERVAL]):
                continue
            yield row.json
    finally:
        results.unpersist()


def topic_schema(archive: Archive, topic: str) -> pa.Schema:
    """The unified Arrow schema of every segment of ``topic`` (from the Parquet footers)."""
    schemas = [archive.parquet_file(segment.path).schema_arrow
               for partition in archive.partitions(topic)
               for segment in archive.segments(topic, partition)]
    return pa.unify_schemas(schemas, promote_options="permissive")


def read_schema(archive: Archive, topic: str, columns: list[str] | None) -> pa.Schema:
    """The Arrow schema of ``columns`` over all segments (field metadata kept)."""
    schema = topic_schema(archive, topic)
    names = schema.names if columns is None else [c for c in columns if c in schema.names]
    return pa.schema([schema.field(n) for n in dict.fromkeys([*names, ARCHIVE_SEQ])])


def _spark_struct(schema: pa.Schema) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def offline(request: OfflineRequest, *, master: str | None = None, output: Path | None = None,
            explain: bool = False, tap: Callable[[str], None] | None = None) -> OfflineRun:
    """Plan ``request`` on the driver, run it on Spark, write its results (JSON lines) to
    ``output`` or standard output; with ``explain``, the plan and then the rows and bytes read
    against the estimate, on standard error. ``tap`` sees each result line as it is written
    (``--timeline``: the results stream from Spark once)."""
    from batch.session import spark_session

    archive = archive_of(request.uri)
    topic = f"{request.stream}.ordered"
    settings = stream_settings(archive, topic)
    options = QueryOptions(name=request.name, time_unit=settings.time_unit,
                           type_field=settings.type_field)
    job = OfflineJob(request.uri, topic, request.query_text, options, settings)
    query = offline_of(job)
    partitions = archive.partitions(topic)
    if not settings.key_fields and len(partitions) > 1:
        # K-slack spreads an unpartitioned stream's batches round-robin over the partitions:
        # none of them is a substream a fresh operator could replay on its own.
        raise ArchiveError(f"{archive.path(topic)}: an unpartitioned stream archived over "
                           f"{len(partitions)} partitions ({', '.join(map(str, partitions))}); "
                           "offline queries need one ordered sequence per partition: archive "
                           "the stream with one ordered partition, or import it")
    lines = windowed_aggregation(request, topic, options, settings, master, explain)
    if lines is not None:
        _write(lines, output, tap)
        return OfflineRun(lines, 0, 0)
    for warning in check_topic(archive, topic, allow_gaps=request.allow_gaps,
                                 attributes=query_attributes(query), lo=request.lo,
                                 hi=request.hi):
        print(f"situflow: warning: {warning}", file=sys.stderr)
    before = archive.bytes_read  # widening reads on the driver
    replay_plan = plan(query, archive, topic, lo=request.lo, hi=request.hi,
                       indexes=request.indexes)
    if explain:
        print(replay_plan.explain(), file=sys.stderr)
    columns = event_columns(query, read_schema(archive, topic, None).names)
    run = run_offline(spark_session(master), job, replay_plan.intervals, replay_plan.blocks,
                      columns)
    if explain:
        driver = archive.bytes_read - before
        print(f"actual: {run.rows_read} rows, {run.bytes_read + driver} bytes read "
              f"({driver} of them on the driver, widening the intervals); estimated "
              f"{replay_plan.estimate.rows} rows, {replay_plan.estimate.bytes} bytes",
              file=sys.stderr)
    _write(run.lines, output, tap)
    return run


def windowed_aggregation(request: OfflineRequest, topic: str, options: QueryOptions,
                         settings: StreamSettings, master: str | None,
                         explain: bool) -> list[str] | None:
    """The results of a windowed aggregation answered from the lightweight index (thesis §3.3,
    :mod:`batch.windows`), or None when the query is none (it is then replayed)."""
    from batch.session import spark_session
    from batch.windows import WindowJob, answers, run_windows

    if not answers(request.query_text, options):
        return None
    job = WindowJob(request.uri, topic, request.query_text, options, settings,
                    lo=request.lo, hi=request.hi)
    run = run_windows(lambda: spark_session(master), job, allow_gaps=request.allow_gaps)
    for warning in run.warnings:
        print(f"situflow: warning: {warning}", file=sys.stderr)
    if explain:
        print(run.explain(), file=sys.stderr)
    return run.lines


def _write(lines: Iterable[str], output: Path | None,
           tap: Callable[[str], None] | None = None) -> None:
    out: IO[str] = open(output, "w") if output else sys.stdout  # noqa: SIM115
    try:
        for line in lines:
            out.write(line + "\n")
            if tap is not None:
                tap(line)
    finally:
        if out is not sys.stdout:
            out.close()
