"""Sliding-window aggregation (thesis §4.3.3): the four implementations against a brute-force
reference, bit for bit, at the window edges and across batches."""

import math
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from situflow.devices.windows import (
    CHUNK,
    FUNCTIONS,
    IMPLEMENTATIONS,
    LANES,
    STEPS,
    RangeAggregator,
    SlidingAggregation,
    WindowSpec,
)


def reference(values, lo, hi, function):
    """The module's three-level summation tree, written out plainly in Python."""
    op = {"min": min, "max": max}.get(function)
    ident = math.inf if function == "min" else -math.inf if function == "max" else 0.0
    dtype = values.dtype.type

    def combine(acc, v):
        if op is None:
            return dtype(acc + v)
        if function == "min":
            return v if v < acc else acc
        return v if v > acc else acc

    results = []
    for a, b in zip(lo, hi, strict=True):
        window_acc, count = dtype(ident), 0
        for chunk in range(a, b, CHUNK):
            lanes = [dtype(ident)] * LANES
            for step in range(STEPS):
                for lane in range(LANES):
                    i = chunk + step * LANES + lane
                    if i < b and values[i] == values[i]:
                        lanes[lane] = combine(lanes[lane], values[i])
                        count += 1
            chunk_acc = dtype(ident)
            for lane in range(LANES):
                chunk_acc = combine(chunk_acc, lanes[lane])
            window_acc = combine(window_acc, chunk_acc)
        if function == "count":
            results.append(count)
        elif function == "sum":
            results.append(window_acc)
        elif count == 0:
            results.append(math.nan)
        elif function == "avg":
            results.append(dtype(window_acc / dtype(count)))
        else:
            results.append(window_acc)
    return np.array(results, np.int64 if function == "count" else values.dtype)


def aggregator(function, implementation, device):
    return RangeAggregator(function, implementation,
                           device if implementation in ("dispatch", "zero-copy") else None)


def same(a, b):
    """Equal bit for bit (NaN equals NaN, -0.0 differs from 0.0)."""
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()


# Window lengths at the edges of the tree: empty, one, a device's lanes × 64 (512 on PoCL) ± 1,
# a chunk ± 1, several chunks with a ragged end.
EDGE_LENGTHS = [0, 1, 511, 512, 513, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 17]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("function", FUNCTIONS)
def test_every_implementation_gives_the_reference_tree_bit_for_bit(function, implementation, device):
    rng = np.random.default_rng(7)
    values = rng.normal(size=5000) * 10.0 ** rng.integers(-3, 4, size=5000)
    values[rng.random(5000) < 0.1] = np.nan
    lo = np.array([0, 4000, 17, 100, 3, 2000, 0, 1500, 900])
    hi = lo + np.array(EDGE_LENGTHS)
    got = aggregator(function, implementation, device)(values, lo, hi)
    assert same(got, reference(values, lo, hi, function))


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_a_window_of_2_20_integer_values_sums_exactly_and_agrees_with_numpy(implementation, device):
    rng = np.random.default_rng(1)
    values = rng.integers(-1000, 1000, size=1 << 20).astype(np.float64)
    values[::97] = np.nan
    lo, hi = np.array([0, 1]), np.array([1 << 20, (1 << 20) - 1])
    expected = {"sum": [np.nansum(values[a:b]) for a, b in zip(lo, hi, strict=True)],
                "count": [np.count_nonzero(~np.isnan(values[a:b])) for a, b in zip(lo, hi, strict=True)],
                "min": [np.nanmin(values[a:b]) for a, b in zip(lo, hi, strict=True)],
                "max": [np.nanmax(values[a:b]) for a, b in zip(lo, hi, strict=True)]}
    for function, want in expected.items():
        got = aggregator(function, implementation, device)(values, lo, hi)
        assert got.tolist() == want, function


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_a_window_of_missing_values_has_zero_sum_zero_count_and_no_min_max_or_average(
        implementation, device):
    values = np.full(700, np.nan)
    lo, hi = np.array([0, 5]), np.array([700, 5])
    results = {f: aggregator(f, implementation, device)(values, lo, hi).tolist() for f in FUNCTIONS}
    assert results["sum"] == [0.0, 0.0] and results["count"] == [0, 0]
    for f in ("min", "max", "avg"):
        assert all(math.isnan(v) for v in results[f])


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_float32_values_are_aggregated_in_float32_with_the_same_bits(implementation, device):
    rng = np.random.default_rng(3)
    values = rng.random(3000).astype(np.float32)
    lo, hi = np.array([0, 10, 2999]), np.array([3000, 2047, 3000])
    for function in ("sum", "avg", "min"):
        got = aggregator(function, implementation, device)(values, lo, hi)
        assert same(got, reference(values, lo, hi, function)), function


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_min_and_max_keep_the_earlier_of_two_equal_zeros(implementation, device):
    values = np.array([0.0, -0.0, 1.0])
    lo, hi = np.array([0, 1]), np.array([3, 3])
    for function in ("min", "max"):
        got = aggregator(function, implementation, device)(values, lo, hi)
        assert same(got, reference(values, lo, hi, function))


