"""Offline situflow on Spark (issue #14): index-pruned replay against full replay, and windowed
aggregation from the lightweight indexes against replay, on one generated archive.

    PYTHONPATH=. .venv/bin/python bench/offline.py                 # 20M events (the issue's size)
    PYTHONPATH=. .venv/bin/python bench/offline.py --events 1000000 --block-rows 2048   # quick

The archive is written directly with the core's segment writer (block sidecars included) and
secondary indexes are built with the pyarrow builder (:func:`situflow.archive.secondary.
build_index`) and the cost weights calibrated (``situflow index calibrate``); the time each
takes is printed. Then, in one Spark session (``local[2]``), for a
selective and an unselective query of each language: the full replay (every row group, one
interval per partition) and the pruned replay with the indexes the cost model chooses, with
all and with none, each where ``situflow offline`` runs it (on the driver when it reads at most
``DRIVER_ROWS`` rows, else on Spark), and the chosen plan on Spark too: wall time, rows and
bytes read, the plan's estimated bytes, and the ratios against the full replay measured in the
same run. Each pruned run's results are checked to be
the full replay's (same result ids). Then windowed aggregation (a COGRA single-event query)
from the lightweight indexes against replaying every block, across slides. Last, the Spark
job's fixed cost: session start and planning, against the replay work.

Data: ``--partitions`` archive partitions, each its own time line (about one event per tick,
with repeated timestamps), ``--cars`` cars (the key, ``car_id``; car ``c`` in partition
``c mod partitions``), type ``Car`` except a rare ``Alarm``; ``speed`` around 60 with rare
spikes above 200, ``accel`` around 0. Seeded, so runs compare.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import numpy as np
import pyarrow as pa

from batch.offline import (
    DRIVER_ROWS,
    OfflineJob,
    OfflineRun,
    archive_of,
    event_columns,
    offline_of,
    read_schema,
    run_offline,
)
from batch.session import spark_session
from situflow.archive import (
    ARCHIVE_OFFSET,
    ARCHIVE_SEQ,
    Archive,
    SegmentMeta,
    StreamSettings,
    open_archive,
    partition_dir,
    write_segment,
)
from situflow.archive.secondary import build_index
from situflow.events import EventBatch
from situflow.kslack.positions import SEQ_FIELD
from situflow.languages import compile_query
from situflow.offline.calibration import calibrate
from situflow.offline.intervals import Interval
from situflow.offline.planner import plan
from situflow.operator import QueryOptions

STREAM = "cars"
TOPIC = f"{STREAM}.ordered"
SETTINGS = StreamSettings(STREAM, key_fields=("car_id",))
INDEXED = ("speed", "accel", "type")
#: Rare events: one in this many is an ``Alarm``, one in this many has a speed spike.
ALARM_EVERY, SPIKE_EVERY = 1_000_000, 1_000_000

#: The runs of each query besides the full replay (``--variants``).
VARIANTS = ("auto", "all", "none", "spark")
#: A selective and an unselective query per language (name, text).
QUERIES = {
    "tpstream selective": """FROM cars PARTITION BY car_id
DEFINE A AS speed > 200, B AS accel < -2
PATTERN A before B
WITHIN 10 minutes
RETURN first(A.car_id) AS id""",
    "tpstream unselective": """FROM cars PARTITION BY car_id
DEFINE A AS speed > 80, B AS accel > 5
PATTERN A before B
WITHIN 20 minutes
RETURN first(A.car_id) AS id""",
    "sase selective": """PATTERN SEQ(Car a, Car b)
WHERE skip_till_next_match(a, b) { [car_id] and a.speed > 200 and b.accel < -2 }
WITHIN 10 minutes""",
    "sase unselective": """PATTERN SEQ(Car a, Car b)
WHERE skip_till_next_match(a, b) { [car_id] and a.speed > 70 and b.accel < -3 }
WITHIN 10 minutes""",
    "cogra selective": """RETURN car_id, COUNT(*)
PATTERN Alarm S+
SEMANTICS skip-till-any-match
WHERE [car_id]
GROUP-BY car_id
WITHIN 10 minutes SLIDE 10 minutes""",
    "cogra unselective": """RETURN COUNT(*)
