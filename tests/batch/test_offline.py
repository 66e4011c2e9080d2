"""``situflow offline`` on Spark gives exactly ``situflow run``'s results over the same events,
for the bundled example queries of the three languages, by full replay and by index-pruned
replay with every index choice (thesis §3.4; research §4.2, AT-08)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batch.index_build import build_indexes
from situflow.archive.importer import import_events
from situflow.cli import main
from situflow.datagen.cars import car_columns
from tests.profiles import scaled

EXAMPLES = Path(__file__).parents[2] / "situflow" / "examples"


def cars(n: int = 20_000, count: int = 20) -> list[dict[str, Any]]:
    """The aggressive-drivers stream (situflow.datagen.cars), ``n`` readings."""
    c = car_columns(n, count, seed=3)
    return [{"ts": int(t), "car_id": int(i), "speed": float(s), "accel": float(a)}
            for t, i, s, a in zip(c["ts"], c["car_id"], c["speed"], c["accel"], strict=True)]


def stocks(n: int = 3_000, seed: int = 5, spacing: int = 1,
           volume: int = 3_000) -> list[dict[str, Any]]:
    """Three stocks of two sectors, a quote every ``spacing`` seconds (two at a time: repeated
    times), random walks."""
    rng = np.random.default_rng(seed)
    prices = {"ACME": 100.0, "BOLT": 50.0, "CORE": 75.0}
    sector = {"ACME": "tech", "BOLT": "energy", "CORE": "tech"}
    rows = []
    for i in range(n):
        symbol = str(rng.choice(list(prices)))
        prices[symbol] = max(1.0, prices[symbol] + float(rng.choice([-1.0, 0.0, 1.0, 2.0])))
        rows.append({"ts": (i - i % 2) * spacing, "type": "Stock", "symbol": symbol, "company": symbol,
                     "sector": sector[symbol], "price": prices[symbol],
                     "volume": int(rng.integers(1, volume))})
    return rows


def archive(root: Path, stream: str, events: Sequence[dict[str, Any]],
            key_fields: tuple[str, ...] = (), segment_rows: int = 1_000,
            block_rows: int = 100) -> Path:
    """``events`` as a JSON-lines file for ``situflow run``, imported into ``stream`` of the
    archive at ``root`` (several segments and blocks), as ``situflow archive import`` does."""
    path = root / f"{stream}.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    import_events(path, str(root), stream, key_fields=key_fields, segment_rows=segment_rows,
                  block_rows=block_rows)
    return path


def run(query: Path, events: Path, out: Path) -> list[str]:
    assert main(["run", str(query), "--input", str(events), "--output", str(out)]) == 0
    return out.read_text().splitlines()


def offline(query: Path, root: Path, stream: str, out: Path, *options: str) -> list[str]:
    assert main(["offline", str(query), "--archive", str(root), "--stream", stream,
                 "--output", str(out), *options]) == 0
    return out.read_text().splitlines()


#: Per example: the stream, its events, the stream's key (the query's partition attributes, as
#: the services' stream would have: the indexes' per-key seq is the stream's) and the
#: attributes to index.
WORKLOADS = {
    "aggressive_drivers.tps": ("cars", cars, ("car_id",), ["speed", "accel"]),
    "aggressive_drivers_edbt.tps": ("cars", cars, ("car_id",), ["accel", "speed"]),
    # Fewer, sparser quotes: a Kleene pattern over an hour has many results.
    "rising_stocks.sase": ("stocks", lambda: stocks(1_000, spacing=20, volume=1_500),
                           ("symbol",), ["volume", "price"]),
    # COGRA prunes by the pattern's event types only (WHERE compares events with each other).
    "downtrends.cogra": ("stocks", stocks, ("company", "sector"), ["type"]),
    "rising_trends.cogra": ("stocks", stocks, ("symbol",), ["type"]),
}


@pytest.mark.parametrize("example", sorted(WORKLOADS))
def test_full_replay_equals_run(spark, tmp_path, example):
    stream, generate, keys, _ = WORKLOADS[example]
    events = archive(tmp_path, stream, generate(), key_fields=keys)
    expected = run(EXAMPLES / example, events, tmp_path / "run.jsonl")
    assert expected, "the workload should give the query results to compare"
    found = offline(EXAMPLES / example, tmp_path, stream, tmp_path / "offline.jsonl", "--indexes", "none")
    assert found == expected


def test_at08_each_interval_is_replayed_with_a_fresh_operator(spark, tmp_path):
    """Research AT-08: (A,B,C,D) contiguous with indexes on B and C; a concatenated pruned
    stream would add the match (5,6,8,9) across the gap between the two intervals."""
    query = tmp_path / "abcd.sase"
    query.write_text("PATTERN SEQ(E a, E b, E c, E d) WHERE strict_contiguity(a, b, c, d) "
                     "{ a.v = 1 AND b.v = 2 AND c.v = 3 AND d.v = 4 } WITHIN 5 seconds")
    values = [1, 2, 3, 4, 1, 2, 9, 3, 4, 9, 2, 3, 9]
    events = archive(tmp_path, "abcd", [{"ts": t, "type": "E", "v": v, "id": t}
                                        for t, v in enumerate(values, start=1)], block_rows=2)
    build_indexes(spark, str(tmp_path), "abcd.ordered", ["v"])
    expected = run(query, events, tmp_path / "run.jsonl")
    assert [json.loads(line)["bindings"] for line in expected] == [
        {"a": [1], "b": [2], "c": [3], "d": [4]}]
    for indexes in ("v", "all", "auto", "none"):
        assert offline(query, tmp_path, "abcd", tmp_path / "offline.jsonl",
                       "--indexes", indexes) == expected


def test_a_query_error_points_at_the_query_file(spark, tmp_path, capsys):
    archive(tmp_path, "stocks", stocks(50))
    query = tmp_path / "bad.sase"
    query.write_text("PATTERN SEQ(Stock a, Stock b)\nWHERE skip_till_next_match(a, b) "
                     "{ a.price > }\nWITHIN 1 hour")
    assert main(["offline", str(query), "--archive", str(tmp_path), "--stream", "stocks"]) == 2
    assert f"{query}:2:" in capsys.readouterr().err


def test_an_attribute_the_archive_lacks_is_an_error(spark, tmp_path, capsys):
    archive(tmp_path, "stocks", stocks(50))
    query = tmp_path / "q.sase"
    query.write_text("PATTERN SEQ(Stock a, Stock b) WHERE skip_till_next_match(a, b) "
                     "{ a.bid > 10 AND b.price > a.price } WITHIN 1 hour")
    assert main(["offline", str(query), "--archive", str(tmp_path), "--stream", "stocks"]) == 1
    assert "'bid'" in capsys.readouterr().err


def test_a_range_without_data_is_an_error(spark, tmp_path, capsys):
    archive(tmp_path, "stocks", stocks(50))
    assert main(["offline", str(EXAMPLES / "rising_stocks.sase"), "--archive", str(tmp_path),
                 "--stream", "stocks", "--from", "5000", "--to", "6000"]) == 1
    assert "no data in the range 5000..6000" in capsys.readouterr().err


@pytest.mark.parametrize("example", sorted(WORKLOADS))
def test_pruned_replay_equals_run(spark, tmp_path, example):
    stream, generate, keys, attributes = WORKLOADS[example]
    events = archive(tmp_path, stream, generate(), key_fields=keys)
    build_indexes(spark, str(tmp_path), f"{stream}.ordered", attributes)
    expected = run(EXAMPLES / example, events, tmp_path / "run.jsonl")
    for indexes in ("auto", "all", attributes[0]):
        assert offline(EXAMPLES / example, tmp_path, stream, tmp_path / "offline.jsonl",
                       "--indexes", indexes) == expected, indexes


def test_explain_shows_the_plan_and_what_was_read(spark, tmp_path, capsys):
    archive(tmp_path, "stocks", stocks(500), key_fields=("symbol",))
    build_indexes(spark, str(tmp_path), "stocks.ordered", ["volume"])
    offline(EXAMPLES / "rising_stocks.sase", tmp_path, "stocks", tmp_path / "out.jsonl",
            "--explain", "--indexes", "volume")
    err = capsys.readouterr().err
    assert "plan for stocks.ordered" in err and "intervals:" in err
    assert "actual:" in err and "estimated" in err


def test_a_plan_of_few_rows_replays_on_the_driver_without_starting_spark(tmp_path, capsys,
                                                                         monkeypatch):
    import batch.session

    def no_spark(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a Spark session was started")

    monkeypatch.setattr(batch.session, "spark_session", no_spark)
    events = archive(tmp_path, "stocks", stocks(2_000), key_fields=("symbol",))
    expected = run(EXAMPLES / "rising_stocks.sase", events, tmp_path / "run.jsonl")
    assert len(expected) > 10
    for indexes in ("auto", "none"):
        assert offline(EXAMPLES / "rising_stocks.sase", tmp_path, "stocks",
                       tmp_path / "out.jsonl", "--indexes", indexes, "--driver-rows", "2000",
                       "--explain") == expected
        assert "replayed on the driver (--driver-rows 2000)" in capsys.readouterr().err
    with pytest.raises(AssertionError, match="Spark session"):
        offline(EXAMPLES / "rising_stocks.sase", tmp_path, "stocks", tmp_path / "out.jsonl",
                "--driver-rows", "1999")


def test_the_spark_submit_entry_point_runs_the_offline_command(spark, tmp_path):
    """``spark-submit batch/submit.py ...`` (or ``python -m batch.submit``) takes the
    command's arguments."""
    from batch.submit import main as submitted

    events = archive(tmp_path, "stocks", stocks(300))
    expected = run(EXAMPLES / "downtrends.cogra", events, tmp_path / "run.jsonl")
    assert submitted([str(EXAMPLES / "downtrends.cogra"), "--archive", str(tmp_path),
                      "--stream", "stocks", "--output", str(tmp_path / "out.jsonl")]) == 0
    assert (tmp_path / "out.jsonl").read_text().splitlines() == expected


