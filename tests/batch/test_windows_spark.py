"""Windowed aggregation on Spark (batch/windows.py): the partial blocks replayed in Spark tasks
or on the driver give the COGRA operator's results over the archived events, in its format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark", reason="the Spark tests need the spark extra")

from batch.windows import (  # noqa: E402
    WindowJob,
    aggregation_of,
    answers,
    run_windows,
    windows_bytes_read,
)
from situflow.archive import ArchiveError, open_archive  # noqa: E402
from situflow.archive.importer import import_events  # noqa: E402
from situflow.cli import main as cli_main  # noqa: E402
from situflow.events import EventBatch  # noqa: E402
from situflow.offline.windows import plan_windows  # noqa: E402
from situflow.operator import QueryOptions  # noqa: E402
from situflow.trends.query import compile  # noqa: E402
from tests.archive.archives import write_partition, write_stream  # noqa: E402

QUERY = ("RETURN COUNT(*), SUM(E.v), MIN(E.v), MAX(E.v), AVG(E.v) PATTERN Reading E "
         "SEMANTICS skip-till-any-match WHERE E.v > 2 WITHIN 400 SLIDE 150")
GROUPED = ("RETURN car, COUNT(*), SUM(E.v) PATTERN Reading E SEMANTICS contiguous "
           "WHERE [car] GROUP-BY car WITHIN 400 SLIDE 150")
TOPIC = "sensors.ordered"


def events_of(partition: int, n: int) -> list[dict[str, Any]]:
    """Runs of readings above the predicate's bound, of other events, and of readings on both
    sides of it: blocks of 10 rows that the statistics answer, skip, or replay."""
    return [{"ts": 3 * i + partition, "type": "Other" if i % 60 >= 50 else "Reading",
             "v": (7 * i + partition) % 11 + (0 if i % 40 < 10 else 3),
             "car": 2 * (i // 25 % 3) + partition} for i in range(n)]


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    root = tmp_path_factory.mktemp("archive")
    write_stream(root, TOPIC)
    every = []
    for partition in (0, 1):
        events = events_of(partition, 300)
        write_partition(root, TOPIC, partition, [events[:130], events[130:]], block_rows=10)
        every += events
    return root, sorted(every, key=lambda e: e["ts"])


def operator_lines(events: list[dict[str, Any]], query: str = QUERY) -> list[str]:
    op = compile(query).operator()
    results = op.process(EventBatch.from_records(events)) + op.finish()
    return [json.dumps(r.to_dict()) for r in results]


def job(root: Path, query: str = QUERY) -> WindowJob:
    archive = open_archive(root)
    settings = archive.settings(TOPIC)
    assert settings is not None
    return WindowJob(root.as_uri(), TOPIC, query, QueryOptions(), settings)


def no_spark() -> Any:
    raise AssertionError("a small replay needs no Spark session")


def test_partial_blocks_replayed_in_spark_tasks_give_the_operators_results(
        spark: Any, archive: tuple[Path, list[dict[str, Any]]]) -> None:
    root, events = archive
    on_spark = run_windows(lambda: spark, job(root), method="index", driver_rows=0)
    on_driver = run_windows(no_spark, job(root), method="index")
    assert on_spark.lines == on_driver.lines == operator_lines(events)
    grouped = run_windows(lambda: spark, job(root, GROUPED), method="index", driver_rows=0)
    assert grouped.lines == operator_lines(events, GROUPED)
    assert grouped.plan.whole_blocks > 0 and len(grouped.plan.whole.groups) == 6
    assert on_spark.plan.whole_blocks > 0 and on_spark.plan.skipped_blocks > 0
    assert f"blocks from statistics: {on_spark.plan.whole_blocks}" in on_spark.plan.explain()
    assert 0 < on_spark.rows_read == on_driver.rows_read < len(events)
    assert on_spark.bytes_read == on_driver.bytes_read == on_driver.estimated_bytes > 0
    rows, size = on_spark.rows_read, on_spark.bytes_read
    assert f"read: {rows} rows, {size} bytes (estimated {rows} rows, {size} bytes)" in \
        on_spark.explain()


def test_which_queries_run_windows_answers() -> None:
    assert answers(QUERY, QueryOptions()) and answers(GROUPED, QueryOptions())
    assert not answers("RETURN COUNT(*) PATTERN Reading E+ SEMANTICS contiguous WITHIN 10",
                       QueryOptions())
    assert not answers("PATTERN SEQ(A a, B b) WITHIN 10 seconds", QueryOptions())


def test_bytes_read_by_the_index_method_and_by_full_replay(
        archive: tuple[Path, list[dict[str, Any]]]) -> None:
    root, events = archive
    full = run_windows(no_spark, job(root), method="replay")
    assert full.lines == operator_lines(events) and full.rows_read == len(events)
    source = open_archive(root)
    aggregation = aggregation_of(job(root))
    blocks = {p: source.blocks(TOPIC, p) for p in source.partitions(TOPIC)}
    index_plan = plan_windows(aggregation, blocks, method="index")
    replay_plan = plan_windows(aggregation, blocks, method="replay")
    assert windows_bytes_read(source, TOPIC, replay_plan, aggregation) == full.bytes_read
    assert 0 < windows_bytes_read(source, TOPIC, index_plan, aggregation) < full.bytes_read


def test_an_attribute_the_archive_lacks_is_an_error(
        archive: tuple[Path, list[dict[str, Any]]]) -> None:
    root, _ = archive
    with pytest.raises(ArchiveError, match="'w'"):
        run_windows(no_spark, job(root, QUERY.replace("E.v", "E.w")))


@pytest.mark.parametrize("query", [
    "RETURN COUNT(*), SUM(E.v), MIN(E.v), MAX(E.v), AVG(E.v) PATTERN Reading E SEMANTICS "
    "skip-till-any-match WITHIN 10 minutes SLIDE 1 minute",
    "RETURN car, COUNT(*), AVG(E.v) PATTERN Reading E SEMANTICS contiguous WHERE E.v >= 40 "
    "GROUP-BY car WITHIN 7 minutes SLIDE 3 minutes",
])
def test_imported_events_give_the_results_of_situflow_run(tmp_path: Path, query: str) -> None:
    """``situflow archive import`` of an events file, then the windows from the archive, equal
    ``situflow run`` on the file (times in seconds, windows in minutes; two partitions by car,
    duplicate timestamps, runs of other events and of missing values)."""
    events = tmp_path / "events.jsonl"
    with events.open("w") as out:
        for i in range(2_000):
            event = {"ts": i // 2 * 3 + i % 2, "car": i % 4 if i % 500 < 250 else 4,
                     "type": "Other" if 900 <= i < 1000 or i % 97 == 0 else "Reading"}
            if not 1200 <= i < 1300:
                event["v"] = (i * 37) % 40 + (0 if 1500 <= i < 1600 else 40)
            out.write(json.dumps(event) + "\n")
    query_file = tmp_path / "speeds.cogra"
    query_file.write_text(query)
    expected = tmp_path / "expected.jsonl"
    assert cli_main(["run", str(query_file), "--input", str(events), "--output",
                     str(expected)]) == 0
    root = tmp_path / "archive"
    import_events(events, str(root), "cars", key_fields=("car",), partitions=2, block_rows=16,
                  segment_rows=256)
    settings = open_archive(root).settings("cars.ordered")
    assert settings is not None
    run = run_windows(no_spark, WindowJob(str(root), "cars.ordered", query,
                                          QueryOptions(name="speeds"), settings))
    assert run.lines == expected.read_text().splitlines()
    assert run.plan.rows_from_index > 0