PATTERN Car S+
SEMANTICS skip-till-next-match
WHERE [car_id] AND S.speed > NEXT(S).speed
WITHIN 10 minutes SLIDE 10 minutes""",
}
#: Windowed aggregation over single events (E's query form), WITHIN in ticks per slide.
WINDOWS = """RETURN COUNT(*), SUM(E.speed), MIN(E.speed), MAX(E.speed)
PATTERN Car E
SEMANTICS skip-till-any-match
WITHIN {size} seconds SLIDE {slide} seconds"""


def generate(root: Path, events: int, partitions: int, cars: int, block_rows: int,
             segment_rows: int, seed: int) -> None:
    """Write the archive (module doc): per partition segments of ``segment_rows`` rows."""
    rng = np.random.default_rng(seed)
    per_partition = events // partitions
    for partition in range(partitions):
        steps = rng.choice(np.array([0, 1, 2]), per_partition, p=[0.2, 0.6, 0.2])
        ts = np.cumsum(steps).astype(np.int64)
        own_cars = np.arange(partition, cars, partitions)
        car = rng.choice(own_cars, per_partition)
        speed = rng.normal(60.0, 10.0, per_partition).round(2)
        speed[rng.random(per_partition) < 1 / SPIKE_EVERY] = 250.0
        accel = rng.normal(0.0, 3.0, per_partition).round(2)
        kind = np.where(rng.random(per_partition) < 1 / ALARM_EVERY, "Alarm", "Car")
        seq = np.arange(per_partition, dtype=np.int64)
        for first in range(0, per_partition, segment_rows):
            last = min(first + segment_rows, per_partition)
            part = slice(first, last)
            table = pa.table({"ts": ts[part], "car_id": car[part], "type": kind[part],
                              "speed": speed[part], "accel": accel[part], SEQ_FIELD: seq[part],
                              ARCHIVE_SEQ: seq[part], ARCHIVE_OFFSET: seq[part]})
            meta = SegmentMeta(TOPIC, partition, first, last, first, last - 1,
                               int(ts[first]), int(ts[last - 1]))
            write_segment(partition_dir(root, TOPIC, partition), table, meta,
                          block_rows=block_rows)
    open_archive(root).write_settings(TOPIC, SETTINGS)


@dataclass
class Measured:
    seconds: float
    plan_seconds: float
    rows: int
    bytes: int
    estimated_bytes: int | None
    chosen: str
    lines: frozenset[str]
    ran_on: str


def whole_intervals(archive: Archive) -> dict[int, list[Interval]]:
    """One interval per partition spanning all its events: the full replay."""
    whole = {}
    for partition in archive.partitions(TOPIC):
        blocks = archive.blocks(TOPIC, partition)
        whole[partition] = [Interval(min(b.ts_min for b in blocks),
                                     max(b.ts_max for b in blocks))]
    return whole


def timed(work: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = work()
    return result, time.perf_counter() - start


def measure(spark: Any, job: OfflineJob, indexes: str | None, repeat: int,
            driver_rows: int = DRIVER_ROWS) -> Measured:
    """One run of the offline job: ``indexes`` as ``situflow offline --indexes``, None for the
    full replay (every row group, one interval per partition); on the driver when it reads at
    most ``driver_rows`` rows, as ``situflow offline --driver-rows``. Bytes include the
    driver's (widening TPStream and COGRA intervals reads events there)."""
    archive = archive_of(job.uri)
    query = offline_of(job)
    columns = event_columns(query, read_schema(archive, TOPIC, None).names)
    before = archive.bytes_read
    if indexes is None:
        intervals, estimated, chosen, plan_seconds = whole_intervals(archive), None, "-", 0.0
        blocks = {p: archive.blocks(TOPIC, p) for p in intervals}
    else:
        replay_plan, plan_seconds = timed(lambda: plan(query, archive, TOPIC, indexes=indexes))
        intervals, blocks = replay_plan.intervals, replay_plan.blocks
        estimated = int(replay_plan.estimate.bytes)
        chosen = ",".join(replay_plan.chosen) or "none"
    driver = archive.bytes_read - before
    # Best of ``repeat`` as the run below (a query's first plan reads the index manifests and
    # the Parquet footers); a plan of minutes (a forced ``all``) is timed once.
    for _ in range(repeat - 1 if indexes is not None and plan_seconds < 10 else 0):
        plan_seconds = min(plan_seconds,
                           timed(lambda: plan(query, archive, TOPIC, indexes=indexes))[1])

    def complete() -> tuple[OfflineRun, frozenset[str]]:
        # The lines stream from Spark as they are read: reading them is part of the run.
        run = run_offline(lambda: spark, job, intervals, blocks, columns, driver_rows)
        return run, frozenset(run.lines)

    # Best of ``repeat``: the machine is shared, and a worker's first run of a query compiles
    # it (which a replay of millions of events makes negligible: --repeat 1 there).
    (run, lines), seconds = timed(complete)
    for _ in range(repeat - 1):
        seconds = min(seconds, timed(complete)[1])
    return Measured(seconds + plan_seconds, plan_seconds, run.rows_read,
                    run.bytes_read + driver, estimated, chosen, lines, run.ran_on)