def brute_count_windows(values, size, slide, function):
    windows = []
    k = 0
    while k * slide + size <= len(values):
        windows.append((k, k * slide, k * slide + size))
        k += 1
    lo = np.array([a for _, a, _ in windows], np.int64)
    hi = np.array([b for _, _, b in windows], np.int64)
    return [k for k, _, _ in windows], reference(values, lo, hi, function).tolist()


def count_stream(size, slide):
    rng = np.random.default_rng(size * 31 + slide)
    values = rng.normal(size=3000)
    values[rng.random(3000) < 0.05] = np.nan
    return values


@cache
def expected_count_windows(size, slide):
    return brute_count_windows(count_stream(size, slide), size, slide, "sum")


def batches(rng, n):
    cuts = np.sort(rng.integers(0, n + 1, size=6))
    return np.split(np.arange(n), cuts)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize(("size", "slide"), [(1, 1), (7, 3), (100, 1), (1500, 250), (5, 9)])
def test_count_windows_spanning_batches_equal_the_windows_of_the_whole_stream(
        size, slide, implementation, device):
    values = count_stream(size, slide)
    operator = SlidingAggregation(WindowSpec(size, slide), "sum", implementation,
                                  device if implementation in ("dispatch", "zero-copy") else None)
    got = []
    for part in batches(np.random.default_rng(size + slide), len(values)):
        got += operator.process(values[part])
    got += operator.finish()
    ks, want = expected_count_windows(size, slide)
    assert [k for k, _ in got] == ks
    assert np.array([v for _, v in got]).tobytes() == np.array(want).tobytes()


def brute_time_windows(times, values, size, slide, function):
    """COGRA's windows [k·slide, k·slide + size), k >= 0, those holding at least one event."""
    results = []
    for k in range(0, int(times.max()) // slide + 1):
        inside = np.flatnonzero((times >= k * slide) & (times < k * slide + size))
        if inside.size:
            lo, hi = np.array([inside[0]]), np.array([inside[-1] + 1])
            results.append((k, reference(values, lo, hi, function)[0].item()))
    return results


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize(("size", "slide"), [(10, 10), (50, 7), (7, 50), (1000, 100)])
def test_time_windows_are_cogras_windows_holding_an_event_closed_across_batches(
        size, slide, implementation, device):
    rng = np.random.default_rng(size + slide)
    # Gaps wider than a window leave windows without events; equal times sit on both sides of
    # batch cuts.
    times = np.cumsum(rng.choice([0, 1, 2, 60], size=2000, p=[0.3, 0.4, 0.25, 0.05]))
    values = rng.normal(size=2000)
    operator = SlidingAggregation(WindowSpec(size, slide, "time"), "max", implementation,
                                  device if implementation in ("dispatch", "zero-copy") else None)
    got = []
    for part in batches(rng, len(values)):
        got += operator.process(values[part], times[part])
    got += operator.finish()
    want = brute_time_windows(times, values, size, slide, "max")
    assert [k for k, _ in got] == [k for k, _ in want]
    assert np.array([v for _, v in got]).tobytes() == np.array([v for _, v in want]).tobytes()


def test_a_time_window_closes_when_an_event_at_its_end_arrives_or_the_watermark_passes_it():
    operator = SlidingAggregation(WindowSpec(10, 10, "time"), "count")
    assert operator.process(np.array([1.0, 2.0]), np.array([3, 9])) == []
    assert operator.process(np.array([1.0]), np.array([10])) == [(0, 2)]
    assert operator.advance_to(19) == []
    assert operator.advance_to(20) == [(1, 1)]
    assert operator.finish() == []


def test_bad_windows_functions_and_implementations_are_refused():
    with pytest.raises(ValueError, match="positive"):
        WindowSpec(0, 1)
    with pytest.raises(ValueError, match="events or time"):
        WindowSpec(1, 1, "rows")
    with pytest.raises(ValueError, match="one of sum"):
        RangeAggregator("median")
    with pytest.raises(ValueError, match="needs an OpenCL device"):
        RangeAggregator("sum", "zero-copy")
    with pytest.raises(ValueError, match="need the events' times"):
        SlidingAggregation(WindowSpec(5, 5, "time"), "sum").process(np.ones(3))
    operator = SlidingAggregation(WindowSpec(5, 5, "time"), "sum")
    with pytest.raises(ValueError, match="in time order"):
        operator.process(np.ones(2), np.array([3, 2]))
    operator.process(np.ones(1), np.array([4]))
    with pytest.raises(ValueError, match="in time order"):
        operator.process(np.ones(1), np.array([3]))


def test_the_cpu_implementations_of_windows_and_join_never_load_pyopencl():
    code = ("import sys, numpy as np\n"
            "from situflow.devices.windows import SlidingAggregation, WindowSpec\n"
            "from situflow.devices.join import WindowedJoin\n"
            "for impl in ('st', 'mt'):\n"
            "    SlidingAggregation(WindowSpec(3, 1), 'sum', impl).process(np.ones(10))\n"
            "    WindowedJoin(3, 1.0, impl).process(np.array([1]), np.ones((1, 2)),\n"
            "                                       np.array([2]), np.ones((1, 2)))\n"
            "print('pyopencl' in sys.modules)\n")
    root = Path(__file__).parents[2]
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    assert result.stdout.strip() == "False"
