"""A matcher whose registry reader is held back loses none of a new query's situations.

The deriver and the matcher read the query registry each on their own. Here the matcher's
reader applies every record ``HELD_BACK`` seconds late (``SITUFLOW_TEST_REGISTRY_DELAY``), so
the first situations of a query submitted while the services run reach the matcher well over
``REGISTRY_WAIT`` seconds before it has read the query (which used to drop them): it waits for
its reader (``situflow_registry_wait_seconds`` while it does, a warning each
``REGISTRY_WAIT`` seconds, ``situflow_registry_waits_total``), then matches them. The results
are ``situflow run``'s on the whole stream, with no restart. The decision alone, with its
timeout: ``tests/workers/test_registry_waits.py``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from situflow.settings import KafkaSettings
from tests.integration.helpers import (
    arrival_order,
    car_events,
    deduplicated_results,
    evaluates,
    keyed,
    metrics,
    oracle,
    produce,
    total,
    wait_until,
    wait_until_evaluated,
)
from topics.catalog import StreamSpec, stream_topics
from workers.query_source import REGISTRY_WAIT
from workers.up import REPO_ROOT, Pipeline

pytestmark = pytest.mark.integration

QUERY = REPO_ROOT / "situflow/examples/aggressive_drivers.tps"
EVENTS, CARS, SEED, SLACK = 20_000, 100, 5, 5
HELD_BACK = 4 * REGISTRY_WAIT


def test_a_matcher_behind_on_the_registry_waits_for_its_reader_and_loses_nothing(
    kafka: KafkaSettings, topic_prefix: str, tmp_path: Path
) -> None:
    events = car_events(EVENTS, CARS, SEED)
    name = f"{topic_prefix}-aggressive"
    expected = oracle(QUERY, events, name, tmp_path)
    assert len(expected) >= 3, "the stream should exercise the query"

    stream = StreamSpec(f"{topic_prefix}.cars", partitions=2, key_fields=("car_id",))
    with Pipeline(stream, slack=SLACK, idle_timeout=1.0, kafka=kafka,
                  work_dir=tmp_path / "pipeline",
                  service_names=("kslack", "deriver")) as pipeline:
        pipeline.extra_env["SITUFLOW_TEST_REGISTRY_DELAY"] = str(HELD_BACK)
        matcher = pipeline.start_service("matcher")
        pipeline.wait_ready()
        deriver = pipeline.services["deriver"]

        pipeline.submit(QUERY, name)
        wait_until(lambda: evaluates(deriver, name), 30,
                   "the deriver to evaluate the submitted query")
        assert not evaluates(matcher, name), "the matcher's registry reader is held back"
        messages = [keyed(e, stream.key_fields) for e in arrival_order(events, SLACK, SEED)]
        asyncio.run(produce(kafka, stream_topics(stream)[0].name, messages))
        wait_until(lambda: total(metrics(matcher), "situflow_registry_wait_seconds")
                   > 1.5 * REGISTRY_WAIT, HELD_BACK,
                   "the matcher to wait for its reader longer than REGISTRY_WAIT")
        wait_until_evaluated(pipeline, len(events))

        assert deduplicated_results(kafka, f"matches.{name}") == expected
        assert total(metrics(matcher), "situflow_registry_waits_total") >= 1
        assert "for the registry reader to reach the registration" in matcher.log_tail(200)
        assert matcher.process.poll() is None, "the matcher waited, it did not restart"
