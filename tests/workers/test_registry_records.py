"""Registry records name the stream their query was checked against (topics/registry.py), and
``submit`` refuses at once what the services would refuse (topics/query_checks.py, issue 12)."""

from __future__ import annotations

import asyncio
import json

import pytest

from situflow.languages import compile_query
from situflow.operator import QueryOptions
from topics.catalog import StreamSpec
from topics.registry import (
    QueryRecord,
    QueryRefused,
    QueryStatus,
    decode_record,
    decode_status,
    encode_record,
    encode_status,
    submit,
)
from workers.up import REPO_ROOT

AGGRESSIVE = (REPO_ROOT / "situflow/examples/aggressive_drivers.tps").read_text()
SASE = "PATTERN SEQ(A a, B b) WHERE [car_id] WITHIN 10 seconds"


def test_a_record_with_its_stream_round_trips_and_an_old_one_still_reads() -> None:
    stream = StreamSpec("cars", key_fields=("car_id",))
    record = QueryRecord("q", "tpstream", AGGRESSIVE, "id", 1, "q.tps", stream)
    key, value = encode_record(record)
    assert json.loads(value)["stream"] == {"name": "cars", "key_fields": ["car_id"],
                                           "unpartitioned": False, "time_unit": 1.0}
    assert decode_record(key, value) == ("q", record)
    old = {k: v for k, v in json.loads(value).items() if k != "stream"}
    assert decode_record(key, json.dumps(old).encode())[1] == QueryRecord(
        "q", "tpstream", AGGRESSIVE, "id", 1, "q.tps")


def test_a_status_round_trips_and_garbage_reads_as_none() -> None:
    status = QueryStatus("q", "id", "KeyError: 'speed'", 5, "deriver")
    assert decode_status(encode_status(status)[1]) == status
    assert decode_status(b"{") is None and decode_status(None) is None


@pytest.mark.parametrize(("text", "stream", "message"), [
    (AGGRESSIVE.replace("PARTITION BY car_id", "PARTITION BY lane"),
     StreamSpec("cars", key_fields=("car_id",)),
     "must partition by the stream's key attributes car_id (missing: car_id)"),
    (SASE, StreamSpec("cars", unpartitioned=True), "the sase query 'q' needs a keyed stream"),
])
def test_submit_refuses_what_the_stream_does_not_allow_before_it_connects(
        text: str, stream: StreamSpec, message: str) -> None:
    compile_query(text, QueryOptions(name="q"))  # a valid query
    with pytest.raises(QueryRefused, match=message.replace("(", r"\(").replace(")", r"\)")):
        asyncio.run(submit("127.0.0.1:1", text, name="q", stream=stream))