def test_a_windowed_aggregation_is_answered_from_the_blocks(spark, tmp_path, capsys):
    """A COGRA query over single events (thesis §3.3) goes to batch/windows.py: whole blocks
    answer from their statistics, partial ones are replayed; the results are situflow run's."""
    query = tmp_path / "volume.cogra"
    query.write_text("RETURN symbol, COUNT(*), SUM(S.volume), MAX(S.price) PATTERN Stock S "
                     "SEMANTICS contiguous WHERE [symbol] GROUP-BY symbol "
                     "WITHIN 10 minutes SLIDE 3 minutes")
    events = archive(tmp_path, "stocks", stocks(3_000))
    expected = run(query, events, tmp_path / "run.jsonl")
    assert offline(query, tmp_path, "stocks", tmp_path / "out.jsonl", "--explain") == expected
    assert "read:" in capsys.readouterr().err


def test_an_unpartitioned_stream_over_several_partitions_is_refused(spark, tmp_path, capsys):
    """K-slack deals an unpartitioned stream's batches round-robin over the ordered topic's
    partitions: no partition alone is a substream to replay."""
    from tests.archive.archives import write_partition, write_stream

    write_stream(tmp_path, "stocks.ordered")
    for partition in (0, 1):
        write_partition(tmp_path, "stocks.ordered", partition, [stocks(20)])
    assert main(["offline", str(EXAMPLES / "rising_stocks.sase"), "--archive", str(tmp_path),
                 "--stream", "stocks"]) == 1
    assert "unpartitioned stream archived over 2 partitions (0, 1)" in capsys.readouterr().err


