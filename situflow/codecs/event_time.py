"""The one event-time rule (SEMANTICS.md, "Event time and types"), for the CLI, the services and
the offline jobs alike.

A stream has one time unit, ``time_unit`` seconds per tick (1 by default; 0.001 for a stream of
milliseconds). Its events' times are integer ticks:

* a JSON integer (or a float with no fraction, as some producers write ``12.0``) *is* a tick
  count, unchanged, provided it fits in int64;
* ISO-8601 text (anything :meth:`datetime.fromisoformat` reads, ``2024-05-01T12:00:00.250Z``;
  without a UTC offset it is UTC) becomes the ticks since the epoch, rounded down;
* anything else (a fraction, a boolean, null, a list, text that is no time, a time outside the
  int64 range) rejects its event with a reason.

Durations in queries (``WITHIN 5 minutes``) are converted with the same unit, so a query means
the same thing on every path.

>>> event_ticks("1970-01-01T00:00:01.5Z", time_unit=0.001)
1500
>>> event_ticks("1970-01-01T00:00:01.5Z")
1
>>> event_ticks(True)
Traceback (most recent call last):
...
situflow.errors.InputError: event time 'ts' must be an integer or ISO-8601 text, found a boolean
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa

from situflow.errors import InputError

DEFAULT_TIME_FIELD = "ts"
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# The finest time unit a stream may have: ISO times are converted through nanoseconds.
FINEST_UNIT = 1e-9
_JSON_KINDS = {dict: "an object", list: "a list", str: "text", bool: "a boolean", int: "a number",
               float: "a number", type(None): "null"}


def json_kind(value: Any) -> str:
    """What kind of JSON value ``value`` is, as the reasons of rejected events name it."""
    return _JSON_KINDS.get(type(value), type(value).__name__)


def check_time_unit(time_unit: float) -> float:
    """``time_unit`` if a stream may have it (a positive number of seconds, at least 1 ns)."""
    if not time_unit >= FINEST_UNIT or time_unit == float("inf"):
        raise ValueError(f"time unit {time_unit!r}: give seconds per tick, at least {FINEST_UNIT:g}")
    return float(time_unit)


def event_ticks(value: Any, time_unit: float = 1.0, field: str = DEFAULT_TIME_FIELD) -> int:
    """The event time ``value`` in ticks of ``time_unit`` seconds; :class:`InputError` if it has
    none (module doc)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not INT64_MIN <= value <= INT64_MAX:
            raise InputError(f"event time '{field}' {value} is outside the 64-bit range")
        return value
    if isinstance(value, float):
        if not value.is_integer():
            raise InputError(f"event time '{field}' must be a whole number of ticks, found {value!r}")
        if not INT64_MIN <= value < INT64_MAX:
            raise InputError(f"event time '{field}' {value!r} is outside the 64-bit range")
        return int(value)
    if isinstance(value, str):
        return _iso_ticks(value, time_unit, field)
    kind = json_kind(value)
    raise InputError(f"event time '{field}' must be an integer or ISO-8601 text, found {kind}")


def _iso_ticks(text: str, time_unit: float, field: str) -> int:
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InputError(f"event time '{field}' is neither an integer nor ISO-8601 text: "
                         f"{text[:64]!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - _EPOCH
    nanos = (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000
    ticks = nanos // round(time_unit * 1e9)
    if not INT64_MIN <= ticks <= INT64_MAX:
        raise InputError(f"event time '{field}' {text[:64]!r} is outside the 64-bit range of ticks")
    return ticks


def time_column(column: pa.Array | pa.ChunkedArray, time_unit: float = 1.0,
                field: str = DEFAULT_TIME_FIELD) -> tuple[np.ndarray, dict[int, str]]:
    """A column of event times as int64 ticks, and the rows that have none with the reason
    (their ticks are 0). Integer columns take the fast path; everything else goes value by
    value through :func:`event_ticks`, so that every reader gives every value the same ticks."""
    kind = column.type
    if pa.types.is_integer(kind) and not column.null_count:
        try:
            # Only a cast loads pyarrow.compute (30 ms of start-up); the JSON reader's are int64.
            same = column if kind == pa.int64() else column.cast(pa.int64())
            return np.asarray(same.to_numpy(zero_copy_only=False)), {}
        except pa.ArrowInvalid:
            pass  # uint64 beyond int64: value by value, to say which
    if pa.types.is_timestamp(kind) and not column.null_count:
        try:  # pyarrow's JSON reader reads plain ISO text as timestamps
            nanos = np.asarray(column.cast(pa.timestamp("ns")).cast(pa.int64())
                               .to_numpy(zero_copy_only=False))
            return np.floor_divide(nanos, round(time_unit * 1e9)), {}
        except pa.ArrowInvalid:
            column = column.cast(pa.string())  # beyond the nanosecond range: value by value
    values = column.to_pylist()
    return values_ticks(values, time_unit, field)


def values_ticks(values: list[Any], time_unit: float = 1.0,
                 field: str = DEFAULT_TIME_FIELD) -> tuple[np.ndarray, dict[int, str]]:
    """:func:`time_column` for plain values (records that were read one by one)."""
    ticks = np.zeros(len(values), np.int64)
    bad: dict[int, str] = {}
    for i, value in enumerate(values):
        if value is None:
            bad[i] = f"missing event time '{field}'"
            continue
        try:
            ticks[i] = event_ticks(value, time_unit, field)
        except InputError as e:
            bad[i] = e.reason
    return ticks, bad
