"""JSON events: one UTF-8 JSON object per Kafka message (the transport **contract**).

The event-time field (``ts`` unless the stream's catalog entry names another) is normalised
on decode:

* an integer is kept as it is, in whatever unit the producer uses (the engine compares event
  times, it never converts them), provided it fits in int64;
* an ISO-8601 string (anything :meth:`datetime.fromisoformat` reads, e.g.
  ``2024-05-01T12:00:00.250Z``) becomes integer **epoch milliseconds**, rounded down; a string
  without a UTC offset is taken as UTC. Producers that mix strings and integers on one stream
  must therefore send integers in milliseconds too.

Everything else (floats, booleans, null, other strings) is rejected: a float time would make
window bounds and the result ids depend on rounding. ``NaN`` and ``Infinity`` are rejected
because they are not JSON.

>>> decode_event(b'{"ts": "1970-01-01T00:00:01.5Z", "speed": 12}')
{'ts': 1500, 'speed': 12}
>>> decode_event(b'[1, 2]')
Traceback (most recent call last):
...
situflow.errors.InputError: expected a JSON object, got array
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from situflow.codecs.errors import InputError

CONTENT_TYPE = "application/json"
DEFAULT_TIME_FIELD = "ts"
#: Kafka's default ``message.max.bytes`` is about 1 MB; a larger event is a producer mistake.
DEFAULT_MAX_BYTES = 1 << 20

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)
_JSON_TYPE_NAMES: dict[type, str] = {
    dict: "object", list: "array", str: "string", int: "number", float: "number",
    bool: "boolean", type(None): "null",
}


def _reject_constant(name: str) -> Any:
    raise InputError(f"invalid JSON: {name} is not a JSON value")


def decode_event(
    data: bytes,
    *,
    time_field: str = DEFAULT_TIME_FIELD,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> dict[str, Any]:
    """Decode one message into an event dict whose ``time_field`` is an int (see module doc).

    Raises :class:`InputError` whose ``reason`` names what is wrong, for the DLQ headers.
    """
    if len(data) > max_bytes:
        raise InputError(f"message of {len(data)} bytes exceeds the limit of {max_bytes} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"invalid UTF-8 at byte {exc.start}") from None
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise InputError(f"invalid JSON: {exc.msg} at {where}") from None
    if not isinstance(value, dict):
        raise InputError(f"expected a JSON object, got {_JSON_TYPE_NAMES[type(value)]}")
    if time_field not in value:
        raise InputError(f"missing event-time field {time_field!r}")
    value[time_field] = event_time(value[time_field], time_field)
    return value


def event_time(value: object, time_field: str = DEFAULT_TIME_FIELD) -> int:
    """The event time as int64: an integer unchanged, an ISO-8601 string in epoch milliseconds."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not INT64_MIN <= value <= INT64_MAX:
            raise InputError(f"event-time field {time_field!r} is out of the int64 range")
        return value
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise InputError(
                f"event-time field {time_field!r} is not an ISO-8601 time: {value[:64]!r}"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return (moment - _EPOCH) // _MILLISECOND
    kind = _JSON_TYPE_NAMES.get(type(value), type(value).__name__)
    if isinstance(value, float):
        kind = f"non-integer number {value!r}"
    raise InputError(
        f"event-time field {time_field!r} must be an integer or an ISO-8601 string, got {kind}"
    )


def encode_event(event: Mapping[str, Any]) -> bytes:
    """Compact UTF-8 JSON for one event (or result); non-ASCII text is kept as is."""
    return json.dumps(event, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
