"""JSON events: one UTF-8 JSON object per Kafka message (the transport **contract**).

The event-time field (``ts`` unless the stream names another) is read by the one event-time
rule of :mod:`situflow.codecs.event_time`: integer ticks of the stream's time unit, or ISO-8601
text converted to them; anything else rejects the message with the reason. ``NaN`` and
``Infinity`` are rejected because they are not JSON.

>>> decode_event(b'{"ts": "1970-01-01T00:00:01.5Z", "speed": 12}', time_unit=0.001)
{'ts': 1500, 'speed': 12}
>>> decode_event(b'[1, 2]')
Traceback (most recent call last):
...
situflow.errors.InputError: expected a JSON object, got array
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from situflow.codecs.errors import InputError
from situflow.codecs.event_time import DEFAULT_TIME_FIELD, event_ticks

CONTENT_TYPE = "application/json"
#: Kafka's default ``message.max.bytes`` is about 1 MB; a larger event is a producer mistake.
DEFAULT_MAX_BYTES = 1 << 20

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
    time_unit: float = 1.0,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> dict[str, Any]:
    """Decode one message into an event dict whose ``time_field`` is in ticks of ``time_unit``
    seconds (see module doc).

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
    if "\\u" in text:  # an escape may be an unpaired surrogate, which has no UTF-8 form
        try:
            json.dumps(value, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            raise InputError("invalid JSON: an unpaired UTF-16 surrogate escape is no "
                             "Unicode text") from None
    if time_field not in value:
        raise InputError(f"missing event-time field {time_field!r}")
    value[time_field] = event_ticks(value[time_field], time_unit, time_field)
    return value


def encode_event(event: Mapping[str, Any]) -> bytes:
    """Compact UTF-8 JSON for one event (or result); non-ASCII text is kept as is."""
    return json.dumps(event, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
