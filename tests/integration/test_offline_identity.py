"""Online/offline identity, end to end (issue #14, acceptance): events produced to the running
services with the archiver give, through ``situflow offline`` over the archive the archiver
wrote, exactly the results the services wrote to the output topics: the same result ids with
the same values, for a TPStream and a SASE+ query over one stream.

The car stream of test_pipeline.py, out of order (K-slack restores it), every event typed
``Car`` for SASE+. The SASE+ query has no ``id`` attribute to bind, so its bindings are input
seqs (``_situflow_seq``): the archive must keep them for the ids to agree. The barrier cars
end every partition, so the services have evaluated every event once their matches arrived.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from situflow.settings import KafkaSettings
from tests.integration.helpers import (
    arrival_order,
    barrier,
    barrier_cars,
    car_events,
    deduplicated_results,
    id_of,
    keyed,
    metrics,
    oracle,
    produce_at_once,
    total,
    wait_until,
)
from topics.catalog import StreamSpec, stream_topics
from topics.registry import submit
from workers.up import REPO_ROOT, Pipeline

pytestmark = pytest.mark.integration

TPSTREAM = REPO_ROOT / "situflow/examples/aggressive_drivers.tps"
#: Hard acceleration, then hard braking of the same car within 20 s.
SASE = """PATTERN SEQ(Car a, Car b)
WHERE skip_till_next_match(a, b) { [car_id] and a.accel > 8 and b.accel < -9 }
WITHIN 20 seconds
"""
EVENTS, CARS, SEED, SLACK = 6_000, 60, 9, 5


def typed(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**event, "type": "Car"} for event in events]


@pytest.fixture
def pipeline(kafka: KafkaSettings, topic_prefix: str, tmp_path: Path) -> Iterator[Pipeline]:
    """K-slack, deriver, matcher and archiver over cars; both queries registered before the
    services start (the matcher begins SASE+ queries at the end offsets it finds)."""
    stream = StreamSpec(f"{topic_prefix}.cars", partitions=3, key_fields=("car_id",))
    registry = f"{topic_prefix}.queries"
    sase = tmp_path / "brake.sase"
    sase.write_text(SASE)
    asyncio.run(submit(kafka, SASE, name=sase_name(stream), source_path=str(sase),
                       topic=registry, stream=stream))
    env = {"SITUFLOW_ARCHIVE_SEGMENT_ROWS": "1000", "SITUFLOW_ARCHIVE_SEGMENT_SECONDS": "1"}
    with Pipeline(stream, TPSTREAM, slack=SLACK, idle_timeout=2.0, kafka=kafka,
                  work_dir=tmp_path / "pipeline", name=f"{topic_prefix}-aggressive",
                  registry_topic=registry, service_names=("kslack", "deriver", "matcher"),
                  archive=True, extra_env=env) as running:
        yield running


def sase_name(stream: StreamSpec) -> str:
    return f"{stream.name}-brake"


def archive_settled(pipeline: Pipeline) -> bool:
    """Whether the archiver has consumed every message and written every segment."""
    values = metrics(pipeline.services["archiver"])
    lags = [v for k, v in values.items() if k.startswith("situflow_consumer_lag{")]
    return bool(lags) and not any(lags) and total(values, "situflow_archive_open_rows") == 0


def archive_uri(pipeline: Pipeline) -> str:
    assert pipeline.work_dir is not None
    return f"file://{pipeline.work_dir / 'archive'}"


def situflow(*args: str) -> str:
    """A ``situflow`` command that must succeed; its standard output."""
    done = subprocess.run([sys.executable, "-m", "situflow.cli", *args],
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def offline(query: Path, name: str, pipeline: Pipeline, tmp_path: Path, *options: str
            ) -> dict[str, Any]:
    """``situflow offline`` over the pipeline's archive: its result lines by result id."""
    output = tmp_path / f"{name}-offline.jsonl"
    situflow("offline", str(query), "--archive", archive_uri(pipeline), "--stream",
             pipeline.stream.name, "--name", name, "--output", str(output), "--master",
             "local[2]", *options)
    return {id_of(r): r for r in map(json.loads, output.read_text().splitlines())}


@pytest.mark.slow
def test_situflow_offline_over_the_archive_gives_the_services_results(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    kafka = pipeline.kafka
    assert kafka is not None
    sase = tmp_path / "brake.sase"
    events = typed(car_events(EVENTS, CARS, SEED))
    ending = typed(barrier(events, barrier_cars(pipeline.stream.partitions)))
    queries = ((TPSTREAM, pipeline.query_name), (sase, sase_name(pipeline.stream)))
    expected = {name: oracle(query, events + ending, name, tmp_path) for query, name in queries}
    assert all(len(results) >= 5 for results in expected.values()), "a workload for both"
    raw = stream_topics(pipeline.stream)[0].name
    messages = [keyed(e, ("car_id",)) for e in arrival_order(events, SLACK, SEED) + ending]
    asyncio.run(produce_at_once(kafka, raw, messages))  # no idle flush amid the jittered stream

    online = {}
    for name, results in expected.items():
        topic = f"matches.{name}"
        # As many as situflow run's (the SASE+ ids differ from its: its seqs are line numbers).
        wait_until(lambda t=topic, r=results: len(deduplicated_results(kafka, t)) >= len(r),
                   120, f"the services' results in {topic}")
        online[name] = deduplicated_results(kafka, topic)
    wait_until(lambda: archive_settled(pipeline), 60, "the archiver to write every event")

    for query, name in queries:  # pruned by the lightweight indexes (no secondary one yet),
        # replayed on the driver (a few rows)
        assert offline(query, name, pipeline, tmp_path) == online[name], name
    situflow("index", "build", "--archive", archive_uri(pipeline), "--topic",
             f"{pipeline.stream.name}.ordered", "--attributes", "accel,speed", "--master",
             "local[2]")
    for query, name in queries:  # and by the secondary indexes, on Spark however few rows
        assert offline(query, name, pipeline, tmp_path, "--indexes", "all", "--driver-rows",
                       "0") == online[name], name
