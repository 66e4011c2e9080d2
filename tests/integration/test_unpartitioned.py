"""Unpartitioned TPStream through a real broker (thesis §5.6.3/§5.6.5, issue 5).

The stream is declared unpartitioned: its input has one partition, K-slack restores the one
global event-time order and cuts it into numbered batches spread over the four partitions of
``<stream>.ordered``, two deriver workers derive them in parallel, and one matcher per query
merges the situation batches, which reach it out of order, in sequence and matches them. The
car stream is produced out of order (disorder at most K), so the services see it in K-slack's
order: by time, ties in arrival order; ``situflow run`` on the events in that order is the
oracle. Two queries: one without PARTITION BY (a single global key) registered before the
stream, and one partitioned by car (several keys per batch), registered halfway through it,
which begins at the batch K-slack cut after reading its registration and so must give
``situflow run``'s results on the events from that batch on. A second test kills one of the
two derivers and K-slack mid-stream: no result is lost.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from situflow.cli import main
from situflow.settings import ENV_BOOTSTRAP, KafkaSettings
from situflow.tpstream.split.messages import SituationMessage
from tests.integration.helpers import (
    arrival_order,
    assert_same_results,
    barrier_cars,
    car_events,
    deduplicated_results,
    metrics,
    oracle_with_barrier,
    produce,
    read_topic,
    run_cli,
    total,
    wait_until,
    wait_until_evaluated,
)
from topics.catalog import StreamSpec, stream_topics
from topics.registry import ENV_TOPIC
from workers.up import Pipeline, ServiceProcess

pytestmark = pytest.mark.integration

#: Conditions that hold in runs of several seconds even when four cars' readings interleave.
GLOBAL = """FROM CarSensors
DEFINE F AS speed > 50 AT LEAST 3s,
       H AS accel > 1 AND speed > 45,
       S AS speed < 50 BETWEEN 2s AND 40s
PATTERN H during;starts;finishes F AND F meets;before S
WITHIN 2 minutes
RETURN count(F) AS n, max(H.accel) AS peak, avg(S.speed) AS slow;
"""
PER_CAR = GLOBAL.replace("FROM CarSensors", "FROM CarSensors PARTITION BY car_id")
# 2,000 s of four cars; seed 1 gives 48 global and 280 per-car matches. Batches span at most
# 40 s: about 50 batches, many situations crossing their boundaries.
EVENTS, CARS, SEED, SLACK, PARTITIONS = 8_000, 4, 1, 5, 4
BATCH_ENV = {"SITUFLOW_BATCH_SPAN": "40"}


def arrivals() -> list[dict[str, Any]]:
    return arrival_order(car_events(EVENTS, CARS, SEED), SLACK, SEED)


def in_kslack_order(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The order K-slack releases them in: by time, ties in arrival order."""
    return sorted(events, key=lambda e: e["ts"])


def messages(events: list[dict[str, Any]]) -> list[tuple[None, bytes]]:
    return [(None, json.dumps(e).encode()) for e in events]


def query_file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.tps"
    path.write_text(text)
    return path


def owned(service: ServiceProcess) -> set[int]:
    return {p for partitions in service.health().get("inputs", {}).values() for p in partitions}


@pytest.fixture
def pipeline(kafka: KafkaSettings, topic_prefix: str, tmp_path: Path) -> Iterator[Pipeline]:
    stream = StreamSpec(f"{topic_prefix}.cars", partitions=PARTITIONS, unpartitioned=True)
    with Pipeline(stream, query_file(tmp_path, "global", GLOBAL), slack=SLACK, idle_timeout=2.0,
                  kafka=kafka, work_dir=tmp_path / "pipeline", name=f"{topic_prefix}-global",
                  replicas={"deriver": 2}, extra_env=BATCH_ENV) as running:
        derivers = [s for s in running.services.values() if s.kind == "deriver"]
        wait_until(lambda: all(owned(d) for d in derivers), 60,
                   "both derivers to own ordered partitions")
        yield running


