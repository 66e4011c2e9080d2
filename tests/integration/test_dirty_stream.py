"""Dirty data never stops the services (issue #12, point 6, "services"): a fuzzed mix through a
real broker and the kslack, deriver and matcher processes.

Valid car events (some with ISO-8601 times, some with a speed beyond 64 bits, which is a number)
are produced with bad messages of every kind between them: keys that are lists, objects or beyond
64 bits, speeds of text, booleans, lists and objects (the typing rule of the query), times of
every wrong type, invalid JSON, a 5 MB message, an empty one, a tombstone. Before the stream, a
mistyped event is the *first* event of every partition, and again the first after an idle flush
(it once decided the types of every later event).

Specified: no service restarts (same pids, healthy); every bad message is in ``<stream>.dlq``
once with a reason (kslack's unchanged, a mistyped event as the JSON event it was, with the query
in its reason); no good event is there; the matches equal ``situflow run`` on the good events.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from aiokafka.structs import ConsumerRecord

from situflow.settings import KafkaSettings
from tests.integration.helpers import (
    Message,
    assert_same_results,
    car_events,
    keyed,
    produce,
    read_topic,
    run_cli,
    unique_prefix,
    wait_until_evaluated,
)
from topics.catalog import DLQ_REASON_HEADER, StreamSpec, stream_topics
from workers.up import REPO_ROOT, Pipeline

pytestmark = pytest.mark.integration

QUERY = REPO_ROOT / "situflow/examples/aggressive_drivers.tps"
EVENTS, CARS, SEED, PARTITIONS = 6_000, 60, 9, 2
IDLE = 2.0


def bad_json(i: int, **fields: Any) -> bytes:
    return json.dumps({"bad": i, "ts": 0, "car_id": 1, "speed": 1, "accel": 0, **fields}).encode()


#: Bad messages kslack refuses (kept unchanged in the DLQ), by the reason's words.
REFUSED: dict[str, tuple[Any, str]] = {
    "list key": (lambda i: bad_json(i, car_id=[i]), "found a list"),
    "object key": (lambda i: bad_json(i, car_id={"id": i}), "found an object"),
    "key beyond 64 bits": (lambda i: bad_json(i, car_id=2**70 + i), "beyond 64 bits"),
    "no key": (lambda i: json.dumps({"bad": i, "ts": 0}).encode(), "missing partition attribute"),
    "fraction time": (lambda i: bad_json(i, ts=0.5), "whole number"),
    "boolean time": (lambda i: bad_json(i, ts=True), "found a boolean"),
    "text time": (lambda i: bad_json(i, ts="noon"), "neither an integer nor ISO-8601"),
    "time beyond 64 bits": (lambda i: bad_json(i, ts=2**70), "64-bit range"),
    "invalid JSON": (lambda i: b'{"bad": %d, "ts": ' % i, "invalid JSON"),
    "not an object": (lambda i: json.dumps([i]).encode(), "expected a JSON object"),
    "empty": (lambda i: b"", "invalid JSON"),
    "tombstone": (lambda i: None, "empty message"),
    "5 MB": (lambda i: bad_json(i, note="x" * (5 << 20)), "exceeds the limit"),
}
#: Events the query's typing rule rejects (the deriver sends each alone, as JSON).
MISTYPED = {
    "text speed": ("abc", "attribute 'speed' must be a number, found text"),
    "boolean speed": (True, "must be a number, found a boolean"),
    "list speed": ([80], "must be a number, found a list"),
    "object speed": ({"v": 80}, "must be a number, found an object"),
}


@dataclass
class Run:
    pipeline: Pipeline
    pids: dict[str, int]
    expected: list[dict[str, Any]]
    results: list[ConsumerRecord[bytes, bytes]]
    dead: list[ConsumerRecord[bytes, bytes]]
    refused: dict[int, str]  # bad number -> reason words
    mistyped: dict[int, str]


def iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


@pytest.fixture(scope="module")
def run(kafka: KafkaSettings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp_path = tmp_path_factory.mktemp("dirty")
    name = f"{unique_prefix()}-dirty"
    good = car_events(EVENTS, CARS, SEED)
    for i, event in enumerate(good):
        if i % 7 == 0:
            event["ts"] = iso(event["ts"])  # the same time, as text
        if i % 11 == 0:
            event["speed"] = 2**70  # a number where a number is expected: good
    expected = run_cli(QUERY, good, name, tmp_path)
    assert len(expected) >= 3, "the data set should exercise the query"
    messages: list[Message] = [keyed(e, ("car_id",)) for e in good]
    refused: dict[int, str] = {}
    mistyped: dict[int, str] = {}
    number = 0
    for k in range(300):  # spread through the stream, in time order with its neighbours
        at = (k + 1) * len(messages) // 301
        kinds = [*REFUSED, *MISTYPED]
        kind = kinds[k % len(kinds)]
        number += 1
        if kind in REFUSED:
            make, words = REFUSED[kind]
            refused[number] = words
            messages.insert(at, (json.dumps(["bad", number]).encode(), make(number)))
        else:
            value, words = MISTYPED[kind]
            neighbour = json.loads(messages[at - 1][1])
            event = dict(neighbour, bad=number, speed=value)
            mistyped[number] = words
            messages.insert(at, keyed(event, ("car_id",)))
    first: list[Message] = []
    for car in range(PARTITIONS * 4):  # the first event of every partition is mistyped
        number += 1
        mistyped[number] = "found text"
        first.append(keyed({"bad": number, "ts": 0, "car_id": car, "speed": "fast",
                            "accel": "hard"}, ("car_id",)))
    stream = StreamSpec(f"{name}.cars", partitions=PARTITIONS, key_fields=("car_id",))
    with Pipeline(stream, QUERY, idle_timeout=IDLE, kafka=kafka, work_dir=tmp_path / "pipeline",
                  name=name) as pipeline:
        pids = {n: s.process.pid for n, s in pipeline.services.items()}
        asyncio.run(produce(kafka, stream.name, first))
        time.sleep(3 * IDLE)  # flushed: the next mistyped event is the first after the flush
        again = []
        for car in range(PARTITIONS * 4):
            number += 1
            mistyped[number] = "found a list"
            again.append(keyed({"bad": number, "ts": 0, "car_id": car, "speed": [1]},
                               ("car_id",)))
        asyncio.run(produce(kafka, stream.name, again + messages))
        wait_until_evaluated(pipeline, len(good) + len(mistyped), timeout=240)
        dead = asyncio.run(read_topic(kafka, stream_topics(stream)[3].name))
        results = asyncio.run(read_topic(kafka, pipeline.output_topic))
        yield Run(pipeline, pids, expected, results, dead, refused, mistyped)


def test_no_service_restarts(run: Run) -> None:
    for name, service in run.pipeline.services.items():
        assert service.process.poll() is None, f"{name} exited:\n{service.log_tail()}"
        assert service.process.pid == run.pids[name], f"{name} restarted"
        assert service.health()["ready"], name


def test_every_bad_message_is_dead_lettered_once_with_its_reason(run: Run) -> None:
    found: dict[int, list[str]] = {}
    for record in run.dead:
        reason = dict(record.headers)[DLQ_REASON_HEADER].decode()
        if record.key is not None and record.key.startswith(b'["bad"'):
            number = json.loads(record.key)[1]
        else:
            number = int(json.loads(record.value)["bad"])  # a float: a NaN column
        found.setdefault(number, []).append(reason)
    expected = {**run.refused, **run.mistyped}
    assert sorted(found) == sorted(expected), "each bad message, and no good event"
    wrong = {n: (reasons, expected[n]) for n, reasons in found.items()
             if len(reasons) != 1 or expected[n] not in reasons[0]}
    assert not wrong
    for number in run.mistyped:
        assert found[number][0].startswith(f"query {run.pipeline.query_name}: "), found[number]


def test_the_good_events_give_the_results_of_situflow_run_on_them_alone(run: Run) -> None:
    assert_same_results(run.results, run.expected)
