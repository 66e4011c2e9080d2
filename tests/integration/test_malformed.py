"""Bad input never stops a service (issue 5): 1,000 malformed messages through a real broker.

The car stream (valid JSON events, keyed by ``car_id``) is produced with 1,000 malformed
messages of every kind spread through it: bad JSON, event times of the wrong type (float,
boolean, object, array, null, a string that is no ISO-8601 time, beyond int64), JSON that is
no object, a missing event time or partition attribute, invalid UTF-8, ``NaN``, empty and null
(tombstone) messages, events over the JSON codec's size limit, and Arrow IPC messages that do
not fit (no time column, a string, float or null-holding time column, no partition attribute,
garbage, JSON or a truncated stream under the Arrow content type).

Specified: each malformed message is in ``<stream>.dlq`` once, unchanged, with a reason header
that names what is wrong with it; the valid events are evaluated as if the bad ones were not
there (the results equal ``situflow run`` on the valid events); the K-slack service keeps
running (same process, healthy) and counts the 1,000 in ``situflow_dlq_messages``.

The same holds one hop further for the matcher: malformed situation batches written to the
situations topic (bad JSON, no batch object, bad records, records the query's matcher rejects)
are in ``<situations>.dlq`` with their reasons, and the matcher keeps running.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest
from aiokafka.structs import ConsumerRecord

from situflow.codecs.arrow_events import HEADERS, batch_from_events, encode_batch
from situflow.codecs.json_events import DEFAULT_MAX_BYTES
from situflow.languages import compile_query
from situflow.operator import QueryOptions
from situflow.settings import KafkaSettings
from tests.integration.helpers import (
    Headers,
    Message,
    Produced,
    assert_same_results,
    car_events,
    keyed,
    metrics,
    produce,
    read_topic,
    run_cli,
    total,
    unique_prefix,
    wait_until,
    wait_until_evaluated,
)
from topics.catalog import (
    DLQ_OFFSET_HEADER,
    DLQ_PARTITION_HEADER,
    DLQ_REASON_HEADER,
    DLQ_TOPIC_HEADER,
    StreamSpec,
    stream_topics,
)
from workers.up import REPO_ROOT, Pipeline

pytestmark = pytest.mark.integration

QUERY = REPO_ROOT / "situflow/examples/aggressive_drivers.tps"
EVENTS, CARS, SEED = 10_000, 100, 9  # as in test_pipeline.py: 6 results
MALFORMED, HUGE = 1_000, 4  # HUGE of them over the size limit, the others of the KINDS below


def arrow(rows: list[dict[str, Any]], schema: pa.Schema | None = None) -> bytes:
    return encode_batch(batch_from_events(rows, schema))


def json_bytes(value: Any) -> bytes:
    return json.dumps(value).encode()


#: Per kind of malformed message: its value and headers for message number ``i``, and what the
#: DLQ reason must say. Values differ per ``i``.
Kind = tuple[Callable[[int], tuple[bytes | None, Headers | None]], str]
KINDS: dict[str, Kind] = {
    "bad JSON": (lambda i: (b'{"ts": %d, "car_id": ' % i, None), "invalid JSON"),
    "empty": (lambda i: (b" " * (i % 3), None), "invalid JSON"),
    "NaN": (lambda i: (b'{"ts": NaN, "car_id": %d}' % i, None), "NaN is not a JSON value"),
    "float time": (lambda i: (json_bytes({"ts": i + 0.5, "car_id": 1}), None),
                   "must be a whole number of ticks"),
    "boolean time": (lambda i: (json_bytes({"ts": True, "car_id": i}), None), "found a boolean"),
    "object time": (lambda i: (json_bytes({"ts": {"s": i}, "car_id": 1}), None), "found an object"),
    "array time": (lambda i: (json_bytes({"ts": [i], "car_id": 1}), None), "found a list"),
    "null time": (lambda i: (json_bytes({"ts": None, "car_id": i}), None), "found null"),
    "no time string": (lambda i: (json_bytes({"ts": f"{i} o'clock", "car_id": 1}), None),
                       "is neither an integer nor ISO-8601 text"),
    "time beyond int64": (lambda i: (json_bytes({"ts": 2**63 + i, "car_id": 1}), None),
                          "is outside the 64-bit range"),
    "array": (lambda i: (json_bytes([i, 2]), None), "expected a JSON object, got array"),
    "string": (lambda i: (json_bytes(f"car {i}"), None), "expected a JSON object, got string"),
    "number": (lambda i: (json_bytes(i), None), "expected a JSON object, got number"),
    "JSON null": (lambda i: (b"null" + b" " * (i % 3), None), "expected a JSON object, got null"),
    "no time": (lambda i: (json_bytes({"car_id": i, "speed": 3}), None),
                "missing event-time field 'ts'"),
    "no partition attribute": (lambda i: (json_bytes({"ts": i, "speed": 1.0}), None),
                               "missing partition attribute 'car_id'"),
    "list partition attribute": (lambda i: (json_bytes({"ts": i, "car_id": [i]}), None),
                                 "partition attribute 'car_id' must be text, a number or a "
                                 "boolean, found a list"),
    "partition attribute beyond 64 bits": (
        lambda i: (json_bytes({"ts": i, "car_id": 2**70 + i}), None),
        "partition attribute 'car_id' is a number beyond 64 bits"),
    "invalid UTF-8": (lambda i: (b'{"ts": %d, "car_id": "\xff\xfe"}' % i, None),
                      "invalid UTF-8"),
    "tombstone": (lambda i: (None, None), "empty message"),
    "Arrow without time": (lambda i: (arrow([{"car_id": i, "speed": 1.0}]), HEADERS),
                           "missing event-time field 'ts'"),
    "Arrow string time": (lambda i: (arrow([{"ts": str(i), "car_id": 1}]), HEADERS),
                          "is neither an integer nor ISO-8601 text"),
    "Arrow float time": (lambda i: (arrow([{"ts": i + 0.5, "car_id": 1}]), HEADERS),
                         "must be a whole number of ticks"),
    "Arrow null time": (lambda i: (arrow([{"ts": i, "car_id": 1}, {"ts": None, "car_id": 2}],
                                         pa.schema([("ts", pa.int64()), ("car_id", pa.int64())])),
                                   HEADERS), "row 1: missing event time 'ts'"),
    "Arrow without partition attribute": (lambda i: (arrow([{"ts": i, "speed": 1.0}]), HEADERS),
                                          "missing partition attribute 'car_id'"),
    "garbage as Arrow": (lambda i: (b"\x00garbage %d" % i, HEADERS), "invalid Arrow IPC stream"),
    "JSON as Arrow": (lambda i: (json_bytes({"ts": i, "car_id": 1}), HEADERS),
                      "invalid Arrow IPC stream"),
    "truncated Arrow": (lambda i: (arrow([{"ts": i, "car_id": 1}])[:-40], HEADERS),
                        "invalid Arrow IPC stream"),
}
TOO_LARGE = f"exceeds the limit of {DEFAULT_MAX_BYTES} bytes"


def malformed(i: int) -> tuple[str, Message, str]:
    """Malformed message number ``i``: its kind, the message (keyed by ``["bad", i]``, so the
    dead letter shows which it is) and what its reason must say."""
    key = json_bytes(["bad", i])
    if i % (MALFORMED // HUGE) == 0:
        padding = "x" * DEFAULT_MAX_BYTES
        return "huge", (key, json_bytes({"ts": i, "car_id": 1, "note": padding})), TOO_LARGE
    kind = list(KINDS)[i % len(KINDS)]
    make, reason = KINDS[kind]
    value, headers = make(i)
    return kind, (key, value, headers), reason


@dataclass
class Run(Produced):
    """The produced stream, what `situflow run` gives, and what the pipeline did."""

    kslack_pid: int
    expected: list[dict[str, Any]]
    results: list[ConsumerRecord[bytes, bytes]]
    dead: list[ConsumerRecord[bytes, bytes]]


@pytest.fixture(scope="module")
def run(kafka: KafkaSettings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """One pipeline for the module: every message produced, and every valid one evaluated."""
    prefix = unique_prefix()
    tmp_path = tmp_path_factory.mktemp("malformed")
    name = f"{prefix}-aggressive"
    events = car_events(EVENTS, CARS, SEED)
    expected = run_cli(QUERY, events, name, tmp_path)
    messages: list[Message] = [keyed(e, ("car_id",)) for e in events]
    for i in range(MALFORMED):  # spread evenly through the stream
        messages.insert((i + 1) * len(messages) // (MALFORMED + 1), malformed(i)[1])
    stream = StreamSpec(f"{prefix}.cars", partitions=4, key_fields=("car_id",))
    with Pipeline(stream, QUERY, idle_timeout=2.0, kafka=kafka, work_dir=tmp_path / "pipeline",
                  name=name) as pipeline:
        kslack_pid = pipeline.services["kslack"].process.pid
        asyncio.run(produce(kafka, stream.name, messages))
        wait_until_evaluated(pipeline, len(events))
        dead = asyncio.run(read_topic(kafka, stream_topics(stream)[3].name))
        results = asyncio.run(read_topic(kafka, pipeline.output_topic))
        yield Run(pipeline, kafka, events, messages, kslack_pid, expected, results, dead)


def test_every_malformed_message_is_dead_lettered_once_unchanged_with_its_reason(
    run: Run
) -> None:
    raw = run.pipeline.stream.name
    dead = {record.key: record for record in run.dead}
    assert len(run.dead) == len(dead) == MALFORMED, "each malformed message once"
    wrong = []
    for i in range(MALFORMED):
        kind, (key, value, *_), reason = malformed(i)
        record = dead[key]
        headers = {k: v.decode() for k, v in record.headers}
        assert record.value == value, kind
        assert headers[DLQ_TOPIC_HEADER] == raw, kind
        assert {DLQ_PARTITION_HEADER, DLQ_OFFSET_HEADER} <= headers.keys(), kind
        if reason not in headers[DLQ_REASON_HEADER]:
            wrong.append(f"{kind}: {headers[DLQ_REASON_HEADER]!r} lacks {reason!r}")
    assert not wrong, "\n".join(sorted(set(wrong)))


def test_the_valid_events_give_the_results_of_situflow_run_on_them_alone(run: Run) -> None:
    assert len(run.expected) >= 5, "the data set should exercise the query"
    assert_same_results(run.results, run.expected)


def test_kslack_keeps_running_and_counts_every_dead_letter(run: Run) -> None:
    kslack = run.pipeline.services["kslack"]
    assert kslack.process.poll() is None, f"K-slack exited:\n{kslack.log_tail()}"
    assert kslack.process.pid == run.kslack_pid
    assert kslack.health()["ready"]
    values = metrics(kslack)
    assert total(values, "situflow_dlq_messages_total") == MALFORMED
    assert total(values, "situflow_messages_in_total") == len(run.messages)
    assert total(values, "situflow_events_in_total") == len(run.events)
    assert total(values, "situflow_late_events_total") == 0
    for service in ("deriver", "matcher"):
        assert total(metrics(run.pipeline.services[service]), "situflow_dlq_messages_total",
                     topic=stream_topics(run.pipeline.stream)[3].name) == 0, service


def situation_record(n: int, without: str = "", **fields: Any) -> list[Any]:
    """A well-formed record row of situation ``A`` of a key no event has, at step ``n`` (a
    step the matcher has seen is a repeat that it skips), with ``fields`` changed and field
    ``without`` left out."""
    record = {"kind": "started", "key": "no such car", "situation": "A", "ts": n, "te": None,
              "at": n, "seq": n, "values": {}, **fields}
    return [v for k, v in record.items() if k != without]


def batch(query: str, query_id: str, records: Any, **fields: Any) -> bytes:
    return json_bytes({"query": query, "query_id": query_id, "registered_at": 0,
                       "rows": records, **fields})


#: Per kind of malformed situation batch: its value, given the query's name and id (``q``,
#: ``i``) and the message number ``n``, and what the matcher's DLQ reason must say.
SITUATION_KINDS: dict[str, tuple[Callable[[str, str, int], bytes | None], str]] = {
    "bad JSON": (lambda q, i, n: b'{"query": "' + q.encode(), "invalid JSON"),
    "tombstone": (lambda q, i, n: None, "empty message"),
    "array": (lambda q, i, n: json_bytes([q, i]), "a situation message is a JSON object"),
    "no query id": (lambda q, i, n: json_bytes({"query": q, "registered_at": 0, "rows": []}),
                    "a situation message is a JSON object"),
    "rows no list": (lambda q, i, n: batch(q, i, {"A": 1}), "a situation message is a JSON object"),
    "row no array": (lambda q, i, n: batch(q, i, [{"kind": "started"}]),
                     "a situation record row must be a JSON array of 8 fields"),
    "row without seq": (lambda q, i, n: batch(q, i, [situation_record(n, without="seq")]),
                        "a situation record row must be a JSON array of 8 fields"),
    "unknown kind": (lambda q, i, n: batch(q, i, [situation_record(n, kind="paused")]),
                     "unknown situation record kind 'paused'"),
    "float time": (lambda q, i, n: batch(q, i, [situation_record(n, ts=1.5)]), "must be integers"),
    "undefined situation": (lambda q, i, n: batch(q, i, [situation_record(n, situation="Z")]),
                            "situation 'Z' is not defined by query"),
    "running, never started": (lambda q, i, n: batch(q, i, [situation_record(n, kind="running")]),
                               "a running record of 'A' that has not started"),
}


def test_malformed_situation_batches_go_to_the_matchers_dead_letter_topic(run: Run) -> None:
    pipeline = run.pipeline
    name = pipeline.query_name
    query_id = compile_query(QUERY.read_text(), QueryOptions(name=name)).query_id
    situations = pipeline.situations_topic
    assert situations is not None
    bad = [(kind, make(name, query_id, 1 + n), reason)
           for n, (kind, (make, reason)) in enumerate(3 * list(SITUATION_KINDS.items()))]
    asyncio.run(produce(run.kafka, situations,
                        [(json_bytes(["bad", i]), value) for i, (_, value, _) in enumerate(bad)]))
    matcher = pipeline.services["matcher"]
    dlq = f"{situations}.dlq"
    wait_until(lambda: total(metrics(matcher), "situflow_dlq_messages_total", topic=dlq)
               >= len(bad), 60, "the matcher to dead-letter every bad situation batch")
    dead = {r.key: r for r in asyncio.run(read_topic(run.kafka, dlq))}
    assert len(dead) == len(bad)
    for i, (kind, value, reason) in enumerate(bad):
        record = dead[json_bytes(["bad", i])]
        headers = {k: v.decode() for k, v in record.headers}
        assert record.value == value, kind
        assert headers[DLQ_TOPIC_HEADER] == situations, kind
        assert reason in headers[DLQ_REASON_HEADER], (kind, headers[DLQ_REASON_HEADER])
    assert matcher.process.poll() is None and matcher.health()["ready"]
