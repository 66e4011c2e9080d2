"""Windowed aggregation and windowed join on devices (thesis §4.4, Fig. 4.11 and 4.12).

For each window size, events/s of the four implementations of each operator on the present
OpenCL device, and the crossover: the smallest window from which an OpenCL implementation beats
the single-threaded (and the multi-threaded) CPU.

- *Aggregation* (Fig. 4.11): SUM over a count window of ``size`` float64 values sliding by one
  event, every result re-evaluating its whole window, as in the thesis. One event = one result.
  The OpenCL variants take a batch of consecutive results per launch (one launch per event from
  Python costs more than a small window; the thesis' HSA driver has no launch): 2^23 values of
  work per batch, between 16 and 4096 windows.
- *Join* (Fig. 4.12 b): new events of six float32 dimensions, uniform in the unit cube,
  against a window of ``size`` events of the other stream, matched at a Euclidean distance
  whose selectivity is about 10^-3 (the radius is estimated from a sample). One event = one
  new event compared with the whole window; 2^22 pairs of work per batch.

- *Derivation* (issue 17's "segmented scan, if it pays"): the numba derivation kernel
  (:func:`situflow.tpstream.derive.kernel.derive`, three definitions, one aggregate, one
  partition, runs of geometric length) against a lower bound of any device derivation of the
  same batch: copying the condition masks in, one kernel that only marks run boundaries
  (``cond[i] != cond[i-1]``), copying the marks out. A real segmented scan also sums runs,
  checks durations and compacts records, and on a partitioned stream first sorts by key.

Every implementation's results are checked against the single-threaded one's before it is
timed; the time is the best of ``--repeat`` runs after a warm-up.

    PYTHONPATH=. .venv/bin/python bench/devices_windows.py [--min-exp 8] [--max-exp 20] [--step 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from bench import devices_options
from situflow.devices.join import IMPLEMENTATIONS, PairProbe
from situflow.devices.windows import RangeAggregator
from situflow.tpstream.derive import kernel as derivation

OPENCL = ("dispatch", "zero-copy")


def _best(run: Callable[[], Any], repeat: int) -> float:
    run()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, tuple):
        return all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a.tobytes() == b.tobytes())


def aggregation_row(device: Any, size: int, repeat: int = 3) -> dict[str, Any]:
    windows = int(min(4096, max(16, (1 << 23) // size)))
    values = np.random.default_rng(size).random(size + windows - 1)
    lo = np.arange(windows, dtype=np.int64)
    hi = lo + size
    row: dict[str, Any] = {"operator": "aggregation", "size": size, "batch": windows}
    reference = None
    for implementation in IMPLEMENTATIONS:
        aggregate = RangeAggregator("sum", implementation, device)
        result = aggregate(values, lo, hi)
        reference = result if reference is None else reference
        if not _same(result, reference):
            raise AssertionError(f"{implementation} differs from st at window {size}")
        row[implementation] = windows / _best(partial(aggregate, values, lo, hi), repeat)
    return row


def _radius(dims: int, selectivity: float, rng: np.random.Generator) -> float:
    a, b = rng.random((1 << 18, dims)), rng.random((1 << 18, dims))
    return float(np.quantile(np.sqrt(((a - b) ** 2).sum(axis=1)), selectivity))


def join_row(device: Any, size: int, repeat: int = 3, dims: int = 6,
             selectivity: float = 1e-3) -> dict[str, Any]:
    rng = np.random.default_rng(size)
    new = int(min(4096, max(4, (1 << 22) // size)))
    xt = rng.random((dims, size + new)).astype(np.float32)
    radius = _radius(dims, selectivity, rng)
    row_of = np.arange(size, size + new, dtype=np.int64)
    lo = np.zeros(new, np.int64)
    hi = np.full(new, size, np.int64)
    row: dict[str, Any] = {"operator": "join", "size": size, "batch": new}
    reference = None
    for implementation in IMPLEMENTATIONS:
        probe = PairProbe(radius, implementation, device)
        result = probe(xt, row_of, lo, hi)
        reference = result if reference is None else reference
        if not _same(result, reference):
            raise AssertionError(f"{implementation} differs from st at window {size}")
        row[implementation] = new / _best(partial(probe, xt, row_of, lo, hi), repeat)
        row["matches"] = len(result[0])
    return row


_BOUNDARIES = """
__kernel void boundaries(__global const uchar *cond, const long n, __global uchar *marks)
{
    long i = get_global_id(0);
    if (i % n == 0) marks[i] = cond[i];
    else marks[i] = cond[i] != cond[i - 1];
}
"""


def derive_row(device: Any, batch: int = 1 << 16, repeat: int = 3) -> dict[str, Any]:
    """Events/s of the numba derivation and of the device's lower bound on one batch."""
    rng = np.random.default_rng(batch)
    ndef, nagg = 3, 1
    cond = np.zeros((ndef, batch), bool)
    for d in range(ndef):
        flips = np.cumsum(rng.geometric(1 / 40, size=batch))
        cond[d] = np.isin(np.arange(batch), flips[flips < batch]).cumsum() % 2 == 1
    ts = np.arange(batch, dtype=np.int64) * 1000
    vals = rng.random((nagg, batch))
    records = batch * ndef

    def numba_derive() -> int:
        shape, aggs = (1, ndef), (1, nagg)
        return int(derivation.derive(
            np.zeros(batch, np.int64), ts, cond, vals, np.zeros(nagg, np.int64),
            np.full(ndef, np.nan), np.full(ndef, np.nan), 60_000.0,
            np.zeros(shape, bool), np.zeros(shape, bool), np.zeros(shape, np.int64),
            np.full(shape, -1, np.int64), np.full(shape, -1, np.int64), np.zeros(shape, np.int64),
            np.full(shape, -(1 << 62), np.int64), np.zeros(aggs), np.zeros(aggs), np.zeros(aggs),
            np.zeros(aggs, np.int64),
            np.empty(records, np.int64), np.empty(records, np.int64), np.empty(records, np.int64),
            np.empty(records, np.int64), np.empty(records, bool), np.empty(records, np.int64),
            np.empty(records, np.int64), np.empty(records, np.int64), np.empty((nagg, records)),
            np.empty((nagg, records)), np.empty((nagg, records)),
            np.empty((nagg, records), np.int64)))

    cl, queue = device.cl, device.queue
    kernel = cl.Kernel(device.program(_BOUNDARIES), "boundaries")
    flat = cond.view(np.uint8).ravel()
    marks = np.empty_like(flat)

    def device_bound() -> None:
        mf = cl.mem_flags
        cond_d = cl.Buffer(device.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=flat)
        marks_d = cl.Buffer(device.context, mf.WRITE_ONLY, marks.nbytes)
        kernel(queue, (flat.size,), None, cond_d, np.int64(batch), marks_d)
        cl.enqueue_copy(queue, marks, marks_d, is_blocking=True)

    device_bound()
    expected = cond.copy()
    expected[:, 1:] = cond[:, 1:] != cond[:, :-1]
    if not np.array_equal(marks.reshape(ndef, batch).astype(bool), expected):
        raise AssertionError("the boundary kernel marks the wrong events")
    return {"operator": "derive", "size": batch,
            "numba": batch / _best(numba_derive, repeat),
            "device-bound": batch / _best(device_bound, repeat)}


