"""Negation (SASE+ §3.1, SEMANTICS.md): between two components, leading, trailing."""

from __future__ import annotations

import pytest

from situflow.errors import ValidationError
from tests.nfa.harness import QUERY1, Harness, batches

HOUR = 3600


def reading(kind: str, ts: int, tag: int = 7):
    return {"id": f"{kind}@{ts}", "type": kind, "tag_id": tag, "ts": ts}


@pytest.mark.parametrize(("events", "count"), [
    ([reading("Shelf", 1), reading("Exit", 2)], 1),
    ([reading("Shelf", 1), reading("Register", 2), reading("Exit", 3)], 0),
    ([reading("Shelf", 1), reading("Register", 2, tag=8), reading("Exit", 3)], 1),
    ([reading("Shelf", 1), reading("Exit", 1 + 12 * HOUR)], 1),  # inclusive window
    ([reading("Shelf", 1), reading("Exit", 2 + 12 * HOUR)], 0),
])
def test_s12_query1_shoplifting(events, count):
    assert len(Harness.for_query(QUERY1).matches(events)) == count


def test_a_register_reading_outside_the_pair_does_not_negate():
    events = [reading("Register", 0), reading("Shelf", 1), reading("Exit", 2),
              reading("Register", 3)]
    assert Harness.for_query(QUERY1).matches(events) == [{"a": ["Shelf@1"], "c": ["Exit@2"]}]


LEADING = "PATTERN SEQ(~(Alarm x), Door d) WHERE skip_till_next_match(x, d) { } WITHIN 10 seconds"


@pytest.mark.parametrize(("door", "count"), [(10, 0), (11, 1)])
def test_a_leading_negation_looks_back_one_window_from_the_last_event(door, count):
    events = [{"id": "alarm", "type": "Alarm", "ts": 0}, {"id": "door", "type": "Door",
                                                           "ts": door}]
    assert len(Harness.for_query(LEADING).matches(events)) == count


TRAILING = ("PATTERN SEQ(Order o, ~(Payment p)) WHERE skip_till_next_match(o, p) "
            "{ [oid] } WITHIN 10 seconds")


def order_events(payment_ts: int | None, later: int | None = None):
    events = [{"id": "o", "type": "Order", "oid": 1, "ts": 0}]
    if payment_ts is not None:
        events.append({"id": "p", "type": "Payment", "oid": 1, "ts": payment_ts})
    if later is not None:
        events.append({"id": "x", "type": "Tick", "oid": 2, "ts": later})
    return events


def test_a_trailing_negation_waits_until_the_window_has_passed():
    h = Harness.for_query(TRAILING)
    assert h.matches(order_events(10)) == []  # (last, first.t + w] is inclusive
    [late_payment] = h.run(order_events(11))
    assert late_payment.emitted_at == 11  # released by the first event after first.t + w
    [unpaid] = h.run(order_events(None, later=10))
    assert unpaid.emitted_at == 10  # released at the end of the input, not at t=10


def test_a_watermark_releases_a_match_waiting_on_a_trailing_negation():
    h = Harness.for_query(TRAILING)
    op = h.compiled.operator()
    assert op.process(batches(order_events(None), None)[0]) == []
    assert op.advance_to(10) == []
    [released] = op.advance_to(11)
    assert released.emitted_at == 11 and released.bindings == {"o": ["o"]}


def test_a_payment_for_another_order_does_not_negate():
    events = [*order_events(None), {"id": "p2", "type": "Payment", "oid": 2, "ts": 5}]
    assert len(Harness.for_query(TRAILING).matches(events)) == 1


def test_a_trailing_negation_without_a_window_is_an_error():
    with pytest.raises(ValidationError, match="trailing negation needs a window"):
        Harness.for_query("PATTERN SEQ(Order o, ~(Payment p)) WHERE skip_till_next_match(o, p) "
                          "{ }")
