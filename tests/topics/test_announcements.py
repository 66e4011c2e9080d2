"""The services topic's records: a worker's announcement, and its tombstone when it stops."""

from __future__ import annotations

import json

import pytest

from topics.announcements import (
    Announcement,
    decode_announcement,
    encode_announcement,
    encode_departure,
    worker_id,
)

ANNOUNCEMENT = Announcement(worker_id("kslack", "kslack-0", 6066), "kslack", "cars",
                            "http://10.0.0.7:6066", "kslack-0", 1, 1_700_000_000_000,
                            1_700_000_012_000, "0.1.0")


def test_an_announcement_is_keyed_by_its_worker_id_and_holds_where_its_pages_are() -> None:
    key, value = encode_announcement(ANNOUNCEMENT)
    assert key == b"kslack@kslack-0:6066"
    assert json.loads(value) == {
        "service": "kslack", "stream": "cars", "url": "http://10.0.0.7:6066", "host": "kslack-0",
        "pid": 1, "started_at": 1_700_000_000_000, "last_seen": 1_700_000_012_000,
        "version": "0.1.0"}
    assert decode_announcement(key, value) == ANNOUNCEMENT


def test_a_departure_is_a_tombstone_which_reads_as_no_announcement() -> None:
    key, value = encode_departure(ANNOUNCEMENT.worker)
    assert (key, value) == (b"kslack@kslack-0:6066", None)
    assert decode_announcement(key, value) is None


@pytest.mark.parametrize("value", [
    b"not json", b"[1, 2]", b'{"service": "kslack"}',
    json.dumps({**json.loads(encode_announcement(ANNOUNCEMENT)[1]), "pid": "1"}).encode(),
    json.dumps({**json.loads(encode_announcement(ANNOUNCEMENT)[1]), "pid": True}).encode(),
], ids=["not-json", "not-an-object", "fields-missing", "pid-as-text", "pid-as-bool"])
def test_a_record_that_is_no_announcement_is_skipped(value: bytes) -> None:
    assert decode_announcement(b"kslack@kslack-0:6066", value) is None
    assert decode_announcement(None, encode_announcement(ANNOUNCEMENT)[1]) is None
