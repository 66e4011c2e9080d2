"""Queries submitted to and deleted from the registry while the services run (issue 5).

The stream comes in three parts, each flushed out of K-slack (idle timeout) before the next;
each part reaches each input partition as one record batch, so that K-slack cannot flush a
partition in the middle of a part (``produce_at_once``).
The aggressive-drivers query is submitted after the first part and deleted after the second:
its results are exactly those of ``situflow run`` on the second part alone. A query starts
from the events after its submission with a fresh state, and a deleted one emits nothing more;
no service restarts. The second part is produced as soon as the deriver evaluates the query,
whether or not the matcher has read the registration yet: the matcher waits for it
(:mod:`situflow.tpstream.split.halves`).

The matcher fetches ``<stream>.ordered`` only while a SASE+ query is registered: a SASE+ query
submitted after the first half of a stock stream gives ``situflow run``'s results on the second
half alone, and the matcher read no ordered message before it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
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
    produce_at_once,
    total,
    wait_until,
    wait_until_evaluated,
)
from topics.catalog import StreamSpec, stream_topics
from workers.up import REPO_ROOT, Pipeline

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
            asyncio.run(produce_at_once(kafka, raw, messages))
            produced += len(part)
            wait_until_evaluated(pipeline, produced)

        feed(parts[0])
        pipeline.submit(QUERY, name)
        wait_until(lambda: evaluates(deriver, name), 30,
                   "the deriver to evaluate the submitted query")
        feed(parts[1])
        assert evaluates(matcher, name)
        pipeline.delete(name)
        wait_until(lambda: not evaluates(deriver, name) and not evaluates(matcher, name), 30,
                   "the services to drop the deleted query")
        feed(parts[2])

        assert deduplicated_results(kafka, f"matches.{name}") == expected
        assert {s.name: s.process.pid for s in pipeline.services.values()} == pids
        assert all(s.process.poll() is None for s in pipeline.services.values())


SASE = REPO_ROOT / "situflow/examples/rising_stocks.sase"  # WITHIN 1 hour, [symbol]


def test_the_matcher_fetches_the_ordered_events_only_while_a_sase_query_is_registered(
    kafka: KafkaSettings, topic_prefix: str, tmp_path: Path
) -> None:
    """Without a SASE+ query, the matcher pauses ``<stream>.ordered`` (its TPStream queries
    read the situations topic); a SASE+ query submitted later evaluates the events after its
    submission, not those written while the topic was paused: its results are ``situflow
    run``'s on the second part of the stream alone."""
    events = stock_events()
    end = max(e["ts"] for e in events) + 1
    parts = [[e for e in events if k * end // 2 <= e["ts"] < (k + 1) * end // 2]
             for k in range(2)]
    name = f"{topic_prefix}-rising"
    expected = oracle(SASE, parts[1], name, tmp_path)
    assert len(expected) >= 3, "the second part should exercise the query"

    stream = StreamSpec(f"{topic_prefix}.stocks", partitions=4, key_fields=("symbol",))
    ordered = stream_topics(stream)[1].name
    with Pipeline(stream, slack=SLACK, idle_timeout=1.0, kafka=kafka,
                  work_dir=tmp_path / "pipeline",
                  service_names=("kslack", "matcher")) as pipeline:
        matcher = pipeline.services["matcher"]
        raw = stream_topics(stream)[0].name
        produced = 0

        def feed(part: list[dict[str, object]]) -> None:
            nonlocal produced
            messages = [keyed(e, stream.key_fields) for e in part]
            asyncio.run(produce(kafka, raw, messages))
            produced += len(part)
            wait_until_evaluated(pipeline, produced)

        def fetching() -> bool:
            return ordered in matcher.health()["inputs"]

        wait_until(lambda: not fetching(), 30, "the matcher to pause the ordered events")
        feed(parts[0])
        assert total(metrics(matcher), "situflow_messages_in_total", topic=ordered) == 0
        pipeline.submit(SASE, name)
        wait_until(fetching, 30, "the matcher to fetch the ordered events again")
        feed(parts[1])

        assert deduplicated_results(kafka, f"matches.{name}") == expected


def stock_events() -> list[dict[str, object]]:
    """Quotes of 8 stocks every 10 s for 5,000 s, in time order; ids are the positions."""
    rng = np.random.default_rng(SEED)
    price = np.full(8, 100.0)
    events: list[dict[str, object]] = []
    for tick in range(500):
        price = np.maximum(1.0, price + rng.normal(0.05, 1.0, 8))
        # Volumes above 1,000 start the query's runs: rare, to keep the results few.
        volume = np.where(rng.random(8) < 0.03, rng.integers(1001, 3000, 8),
                          rng.integers(100, 1000, 8))
        events += [{"id": len(events) + s, "type": "Stock", "ts": tick * 10, "symbol": f"S{s}",
                    "price": round(float(price[s]), 2), "volume": int(volume[s])}
                   for s in range(8)]
    return events
