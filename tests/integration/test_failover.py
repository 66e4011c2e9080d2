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
from aiokafka import AIOKafkaProducer
from aiokafka.structs import ConsumerRecord

from situflow.codecs.arrow_events import decode_batch, events_from_batch
from situflow.settings import KafkaSettings, ServiceSettings
from tests.integration.helpers import (
    arrival_order,
    barrier_cars,
    car_events,
    deduplicated_results,
    in_barrier,
    in_blocks,
    keyed,
    metrics,
    oracle_with_barrier,
    produce,
    produce_at_once,
    read_topic,
    total,
    wait_until,
    wait_until_evaluated,
)
from topics.catalog import SEQ_FIELD, StreamSpec, stream_topics
from workers.app import MAX_STATE_BYTES
from workers.up import REPO_ROOT, Pipeline, ServiceProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUERY = REPO_ROOT / "situflow/examples/aggressive_drivers.tps"
EVENTS, CARS, SEED, SLACK, PARTITIONS = 10_000, 100, 9, 5, 4
#: Ticks per block of the stream (:func:`in_blocks`): 100 cars read each tick.
BLOCK_TICKS = 10
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
        expected, ending = oracle_with_barrier(QUERY, events, barrier_cars(PARTITIONS),
                                               pipeline.query_name, tmp_path)
        assert sum(not in_barrier(r, events) for r in expected.values()) >= 5, \
            "the data set should exercise the query"
        # Two halves by event time, each jittered within blocks of time (in_blocks): the kill
        # may outlast K-slack's idle timeout after it caught up with the first half, and its
        # flush then makes no event of the second half late. The kill is not put off until
        # that flush: it is to come while the services are busy.
        blocks = [[keyed(e, stream.key_fields) for e in arrival_order(block, SLACK, SEED)]
                  for block in in_blocks(events, BLOCK_TICKS)]
        halves = [[m for block in blocks[:len(blocks) // 2] for m in block],
                  [m for block in blocks[len(blocks) // 2:] for m in block]]
        raw = stream_topics(stream)[0].name
        half = len(halves[0])
        pairs = {kind: [s for s in pipeline.services.values() if s.kind == kind]
                 for kind in pipeline.service_names}
        wait_until(lambda: all(owned(a) and owned(b) for a, b in pairs.values()), 60,
                   "both workers of every service to own partitions")

        asyncio.run(produce(kafka, raw, halves[0]))
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
        asyncio.run(produce(kafka, raw, halves[1] + [keyed(e, stream.key_fields)
                                                     for e in ending]))

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
                   "every expected result, the barrier's among them")
        assert deduplicated_results(kafka, topic) == expected
        assert total(metrics(survivors["kslack"]), "situflow_late_events_total") == 0


def test_services_that_restore_an_older_checkpoint_read_their_input_again_from_it(
    kafka: KafkaSettings, topic_prefix: str, tmp_path: Path
) -> None:
    """K-slack, deriver and matcher restart on a checkpoint older than their group's committed
    offsets: one that a worker which had lost the partitions wrote after the new owner's (a
    "zombie"), as the group could also have committed messages Faust skipped."""
    stream = StreamSpec(f"{topic_prefix}.cars", partitions=PARTITIONS, key_fields=("car_id",))
    with Pipeline(stream, QUERY, slack=SLACK, idle_timeout=1.0, kafka=kafka,
                  work_dir=tmp_path / "pipeline", name=f"{topic_prefix}-aggressive") as pipeline:
        events = car_events(EVENTS, CARS, SEED)
        cars = barrier_cars(PARTITIONS)
        expected, ending = oracle_with_barrier(QUERY, events, cars, pipeline.query_name, tmp_path)
        # Three parts by event time, so that no event is late after K-slack flushed the part
        # before when its input paused; each part of a partition in one record batch, so that
        # it does not flush in the middle of one (helpers.produce_at_once).
        end = events[-1]["ts"] + 1
        parts = [[keyed(e, stream.key_fields) for e in arrival_order(
            [e for e in events if i * end <= 3 * e["ts"] < (i + 1) * end], SLACK, SEED)]
            for i in range(3)]
        raw, ordered = (spec.name for spec in stream_topics(stream)[:2])
        changelogs = [f"situflow-{name}-{stream.name}-{table}-changelog" for name, table in
                      (("kslack", "buffers"), ("deriver", "derivers"), ("matcher", "matchers"))]

        def checkpoints() -> list[ConsumerRecord[bytes, bytes]]:
            """The last checkpoint of every partition of every service."""
            # the ticks of idle partitions checkpoint them
            time.sleep(2 * ServiceSettings.from_env().checkpoint_interval)
            latest = {(r.topic, r.partition): r for topic in changelogs
                      for r in asyncio.run(read_topic(kafka, topic))}
            return list(latest.values())

        asyncio.run(produce_at_once(kafka, raw, parts[0]))
        wait_until_evaluated(pipeline, len(parts[0]))
        older = checkpoints()
        asyncio.run(produce_at_once(kafka, raw, parts[1]))
        wait_until_evaluated(pipeline, len(parts[0]) + len(parts[1]))
        assert checkpoints() != older, "the services should have checkpointed part 1"
        for service in pipeline.services.values():
            service.process.terminate()
            service.process.wait()
        asyncio.run(write(kafka, older))  # after the newer ones: what the restarts restore
        asyncio.run(produce(kafka, raw, parts[2] + [keyed(e, stream.key_fields) for e in ending]))
        for name in list(pipeline.services):
            pipeline.start_service(name)
        pipeline.wait_ready()

        topic = pipeline.output_topic
        wait_until(lambda: expected.keys() <= deduplicated_results(kafka, topic).keys(), 90,
                   "every expected result, the barrier's among them")
        assert deduplicated_results(kafka, topic) == expected

        # What K-slack read again it sent again, each event with the same position (partition,
        # sequence number), which downstream recognises repeats by. (The barrier's last events
        # wait for the idle flush, which the results did not need.)
        sequenced: dict[tuple[int, int], dict[str, Any]] = {}
        for record in asyncio.run(read_topic(kafka, ordered)):
            for event in events_from_batch(decode_batch(record.value)):
                position = (record.partition, event.pop(SEQ_FIELD))
                assert sequenced.setdefault(position, event) == event, \
                    f"{position} sent with two events"
        by_time = lambda e: (e["car_id"], e["ts"])  # noqa: E731
        sent = [e for e in sequenced.values() if e["car_id"] not in cars]
        assert sorted(sent, key=by_time) == sorted(events, key=by_time)


async def write(kafka: KafkaSettings, records: list[ConsumerRecord[bytes, bytes]]) -> None:
    """Append ``records`` again, each to its own topic partition."""
    async with AIOKafkaProducer(**kafka.client_kwargs(), max_request_size=MAX_STATE_BYTES) \
            as producer:
        for r in records:
            await producer.send_and_wait(r.topic, r.value, key=r.key, partition=r.partition)
