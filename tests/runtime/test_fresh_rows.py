"""Skipping what a redelivery repeats (situflow/runtime/dedup.py ``fresh_rows``), without a broker.

K-slack releases each key's events in increasing (time, seq); after a crash, an ordered message
comes again, whole or overlapping the next one. The evaluating services keep, per key, the
position of the last event evaluated and evaluate only the rows after it. ``fresh_rows``
decides that for a whole batch at once; it is checked here against the definition row by row,
on any rows (also out of order, with ties and with checkpointed positions), for keys of one or
two attributes, floats (0.0 and -0.0 are two keys, as their ``repr`` are), nulls and nested
values.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from situflow.errors import InputError
from situflow.runtime import OrderedLayout, fresh_rows
from tests.profiles import scaled

SEQ_FIELD = "seq"


def fresh_rows_by_row(positions: dict[str, list[int]], rows: list[dict[str, Any]],
                      key_fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """The definition: each row against its key's position, which a fresh row moves on."""
    fresh = []
    for row in rows:
        name = repr(tuple(row[f] for f in key_fields))
        last = positions.get(name)
        if last is None or [row["ts"], row[SEQ_FIELD]] > last:
            positions[name] = [row["ts"], row[SEQ_FIELD]]
            fresh.append(row)
    return fresh


KEYS: dict[str, tuple[tuple[str, ...], st.SearchStrategy[Any]]] = {
    "int": (("car",), st.fixed_dictionaries({"car": st.integers(0, 4)})),
    "float": (("car",), st.fixed_dictionaries(
        {"car": st.sampled_from([0.0, -0.0, 1.5, float("nan"), None])})),
    "two attributes": (("car", "lane"), st.fixed_dictionaries(
        {"car": st.integers(0, 2), "lane": st.sampled_from(["a", "b", None])})),
    "nested": (("car",), st.fixed_dictionaries({"car": st.sampled_from([[1], [1, 2], []])})),
}


def table(rows: list[dict[str, Any]], names: list[str]) -> pa.RecordBatch:
    if not rows:
        return pa.RecordBatch.from_pydict({n: pa.array([], pa.int64()) for n in names})
    return pa.RecordBatch.from_pylist(rows)


def values(rows: list[dict[str, Any]], names: list[str]) -> list[tuple[Any, ...]]:
    return [tuple(row[n] for n in names) for row in rows]


@pytest.mark.parametrize("kind", sorted(KEYS))
@settings(max_examples=scaled(1.5))
@given(data=st.data())
def test_fresh_rows_equal_the_row_by_row_definition(kind: str, data: st.DataObject) -> None:
    key_fields, key = KEYS[kind]
    layout = OrderedLayout("ts", key_fields, SEQ_FIELD)
    row = st.builds(lambda k, ts, seq: {**k, "ts": ts, SEQ_FIELD: seq},
                    key, st.integers(0, 6), st.integers(0, 6))
    names = [*key_fields, "ts", SEQ_FIELD]
    batches = data.draw(st.lists(st.lists(row, max_size=12), max_size=6))
    checkpointed = data.draw(st.lists(row, max_size=4))  # positions restored from a checkpoint
    check_against_definition(batches, checkpointed, layout, names)


def check_against_definition(batches: list[list[dict[str, Any]]],
                             checkpointed: list[dict[str, Any]], layout: OrderedLayout,
                             names: list[str]) -> None:
    """``fresh_rows`` over ``batches`` after ``checkpointed`` equals the row-by-row
    definition: the rows it keeps and the positions it leaves, in the checkpoint's order."""
    key_fields = layout.key_fields
    expected_positions: dict[str, list[int]] = {}
    fresh_rows_by_row(expected_positions, checkpointed, key_fields)
    positions = {name: list(last) for name, last in expected_positions.items()}
    for rows in batches:
        expected = fresh_rows_by_row(expected_positions, rows, key_fields)
        got = fresh_rows(positions, table(rows, names), layout)
        # repr: nan is nan, -0.0 is not 0.0
        assert repr(values(got.to_pylist(), names)) == repr(values(expected, names))
        assert positions == expected_positions
        assert list(positions) == list(expected_positions)


@pytest.mark.parametrize("kind", sorted(KEYS))
@settings(max_examples=scaled(1.5))
@given(data=st.data())
def test_rows_in_k_slack_order_are_fresh_as_row_by_row(kind: str, data: st.DataObject) -> None:
    """Batches in strictly increasing (time, seq), as K-slack releases them (``fresh_rows``
    decides those without sorting), against the definition."""
    key_fields, key = KEYS[kind]
    layout = OrderedLayout("ts", key_fields, SEQ_FIELD)
    row = st.builds(lambda k, ts, seq: {**k, "ts": ts, SEQ_FIELD: seq},
                    key, st.integers(0, 6), st.integers(0, 6))
    names = [*key_fields, "ts", SEQ_FIELD]
    batches = [list({(r["ts"], r[SEQ_FIELD]): r for r in sorted(
        rows, key=lambda r: (r["ts"], r[SEQ_FIELD]))}.values())
        for rows in data.draw(st.lists(st.lists(row, max_size=12), max_size=6))]
    check_against_definition(batches, data.draw(st.lists(row, max_size=4)), layout, names)


@given(st.lists(st.integers(0, 3), min_size=1, max_size=60), st.data())
def test_redelivered_messages_of_a_stream_give_each_event_once(cars: list[int],
                                                               data: st.DataObject) -> None:
    """The stream as K-slack releases it, cut into messages that are delivered again after
    crashes (from an earlier message on, and cut elsewhere): every event is fresh once."""
    layout = OrderedLayout("ts", ("car",), SEQ_FIELD)
    events = [{"car": car, "ts": t // 2, SEQ_FIELD: t} for t, car in enumerate(cars)]
    positions: dict[str, list[int]] = {}
    fresh: list[dict[str, Any]] = []
    start = 0
    redelivered = data.draw(st.lists(st.integers(0, 10), max_size=5))  # after each crash
    while start < len(events):
        end = data.draw(st.integers(start + 1, len(events)))
        fresh += fresh_rows(positions, pa.RecordBatch.from_pylist(events[start:end]),
                            layout).to_pylist()
        start = max(0, end - (redelivered.pop() if redelivered else 0))
    assert fresh == events


def test_a_batch_without_its_key_or_with_non_integer_positions_is_bad_input() -> None:
    layout = OrderedLayout("ts", ("car",), SEQ_FIELD)
    with pytest.raises(InputError, match="missing partition attribute 'car'"):
        fresh_rows({}, pa.RecordBatch.from_pylist([{"ts": 1, SEQ_FIELD: 1}]), layout)
    with pytest.raises(InputError, match=f"{SEQ_FIELD!r} must be integers"):
        fresh_rows({}, pa.RecordBatch.from_pylist([{"car": 1, "ts": 1, SEQ_FIELD: 1.5}]), layout)