def print_row(label: str, variant: str, m: Measured, full: Measured) -> None:
    estimate = "" if m.estimated_bytes is None else "-" if m.bytes == 0 else \
        f"{m.estimated_bytes / m.bytes:8.2f}"
    print(f"{label:<22} {variant:<7} {m.ran_on:<6} {m.chosen:<18} {m.seconds:8.2f} "
          f"{m.plan_seconds:7.2f} "
          f"{m.rows:>11,} {m.bytes:>13,} {estimate:>8} {full.seconds / m.seconds:8.1f}x "
          f"{100 * m.bytes / max(full.bytes, 1):7.2f}% {len(m.lines):>7} "
          f"{'same' if m.lines == full.lines else 'DIFFERENT'}")


def bench_queries(spark: Any, uri: str, fixed_seconds: float, repeat: int,
                  chosen: Sequence[str], variants: Sequence[str] = VARIANTS) -> None:
    print(f"\n{'query':<22} {'indexes':<7} {'on':<6} {'chosen':<18} {'seconds':>8} "
          f"{'plan s':>7} "
          f"{'rows read':>11} {'bytes read':>13} {'est/act':>8} {'speed-up':>9} "
          f"{'bytes':>8} {'results':>7} check")
    rates: dict[str, float] = {}
    for label, text in QUERIES.items():
        if chosen and not any(word in label for word in chosen):
            continue
        options = QueryOptions(name=label.replace(" ", "_"), time_unit=SETTINGS.time_unit,
                               type_field=SETTINGS.type_field)
        job = OfflineJob(uri, TOPIC, text, options, SETTINGS)
        full = measure(spark, job, None, repeat)
        print_row(label, "full", full, full)
        for variant in ("auto", "all", "none"):
            if variant in variants:
                print_row(label, variant, measure(spark, job, variant, repeat), full)
        if "spark" in variants:  # the chosen plan on Spark however few rows: the fixed cost
            print_row(label, "auto", measure(spark, job, "auto", repeat, driver_rows=0), full)
        rates[label] = full.rows / full.seconds
    print(f"\nSpark's fixed cost ({fixed_seconds:.1f} s: session start and first job) equals "
          "the full replay of:")
    for label, rate in rates.items():
        print(f"  {label:<22} {rate * fixed_seconds:>13,.0f} events ({rate:,.0f} events/s)")


def same_windows(left: Sequence[Any], right: Sequence[Any]) -> bool:
    """Whether two window result lists agree (float sums up to rounding: windows.py doc)."""
    def close(a: Any, b: Any) -> bool:
        if isinstance(a, float) or isinstance(b, float):
            return math.isclose(a, b, rel_tol=1e-9)
        return bool(a == b)

    return len(left) == len(right) and all(
        (a.window_start, a.window_end) == (b.window_start, b.window_end)
        and a.values.keys() == b.values.keys()
        and all(close(a.values[k], b.values[k]) for k in a.values)
        for a, b in zip(left, right, strict=True))


def operator_replay(archive: Archive, compiled: Any) -> list[Any]:
    """The COGRA operator over every archived event, in time order across partitions (as
    ``situflow run`` over the whole stream): the baseline without any index."""
    tables = [archive.read(TOPIC, p, columns=["type", "speed"]) for p in archive.partitions(TOPIC)]
    events = pa.concat_tables(tables).sort_by([(SETTINGS.time_field, "ascending"),
                                               (ARCHIVE_SEQ, "ascending")])
    batch = EventBatch.from_arrow(events.select(["ts", "type", "speed"]),
                                  time_field=SETTINGS.time_field)
    operator = compiled.operator()
    return [*operator.process(batch), *operator.finish()]