def rows(device: Any, sizes: list[int]) -> list[dict[str, Any]]:
    """Events/s per implementation for each operator and window size (the driver's entry)."""
    return ([aggregation_row(device, s) for s in sizes]
            + [join_row(device, s) for s in sizes]
            + [derive_row(device, b) for b in (1 << 12, 1 << 16, 1 << 20)])


def crossover(table: list[dict[str, Any]], baseline: str) -> int | None:
    """The smallest window from which the better OpenCL variant stays ahead of ``baseline``."""
    ahead = [max(r[v] for v in OPENCL) > r[baseline] for r in table]
    for i, row in enumerate(table):
        if all(ahead[i:]):
            return int(row["size"])
    return None


def print_table(title: str, table: list[dict[str, Any]]) -> None:
    print(f"\n{title} (events/s)")
    print(f"{'window':>8} {'batch':>6} " + " ".join(f"{v:>11}" for v in IMPLEMENTATIONS)
          + f" {'mt/st':>6} {'best cl/st':>10}")
    for r in table:
        best_cl = max(r[v] for v in OPENCL)
        print(f"{r['size']:>8} {r['batch']:>6} "
              + " ".join(f"{r[v]:>11,.0f}" for v in IMPLEMENTATIONS)
              + f" {r['mt'] / r['st']:>6.2f} {best_cl / r['st']:>10.2f}")
    for baseline in ("st", "mt"):
        at = crossover(table, baseline)
        print(f"crossover vs {baseline}: " + (f"OpenCL ahead from window {at}" if at
                                              else "OpenCL never stays ahead"))


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--min-exp", type=int, default=8)
    parser.add_argument("--max-exp", type=int, default=20)
    parser.add_argument("--step", type=int, default=2)


def main(argv: list[str] | None = None) -> int:
    args = devices_options.parse(__doc__, argv, options)
    device = devices_options.opencl()
    if device is None:
        return 1
    sizes = [1 << e for e in range(args.min_exp, args.max_exp + 1, args.step)]
    table = rows(device, sizes)
    print_table("aggregation: SUM, slide 1 event", [r for r in table if r["operator"] == "aggregation"])
    print_table("join: 6-D distance, selectivity ~1e-3", [r for r in table if r["operator"] == "join"])
    print("\nderivation: numba kernel vs a lower bound of any device derivation (events/s)")
    print(f"{'batch':>8} {'numba':>12} {'device bound':>13} {'bound/numba':>12}")
    for r in (r for r in table if r["operator"] == "derive"):
        print(f"{r['size']:>8} {r['numba']:>12,.0f} {r['device-bound']:>13,.0f} "
              f"{r['device-bound'] / r['numba']:>12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
