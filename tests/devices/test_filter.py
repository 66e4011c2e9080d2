"""The filter of thesis §4.3.2: four implementations, one output, in input order."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from situflow.devices.filter import Filter
from situflow.lang import ast
from situflow.lang.compile import compile_vector
from tests.devices.test_opencl_c import columns as opencl_columns
from tests.devices.test_opencl_c import predicates, resolve

IMPLEMENTATIONS = ("single_threaded", "multi_threaded", "dispatch", "zero_copy")


def ref(name):
    return ast.Ref(None, name)


def binary(op, left, right):
    return ast.Binary(op, left, right)


# The thesis' predicate (Euclidean norm of the payload above a threshold, squared), with a
# second conjunct on an integer column and a NaN-sensitive disjunct.
NORM = binary("+", binary("*", ref("x"), ref("x")), binary("*", ref("y"), ref("y")))
PREDICATE = binary("or", binary("and", binary(">", NORM, ast.Literal(1.0)),
                                binary("!=", binary("%", ref("k"), ast.Literal(3)), ast.Literal(0))),
                   binary("=", ref("y"), ast.Literal(0.25)))


def reference(columns):
    """The predicate event by event in plain Python: NaN compares false, != included."""
    out = []
    for i, (x, y, k) in enumerate(zip(columns["x"].tolist(), columns["y"].tolist(),
                                      columns["k"].tolist(), strict=True)):
        norm = x * x + y * y
        remainder = 0 if k % 3 == 0 else int(np.fmod(k, 3))
        if (norm > 1.0 and remainder != 0) or y == 0.25:
            out.append(i)
    return np.array(out, dtype=np.int64)


def batch(n, seed=0, nan=0.1):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=n), rng.normal(size=n)
    y[rng.random(n) < 0.05] = 0.25
    x[rng.random(n) < nan] = np.nan
    return {"x": x, "y": y, "k": rng.integers(-50, 50, n)}


@pytest.fixture(scope="module")
def filter_(device):
    f = Filter(PREDICATE, device)
    yield f
    f.close()


def sizes(lanes):
    unit = lanes * 64
    return [0, 1, 7, 8, 9, unit - 1, unit, unit + 1, 3 * unit + 5]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_every_implementation_passes_exactly_the_reference_events_in_input_order(
        filter_, device, implementation):
    for n in sizes(device.lanes):
        columns = batch(n, seed=n)
        got = getattr(filter_, implementation)(columns)
        assert got.dtype == np.int64
        assert got.tolist() == reference(columns).tolist(), n


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_all_true_and_all_false_batches(device, implementation):
    n = device.lanes * 64 + 3
    columns = {"x": np.full(n, 2.0), "y": np.zeros(n), "k": np.ones(n, np.int64)}
    everything = Filter(binary(">", ref("x"), ast.Literal(1)), device)
    nothing = Filter(binary("<", ref("x"), ast.Literal(1)), device)
    assert getattr(everything, implementation)(columns).tolist() == list(range(n))
    assert getattr(nothing, implementation)(columns).tolist() == []


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_a_stream_cut_into_batches_anywhere_gives_the_whole_streams_output(
        filter_, implementation):
    columns = batch(5000, seed=7, nan=0.3)
    expected = reference(columns).tolist()
    got: list[int] = []
    for lo, hi in [(0, 1), (1, 513), (513, 2048), (2048, 2048), (2048, 4999), (4999, 5000)]:
        part = {name: c[lo:hi] for name, c in columns.items()}
        got += (getattr(filter_, implementation)(part) + lo).tolist()
    assert got == expected


def test_a_million_events_once(filter_):
    columns = batch(1 << 20, seed=3)
    expected = reference(columns)
    for implementation in IMPLEMENTATIONS:
        assert np.array_equal(getattr(filter_, implementation)(columns), expected), implementation


def test_a_predicate_on_strings_stays_on_the_cpu_and_says_why(device):
    f = Filter(binary("=", ref("name"), ast.Literal("bob")), device)
    columns = {"name": np.array(["bob", None, "al", "bob"], dtype=object)}
    assert "string" in f.unsupported
    assert f.zero_copy(columns).tolist() == f.dispatch(columns).tolist() == [0, 3]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(predicate=predicates(), size=st.integers(0, 1100), seed=st.integers(0, 2**32 - 1))
def test_random_predicates_pass_the_same_events_in_every_implementation(
        device, predicate, size, seed):
    columns = opencl_columns(size, seed)
    try:
        with np.errstate(all="ignore"):
            values = compile_vector(predicate, resolve)(columns)
    except TypeError:
        return  # numpy refuses the predicate; so does every implementation
    expected = np.flatnonzero(np.broadcast_to(np.asarray(values, dtype=np.bool_), (size,)))
    f = Filter(predicate, device)
    try:
        for implementation in IMPLEMENTATIONS:
            with np.errstate(all="ignore"):
                got = getattr(f, implementation)(columns)
            assert got.tolist() == expected.tolist(), implementation
    finally:
        f.close()
