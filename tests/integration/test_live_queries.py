"""Queries submitted to and deleted from the registry while the services run (issue 5).

The stream comes in three parts, each flushed out of K-slack (idle timeout) before the next.
The aggressive-drivers query is submitted after the first part and deleted after the second:
its results are exactly those of ``situflow run`` on the second part alone. A query starts
from the events after its submission with a fresh state, and a deleted one emits nothing more;
no service restarts. The second part is produced as soon as the deriver evaluates the query,
whether or not the matcher has read the registration yet: the matcher waits for it
(:mod:`workers.situation_matching`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.integration.helpers import (
    arrival_order,
    car_events,
    deduplicated_results,
    keyed,
    oracle,
    produce,
    wait_until,
    wait_until_evaluated,
)
from topics.catalog import StreamSpec, stream_topics
from workers.settings import KafkaSettings
from workers.up import REPO_ROOT, Pipeline, ServiceProcess

pytestmark = pytest.mark.integration

QUERY = REPO_ROOT / "situflow/examples/aggressive_drivers.tps"
EVENTS, CARS, SEED, SLACK = 60_000, 200, 9, 5


def test_a_query_runs_from_its_submission_until_its_deletion(
    kafka: KafkaSettings, topic_prefix: str, tmp_path: Path
) -> None:
    events = car_events(EVENTS, CARS, SEED)
    end = max(e["ts"] for e in events) + 1
    parts = [[e for e in events if k * end // 3 <= e["ts"] < (k + 1) * end // 3]
             for k in range(3)]
    name = f"{topic_prefix}-aggressive"
    expected = oracle(QUERY, parts[1], name, tmp_path)
    assert len(expected) >= 3, "the middle part should exercise the query"

    stream = StreamSpec(f"{topic_prefix}.cars", partitions=4, key_fields=("car_id",))
    with Pipeline(stream, slack=SLACK, idle_timeout=1.0, kafka=kafka,
                  work_dir=tmp_path / "pipeline",
                  service_names=("kslack", "deriver", "matcher")) as pipeline:
        deriver, matcher = pipeline.services["deriver"], pipeline.services["matcher"]
        pids = {s.name: s.process.pid for s in pipeline.services.values()}
        raw = stream_topics(stream)[0].name
        produced = 0

        def feed(part: list[dict[str, object]]) -> None:
            nonlocal produced
            messages = [keyed(e, stream.key_fields) for e in arrival_order(part, SLACK, SEED)]
            asyncio.run(produce(kafka, raw, messages))
            produced += len(part)
            wait_until_evaluated(pipeline, produced)

        def evaluating(service: ServiceProcess) -> bool:
            return name in service.health().get("queries", ())

        feed(parts[0])
        pipeline.submit(QUERY, name)
        wait_until(lambda: evaluating(deriver), 30, "the deriver to evaluate the submitted query")
        feed(parts[1])
        assert evaluating(matcher)
        pipeline.delete(name)
        wait_until(lambda: not evaluating(deriver) and not evaluating(matcher), 30,
                   "the services to drop the deleted query")
        feed(parts[2])

        assert deduplicated_results(kafka, f"matches.{name}") == expected
        assert {s.name: s.process.pid for s in pipeline.services.values()} == pids
        assert all(s.process.poll() is None for s in pipeline.services.values())
