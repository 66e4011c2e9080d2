"""Calibration of the cost weights of Eq. 3.1 on this machine and this archive (thesis §3.5.3:
the weights "must be calibrated for the actual setting").

Four timings, each on the archive itself and each bounded by a share of ``budget`` seconds:

- ω_PIO: seconds per 8 KiB page of primary reads, reading row groups of the topic through
  :meth:`Archive.read_blocks` (bytes as ``bytes_read`` counts them);
- ω_SIO: seconds per page of secondary-index reads: a file shaped like an index part (value,
  seq, ts, partition, segment, row group, key, key_seq; sorted by value, small row groups) is
  written from the topic's rows next to the indexes, read back, and removed;
- ω_sort: seconds per ``n·log2(n)`` for sorting index rows by (partition, key, key_seq), as the
  index lookup does;
- ω_interval: the fixed cost of one more replay interval: a fresh operator replaying a few of
  the topic's events (a trivial query over their types).

The weights are written to ``<root>/_index/_calibration.json``, where :func:`plan` finds them.
"""

from __future__ import annotations

import math
import statistics
import time
import uuid
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from situflow.archive.blocks import Block
from situflow.archive.format import ARCHIVE_SEQ, ArchiveError
from situflow.archive.location import Archive
from situflow.archive.stream import StreamSettings
from situflow.languages import compile_query
from situflow.offline.cost import CALIBRATION_FILE, PAGE_BYTES, CostWeights
from situflow.offline.intervals import Interval
from situflow.offline.queries import offline_query
from situflow.offline.replay import replay
from situflow.operator import QueryOptions

#: Rows per row group of the index-shaped file (as the secondary indexes write them).
_INDEX_GROUP_ROWS = 8192
#: Rows of the topic kept as material for the index and sort timings.
_SAMPLE_ROWS = 200_000
#: A query every archive can run (it reads only the event type), and how many events it sees.
_PROBE_QUERY = "PATTERN SEQ(A a, B b) WITHIN 10 seconds"
_PROBE_ROWS = 16
#: The least time one measurement may take, so timer resolution does not count.
_MIN_SECONDS = 1e-4


def calibrate(archive: Archive, topic: str, *, budget: float = 3.0, save: bool = True) -> CostWeights:
    """Time primary reads, index reads, sorting and interval overhead on ``topic`` of
    ``archive`` within about ``budget`` seconds; write the weights (``save``) and return them."""
    blocks = [(p, b) for p in archive.partitions(topic) for b in archive.blocks(topic, p)]
    if not blocks:
        raise ArchiveError(f"{archive.uri}: topic {topic} has no archived rows to calibrate on")
    share = budget / 4
    pio, sample = _primary(archive, topic, blocks, share)
    index = _index_shaped(sample)
    sio = _index_reads(archive, index, share)
    sort = _sort(index, share)
    per_interval = _fresh_operator(archive, topic, sample, share)
    weights = CostWeights(pio=pio, sio=sio, sort=sort, per_interval=per_interval)
    if save:
        weights.save(archive.fs, archive.root)
    return weights


def _repeat(action: Callable[[], float], seconds: float) -> list[float]:
    """Run ``action`` (which returns its own measured seconds) at least 3 times and until
    ``seconds`` have passed."""
    timings: list[float] = []
    started = time.perf_counter()
    while len(timings) < 3 or time.perf_counter() - started < seconds:
        timings.append(action())
    return timings


