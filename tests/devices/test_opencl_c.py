"""Expressions generated as OpenCL C give compile_vector's results bit for bit."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from situflow.devices.opencl_c import OpenCLExpression, Unsupported
from situflow.devices.vector import compile_device_vector
from situflow.lang import ast
from situflow.lang.compile import compile_vector

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, np.nan, np.inf, -np.inf, 1e308, 5e-324, 2.0**53 + 2]
INTS = [0, 1, -1, 2, -3, 7, 2**53 + 1, np.iinfo(np.int64).max, np.iinfo(np.int64).min]


def resolve(node):
    name = node.name
    return lambda env: env[name]


def columns(n, seed):
    rng = np.random.default_rng(seed)
    out = {
        "i": rng.choice(np.array(INTS + list(range(-5, 6)), dtype=np.int64), n),
        "j": rng.choice(np.array(INTS + list(range(-5, 6)), dtype=np.int64), n),
        "x": rng.choice(np.array(SPECIAL + list(rng.normal(size=8)), dtype=np.float64), n),
        "y": rng.choice(np.array(SPECIAL + list(rng.normal(size=8)), dtype=np.float64), n),
        "b": rng.random(n) < 0.5,
    }
    return out


literals = st.one_of(
    st.sampled_from(INTS).map(int), st.sampled_from(SPECIAL).map(float),
    st.integers(-10, 10), st.floats(allow_nan=True, allow_infinity=True),
).map(lambda v: ast.Literal(v))
booleans = st.booleans().map(lambda v: ast.Literal(v))
refs = st.sampled_from(["i", "j", "x", "y", "i", "x"]).map(lambda name: ast.Ref(None, name))
flags = st.just(ast.Ref(None, "b"))


def expressions():
    return st.recursive(
        st.one_of(refs, refs, literals),
        lambda inner: st.one_of(
            st.tuples(st.just("-"), inner).map(lambda t: ast.Unary(*t)),
            st.tuples(st.sampled_from(["+", "-", "*", "/", "%"]), inner, inner).map(
                lambda t: ast.Binary(*t)),
        ),
        max_leaves=4,
    )


def predicates():
    """Comparisons of arithmetic, combined by AND, OR and NOT with boolean columns and
    literals (what a WHERE clause holds)."""
    comparison = st.tuples(st.sampled_from(["<", ">", "<=", ">=", "=", "!="]), expressions(),
                           expressions()).map(lambda t: ast.Binary(*t))
    return st.recursive(
        st.one_of(comparison, comparison, comparison, flags, booleans),
        lambda inner: st.one_of(
            st.tuples(st.just("not"), inner).map(lambda t: ast.Unary(*t)),
            st.tuples(st.sampled_from(["and", "or"]), inner, inner).map(lambda t: ast.Binary(*t)),
        ),
        max_leaves=4,
    )


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype
    assert a.shape == b.shape
    if a.dtype.kind == "f":  # bit for bit, NaN included, -0.0 apart from 0.0
        assert a.view(np.int64).tolist() == b.view(np.int64).tolist() or (
            np.array_equal(np.isnan(a), np.isnan(b))
            and np.array_equal(a[~np.isnan(a)].view(np.int64), b[~np.isnan(b)].view(np.int64)))
    else:
        assert a.tolist() == b.tolist()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=st.one_of(expressions(), predicates()), seed=st.integers(0, 2**32 - 1))
def test_a_random_expression_on_the_device_equals_compile_vector_or_stays_on_the_cpu(
        device, expr, seed):
    env = columns(67, seed)
    try:
        with np.errstate(all="ignore"):
            expected = compile_vector(expr, resolve)(env)
    except TypeError:
        return  # numpy refuses it (say -true); the device evaluator delegates, raising the same
    got = compile_device_vector(expr, resolve, device=device)(env)
    same(got, expected)


def test_strings_are_refused_at_compile_time_and_stay_on_the_cpu(device):
    expr = ast.Binary("=", ast.Ref(None, "name"), ast.Literal("bob"))
    with pytest.raises(Unsupported, match="string"):
        OpenCLExpression(expr, resolve)
    env = {"name": np.array(["bob", None, "al"], dtype=object)}
    assert compile_device_vector(expr, resolve, device=device)(env).tolist() == [True, False, False]


def test_a_column_of_objects_runs_on_the_cpu_for_that_batch(device):
    expr = ast.Binary(">", ast.Ref(None, "v"), ast.Literal(1))
    evaluate = compile_device_vector(expr, resolve, device=device)
    assert evaluate({"v": np.array([0, 2, None], dtype=object)}).tolist() == [False, True, False]
    assert evaluate({"v": np.array([0, 2, 3])}).tolist() == [False, True, True]


def test_nan_is_missing_so_every_comparison_with_it_is_false_even_not_equal(device):
    env = {"x": np.array([np.nan, 1.0, 2.0])}
    for op in ("<", ">", "<=", ">=", "=", "!="):
        expr = ast.Binary(op, ast.Ref(None, "x"), ast.Literal(1.0))
        got = compile_device_vector(expr, resolve, device=device)(env)
        assert got[0] == np.False_
        same(got, compile_vector(expr, resolve)(env))


def test_integer_remainder_by_zero_or_minus_one_is_zero_as_numpy_fmod_gives(device):
    env = {"i": np.array([np.iinfo(np.int64).min, 7, -7]), "j": np.array([-1, 0, 2])}
    expr = ast.Binary("%", ast.Ref(None, "i"), ast.Ref(None, "j"))
    assert compile_device_vector(expr, resolve, device=device)(env).tolist() == [0, 0, -1]
