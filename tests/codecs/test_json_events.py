"""JSON events: one object per message; the event time becomes integer ticks of the stream's time
unit (ISO-8601 text converted, SEMANTICS.md "Event time and types")."""

from __future__ import annotations

import pytest

from situflow.codecs.errors import InputError
from situflow.codecs.event_time import event_ticks
from situflow.codecs.json_events import decode_event, encode_event

MS = 0.001

GOOD = [
    # (message, time field, decoded event), in a stream of milliseconds
    (b'{"ts": 5, "car": "A", "speed": 98.5}', "ts", {"ts": 5, "car": "A", "speed": 98.5}),
    (b'{"ts": 5.0}', "ts", {"ts": 5}),
    (b'{"ts": -3}', "ts", {"ts": -3}),
    (b'{"ts": 9223372036854775807}', "ts", {"ts": 2**63 - 1}),
    (b'{"ts": "1970-01-01T00:00:01Z"}', "ts", {"ts": 1000}),
    (b'{"ts": "2024-05-01T12:00:00.250+02:00"}', "ts", {"ts": 1714557600250}),
    (b'{"ts": "2024-05-01T10:00:00.250"}', "ts", {"ts": 1714557600250}),  # no offset: UTC
    (b'{"ts": "1969-12-31T23:59:59.9995Z"}', "ts", {"ts": -1}),  # rounded down
    (b'{"ts": "2024-05-01"}', "ts", {"ts": 1714521600000}),
    (b'{"time": 7, "ts": "not the time field"}', "time", {"time": 7, "ts": "not the time field"}),
    ('{"ts": 1, "name": "Müller"}'.encode(), "ts", {"ts": 1, "name": "Müller"}),
]

BAD = [
    # (message, reason)
    (b'{"ts": 1', "invalid JSON: Expecting ',' delimiter at line 1 column 9"),
    (b"", "invalid JSON: Expecting value at line 1 column 1"),
    (b'{"ts": NaN}', "invalid JSON: NaN is not a JSON value"),
    (b"\xff\xfe{}", "invalid UTF-8 at byte 0"),
    (b"[1, 2]", "expected a JSON object, got array"),
    (b'"ts"', "expected a JSON object, got string"),
    (b"null", "expected a JSON object, got null"),
    (b'{"speed": 3}', "missing event-time field 'ts'"),
    (b'{"ts": null}', "event time 'ts' must be an integer or ISO-8601 text, found null"),
    (b'{"ts": 1.5}', "event time 'ts' must be a whole number of ticks, found 1.5"),
    (b'{"ts": true}', "event time 'ts' must be an integer or ISO-8601 text, found a boolean"),
    (b'{"ts": {"s": 1}}', "event time 'ts' must be an integer or ISO-8601 text, found an object"),
    (b'{"ts": "yesterday"}', "event time 'ts' is neither an integer nor ISO-8601 text: 'yesterday'"),
    (b'{"ts": "12345"}', "event time 'ts' is neither an integer nor ISO-8601 text: '12345'"),
    (b'{"ts": 9223372036854775808}', "event time 'ts' 9223372036854775808 is outside the 64-bit range"),
    (b'{"ts": 1e300}', "event time 'ts' 1e+300 is outside the 64-bit range"),
    (b'{"ts": 1, "name": "\\ud800"}',
     "invalid JSON: an unpaired UTF-16 surrogate escape is no Unicode text"),
]


@pytest.mark.parametrize(("message", "time_field", "event"), GOOD)
def test_decodes_an_event_with_an_integer_time(
    message: bytes, time_field: str, event: dict[str, object]
) -> None:
    assert decode_event(message, time_field=time_field, time_unit=MS) == event


@pytest.mark.parametrize(("message", "reason"), BAD)
def test_rejects_a_bad_message_with_its_reason(message: bytes, reason: str) -> None:
    with pytest.raises(InputError) as raised:
        decode_event(message)
    assert raised.value.reason == reason


def test_a_message_over_the_size_limit_is_rejected_before_parsing() -> None:
    with pytest.raises(InputError) as raised:
        decode_event(b'{"ts": 1, "pad": "' + b"x" * 100 + b'"}', max_bytes=64)
    assert raised.value.reason == "message of 120 bytes exceeds the limit of 64 bytes"


def test_input_error_is_the_engine_wide_input_error() -> None:
    from situflow import errors

    assert InputError is errors.InputError


@pytest.mark.parametrize(("_message", "_field", "event"), GOOD)
def test_encode_then_decode_returns_the_event(
    _message: bytes, _field: str, event: dict[str, object]
) -> None:
    assert decode_event(encode_event(event), time_field=_field, time_unit=MS) == event


def test_encoding_is_compact_utf8() -> None:
    assert encode_event({"ts": 1, "name": "Müller"}) == '{"ts":1,"name":"Müller"}'.encode()


def test_integer_times_are_ticks_of_the_stream_unit_unchanged() -> None:
    assert event_ticks(1_714_557_600_250_123_456, time_unit=1e-9) == 1_714_557_600_250_123_456
    assert event_ticks(12) == 12


def test_iso_text_becomes_ticks_of_the_stream_unit() -> None:
    text = "2024-05-01T12:00:00Z"
    assert event_ticks(text) == 1_714_564_800
    assert event_ticks(text, time_unit=MS) == 1_714_564_800_000
    assert event_ticks(text, time_unit=60) == 1_714_564_800 // 60
