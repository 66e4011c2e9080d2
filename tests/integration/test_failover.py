"""Two workers per service in one consumer group: ``kill -9`` of one loses no result (issue 5).

Each service of the TPStream pipeline (K-slack, deriver, matcher) runs twice
(``Pipeline(replicas=2)``), so each worker owns some of the stream's partitions. Halfway
through the stream one worker of every service is killed; its partitions move to the survivor
when its group session times out (``SITUFLOW_SESSION_TIMEOUT``, 10 s here), and the survivor
resumes them from the changelogged checkpoints. Every result ``situflow run`` finds
arrives, and after de-duplication by result id nothing else does. The test reports how long the
survivors took to own every partition.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers import (
    arrival_order,
    car_events,
    deduplicated_results,
    keyed,
    metrics,
    oracle,
    produce,
    total,
    wait_until,
)
from topics.catalog import StreamSpec, stream_topics
from workers.settings import KafkaSettings
from workers.up import REPO_ROOT, Pipeline, ServiceProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUERY = REPO_ROOT / "situflow/examples/aggressive_drivers.tps"
EVENTS, CARS, SEED, SLACK, PARTITIONS = 10_000, 100, 9, 5, 4
#: The group session timeout bounds detection; the rest is rebalancing and state recovery.
TAKEOVER_BOUND = 60.0


def owned(service: ServiceProcess) -> set[int]:
    """The input partitions the worker owns now (empty while it rebalances)."""
    health = service.health()
    return {p for partitions in health.get("inputs", {}).values() for p in partitions}


def test_a_killed_worker_loses_no_result_and_its_partitions_move_to_the_survivor(
    kafka: KafkaSettings, topic_prefix: str, tmp_path: Path, record_property: Any
) -> None:
    stream = StreamSpec(f"{topic_prefix}.cars", partitions=PARTITIONS, key_fields=("car_id",))
    with Pipeline(stream, QUERY, slack=SLACK, idle_timeout=2.0, kafka=kafka, replicas=2,
                  work_dir=tmp_path / "pipeline", name=f"{topic_prefix}-aggressive") as pipeline:
        events = car_events(EVENTS, CARS, SEED)
        expected = oracle(QUERY, events, pipeline.query_name, tmp_path)
        assert len(expected) >= 5, "the data set should exercise the query"
        messages = [keyed(e, stream.key_fields) for e in arrival_order(events, SLACK, SEED)]
        raw = stream_topics(stream)[0].name
        half = len(messages) // 2
        pairs = {kind: [s for s in pipeline.services.values() if s.kind == kind]
                 for kind in pipeline.service_names}
        wait_until(lambda: all(owned(a) and owned(b) for a, b in pairs.values()), 60,
                   "both workers of every service to own partitions")

        asyncio.run(produce(kafka, raw, messages[:half]))
        derivers = pairs["deriver"]
        wait_until(lambda: sum(total(metrics(d), "situflow_events_in_total")
                               for d in derivers) >= half // 2, 60,
                   "the derivers to be busy with the first half")
        assert set(pairs) == {"kslack", "deriver", "matcher"}
        victims = [workers[0] for workers in pairs.values()]
        for victim in victims:
            victim.process.kill()
            victim.process.wait()
        killed = time.monotonic()
        asyncio.run(produce(kafka, raw, messages[half:]))

        survivors = {kind: workers[1] for kind, workers in pairs.items()}
        took: dict[str, float] = {}  # per service: seconds from the kill to the takeover

        def taken_over() -> bool:
            for kind, survivor in survivors.items():
                if kind not in took and owned(survivor) == set(range(PARTITIONS)):
                    took[kind] = time.monotonic() - killed
            return len(took) == len(survivors)

        wait_until(taken_over, TAKEOVER_BOUND, "the survivors to own every partition")
        for kind, seconds in took.items():
            record_property(f"seconds_from_kill_to_takeover_{kind}", round(seconds, 1))

        topic = pipeline.output_topic
        wait_until(lambda: expected.keys() <= deduplicated_results(kafka, topic).keys(), 90,
                   "every expected result")
        time.sleep(2.0)  # room for a wrong extra result to show up
        assert deduplicated_results(kafka, topic) == expected
