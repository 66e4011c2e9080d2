"""The filter of thesis §4.3.2 (Fig. 4.10 b): events/s of its four implementations per batch size.

The thesis' workload: events with a 6-dimensional payload uniform in the unit interval, the
predicate "Euclidean distance from the origin above a threshold" (here its square, as a query
would write it), the threshold set for a selectivity of 10^-3. The input is preloaded (the
thesis' operators read preloaded queues); each implementation filters it batch by batch, and
its rate is the best of ``--rounds`` timed runs of at least ``--seconds`` each, the
implementations taking turns. Every implementation's
output is checked against the single-threaded one first.

The crossover is the smallest batch size from which an implementation is at least as fast as
the single-threaded one at every larger size measured.

    PYTHONPATH=. .venv/bin/python bench/devices_filter.py [--sizes 8 20] [--selectivity 1e-3]
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

from bench import devices_options
from situflow.devices.device import Device
from situflow.devices.filter import Filter
from situflow.lang import ast

IMPLEMENTATIONS = ("single_threaded", "multi_threaded", "dispatch", "zero_copy")
DIMENSIONS = 6


def payload(events: int, seed: int = 11) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {f"a{d}": rng.random(events) for d in range(DIMENSIONS)}


def predicate(threshold: float) -> ast.Node:
    """a0*a0 + … + a5*a5 > threshold, as the parser would build it."""
    square = [ast.Binary("*", ast.Ref(None, f"a{d}"), ast.Ref(None, f"a{d}"))
              for d in range(DIMENSIONS)]
    total = square[0]
    for term in square[1:]:
        total = ast.Binary("+", total, term)
    return ast.Binary(">", total, ast.Literal(threshold))


def threshold_for(columns: dict[str, np.ndarray], selectivity: float) -> float:
    squared = sum(c * c for c in columns.values())
    return float(np.quantile(squared, 1 - selectivity))


def rate(step: Any, batches: list[dict[str, np.ndarray]], size: int,
         seconds: float) -> tuple[float, float]:
    """Events per second of ``step`` over ``batches`` (of ``size`` events), for at least
    ``seconds``: per second of wall time, and per second of this process's CPU time (all its
    threads, PoCL's included), which other load on the machine disturbs far less."""
    done, started, cpu = 0, time.perf_counter(), time.process_time()
    while True:
        for batch in batches:
            step(batch)
            done += size
            elapsed = time.perf_counter() - started
            if elapsed >= seconds:
                return done / elapsed, done / max(time.process_time() - cpu, 1e-9)


def rows(device: Device, sizes: list[int], *, selectivity: float = 1e-3, threads: int = 2,
         seconds: float = 0.1, rounds: int = 5) -> list[dict[str, Any]]:
    """One row per batch size: the events/s of each implementation (the best of ``rounds``
    timed runs, the implementations taking turns so that the machine's load changes hit all
    alike) and the hits found."""
    columns = payload(max(sizes) * 2)
    total = len(columns["a0"])
    filter_ = Filter(predicate(threshold_for(columns, selectivity)), device, threads)
    out = []
    try:
        for size in sizes:
            first = {k: c[:size] for k, c in columns.items()}
            expected = filter_.single_threaded(first)
            row: dict[str, Any] = {"operator": "filter", "size": size,
                                   "hits": len(expected)}
            for name in IMPLEMENTATIONS:
                if not np.array_equal(getattr(filter_, name)(first), expected):
                    raise AssertionError(f"{name} differs from single_threaded at {size}")
                row[name] = row[f"{name}_cpu"] = 0.0
            batches = [{k: c[lo:lo + size] for k, c in columns.items()}
                       for lo in range(0, total - size + 1, size)]
            for _ in range(rounds):
                for name in IMPLEMENTATIONS:
                    wall, cpu = rate(getattr(filter_, name), batches, size, seconds)
                    row[name] = max(row[name], wall)
                    row[f"{name}_cpu"] = max(row[f"{name}_cpu"], cpu)
            out.append(row)
    finally:
        filter_.close()
    return out


def crossover(table: list[dict[str, Any]], name: str, suffix: str = "") -> int | None:
    """The smallest size from which ``name`` keeps up with single_threaded, or None
    (``suffix`` "_cpu": by events per CPU second)."""
    found = None
    for row in reversed(table):
        if row[name + suffix] < row["single_threaded" + suffix]:
            break
        found = row["size"]
    return found


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", nargs=2, type=int, default=(8, 20), metavar=("LO", "HI"),
                        help="batch sizes 2^LO … 2^HI (default 8 20)")
    parser.add_argument("--selectivity", type=float, default=1e-3)
    parser.add_argument("--threads", type=int, default=2, help="threads of multi_threaded")
    parser.add_argument("--seconds", type=float, default=0.1, help="per timed run")
    parser.add_argument("--rounds", type=int, default=5, help="timed runs per implementation")


def main(argv: list[str] | None = None) -> int:
    args = devices_options.parse(__doc__, argv, options)
    device = devices_options.opencl()
    if device is None:
        return 1
    print(f"lanes {device.lanes}, so batches of {device.lanes * 64} events fill every work-item")
    sizes = [1 << e for e in range(args.sizes[0], args.sizes[1] + 1)]
    table = rows(device, sizes, selectivity=args.selectivity, threads=args.threads,
                 seconds=args.seconds, rounds=args.rounds)
    for suffix, unit in (("", "events per second"), ("_cpu", "events per CPU second")):
        print(f"\nfilter, selectivity {args.selectivity:g}: {unit} (ratio to single-threaded)")
        print(f"{'batch':>8} {'hits':>6} " + " ".join(f"{n:>22}" for n in IMPLEMENTATIONS))
        for row in table:
            base = row[f"single_threaded{suffix}"]
            cells = " ".join(f"{row[n + suffix]:>13,.0f} ({row[n + suffix] / base:5.2f}x)"
                             for n in IMPLEMENTATIONS)
            print(f"{row['size']:>8} {row['hits']:>6} {cells}")
    print()
    for name in IMPLEMENTATIONS[1:]:
        found = [crossover(table, name, suffix) for suffix in ("", "_cpu")]
        print(f"crossover {name}: " + ", ".join(
            (f"from {size} events" if size else "none measured") + f" {unit}"
            for size, unit in zip(found, ("by events/s", "by events per CPU second"),
                                  strict=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
