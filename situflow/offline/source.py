"""Where offline evaluation reads events: an archive partition, or a table in memory (tests).

An :class:`EventSource` answers the few questions replay-interval widening asks
(:func:`situflow.offline.replay.widen`): the events of a time range, optionally of one
partition key, and the time span of a partition's data.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from situflow.results import json_number


class EventSource(Protocol):
    def events(self, partition: int, lo: int | None, hi: int | None,
               key: Any = None) -> pa.Table:
        """The rows with ``lo <= time <= hi`` (None: unbounded) in archive order, only those of
        partition key ``key`` when given."""
        ...

    def bounds(self, partition: int) -> tuple[int, int] | None:
        """The first and last event time of ``partition`` (None: no events)."""
        ...


def key_text(key: Any) -> str:
    """A partition key as one comparable text: a tuple or list of values, or one value (a
    result's ``key`` of a one-attribute partition), as a JSON array.

    >>> key_text((7,)) == key_text(7.0) == key_text([7])
    True
    """
    values = list(key) if isinstance(key, tuple | list) else [key]
    return json.dumps([json_number(plain_value(v)) for v in values])


def interval_key_text(key: Any) -> str:
    """:func:`key_text` of an interval's key: the secondary index's JSON text of the key values
    (``'[7]'``), or the values themselves."""
    return key_text(json.loads(key)) if isinstance(key, str) else key_text(key)


def plain_value(value: Any) -> Any:
    """A numpy scalar as the Python value (NaN as None)."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


def row_keys(table: pa.Table, key_fields: Sequence[str]) -> list[str]:
    """:func:`key_text` of every row's key attributes."""
    columns = [table.column(f).to_pylist() if f in table.column_names else [None] * table.num_rows
               for f in key_fields]
    return key_texts(columns) if columns else [key_text(())] * table.num_rows


def key_texts(columns: Sequence[Sequence[Any] | np.ndarray]) -> list[str]:
    """:func:`key_text` of each row of the key ``columns`` (equally long), computed once per
    distinct key: a planner widening intervals reads tens of thousands of events of a few
    thousand keys."""
    if len(columns) == 1 and isinstance(columns[0], np.ndarray) and columns[0].dtype.kind in "iu":
        distinct, inverse = np.unique(columns[0], return_inverse=True)
        return np.array([key_text(v) for v in distinct.tolist()], dtype=object)[inverse].tolist()
    memo: dict[tuple[Any, ...], str] = {}
    texts = []
    for values in zip(*(c.tolist() if hasattr(c, "tolist") else c for c in columns),
                      strict=True):
        token = tuple((v.__class__, v) for v in values)  # True and 1 are different keys
        text = memo.get(token)
        if text is None:
            text = memo[token] = key_text(values)
        texts.append(text)
    return texts


@dataclass(frozen=True)
class TableSource:
    """Events in memory, one Arrow table per partition, each in archive order."""

    tables: Mapping[int, pa.Table]
    time_field: str = "ts"
    key_fields: tuple[str, ...] = ()

    def events(self, partition: int, lo: int | None, hi: int | None,
               key: Any = None) -> pa.Table:
        table = self.tables[partition]
        time = table.column(self.time_field)
        keep = pc.and_(pc.greater_equal(time, lo) if lo is not None else pc.is_valid(time),
                       pc.less_equal(time, hi) if hi is not None else pc.is_valid(time))
        table = table.filter(keep)
        if key is not None:
            wanted = interval_key_text(key)
            table = table.filter(pa.array(np.array(row_keys(table, self.key_fields)) == wanted,
                                          pa.bool_()))
        return table

    def bounds(self, partition: int) -> tuple[int, int] | None:
        table = self.tables.get(partition)
        if table is None or not table.num_rows:
            return None
        limits = pc.min_max(table.column(self.time_field))
        return int(limits["min"].as_py()), int(limits["max"].as_py())
