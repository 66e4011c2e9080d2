"""Query registry records: how a query, and its deletion, look in the control topic."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from topics.catalog import QUERIES, CleanupPolicy
from topics.registry import (
    ENV_TOPIC,
    InvalidQueryName,
    QueryRecord,
    RegistryRecordError,
    decode_record,
    encode_record,
    encode_tombstone,
    registry_spec,
    registry_topic,
    submit,
)

EXAMPLES = Path(__file__).parents[2] / "situflow" / "examples"
RECORD = QueryRecord(
    name="aggressive_drivers",
    language="tpstream",
    text="FROM cars ...",
    query_id="3f2a",
    submitted_at=1_700_000_000_000,
    source="queries/aggressive.tps",
)
VALUE = {
    "name": "aggressive_drivers",
    "language": "tpstream",
    "text": "FROM cars ...",
    "id": "3f2a",
    "source": "queries/aggressive.tps",
    "submitted_at": 1_700_000_000_000,
}


def test_a_record_is_keyed_by_name_and_holds_the_query_as_json() -> None:
    key, value = encode_record(RECORD)
    assert key == b"aggressive_drivers"
    assert json.loads(value) == VALUE


def test_a_record_decodes_to_itself() -> None:
    assert decode_record(*encode_record(RECORD)) == ("aggressive_drivers", RECORD)


def test_a_record_submitted_with_a_backfill_says_so_and_others_carry_no_flag() -> None:
    handed_off = dataclasses.replace(RECORD, handoff=True)
    assert json.loads(encode_record(handed_off)[1]) == {**VALUE, "handoff": True}
    assert decode_record(*encode_record(handed_off)) == ("aggressive_drivers", handed_off)
    plain = decode_record(*encode_record(RECORD))[1]
    assert plain is not None and not plain.handoff


def test_a_delete_is_a_tombstone_of_the_name() -> None:
    assert encode_tombstone("aggressive_drivers") == (b"aggressive_drivers", None)
    assert decode_record(b"aggressive_drivers", None) == ("aggressive_drivers", None)


def test_a_record_without_source_was_not_submitted_from_a_file() -> None:
    value = json.dumps({**VALUE, "source": None}).encode()
    assert decode_record(b"aggressive_drivers", value)[1] == QueryRecord(
        "aggressive_drivers", "tpstream", "FROM cars ...", "3f2a", 1_700_000_000_000
    )


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (None, json.dumps(VALUE).encode(), "without a key"),
        (b"\xff", None, "not UTF-8"),
        (b"aggressive_drivers", b"{not json", "not JSON"),
        (b"aggressive_drivers", b"\xff", "not JSON"),
        (b"aggressive_drivers", b"[1, 2]", "not a JSON object"),
        (b"aggressive_drivers", json.dumps({**VALUE, "text": None}).encode(),
         "'text' is missing or mistyped"),
        (b"aggressive_drivers", json.dumps({**VALUE, "submitted_at": "today"}).encode(),
         "'submitted_at' is missing or mistyped"),
        (b"aggressive_drivers", json.dumps({**VALUE, "submitted_at": True}).encode(),
         "'submitted_at' is missing or mistyped"),
        (b"other", json.dumps(VALUE).encode(), "value names 'aggressive_drivers'"),
        (b"aggressive_drivers", json.dumps({**VALUE, "language": "sql"}).encode(),
         "unknown language 'sql'"),
    ],
    ids=["no key", "key not UTF-8", "broken JSON", "value not UTF-8", "array", "missing text",
         "string time", "boolean time", "key and name differ", "unknown language"],
)
def test_a_record_that_is_no_query_says_why(
    key: bytes | None, value: bytes | None, reason: str
) -> None:
    with pytest.raises(RegistryRecordError, match=reason):
        decode_record(key, value)


@pytest.mark.parametrize(
    ("language", "topic"),
    [("tpstream", "matches.q"), ("sase", "matches.q"), ("cogra", "trends.q")],
)
def test_each_language_writes_results_to_its_output_topic(language: str, topic: str) -> None:
    assert QueryRecord("q", language, "", "", 0).output_topic == topic


def test_the_registry_is_the_catalog_control_topic_unless_the_environment_renames_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV_TOPIC, raising=False)
    assert registry_topic() == QUERIES
    monkeypatch.setenv(ENV_TOPIC, "staging.queries")
    spec = registry_spec()
    assert (spec.name, spec.partitions, spec.cleanup_policy) == (
        "staging.queries", 1, CleanupPolicy.COMPACT,
    )


def test_a_name_that_cannot_be_part_of_a_topic_name_is_refused_before_connecting() -> None:
    text = (EXAMPLES / "aggressive_drivers.tps").read_text()
    with pytest.raises(InvalidQueryName, match="query name 'fast drivers' cannot name a topic"):
        asyncio.run(submit("127.0.0.1:1", text, name="fast drivers"))  # nothing listens there


def test_registry_progress_not_followed_is_read_at_once_and_counts_nothing() -> None:
    from topics.registry import RegistryProgress

    progress = RegistryProgress("localhost:9092", followed=False)
    assert progress.read.is_set() and progress.records == 0 and not progress.followed
    assert not RegistryProgress("localhost:9092", followed=True).read.is_set()