def bench_windows(archive: Archive, slides: Sequence[int], size: int) -> None:
    """Windowed aggregation from the lightweight indexes against replaying the blocks (E's
    vectorised replay) and against the COGRA operator over every event."""
    from situflow.offline.windows import WindowedAggregation, aggregate_windows, plan_windows

    blocks = {p: archive.blocks(TOPIC, p) for p in archive.partitions(TOPIC)}
    block_span = float(np.median([b.ts_max - b.ts_min + 1 for bs in blocks.values()
                                  for b in bs]))
    print(f"\nwindowed aggregation, WITHIN {size} ticks (~{size / block_span:.0f} blocks per "
          "partition per window)")
    print(f"{'slide':>8} {'index s':>8} {'replay s':>9} {'operator s':>10} {'vs replay':>10} "
          f"{'vs operator':>11} {'cost rule':>9} {'windows':>7} check")

    def read(partition: int, chosen: Sequence[Any], columns: Sequence[str]) -> pa.Table:
        return archive.read_blocks(TOPIC, partition, chosen, columns)

    for slide in slides:
        compiled = compile_query(WINDOWS.format(size=size, slide=slide),
                                 QueryOptions(name="windows", type_field=SETTINGS.type_field))
        aggregation = WindowedAggregation(compiled, time_field=SETTINGS.time_field)
        indexed, index_seconds = timed(lambda a=aggregation: aggregate_windows(
            a, blocks, read, method="index"))
        replayed, replay_seconds = timed(lambda a=aggregation: aggregate_windows(
            a, blocks, read, method="replay"))
        operated, operator_seconds = timed(lambda c=compiled: operator_replay(archive, c))
        # The operator also emits the windows still open at the end of input.
        operated = [r for r in operated if r.window_end <= max(w.window_end for w in indexed)]
        rule = plan_windows(aggregation, blocks).method
        same = same_windows(indexed, replayed) and same_windows(indexed, operated)
        print(f"{slide:>8} {index_seconds:8.2f} {replay_seconds:9.2f} {operator_seconds:10.2f} "
              f"{replay_seconds / index_seconds:9.1f}x {operator_seconds / index_seconds:10.1f}x "
              f"{rule:>9} {len(indexed):>7} {'same' if same else 'DIFFERENT'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--cars", type=int, default=1_000)
    parser.add_argument("--block-rows", type=int, default=16_384)
    parser.add_argument("--segment-rows", type=int, default=1_048_576)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--queries", nargs="*", default=[], metavar="WORD",
                        help="only the queries whose label holds one of these words "
                             "(e.g. cogra, selective)")
    parser.add_argument("--slides", type=int, nargs="*", default=[], metavar="TICKS",
                        help="the windowed aggregation's slides (default: 600, 6,000, 60,000 "
                             "and the window itself)")
    parser.add_argument("--variants", nargs="*", choices=VARIANTS, default=VARIANTS,
                        help="the runs besides the full replay: --indexes auto, all, none, and "
                             "auto on Spark however few rows (spark); default: all four")
    parser.add_argument("--repeat", type=int, default=2,
                        help="runs of each query and variant, the best one reported")
    parser.add_argument("--archive", type=Path, help="keep the archive here, or reuse the one "
                        "kept there (default: a temporary directory, removed at the end)")
    args = parser.parse_args(argv)
    with TemporaryDirectory(prefix="situflow-bench-") as scratch:
        root = args.archive or Path(scratch)
        uri = f"file://{root}"
        if (root / TOPIC).exists():
            # A kept archive (--archive) is reused with its indexes: generating 20M events
            # and indexing them takes minutes.
            print(f"reusing the archive and indexes in {root}")
            archive = open_archive(uri)
        else:
            _, seconds = timed(lambda: generate(root, args.events, args.partitions, args.cars,
                                                args.block_rows, args.segment_rows, args.seed))
            written = sum(f.stat().st_size for f in root.rglob("*.parquet"))
            print(f"generated {args.events:,} events in {args.partitions} partitions, blocks "
                  f"of {args.block_rows:,} rows: {seconds:.1f} s, {written / 1e6:.0f} MB")
            archive = open_archive(uri)
            for attribute in INDEXED:
                # with the stream's key, as `situflow index build` does
                _, seconds = timed(lambda a=attribute: build_index(
                    archive, TOPIC, a, key_fields=SETTINGS.key_fields))
                print(f"secondary index on {attribute}: {seconds:.1f} s")
        # As `situflow index calibrate` does: the cost model's weights measured on this machine
        # and archive (without, the planner uses the thesis' ChronicleDB weights).
        weights, seconds = timed(lambda: calibrate(archive, TOPIC))
        print(f"calibrated in {seconds:.1f} s: {weights}")
        spark, start_seconds = timed(lambda: spark_session(args.master, app="bench-offline"))
        try:
            # A first tiny job pays Python workers' start-up once, as a long-lived job would.
            _, warm_seconds = timed(lambda: spark.range(4, numPartitions=2).count())
            print(f"Spark fixed cost: session start {start_seconds:.1f} s, first job "
                  f"{warm_seconds:.1f} s")
            bench_queries(spark, uri, start_seconds + warm_seconds, args.repeat,
                          args.queries, args.variants)
        finally:
            spark.stop()
        per_partition = args.events // args.partitions
        window = max(100 * args.block_rows, per_partition // 5)
        bench_windows(archive, slides=args.slides or [600, 6_000, 60_000, window], size=window)
    return 0


if __name__ == "__main__":
    sys.exit(main())
