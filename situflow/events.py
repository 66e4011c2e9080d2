"""Columnar event batches: the unit every operator consumes.

An event is a row of attribute columns plus its event time ``ts`` (int64, in the stream's time
unit), its sequence number ``seq`` (position in the ordered stream: the Kafka offset of the
ordered topic, the 0-based line number of a file), its id, and optionally its type name.
Operators must give the same results whatever the batch boundaries are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from situflow.codecs.arrow_events import batch_from_events, is_json_text, values_of
from situflow.errors import InputError

# Every integer up to this magnitude is exact as a float64.
DOUBLE_EXACT = 1 << 53
# A time before every event time: the int64 minimum, so it fits the kernels' int64 arrays.
NEVER = -(1 << 63)


@dataclass(frozen=True, slots=True)
class EventBatch:
    columns: Mapping[str, np.ndarray]
    ts: np.ndarray
    seq: np.ndarray
    ids: np.ndarray
    types: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ts)

    def slice(self, start: int, stop: int) -> EventBatch:
        return EventBatch(
            {k: v[start:stop] for k, v in self.columns.items()},
            self.ts[start:stop],
            self.seq[start:stop],
            self.ids[start:stop],
            None if self.types is None else self.types[start:stop],
        )

    def take(self, index: np.ndarray) -> EventBatch:
        return EventBatch(
            {k: v[index] for k, v in self.columns.items()},
            self.ts[index],
            self.seq[index],
            self.ids[index],
            None if self.types is None else self.types[index],
        )

    def column(self, name: str) -> np.ndarray:
        """An attribute column; an attribute no event has reads as missing (NaN)."""
        found = self.columns.get(name)
        return np.full(len(self), np.nan) if found is None else found

    def record(self, i: int, time_field: str = "ts", type_field: str = "type") -> dict[str, Any]:
        """Event ``i`` as the JSON object it came from: its present attributes, time and type."""
        out = {k: plain(v[i]) for k, v in self.columns.items()}
        out = {k: v for k, v in out.items() if v is not None}
        out[time_field] = int(self.ts[i])
        if self.types is not None and self.types[i] is not None:
            out[type_field] = self.types[i]
        return out

    def row(self, i: int) -> dict[str, Any]:
        """One event as a dict (slow; for results and error messages)."""
        out = {k: plain(v[i]) for k, v in self.columns.items()}
        out["ts"] = int(self.ts[i])
        return out

    @classmethod
    def from_arrow(
        cls,
        table: pa.Table | pa.RecordBatch,
        *,
        time_field: str = "ts",
        type_field: str = "type",
        id_field: str = "id",
        seq: np.ndarray | None = None,
    ) -> EventBatch:
        """Columns of an Arrow table; ``seq`` defaults to 0..n-1, the event id to ``seq``."""
        n = table.num_rows
        names = table.schema.names
        if time_field not in names:
            raise InputError(f"events have no event-time field '{time_field}'")
        ts = _time_column(table.column(time_field), time_field)
        seq = np.arange(n, dtype=np.int64) if seq is None else seq
        ids = numpy_column(table.column(id_field)) if id_field in names else seq
        types = None
        if type_field in names:
            text = (None if is_json_text(table.schema.field(type_field))
                    else text_column(table.column(type_field)))
            types = object_array(values_of(table, type_field)) if text is None else text
        hidden = {time_field, id_field, type_field}
        # Columns that travel as JSON text (situflow.codecs.arrow_events) hold any JSON value.
        columns = {field.name: object_array(values_of(table, field.name)) if is_json_text(field)
                   else numpy_column(table.column(field.name))
                   for field in table.schema if field.name not in hidden}
        return cls(columns, ts, seq, ids, types)

    @classmethod
    def from_records(cls, records: Sequence[Mapping[str, Any]], **options: Any) -> EventBatch:
        """From dicts (tests, small inputs); same field conventions as :meth:`from_arrow`.

        Every attribute any record has is a column (missing where a record lacks it).
        """
        if not records:
            return cls.from_arrow(pa.table({options.get("time_field", "ts"): pa.array([], pa.int64())}),
                                  **options)
        return cls.from_arrow(pa.Table.from_batches([batch_from_events(records)]), **options)


def numpy_column(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """An Arrow column as the operators read it: integers int64 (float64 with NaN where
    missing), floats float64, booleans bool (object where missing), anything else object
    (a dictionary-encoded column as its values would be)."""
    kind = column.type
    if pa.types.is_dictionary(kind) and not _is_text(kind.value_type):
        return numpy_column(column.dictionary_decode() if isinstance(column, pa.Array)
                            else pa.chunked_array([c.dictionary_decode() for c in column.chunks],
                                                  kind.value_type))
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        if column.null_count:
            if pa.types.is_integer(kind) and _beyond_doubles(column):
                return object_array(column.to_pylist())  # exact, as they are without nulls
            return np.asarray(column.cast(pa.float64()).to_numpy(zero_copy_only=False))
        return np.asarray(column.to_numpy(zero_copy_only=False))
    if pa.types.is_boolean(kind) and not column.null_count:
        return np.asarray(column.to_numpy(zero_copy_only=False), dtype=bool)
    if (text := text_column(column)) is not None:
        return text
    if pa.types.is_null(kind):
        return np.full(len(column), np.nan)
    return object_array(column.to_pylist())


def text_column(column: pa.ChunkedArray | pa.Array) -> np.ndarray | None:
    """A text column as an object array of str (None where missing), converted in C (the
    values :func:`object_array` of ``to_pylist`` gives, at a tenth of the cost); None for a
    column of another type."""
    kind = column.type
    if pa.types.is_dictionary(kind) and _is_text(kind.value_type):
        return _dictionary_text(column)
    if not _is_text(kind):
        return None
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=object)


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _dictionary_text(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A dictionary-encoded text column as :func:`text_column` gives its values, with one
    ``str`` per distinct value, not per row: every row refers to its value's object. (The
    compiled loop factorizes texts by object identity, :mod:`situflow.nfa.kernel.texts`.)"""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    parts = []
    for chunk in chunks:
        # The values, then None at the end for the rows that have no value.
        values = np.empty(len(chunk.dictionary) + 1, dtype=object)
        values[:-1] = chunk.dictionary.to_numpy(zero_copy_only=False)
        # Indices with nulls come as floats with NaN (no pyarrow.compute, 30 ms of start-up).
        indices = np.asarray(chunk.indices.to_numpy(zero_copy_only=False))
        if chunk.indices.null_count:
            indices = np.where(np.isnan(indices), len(values) - 1, indices)
        parts.append(values[indices.astype(np.intp, copy=False)])
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.empty(0, dtype=object)


