"""Attributes a query uses that none of its events carried (situflow/runtime/attributes.py): a
count per query, and one report once the query has seen enough events to tell."""

from __future__ import annotations

import numpy as np

from situflow.events import EventBatch
from situflow.runtime import UnseenAttributes


def events(*records: dict[str, object]) -> EventBatch:
    return EventBatch.from_records(list(records), time_field="ts",
                                   seq=np.arange(len(records), dtype=np.int64))


def test_an_attribute_no_event_carries_is_counted_and_reported_once() -> None:
    watch = UnseenAttributes(report_after=3)
    used = ("speed", "sped")
    steps = [  # (events, unseen count, reported now)
        (events({"ts": 1, "speed": 1.0}, {"ts": 2, "speed": 2.0}), 1, []),
        (events({"ts": 3, "speed": 3.0}), 1, ["sped"]),
        (events({"ts": 4, "speed": 4.0}), 1, []),  # reported once
    ]
    for batch, unseen, reported in steps:
        assert watch.observe("q", used, batch) == unseen
        assert watch.to_report("q") == reported


def test_once_every_attribute_was_seen_nothing_is_counted_any_more() -> None:
    watch = UnseenAttributes(report_after=1)
    assert watch.observe("q", ("speed",), events({"ts": 1})) == 1
    assert watch.observe("q", ("speed",), events({"ts": 2, "speed": 1.0})) == 0
    assert watch.observe("q", ("speed",), events({"ts": 3})) is None
    assert watch.to_report("q") == []