def test_a_gap_in_the_archive_stops_the_query_unless_allowed(spark, tmp_path, capsys):
    archive(tmp_path, "stocks", stocks(300), segment_rows=100)
    middle = sorted((tmp_path / "stocks.ordered" / "partition=0").glob("*.parquet"))[1]
    middle.unlink()
    command = ["offline", str(EXAMPLES / "downtrends.cogra"), "--archive", str(tmp_path),
               "--stream", "stocks", "--output", str(tmp_path / "out.jsonl")]
    assert main(command) == 1
    assert "seq 100..199 missing" in capsys.readouterr().err
    assert main([*command, "--allow-gaps"]) == 0
    assert "warning: gap:" in capsys.readouterr().err


def test_a_keyed_stream_over_several_partitions_through_the_import_command(spark, tmp_path,
                                                                          capsys):
    """``situflow archive import --partitions 2`` spreads the cars over two partitions by key;
    offline evaluation replays each on its own and gives the results of ``situflow run`` (in
    emission-time order across partitions, which the services do not order)."""
    events = tmp_path / "cars.jsonl"
    events.write_text("".join(json.dumps(e) + "\n" for e in cars()))
    assert main(["archive", "import", str(events), "--archive", str(tmp_path), "--stream",
                 "cars", "--key-fields", "car_id", "--partitions", "2"]) == 0
    assert "20000 events of cars imported into cars.ordered" in capsys.readouterr().out
    build_indexes(spark, str(tmp_path), "cars.ordered", ["speed", "accel"])
    query = EXAMPLES / "aggressive_drivers.tps"
    expected = run(query, events, tmp_path / "run.jsonl")
    for indexes in ("none", "auto"):
        found = offline(query, tmp_path, "cars", tmp_path / "offline.jsonl", "--indexes", indexes)
        assert sorted(found) == sorted(expected)
        times = [json.loads(line)["emitted_at"] for line in found]
        assert times == sorted(times)


