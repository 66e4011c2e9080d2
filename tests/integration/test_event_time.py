"""One event-time rule in the CLI and the services (issue #12, SEMANTICS.md "Event time and
types"): a stream of milliseconds, half of its events with ISO-8601 times, through the services
with ``time_unit=0.001`` gives what ``situflow run --time-unit 0.001`` gives, and that is what
the same stream in integer milliseconds gives (``WITHIN 5 minutes`` is 300,000 ticks in both)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from situflow.settings import KafkaSettings
from tests.integration.helpers import (
    assert_same_results,
    car_events,
    keyed,
    produce,
    read_topic,
    run_cli,
    unique_prefix,
    wait_until_evaluated,
)
from topics.catalog import StreamSpec
from workers.up import REPO_ROOT, Pipeline

pytestmark = pytest.mark.integration

QUERY = REPO_ROOT / "situflow/examples/aggressive_drivers.tps"
EVENTS, CARS, SEED = 6_000, 60, 9
START_MS = 1_714_564_800_000  # 2024-05-01T12:00:00Z


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def test_iso_and_millisecond_times_mean_the_same_in_the_cli_and_the_services(
        kafka: KafkaSettings, tmp_path) -> None:
    seconds = car_events(EVENTS, CARS, SEED)
    millis = [dict(e, ts=START_MS + 1000 * e["ts"] + 250) for e in seconds]
    mixed = [dict(e, ts=iso(e["ts"])) if i % 2 else e for i, e in enumerate(millis)]
    name = f"{unique_prefix()}-ms"
    expected = run_cli(QUERY, mixed, name, tmp_path, "--time-unit", "0.001")
    assert expected == run_cli(QUERY, millis, name, tmp_path, "--time-unit", "0.001")
    assert len(expected) >= 3, "the data set should exercise the query"
    stream = StreamSpec(f"{name}.cars", partitions=2, key_fields=("car_id",), time_unit=0.001)
    with Pipeline(stream, QUERY, idle_timeout=2.0, kafka=kafka, work_dir=tmp_path / "pipeline",
                  name=name) as pipeline:
        asyncio.run(produce(kafka, stream.name, [keyed(e, ("car_id",)) for e in mixed]))
        wait_until_evaluated(pipeline, len(mixed))
        results = asyncio.run(read_topic(kafka, pipeline.output_topic))
    assert_same_results(results, expected)
