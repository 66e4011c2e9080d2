"""The one typing rule for events (SEMANTICS.md, "Event time and types"), applied identically by
the CLI, the services and the offline jobs.

Types come from the query's use of an attribute, never from whichever event came first: JSON has
no schema, and one event must not decide how the next are read. A compiled query states what it
needs in :class:`~situflow.lang.attributes.AttributeTypes` (which uses make an attribute numeric is
decided there):

* ``numeric``: attributes it uses with numbers (compared with a number, ordered against
  another attribute, in arithmetic, under ``sum avg min max``). Where present, the value must be
  a number; an integer beyond 64 bits is read as a float (exact to 2^53). ``null`` and an absent
  attribute are *missing* (NaN: every comparison with it is false).
* ``keys``: attributes that split the stream (``PARTITION BY``, ``[attr]``, ``GROUP-BY``). The
  value must be a single JSON scalar: text, a number within 64 bits, or a boolean, never a list
  or an object. A missing key is missing, as each language defines it (no partition in SASE+,
  the null key or group in TPStream and COGRA).

:func:`conform` checks a batch against them and *rejects* each event that breaks a rule, alone,
with the reason; the events around it are evaluated as if it had never been there. A column is
converted to the dtype the columnar reader gives the accepted values on their own, so results
never depend on which bad event shared a block with good ones.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from situflow.codecs.arrow_events import BUILD_ERRORS, array_of, is_json_text, values_of
from situflow.codecs.event_time import json_kind
from situflow.events import EventBatch, numpy_column
from situflow.lang.attributes import AttributeTypes

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


@dataclass
class Conformed:
    """The accepted events, and per rejected event its sequence number and reason."""

    batch: EventBatch
    rejected: list[tuple[int, str]] = field(default_factory=list)


def conform(batch: EventBatch, types: AttributeTypes) -> Conformed:
    """The events of ``batch`` that follow ``types``, their columns converted (module doc)."""
    n = len(batch)
    reasons: dict[int, str] = {}
    columns = dict(batch.columns)
    for name in types.keys:
        found = columns.get(name)
        if found is not None:
            columns[name] = _key_column(name, found, reasons)
    for name in sorted(types.numeric):
        found = columns.get(name)
        if found is not None and name not in types.keys:
            columns[name] = _numeric_column(name, found, reasons)
    if not reasons:
        if all(columns[k] is batch.columns[k] for k in columns):
            return Conformed(batch)
        return Conformed(EventBatch(columns, batch.ts, batch.seq, batch.ids, batch.types))
    keep = np.ones(n, bool)
    keep[list(reasons)] = False
    accepted = EventBatch(columns, batch.ts, batch.seq, batch.ids, batch.types).take(
        np.flatnonzero(keep))
    columns = {name: _settle(column) for name, column in accepted.columns.items()}
    rejected = [(int(batch.seq[i]), reasons[i]) for i in sorted(reasons)]
    return Conformed(EventBatch(columns, accepted.ts, accepted.seq, accepted.ids, accepted.types),
                     rejected)


def carried(batch: EventBatch, names: Iterable[str]) -> set[str]:
    """Those of ``names`` that some event of ``batch`` carries (not missing)."""
    found = set()
    for name in names:
        column = batch.columns.get(name)
        if column is None or not len(column):
            continue
        if column.dtype.kind == "f":
            present = not np.isnan(column).all()
        elif column.dtype.kind == "O":
            present = any(not _missing(v) for v in column)
        else:
            present = True
        if present:
            found.add(name)
    return found


def _numeric_column(name: str, column: np.ndarray, reasons: dict[int, str]) -> np.ndarray:
    kind = column.dtype.kind
    if kind in "iuf":
        return column
    if kind == "b":
        for i in range(len(column)):
            reasons.setdefault(i, f"attribute '{name}' must be a number, found a boolean")
        return np.full(len(column), np.nan)
    values = np.full(len(column), np.nan)
    for i, value in enumerate(column.tolist()):
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        if isinstance(value, int | float) and not isinstance(value, bool):
            values[i] = float(value)
        else:
            reasons.setdefault(i, f"attribute '{name}' must be a number, found {_describe(value)}")
    return _with_ints(column, values)


def _key_column(name: str, column: np.ndarray, reasons: dict[int, str]) -> np.ndarray:
    if column.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            beyond = np.flatnonzero(~(np.abs(column) < 2.0**63) & ~np.isnan(column))
        for i in beyond.tolist():
            reasons.setdefault(i, f"partition attribute '{name}' is a number beyond 64 bits")
        return column
    if column.dtype.kind != "O":
        return column
    values = column.tolist()
    # Text and missing keys are fine: the common column, decided without a Python loop.
    if set(map(type, values)) <= {str, type(None)}:
        return column
    for i, value in enumerate(values):
        problem = key_problem(name, value)
        if problem is not None:
            reasons.setdefault(i, problem)
    return column


def key_problem(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be the partition attribute ``name``, or None if it can (a missing
    value is missing, not a problem)."""
    if _missing(value) or isinstance(value, str | bool):
        return None
    if isinstance(value, int | float):
        if INT64_MIN <= value <= INT64_MAX:
            return None
        return f"partition attribute '{name}' is a number beyond 64 bits"
    return (f"partition attribute '{name}' must be text, a number or a boolean, "
            f"found {_describe(value)}")


def arrow_key_problem(name: str, batch: pa.RecordBatch) -> str | None:
    """:func:`key_problem` of the first value of the key column ``name`` of an Arrow batch
    that has a problem, by column type where that decides (a list column, a float column)."""
    field = batch.schema.field(name)
    column = batch.column(name)
    kind = field.type
    if pa.types.is_floating(kind) or pa.types.is_unsigned_integer(kind):
        # Imported here: pyarrow.compute costs 30 ms of start-up, which `situflow run` spares.
        import pyarrow.compute as pc

        limit = 2.0**63 if pa.types.is_floating(kind) else 2**63
        beyond = pc.greater_equal(pc.abs(column) if pa.types.is_floating(kind) else column,
                                  pa.scalar(limit, kind))
        return (f"partition attribute '{name}' is a number beyond 64 bits"
                if pc.any(beyond).as_py() else None)
    if pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_boolean(kind) \
            or pa.types.is_null(kind) or pa.types.is_large_string(kind):
        return None
    values = values_of(batch, name) if is_json_text(field) else column.to_pylist()
    return next((p for v in values if (p := key_problem(name, v)) is not None), None)


def _with_ints(column: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Integers stay int64 when every value is one (as the columnar reader keeps them)."""
    items = column.tolist()
    if all(isinstance(v, int) and not isinstance(v, bool) and INT64_MIN <= v <= INT64_MAX
           for v in items):
        return np.asarray(items, dtype=np.int64)
    return values


def _settle(column: np.ndarray) -> np.ndarray:
    """An object column of the accepted events, typed as the columnar reader types them when
    they are read alone (:func:`situflow.events.numpy_column`)."""
    if column.dtype.kind != "O" or not len(column):
        return column
    try:
        return numpy_column(array_of(column.tolist()))
    except BUILD_ERRORS:
        return column


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _describe(value: Any) -> str:
    kind = json_kind(value)
    if isinstance(value, str):
        return f"{kind} {value[:40]!r}"
    return kind