def test_ranges_that_share_a_row_group_are_replayed_by_one_task_which_reads_it_once():
    from batch.offline import replay_tasks
    from situflow.archive import Block
    from situflow.offline.intervals import Interval

    blocks = [Block("s0", g, 10, 10 * g, 10 * g + 9, 10 * g, 10 * g + 9) for g in range(6)]
    ranges = [Interval(50, 55), Interval(2, 5), Interval(7, 12), Interval(33, 36)]
    planned = [blocks[0], blocks[1], blocks[3], blocks[5]]
    tasks = replay_tasks({0: ranges, 1: [Interval(0, 9)]}, {0: planned, 1: blocks[:1]}, 99)
    # ranges 1 and 2 share the first row group; each other range has its own
    assert [(t.partition, t.ranges, [b.row_group for b in t.blocks], t.rows) for t in tasks] == [
        (0, (1, 2), [0, 1], 20), (0, (3,), [3], 10), (0, (0,), [5], 10), (1, (0,), [0], 10)]
    # fewer tasks wanted: neighbours of one partition join up to an equal share of the rows
    joined = replay_tasks({0: ranges, 1: [Interval(0, 9)]}, {0: planned, 1: blocks[:1]}, 2)
    assert [(t.partition, t.ranges, t.rows) for t in joined] == [(0, (1, 2), 20),
                                                                 (0, (3, 0), 20), (1, (0,), 10)]
    with pytest.raises(ValueError, match="overlap"):
        replay_tasks({0: [Interval(0, 5), Interval(5, 9)]}, {0: blocks}, 1)


def range_results(table: Any) -> SimpleNamespace:
    """What the replay stage's :class:`batch.offline.RangeResults` accumulator holds after it
    gave the result rows ``table``: per range, the last emission time and the number."""
    from batch.offline import INTERVAL, PARTITION

    found: dict[tuple[int, int], tuple[int, int]] = {}
    for row in table.to_pylist():
        last, n = found.get((row[PARTITION], row[INTERVAL]), (row["order_ts"], 0))
        found[row[PARTITION], row[INTERVAL]] = (max(last, row["order_ts"]), n + 1)
    return SimpleNamespace(value=found)


def test_results_are_merged_in_full_replay_order_and_deduplicated_across_ranges(spark):
    import pyarrow as pa

    from batch.offline import INTERVAL, PARTITION, full_replay_order

    rows = [  # (order_ts, order_seq, partition, range, result id)
        (5, 0, 0, 1, "c"), (3, 0, 0, 0, "a"), (3, 1, 0, 0, "a"), (4, 2, 0, 0, "b"),
        (4, 1, 1, 0, "b"), (6, 1, 0, 1, "d"), (2, 0, 1, 0, "e"),
    ]
    table = pa.table({"order_ts": [r[0] for r in rows], "order_seq": [r[1] for r in rows],
                      PARTITION: [r[2] for r in rows], INTERVAL: [r[3] for r in rows],
                      "result_id": [r[4] for r in rows],
                      "json": [f"{r[4]}@{r[2]}.{r[3]}" for r in rows]})
    # a range keeps its own repeated id (a), a later range loses one an earlier range gave (b)
    found = full_replay_order(spark.createDataFrame(table.to_pandas()), range_results(table))
    assert list(found) == ["e@1.0", "a@0.0", "a@0.0", "b@0.0", "c@0.1", "d@0.1"]