def _primary(archive: Archive, topic: str, blocks: list[tuple[int, Block]], seconds: float
             ) -> tuple[float, pa.Table]:
    """Seconds per page of primary reads, and rows read as material for the other timings.

    A read has a fixed part (opening the segment, its footer), so the weight is the slope
    between reading one row group and reading all row groups of its segment, as a replay task
    reads them (medians over the segments, in turn)."""
    segments: dict[tuple[int, str], list[Block]] = {}
    for partition, block in blocks:
        segments.setdefault((partition, block.segment), []).append(block)
    order = list(segments.items())
    one: list[tuple[float, int]] = []
    whole: list[tuple[float, int]] = []
    tables: list[pa.Table] = []
    position = 0

    def timed(partition: int, chosen: list[Block]) -> tuple[float, int, pa.Table]:
        before = archive.bytes_read
        started = time.perf_counter()
        table = archive.read_blocks(topic, partition, chosen)
        return time.perf_counter() - started, archive.bytes_read - before, table

    def read_next() -> float:
        nonlocal position
        (partition, _), segment_blocks = order[position % len(order)]
        position += 1
        elapsed, size, _ = timed(partition, segment_blocks[:1])
        one.append((elapsed, size))
        elapsed_all, size_all, table = timed(partition, segment_blocks)
        whole.append((elapsed_all, size_all))
        if sum(t.num_rows for t in tables) < _SAMPLE_ROWS:
            tables.append(table.select([c for c in table.column_names if c != "_situflow_offset"]))
        return elapsed + elapsed_all

    _repeat(read_next, seconds)
    pages_one = statistics.median(size for _, size in one) / PAGE_BYTES
    pages_all = statistics.median(size for _, size in whole) / PAGE_BYTES
    time_one = statistics.median(elapsed for elapsed, _ in one)
    time_all = statistics.median(elapsed for elapsed, _ in whole)
    if pages_all > pages_one and time_all > time_one:
        per_page = (time_all - time_one) / (pages_all - pages_one)
    else:   # one row group per segment: no slope to take
        per_page = max(time_all, _MIN_SECONDS) / max(pages_all, 1 / PAGE_BYTES)
    return per_page, pa.concat_tables(tables, promote_options="permissive")


def _index_shaped(rows: pa.Table) -> pa.Table:
    """Rows shaped like a secondary index's part file, sorted by value."""
    count = rows.num_rows
    seq = rows.column(ARCHIVE_SEQ) if ARCHIVE_SEQ in rows.column_names else \
        pa.array(np.arange(count), pa.int64())
    values = np.random.default_rng(0).random(count)
    table = pa.table({
        "value": pa.array(values, pa.float64()),
        "seq": pa.array(np.asarray(seq), pa.int64()),
        "ts": pa.array(np.asarray(seq), pa.int64()),
        "partition": pa.array(np.zeros(count, np.int32)),
        "segment": pa.array(["00000000000000000000.parquet"] * count, pa.string()),
        "row_group": pa.array(np.zeros(count, np.int32)),
        "key": pa.nulls(count, pa.string()),
        "key_seq": pa.array(np.asarray(seq), pa.int64()),
    })
    return table.sort_by("value")


def _index_reads(archive: Archive, index: pa.Table, seconds: float) -> float:
    """Seconds per page of reading an index-shaped file, written next to the indexes and
    removed afterwards."""
    directory = f"{archive.root.rstrip('/')}/{CALIBRATION_FILE.rsplit('/', 1)[0]}"
    archive.fs.create_dir(directory, recursive=True)
    path = f"{directory}/._calibration-{uuid.uuid4().hex[:8]}.parquet"
    with archive.fs.open_output_stream(path) as stream:
        pq.write_table(index, stream, row_group_size=_INDEX_GROUP_ROWS, compression="zstd")
    try:
        size = max(archive.fs.get_file_info(path).size or 1, 1)

        def read() -> float:
            started = time.perf_counter()
            with archive.fs.open_input_file(path) as file:
                pq.ParquetFile(file).read()
            return max(time.perf_counter() - started, _MIN_SECONDS)

        return statistics.median(_repeat(read, seconds)) / (size / PAGE_BYTES)
    finally:
        archive.fs.delete_file(path)


def _sort(index: pa.Table, seconds: float) -> float:
    """Seconds per ``n·log2(n)`` of sorting index rows as a lookup's result is sorted."""
    shuffled = index.take(np.random.default_rng(1).permutation(index.num_rows))
    n = max(index.num_rows, 2)

    def sort() -> float:
        started = time.perf_counter()
        shuffled.sort_by([("partition", "ascending"), ("key", "ascending"), ("key_seq", "ascending")])
        return max(time.perf_counter() - started, _MIN_SECONDS)

    return statistics.median(_repeat(sort, seconds)) / (n * math.log2(n))


def _fresh_operator(archive: Archive, topic: str, sample: pa.Table, seconds: float) -> float:
    """Seconds to replay one short interval with a fresh operator (compile once, then per
    interval: an operator, the events' conversion, the slice): what each more interval costs
    beyond its rows."""
    settings = archive.settings(topic) or StreamSettings(topic.removesuffix(".ordered"))
    offline = offline_query(compile_query(_PROBE_QUERY, QueryOptions()), settings)
    rows = sample.slice(0, _PROBE_ROWS)
    times = rows.column(settings.time_field).to_pylist()
    interval = [Interval(min(times), max(times))]

    def run() -> float:
        started = time.perf_counter()
        replay(offline, rows, interval)
        return time.perf_counter() - started

    return statistics.median(_repeat(run, seconds))