def _beyond_doubles(column: pa.ChunkedArray | pa.Array) -> bool:
    """Whether an integer column holds a value that a float64 cannot hold exactly (beyond
    2^53): as floats, distinct keys would merge, and only in the blocks with a missing value."""
    # Imported here: pyarrow.compute costs 30 ms of start-up, and columns with nulls are rare.
    import pyarrow.compute as pc

    bounds = pc.min_max(column)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    return low is not None and (low < -DOUBLE_EXACT or high > DOUBLE_EXACT)


def object_array(values: Sequence[Any]) -> np.ndarray:
    """A 1-d object array of ``values``, lists and dicts included (``np.asarray`` would make
    a list of equal-length lists two-dimensional)."""
    array = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):
        array[i] = value
    return array


def _time_column(column: pa.ChunkedArray | pa.Array, name: str) -> np.ndarray:
    if column.null_count:
        raise InputError(f"an event has no event time '{name}'")
    kind = column.type
    if pa.types.is_integer(kind):
        return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.int64)
    if pa.types.is_floating(kind):
        values = np.asarray(column.to_numpy(zero_copy_only=False))
        if not np.all(np.isfinite(values)) or not np.all(values == np.floor(values)):
            raise InputError(f"event time '{name}' must be a whole number")
        return values.astype(np.int64)
    raise InputError(f"event time '{name}' must be an integer, found {kind}")


def factorize(column: np.ndarray) -> tuple[list[Any], np.ndarray]:
    """The distinct values of a key column as plain Python (NaN as None), and each row's index
    among them. Values of unlike types (text among numbers) cannot be sorted together: they
    are then numbered in first-seen order."""
    try:
        uniques, inverse = np.unique(column, return_inverse=True)
        return [plain(u) for u in uniques.tolist()], np.asarray(inverse).reshape(-1)
    except TypeError:
        index: dict[Any, int] = {}
        codes = np.fromiter((index.setdefault(plain(v), len(index)) for v in column.tolist()),
                            dtype=np.int64, count=len(column))
        return list(index), codes


def plain(value: Any) -> Any:
    """A JSON-able Python scalar: numpy scalars unwrapped, NaN as None."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


def hashable_key(key: Any) -> Any:
    """A partition key usable as a dict key: JSON gives a multi-attribute key back as a list."""
    return tuple(key) if isinstance(key, list) else key