def test_many_results_stream_to_the_output_in_sorted_chunks(spark, tmp_path, monkeypatch):
    """Tens of thousands of results, sorted by Spark in many small chunks: the output is
    ``situflow run``'s, and the driver pulls the rows one by one as it writes them (never a
    list of all results)."""
    from collections.abc import Iterator

    import batch.offline

    query = tmp_path / "pairs.sase"
    query.write_text("PATTERN SEQ(Stock a, Stock b) WHERE skip_till_any_match(a, b) "
                     "{ [symbol] and b.price > a.price } WITHIN 30 seconds")
    events = tmp_path / "stocks.jsonl"
    events.write_text("".join(json.dumps(e) + "\n" for e in stocks()))
    for stream, partitions in (("one", "1"), ("two", "2")):
        assert main(["archive", "import", str(events), "--archive", str(tmp_path), "--stream",
                     stream, "--key-fields", "symbol", "--partitions", partitions]) == 0
    expected = run(query, events, tmp_path / "run.jsonl")
    assert len(expected) > 20_000
    monkeypatch.setattr(batch.offline, "CHUNK_ROWS", 1_000)
    pulled = [0]
    frames = type(spark.range(1))  # the session's DataFrame class (pyspark.sql.classic's)
    to_local_iterator = frames.toLocalIterator

    def counted(frame: Any, prefetchPartitions: bool = False) -> Iterator[Any]:
        for row in to_local_iterator(frame, prefetchPartitions):
            pulled[0] += 1
            yield row

    write = batch.offline._write

    def spy(lines: Iterator[str], output: Path, tap: Any = None) -> None:
        assert isinstance(lines, Iterator)
        pulled[0] = 0
        first = next(lines)
        assert pulled[0] == 1  # the first line is written after one row, not after them all
        write(itertools.chain([first], lines), output, tap)
        assert pulled[0] == len(expected)

    monkeypatch.setattr(frames, "toLocalIterator", counted)
    monkeypatch.setattr(batch.offline, "_write", spy)
    out = tmp_path / "offline.jsonl"
    assert offline(query, tmp_path, "one", out, "--indexes", "none") == expected
    # Two partitions: situflow run's results, merged by emission time.
    found = offline(query, tmp_path, "two", out, "--indexes", "none")
    assert sorted(found) == sorted(expected)
    times = [json.loads(line)["emitted_at"] for line in found]
    assert times == sorted(times)


@pytest.mark.slow  # a few Spark jobs per example
@settings(max_examples=scaled(0.1), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.lists(st.tuples(st.integers(0, 9), st.sampled_from("abcdef")),
                                  max_size=5), min_size=1, max_size=3), min_size=1, max_size=3))
def test_spark_sorts_results_as_the_merge_by_emission_time_orders_them(spark, partitions):
    """Whatever the emission times (not even rising within a range), the order and the
    de-duplication are those of ``heapq.merge`` of the partitions' results in full-replay order
    by emission time, keeping an id in the range that gave it first."""
    import heapq

    import pyarrow as pa

    from batch.offline import INTERVAL, PARTITION, full_replay_order

    rows = [(ts, seq, p, r, result_id) for p, ranges in enumerate(partitions)
            for r, results in enumerate(ranges) for seq, (ts, result_id) in enumerate(results)]
    merged = heapq.merge(*([row for row in rows if row[2] == p] for p in range(len(partitions))),
                         key=lambda row: row[0])
    first: dict[str, tuple[int, int]] = {}
    expected = [f"{i}@{p}.{r}.{seq}" for _, seq, p, r, i in merged
                if first.setdefault(i, (p, r)) == (p, r)]
    # The replay stage gives each range's running maximum of the emission time.
    running = [max(ts for ts, seq, p, r, _ in rows[:k + 1] if (p, r) == row[2:4] and seq <= row[1])
               for k, row in enumerate(rows)]
    table = pa.table({"result_id": [r[4] for r in rows], "order_ts": pa.array(running, pa.int64()),
                      "order_seq": pa.array([r[1] for r in rows], pa.int64()),
                      "json": [f"{r[4]}@{r[2]}.{r[3]}.{r[1]}" for r in rows],
                      PARTITION: pa.array([r[2] for r in rows], pa.int32()),
                      INTERVAL: pa.array([r[3] for r in rows], pa.int32())})
    frame = spark.createDataFrame(table.to_pandas(), "result_id string, order_ts long, order_seq "
                                  f"long, json string, {PARTITION} int, {INTERVAL} int")
    assert list(full_replay_order(frame, range_results(table))) == expected
