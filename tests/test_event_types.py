"""The one typing rule (SEMANTICS.md, "Event time and types"): types come from the query's use of
an attribute, and an event that breaks the rule is rejected alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from situflow.event_types import arrow_key_problem, conform
from situflow.events import EventBatch
from situflow.lang.attributes import AttributeTypes
from situflow.languages import compile_query
from tests.profiles import scaled
from tests.strategies import json_values

EXAMPLES = Path(__file__).parents[1] / "situflow" / "examples"


@pytest.mark.parametrize(("example", "numeric", "keys"), [
    ("aggressive_drivers.tps", {"accel", "speed"}, ("car_id",)),
    ("rising_stocks.sase", {"price", "volume"}, ("symbol",)),
    ("downtrends.cogra", {"price"}, ("company", "sector")),
])
def test_a_query_says_which_attributes_are_numbers_and_which_are_keys(example, numeric, keys):
    types = compile_query((EXAMPLES / example).read_text()).attribute_types
    assert (set(types.numeric), types.keys) == (numeric, keys)
    assert types.used == {*numeric, *keys}


@pytest.mark.parametrize(("where", "numeric"), [
    ("a.x = 5", {"x"}),  # compared with a number
    ("a.x = 'five'", set()),  # with text: any value
    ("a.x = b.y", set()),  # equality between attributes: any value
    ("a.x < b.y", {"x", "y"}),  # ordered against each other
    ("a.x < 'm'", set()),  # ordered against text
    ("a.x + 1 > 0", {"x"}),  # arithmetic
    ("-a.x = b.y", {"x", "y"}),  # b.y is compared with a number
])
def test_a_comparison_with_a_number_or_an_ordering_makes_an_attribute_numeric(where, numeric):
    query = compile_query(f"PATTERN SEQ(A a, B b) WHERE skip_till_any_match(a, b) {{ {where} }}"
                          " WITHIN 10 seconds")
    assert set(query.attribute_types.numeric) == numeric


def test_a_kleene_aggregate_takes_numbers():
    query = compile_query("PATTERN SEQ(A+ a[ ], B b) WHERE skip_till_next_match(a[ ], b) "
                          "{ a[i].x > avg(a[..i-1].y) and b.name = 'z' } WITHIN 10 seconds")
    assert set(query.attribute_types.numeric) == {"x", "y"}
    assert query.attribute_types.used == {"x", "y", "name"}


TYPES = AttributeTypes(frozenset({"speed"}), ("car",))


def batch(*records: dict) -> EventBatch:
    return EventBatch.from_records([{"ts": i, **r} for i, r in enumerate(records)])


def test_numbers_where_numbers_are_needed_and_single_values_as_keys():
    conformed = conform(batch({"car": 1, "speed": 80}, {"car": [1], "speed": 80},
                              {"car": "x", "speed": "80"}, {"car": 2**70, "speed": 1},
                              {"car": 2, "speed": True}, {"car": 3, "speed": None}, {"car": 4}),
                        TYPES)
    assert conformed.rejected == [
        (1, "partition attribute 'car' must be text, a number or a boolean, found a list"),
        (2, "attribute 'speed' must be a number, found text '80'"),
        (3, "partition attribute 'car' is a number beyond 64 bits"),
        (4, "attribute 'speed' must be a number, found a boolean"),
    ]
    accepted = conformed.batch
    assert accepted.seq.tolist() == [0, 5, 6]
    assert accepted.columns["car"].tolist() == [1, 3, 4]
    assert accepted.columns["speed"].dtype == np.float64  # missing values are NaN
    assert np.isnan(accepted.columns["speed"][1:]).all()


def test_a_boolean_among_floats_is_no_number():
    """Arrow would read ``[80.5, true]`` as ``[80.5, 1.0]``: the reader keeps the boolean."""
    conformed = conform(batch({"car": 1, "speed": 80.5}, {"car": 1, "speed": True}), TYPES)
    assert conformed.rejected == [(1, "attribute 'speed' must be a number, found a boolean")]


def test_an_integer_beyond_64_bits_is_a_float_where_a_number_is_expected():
    conformed = conform(batch({"car": 1, "speed": 2**70}, {"car": 1, "speed": 3}), TYPES)
    assert conformed.rejected == []
    assert conformed.batch.columns["speed"].tolist() == [float(2**70), 3.0]


def test_a_missing_key_is_missing_not_rejected():
    conformed = conform(batch({"speed": 1}, {"car": None, "speed": 2}), TYPES)
    assert conformed.rejected == [] and len(conformed.batch) == 2


JSON = json_values(max_leaves=4, max_size=2)


@settings(max_examples=scaled(1.5), derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.fixed_dictionaries({}, optional={"car": JSON, "speed": JSON, "note": JSON}),
                min_size=1, max_size=12))
def test_the_accepted_events_read_as_if_the_rejected_had_never_been_there(records):
    """Columns equal those of the accepted events read on their own (numbers by value)."""
    conformed = conform(batch(*records), TYPES)
    rejected = {seq for seq, _ in conformed.rejected}
    alone = [dict(r, ts=i) for i, r in enumerate(records) if i not in rejected]
    if not alone:
        assert len(conformed.batch) == 0
        return
    expected = conform(EventBatch.from_records(alone), TYPES)
    assert expected.rejected == []
    got = conformed.batch
    assert got.ts.tolist() == expected.batch.ts.tolist()
    for name, column in expected.batch.columns.items():
        if not any(name in r for r in alone):
            continue
        mine = got.columns[name]
        if mine.dtype.kind in "iuf" and column.dtype.kind in "iuf":
            # Integers read as floats where the batch had a missing value; results print
            # whole floats as integers (situflow.results.json_number).
            np.testing.assert_array_equal(mine.astype(float), column.astype(float), name)
        else:
            assert mine.dtype == column.dtype, name
            assert repr(mine.tolist()) == repr(column.tolist()), name


@pytest.mark.parametrize(("column", "problem"), [
    (pa.array([1, 2]), None),
    (pa.array(["a", "b"]), None),
    (pa.array([1.5, 2.0**70]), "partition attribute 'k' is a number beyond 64 bits"),
    (pa.array([2**64 - 1], pa.uint64()), "partition attribute 'k' is a number beyond 64 bits"),
    (pa.array([[1], [2]]), "partition attribute 'k' must be text, a number or a boolean, "
                           "found a list"),
    (pa.array([{"a": 1}]), "partition attribute 'k' must be text, a number or a boolean, "
                           "found an object"),
])
def test_a_key_column_of_an_arrow_message_is_checked_by_its_type(column, problem):
    assert arrow_key_problem("k", pa.RecordBatch.from_arrays([column], names=["k"])) == problem
