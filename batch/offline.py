"""An offline query over the archive on Spark: index-pruned replay (thesis §3.4; research §4.2).

The driver compiles the query, checks the archive and plans
(:func:`situflow.offline.planner.plan`: indexes chosen by cost, Alg. 3.1 replay intervals
widened for TPStream and COGRA, the row groups they need). Then one Spark job, or, when the
plan reads at most :data:`DRIVER_ROWS` rows, the same tasks one after the other on the driver,
without starting Spark (:func:`run_offline`):

1. *read and replay*: one task per group of replay ranges (``mapInArrow``) reads, with pyarrow,
   only the planned row groups those ranges overlap and only the query's columns, and replays
   each range, as one Arrow table, through :func:`situflow.offline.replay.replay`: a fresh
   operator per range, never a concatenated pruned stream (AT-08). Ranges that share a row
   group go to one task, so no row group is read twice (:func:`replay_tasks`). A range of a
   full replay (a plain interval: the query has nothing to prune by, or ``--indexes none``)
   goes to :func:`~situflow.offline.replay.full_replay`, which keeps every result as
   ``situflow run``. pyarrow rather than Spark's Parquet reader because the plan names row
   groups: Spark selects row groups by pushed-down statistics only, so it would also read the
   row groups between the ranges. No event crosses a shuffle: a range's events are all in the
   task that reads them;
2. the results are sorted into full-replay order and streamed to the driver, de-duplicated by
   result id (:func:`full_replay_order`).

Tasks get plain data (:class:`OfflineJob`) and compile the query themselves, once per Python
worker: a compiled query holds numba kernels, which do not travel by pickle.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
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

#: Columns that say which range gave a result: the archive partition and the range's index.
PARTITION = "_situflow_partition"
INTERVAL = "_situflow_interval"
#: The result columns of the replay stage (:func:`result_rows`, plus where each came from;
#: ``order_ts`` is the running maximum of the emission time within the range).
RESULT_SCHEMA = ("result_id string, order_ts long, order_seq long, json string, "
                 f"{PARTITION} int, {INTERVAL} int")


#: Rows per sorted chunk of results that the driver fetches (with the next one prefetched).
CHUNK_ROWS = 50_000
#: A plan that reads at most this many rows replays on the driver, without Spark
#: (``situflow offline --driver-rows``): a Spark job's fixed cost (starting the session 5–10 s,
#: then about half a second a job) is many times the replay of a million events
#: (bench/README.md, "Offline").
DRIVER_ROWS = 1_000_000
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
    #: Replay on the driver when the plan reads at most this many rows (None: DRIVER_ROWS).
    driver_rows: int | None = None


@dataclass(frozen=True)
class ReplayTask:
    """One task: replay ranges of one partition (indexes into its intervals) and the planned
    row groups they overlap, which hold all of their rows."""

    partition: int
    ranges: tuple[int, ...]
    blocks: tuple[Block, ...]
    rows: int


@dataclass
class OfflineRun:
    """A finished offline query: its results (JSON lines, full-replay order; a stream, read
    once), the numbers ``--explain`` compares with the plan's estimate, and where it ran
    (``"Spark"`` or ``"driver"``)."""

    lines: Iterable[str]
    rows_read: int
    bytes_read: int
    intervals: Ranges = field(default_factory=dict)
    ran_on: str = "Spark"


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


def disjoint(ranges: Sequence[Interval]) -> bool:
    """Whether no two ``ranges`` share a time (so each row belongs to one range at most).

    >>> disjoint([Interval(0, 4), Interval(5, 9)]), disjoint([Interval(0, 5), Interval(5, 9)])
    (True, False)
    """
    ordered = sorted(ranges, key=lambda r: r.lo)
    return all(a.hi < b.lo for a, b in itertools.pairwise(ordered))


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with exactly ``schema``'s columns (missing ones null) in its types."""
    columns = [table.column(f.name).cast(f.type) if f.name in table.schema.names
               else pa.nulls(table.num_rows, f.type) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def replay_tasks(intervals: Ranges, blocks: Mapping[int, Sequence[Block]],
                 tasks_wanted: int) -> list[ReplayTask]:
    """The tasks that replay ``intervals`` from the planned ``blocks``: ranges that share a
    row group in one task (so each is read once), and consecutive ranges of a partition
    joined up to about ``tasks_wanted`` tasks of equal rows."""
    groups: list[ReplayTask] = []
    for partition, ranges in sorted(intervals.items()):
        if not disjoint(ranges):
            raise ValueError(f"replay ranges of partition {partition} overlap: an event would be "
                             "replayed twice")
        planned = sorted(set(blocks.get(partition, ())), key=lambda b: b.seq_min)
        starts = np.array([b.ts_min for b in planned], dtype=np.int64)
        ends = np.maximum.accumulate(np.array([b.ts_max for b in planned], dtype=np.int64))
        current: list[int] = []
        held: dict[Block, None] = {}
        for index in sorted(range(len(ranges)), key=lambda i: ranges[i].lo):
            r = ranges[index]
            # Archive order is time order: the blocks overlapping [lo, hi] are consecutive.
            first = int(np.searchsorted(ends, r.lo, side="left"))
            stop = int(np.searchsorted(starts, r.hi, side="right"))
            needed = planned[first:stop]
            if current and not any(b in held for b in needed):
                groups.append(_task(partition, current, held))
                current, held = [], {}
            current.append(index)
            held.update(dict.fromkeys(needed))
        if current:
            groups.append(_task(partition, current, held))
    share = sum(t.rows for t in groups) / max(tasks_wanted, 1)
    tasks: list[ReplayTask] = []
    for group in groups:
        last = tasks[-1] if tasks else None
        if last is not None and last.partition == group.partition and \
                last.rows + group.rows <= share:
            tasks[-1] = _task(group.partition, [*last.ranges, *group.ranges],
                              dict.fromkeys([*last.blocks, *group.blocks]))
        else:
            tasks.append(group)
    return tasks


def _task(partition: int, ranges: Sequence[int], blocks: Mapping[Block, None]) -> ReplayTask:
    return ReplayTask(partition, tuple(ranges), tuple(blocks), sum(b.count for b in blocks))


def run_offline(session: Callable[[], Any], job: OfflineJob, intervals: Ranges,
                blocks: Mapping[int, Sequence[Block]], columns: list[str] | None,
                driver_rows: int = DRIVER_ROWS) -> OfflineRun:
    """Read ``blocks`` and replay each of the ``intervals`` with a fresh operator; results
    de-duplicated by result id, in full-replay order. On the driver when the blocks hold at most
    ``driver_rows`` rows, else on Spark (the session ``session`` gives, started only then)."""
    planned = sum(b.count for partition in intervals for b in set(blocks.get(partition, ())))
    on_driver = planned <= driver_rows
    spark = None if on_driver else session()
    tasks = replay_tasks(intervals, blocks,
                         1 if spark is None else spark.sparkContext.defaultParallelism)
    events_schema = read_schema(archive_of(job.uri), job.topic, columns)
    if spark is None:
        return _run_on_driver(job, tasks, intervals, columns, events_schema)
    if not tasks:
        return OfflineRun([], 0, 0, intervals, "Spark")
    context = spark.sparkContext
    rows_read = context.accumulator(0)
    bytes_read = context.accumulator(0)
    # Per range: its results' last emission time and their number. Set, not summed, so a task
    # Spark runs twice reports the same.
    groups = context.accumulator({}, RangeResults())

    def read_and_replay(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        source = archive_of(job.uri)
        for batch in batches:
            for task_id in batch.column(0).to_pylist():
                task = tasks[task_id]
                before = source.bytes_read
                found: dict[tuple[int, int], tuple[int, int]] = {}
                for index, results in replay_task(job, task, intervals, columns, events_schema,
                                                  source):
                    found[task.partition, index] = (results["order_ts"][-1].as_py(),
                                                    results.num_rows)
                    yield from results.to_batches()
                bytes_read.add(source.bytes_read - before)
                rows_read.add(task.rows)
                groups.add(found)

    ids = spark.range(len(tasks), numPartitions=len(tasks))
    results = ids.mapInArrow(read_and_replay, RESULT_SCHEMA)
    lines = full_replay_order(results, groups)  # runs the replay: the accumulators are final
    return OfflineRun(lines, rows_read.value, bytes_read.value, intervals, "Spark")


def replay_task(job: OfflineJob, task: ReplayTask, intervals: Ranges, columns: list[str] | None,
                events_schema: pa.Schema, source: Archive) -> Iterator[tuple[int, pa.Table]]:
    """Per range of ``task`` that gives results: its index and the results as
    :data:`RESULT_SCHEMA` rows, with ``order_ts`` raised to its running maximum (what the
    partitions are merged by: :func:`full_replay_order`). Reads the task's row groups from
    ``source`` once."""
    query = offline_of(job)
    table = source.read_blocks(job.topic, task.partition, task.blocks, columns)
    events = conform(table, events_schema)
    # Archive order is time order: a range's rows are a slice.
    times = np.asarray(events.column(job.settings.time_field).to_numpy(zero_copy_only=False),
                       dtype=np.int64)
    for index in task.ranges:
        interval = intervals[task.partition][index]
        start = int(np.searchsorted(times, interval.lo, side="left"))
        stop = int(np.searchsorted(times, interval.hi, side="right"))
        rows = events.slice(start, stop - start)
        results = result_rows(replay(query, rows, [interval]) if isinstance(interval, ReplayRange)
                              else full_replay(query, rows))
        n = results.num_rows
        if n:
            running = np.maximum.accumulate(results.column("order_ts").to_numpy())
            yield index, (results.set_column(1, "order_ts", pa.array(running, pa.int64()))
                          .append_column(PARTITION, pa.array(np.full(n, task.partition),
                                                             pa.int32()))
                          .append_column(INTERVAL, pa.array(np.full(n, index), pa.int32())))


def _run_on_driver(job: OfflineJob, tasks: Sequence[ReplayTask], intervals: Ranges,
                   columns: list[str] | None, events_schema: pa.Schema) -> OfflineRun:
    """:func:`run_offline` in this process: the same tasks, one after the other."""
    source = archive_of(job.uri)
    before = source.bytes_read
    found = [(task.partition, index, results) for task in tasks
             for index, results in replay_task(job, task, intervals, columns, events_schema,
                                               source)]
    read = source.bytes_read - before
    rows = sum(task.rows for task in tasks)
    if not found:
        return OfflineRun([], rows, read, intervals, "driver")
    floors = _floors((partition, index, results["order_ts"][-1].as_py())
                     for partition, index, results in found)
    lines = _in_output_order(pa.concat_tables(results for *_, results in found), floors)
    return OfflineRun(lines, rows, read, intervals, "driver")


class RangeResults:
    """An accumulator (Spark's ``AccumulatorParam``) of ``{(partition, range): (last emission
    time, number of results)}``."""

    def zero(self, value: dict[Any, Any]) -> dict[Any, Any]:
        return {}

    def addInPlace(self, value: dict[Any, Any], other: dict[Any, Any]  # Spark's name
                   ) -> dict[Any, Any]:
        value.update(other)
        return value


def full_replay_order(results: Any, ranges: Any) -> Iterator[str]:
    """The JSON lines of ``results`` (a DataFrame of :data:`RESULT_SCHEMA`), streamed to the
    driver: per partition in full-replay order (by range, then as emitted:
    :func:`situflow.offline.replay.result_rows`), partitions merged by emission time (the
    services order no results across partitions). A result id one range gave is dropped from
    the later ones; a range keeps its own repeats (a full replay emits them too).

    Spark sorts them and finds the ids that more than one range gave; the driver holds those
    ids and one sorted chunk of about :data:`CHUNK_ROWS` rows (two while the next is fetched).
    The results are computed (and kept on the executors) before this returns. Results of one
    chunk are ordered on the driver instead (:func:`_ordered_on_driver`). ``ranges`` is the
    :class:`RangeResults` accumulator that computing ``results`` fills (anything whose
    ``value`` is that mapping)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    # Computed once and kept on the executors (the archive is read and replayed once), then
    # read again for the ids of several ranges and the sorted lines. Computing them fills
    # ``ranges`` (:class:`RangeResults`), whose ``value`` is read after it.
    results = results.persist(StorageLevel.MEMORY_AND_DISK)
    results.write.format("noop").mode("overwrite").save()
    groups = sorted((partition, index, last, rows)
                    for (partition, index), (last, rows) in ranges.value.items())
    if not groups:
        results.unpersist()
        return iter(())
    # The merge by emission time was heapq.merge over each partition's results in full-replay
    # order; its order is the sort by the running maximum of the emission time along each
    # partition (ties: by partition, then full-replay order), which Spark can compute: the
    # maximum within a range (the replay stage's order_ts) raised to that of the partition's
    # earlier ranges.
    floors = _floors((partition, index, last) for partition, index, last, _ in groups)
    total = sum(rows for *_, rows in groups)
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


def _floors(ranges: Iterable[tuple[int, int, int]]) -> list[tuple[int, int, int | None]]:
    """Per range (partition, index, its last running emission time), the greatest emission
    time of its partition's earlier ranges (None: the first), which :func:`full_replay_order`
    raises its results' times to."""
    floors: list[tuple[int, int, int | None]] = []
    previous: dict[int, int] = {}
    for partition, index, last in sorted(ranges):
        floors.append((partition, index, previous.get(partition)))
        previous[partition] = max(previous.get(partition, last), last)
    return floors


def _ordered_on_driver(results: Any, floors: list[tuple[int, int, int | None]]
                       ) -> Iterator[str]:
    """:func:`full_replay_order` for results of one chunk: collected and ordered on the driver,
    which saves the two jobs (ids of several ranges, the sort) that cost a selective query
    most of its run."""
    try:
        yield from _in_output_order(results.toArrow(), floors)
    finally:
        results.unpersist()


def _in_output_order(results: pa.Table, floors: Sequence[tuple[int, int, int | None]]
                     ) -> Iterator[str]:
    """The JSON lines of ``results`` (:data:`RESULT_SCHEMA` rows) in the order and with the
    de-duplication of :func:`full_replay_order`, sorted here."""
    partition = results.column(PARTITION).to_numpy().astype(np.int64)
    index = results.column(INTERVAL).to_numpy().astype(np.int64)
    span = int(index.max()) + 1
    code = partition * span + index  # one number per range
    raised_to = np.full(max([int(code.max()), *(p * span + i for p, i, _ in floors)]) + 1,
                        np.iinfo(np.int64).min)
    for p, i, low in floors:
        if low is not None:
            raised_to[p * span + i] = low
    raised = np.maximum(results.column("order_ts").to_numpy(), raised_to[code])
    order = np.lexsort((results.column("order_seq").to_numpy(), index, partition, raised))
    yield from _first_range_only(zip(results.column("result_id").take(order).to_pylist(),
                                     code[order].tolist(),
                                     results.column("json").take(order).to_pylist(),
                                     strict=True))


def _deduplicated(rows: Iterator[Any], collided: set[str], results: Any) -> Iterator[str]:
    """:func:`_first_range_only` of Spark's sorted ``rows``, where only the ids in ``collided``
    (those of several ranges) can repeat; ``results`` unpersisted at the end."""
    try:
        yield from _first_range_only(((row.result_id, (row[PARTITION], row[INTERVAL]), row.json)
                                      for row in rows), collided)
    finally:
        results.unpersist()


def _first_range_only(rows: Iterable[tuple[str, Any, str]],
                      collided: Container[str] | None = None) -> Iterator[str]:
    """The lines of ``rows`` (result id, range, line; in output order) without those of an id
    an earlier range gave; only ids in ``collided`` are looked at (None: every id)."""
    first: dict[str, Any] = {}
    for result_id, where, line in rows:
        if (collided is None or result_id in collided) and \
                first.setdefault(result_id, where) != where:
            continue
        yield line


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
    driver_rows = DRIVER_ROWS if request.driver_rows is None else request.driver_rows
    widened = archive.bytes_read - before
    run = run_offline(lambda: spark_session(master), job, replay_plan.intervals,
                      replay_plan.blocks, columns, driver_rows)
    if explain:
        print(f"actual: {run.rows_read} rows, {run.bytes_read + widened} bytes read "
              f"({widened} of them widening the intervals on the driver); estimated "
              f"{replay_plan.estimate.rows} rows, {replay_plan.estimate.bytes} bytes; replayed "
              f"on {'the driver' if run.ran_on == 'driver' else 'Spark'} (--driver-rows "
              f"{driver_rows})", file=sys.stderr)
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
