"""Skipping what a redelivery repeats: per key, the position of the last event evaluated.

K-slack releases each key's events in strictly increasing (event time, input seq) (thesis
§5.6.1), so after a crash an ordered message that comes again repeats exactly the rows at or
before their key's position; :func:`fresh_rows` keeps the others and moves the positions on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from situflow.codecs import arrow_events
from situflow.errors import InputError
from situflow.runtime.ordered import OrderedLayout


def fresh_rows(positions: dict[str, list[int]], batch: pa.RecordBatch,
               layout: OrderedLayout) -> pa.RecordBatch:
    """The rows after their key's position (a redelivery repeats the others); moves the
    positions on.

    Taken row by row, a row is fresh when its (time, seq) is after its key's position, which
    it then becomes: so a row is fresh exactly when it is after its key's position and after
    every earlier row of its key. That is a running maximum per key, computed for all rows at
    once; the Python work is per key (its name and position), not per row. Rows in K-slack's
    order, strictly increasing (time, seq), need only the comparison with their key's
    position."""
    if not batch.num_rows:
        return batch
    names, group = key_groups(batch, layout.key_fields)
    ts, seq = (integer_column(batch, name) for name in (layout.time_field, layout.seq_field))
    stored = [(g, last) for g, last in enumerate(map(positions.get, names)) if last is not None]
    if in_order(ts, seq):
        keep, lasts = _fresh_in_order(stored, len(names), group, ts, seq)
    else:
        keep, lasts = _fresh_any_order(stored, group, ts, seq)
    for row, t, s in zip(lasts.tolist(), ts[lasts].tolist(), seq[lasts].tolist(), strict=True):
        positions[names[group[row]]] = [t, s]
    return batch if keep.all() else batch.filter(pa.array(keep))


def in_order(ts: np.ndarray, seq: np.ndarray) -> bool:
    """Whether the rows come in strictly increasing (time, seq), as K-slack releases them."""
    step = np.diff(ts)
    return bool(np.all((step > 0) | ((step == 0) & (np.diff(seq) > 0))))


def _fresh_in_order(stored: list[tuple[int, list[int]]], keys: int, group: np.ndarray,
                    ts: np.ndarray, seq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`fresh_rows` of rows in increasing (time, seq): each key's rows increase too, so
    its fresh rows are those after its position, and its last row is its new position. The
    rows kept and each key's last kept row."""
    known = np.zeros(keys, dtype=bool)
    at_ts, at_seq = np.zeros(keys, dtype=np.int64), np.zeros(keys, dtype=np.int64)
    for g, (t, s) in stored:
        known[g], at_ts[g], at_seq[g] = True, t, s
    before_ts, before_seq = at_ts[group], at_seq[group]
    keep = ~known[group] | (ts > before_ts) | ((ts == before_ts) & (seq > before_seq))
    rows = np.flatnonzero(keep)
    last = np.full(keys, -1, dtype=np.int64)
    np.maximum.at(last, group[rows], rows)
    return keep, last[last >= 0]


def _fresh_any_order(stored: list[tuple[int, list[int]]], group: np.ndarray, ts: np.ndarray,
                     seq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`fresh_rows` of rows in any order: a running maximum per key (its docstring).
    The rows kept and each key's last kept row."""
    known = len(stored)
    last_positions = np.array([last for _, last in stored], dtype=np.int64).reshape(known, 2)
    # Each key's position goes before its rows, so that its running maximum starts there.
    all_group = np.concatenate([np.array([g for g, _ in stored], dtype=np.int64), group])
    all_ts = np.concatenate([last_positions[:, 0], ts])
    all_seq = np.concatenate([last_positions[:, 1], seq])
    # (time, seq) pairs as one rank each, equal pairs equal ranks.
    order = np.lexsort((all_seq, all_ts))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.cumsum((np.diff(all_ts[order], prepend=all_ts[order[0]]) != 0) |
                            (np.diff(all_seq[order], prepend=all_seq[order[0]]) != 0))
    # Offset by its key's number, a rank exceeds every rank of the keys before it, so one
    # running maximum in key-major order (rows in batch order) restarts at each key.
    by_key = np.argsort(all_group, kind="stable")
    keys = all_group[by_key]
    value = keys * (int(rank[order[-1]]) + 1) + rank[by_key]
    before = np.empty_like(value)
    before[0], before[1:] = -1, np.maximum.accumulate(value)[:-1]
    fresh = np.flatnonzero((value > before) & (by_key >= known))  # rows only, not positions
    rows = by_key[fresh] - known
    keep = np.zeros(len(group), dtype=bool)
    keep[rows] = True
    # A key's last fresh row is its new position.
    return keep, rows[np.diff(keys[fresh], append=-1) != 0]


def key_groups(batch: pa.RecordBatch, fields: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The batch's keys, each named by ``repr`` of the tuple of its values (as positions are
    checkpointed), and each row's key number (keys numbered in order of first row). Values
    with one ``repr`` are one key value."""
    group = np.zeros(batch.num_rows, dtype=np.int64)
    values: list[tuple[list[Any], np.ndarray]] = []
    for name in fields:
        try:
            column = batch.column(name)
        except KeyError:
            raise InputError(f"missing partition attribute {name!r}") from None
        if arrow_events.is_json_text(batch.schema.field(name)):  # the values, not their text
            distinct, indices = arrow_events.values_of(batch, name), np.arange(batch.num_rows)
        else:
            try:
                encoded = pc.dictionary_encode(column, null_encoding="encode")
                distinct, indices = encoded.dictionary.to_pylist(), encoded.indices.to_numpy()
            except pa.ArrowNotImplementedError:  # nested values: each row is its own entry
                distinct, indices = column.to_pylist(), np.arange(batch.num_rows)
        by_repr: dict[str, int] = {}
        same = np.array([by_repr.setdefault(repr(v), i) for i, v in enumerate(distinct)],
                        dtype=np.int64)
        if values or len(by_repr) < len(distinct):  # (NaNs Arrow tells apart are one "nan")
            # Numbered densely again, in order of first row, so that no product overflows.
            combined = pc.dictionary_encode(pa.array(group * len(distinct) + same[indices]))
            group = combined.indices.to_numpy().astype(np.int64)
        else:
            group = indices.astype(np.int64)
        values.append((distinct, indices))
    firsts = np.flatnonzero(np.diff(np.maximum.accumulate(group), prepend=-1) > 0)
    at_firsts = [[distinct[i] for i in indices[firsts].tolist()] for distinct, indices in values]
    names = [repr(key) for key in zip(*at_firsts, strict=True)]
    return names, group


def integer_column(batch: pa.RecordBatch, name: str) -> np.ndarray:
    column = batch.column(name)
    if not pa.types.is_integer(column.type) or column.null_count:
        raise InputError(f"{name!r} must be integers without nulls, not {column.type}")
    return np.asarray(column.to_numpy(), dtype=np.int64)