def test_unpartitioned_queries_give_situflow_runs_results_from_batches_derived_in_parallel(
        pipeline: Pipeline, topic_prefix: str, tmp_path: Path, record_property: Any) -> None:
    kafka = pipeline.kafka
    assert kafka is not None and pipeline.situations_topic is not None
    raw = stream_topics(pipeline.stream)[0].name
    events = arrivals()
    ordered = in_kslack_order(events)
    half = len(events) // 2

    asyncio.run(produce(kafka, raw, messages(events[:half])))
    kslack = pipeline.services["kslack"]
    wait_until(lambda: total(metrics(kslack), "situflow_events_out_total") >= half // 2, 60,
               "K-slack to batch a quarter of the stream")
    per_car = f"{topic_prefix}-per-car"
    pipeline.submit(query_file(tmp_path, "per-car", PER_CAR), per_car)
    asyncio.run(produce(kafka, raw, messages(events[half:])))
    wait_until_evaluated(pipeline, EVENTS)

    expected = run_cli(pipeline.query_file, ordered, pipeline.query_name, tmp_path)  # type: ignore[arg-type]
    assert len(expected) >= 40, "the data set should exercise the query"
    assert_same_results(asyncio.run(read_topic(kafka, pipeline.output_topic)), expected)

    situations = [SituationMessage.decode(r.value)
                  for r in asyncio.run(read_topic(kafka, pipeline.situations_topic))]
    by_query: dict[str, list[int]] = {}
    for message in situations:
        assert message.batch is not None
        by_query.setdefault(message.query, []).append(message.batch.seq)
    arrived = by_query[pipeline.query_name]
    assert sorted(arrived) == list(range(max(arrived) + 1)), "every batch, once"
    assert arrived != sorted(arrived), "batches derived in parallel reach the matcher out of order"
    derived = [total(metrics(d), "situflow_events_in_total")
               for d in pipeline.services.values() if d.kind == "deriver"]
    assert len(derived) == 2 and all(derived), "both derivers derive batches"

    (start,) = [m.batch for m in situations if m.query == per_car and m.starts]
    assert start is not None and start.span is not None
    record_property("per_car_query_begins_at_batch", start.seq)
    assert 0 < start.seq == min(by_query[per_car])
    begun = run_cli(query_file(tmp_path, "per-car", PER_CAR), ordered[start.span[0]:], per_car,
                    tmp_path)
    assert len(begun) >= 20, "the registration should come early enough to exercise the query"
    assert_same_results(asyncio.run(read_topic(kafka, f"matches.{per_car}")), begun)

    gauges = metrics(pipeline.services["matcher"])
    assert gauges[f"situflow_merge_waiting_for{{query={pipeline.query_name},service=matcher}}"] \
        == max(arrived) + 1
    assert total(gauges, "situflow_merge_pending_batches") == 0


@pytest.mark.slow
def test_a_deriver_and_k_slack_killed_mid_stream_lose_no_result(
        pipeline: Pipeline, tmp_path: Path, record_property: Any) -> None:
    """kill -9 of one of the two derivers and of K-slack halfway. K-slack restarts from its
    checkpoint and cuts and numbers the batches it sent again as before; the dead deriver's
    partitions move to the survivor, which derives their batches again from the last commit.
    The matcher waits for the missing batches and drops the repeated ones: every result
    arrives, and after de-duplication by id nothing else."""
    kafka = pipeline.kafka
    assert kafka is not None
    raw = stream_topics(pipeline.stream)[0].name
    events = arrivals()
    expected, ending = oracle_with_barrier(
        pipeline.query_file, in_kslack_order(events), barrier_cars(1),  # type: ignore[arg-type]
        pipeline.query_name, tmp_path)
    half = len(events) // 2
    victim, survivor = [s for s in pipeline.services.values() if s.kind == "deriver"]

    asyncio.run(produce(kafka, raw, messages(events[:half])))
    wait_until(lambda: total(metrics(victim), "situflow_events_in_total") > 0, 60,
               "the deriver to be killed to derive batches")
    for service in (victim, pipeline.services["kslack"]):
        service.process.kill()
        service.process.wait()
    killed = time.monotonic()
    pipeline.start_service("kslack")
    asyncio.run(produce(kafka, raw, messages(events[half:] + ending)))
    matcher = pipeline.services["matcher"]
    waiting: list[float] = []  # batches waiting in the matcher's merger, while it takes over

    def taken_over() -> bool:
        waiting.append(total(metrics(matcher), "situflow_merge_pending_batches"))
        return owned(survivor) == set(range(PARTITIONS))

    wait_until(taken_over, 60, "the surviving deriver to own every ordered partition")
    record_property("seconds_from_kill_to_takeover", round(time.monotonic() - killed, 1))
    record_property("most_batches_waiting_for_a_missing_one", max(waiting))

    topic = pipeline.output_topic
    wait_until(lambda: expected.keys() <= deduplicated_results(kafka, topic).keys(), 90,
               "every expected result, the barrier's among them")
    assert deduplicated_results(kafka, topic) == expected
    # The barrier's last batches (its idle tail) may still be on their way to the merger.
    wait_until(lambda: total(metrics(matcher), "situflow_merge_pending_batches") == 0, 30,
               "the merger to have no batch waiting")
    assert total(metrics(matcher), "situflow_dlq_messages_total") == 0, "no batch was refused"


def test_topics_create_gives_an_unpartitioned_stream_one_input_partition(
        kafka: KafkaSettings, topic_prefix: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The one ordering point of the global order; the batches spread over the ordered topic."""
    monkeypatch.setenv(ENV_BOOTSTRAP, kafka.bootstrap_servers)
    monkeypatch.setenv(ENV_TOPIC, f"{topic_prefix}.queries")
    stream = f"{topic_prefix}.sensors"
    assert main(["topics", "create", "--stream", stream, "--partitions", "3",
                 "--unpartitioned", "--situations", f"{topic_prefix}.situations"]) == 0
    assert {f"created  {stream} (1 partition)", f"created  {stream}.ordered (3 partitions)",
            f"created  {stream}.late (1 partition)"} <= set(capsys.readouterr().out.splitlines())
