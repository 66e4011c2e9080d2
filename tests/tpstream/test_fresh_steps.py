"""The matcher's skipping of repeated steps and the deriver's checkpoint rows, against their
definitions.

:func:`~situflow.tpstream.split.halves.fresh_steps` keeps the steps (the records of one event
of one key: adjacent, one ``seq`` and ``at``, keys of one JSON text) after their key's position
and moves the positions on; it is compared with the definition written with ``groupby`` over
each record's serialised key. :func:`~situflow.tpstream.derive.state.plain_rows` is
:func:`situflow.events.plain` of each value of a state array.
"""

from __future__ import annotations

import json
import math
from itertools import groupby
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from situflow.events import plain
from situflow.tpstream.derive.state import plain_rows
from situflow.tpstream.split.halves import fresh_steps
from situflow.tpstream.split.records import FINISHED, STARTED, SituationRecord

# Keys whose equality and JSON disagree: 1, 1.0 and True; 0.0 and -0.0; NaN; lists.
KEYS = st.sampled_from([1, 1.0, True, 2, 0.0, -0.0, math.nan, "a", "b", [1, "a"], [1.0, "a"],
                        None])


def reference(positions: dict[str, list[int]], query: str,
              records: list[SituationRecord]) -> list[SituationRecord]:
    fresh: list[SituationRecord] = []
    for (key, seq, at), step in groupby(records, key=lambda r: (json.dumps(r.key), r.seq, r.at)):
        name = f"{query}\x00{key}"
        position, last = [at, seq], positions.get(name)
        if last is None or position > last:
            positions[name] = position
            fresh += step
    return fresh


@st.composite
def record_lists(draw: Any) -> list[SituationRecord]:
    rows = draw(st.lists(st.tuples(KEYS, st.integers(0, 3), st.integers(0, 3),
                                   st.sampled_from([STARTED, FINISHED])), max_size=30))
    return [SituationRecord(kind, key, "B", 0, None, at, seq, {})
            for key, seq, at, kind in rows]


@given(record_lists(), st.dictionaries(st.sampled_from(["q\x001", "q\x00\"a\"", "q\x00NaN"]),
                                       st.lists(st.integers(0, 3), min_size=2, max_size=2)))
def test_fresh_steps_keep_what_the_step_by_step_definition_keeps(
        records: list[SituationRecord], positions: dict[str, list[int]]) -> None:
    expected_positions = {name: list(p) for name, p in positions.items()}
    expected = reference(expected_positions, "q", records)
    assert fresh_steps(positions, "q", records) == expected
    assert positions == expected_positions


@given(st.one_of(
    hnp.arrays(np.float64, hnp.array_shapes(min_dims=2, max_dims=2, min_side=0, max_side=4)),
    hnp.arrays(np.int64, hnp.array_shapes(min_dims=2, max_dims=2, min_side=0, max_side=4)),
    hnp.arrays(np.bool_, hnp.array_shapes(min_dims=2, max_dims=2, min_side=0, max_side=4))))
def test_checkpoint_rows_are_the_plain_values_of_the_state(array: np.ndarray) -> None:
    expected = [[plain(v) for v in row] for row in array.tolist()]
    rows = plain_rows(array)
    assert json.dumps(rows) == json.dumps(expected)
    assert [[type(v) for v in row] for row in rows] == [[type(v) for v in row] for row in expected]


def test_checkpoint_rows_of_objects_unwrap_numpy_scalars() -> None:
    array = np.array([[np.int64(3), None], ["x", np.float64(math.nan)]], dtype=object)
    assert plain_rows(array) == [[3, None], ["x", None]]
