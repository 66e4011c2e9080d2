"""COGRA online trend aggregation against enumerate-then-aggregate (Poppe et al. §8, Fig. 5–11).

For COUNT(*) and AVG(A.x) over the running-example pattern ``(SEQ(A+, B))+`` under each
semantics, prints events/s and peak traced memory of the online operator as the number of
events per window grows from 10^3 to 10^7 (one window holds the whole stream, fed in batches
of 10,000 events generated on the fly). Then the same queries run through two enumerating
baselines, each in a child process, growing the stream until a run would pass its time
budget: the brute-force reference of the definitions (``tests/trends/reference.py``: every
skip-till-any-match trend, then the semantics' filter), and a two-step evaluator in the style
of the paper's SASE baseline (§8): depth-first construction of exactly the trends of the
semantics (research file, Appendix Z), one trend at a time, then aggregation. Speed-up ratios
are measured in this run. At 30,000 events per window, where enumeration cannot finish, the
printed ratio is a *lower bound*: enumeration must at least write every event of every trend,
counted by the online operator as COUNT(A) + COUNT(B), at an assumed 1 ns per event.

    .venv/bin/python bench/trends.py [--max-exp 7] [--budget 60] [--seed 0]

Throughput on a shared or throttled machine varies by tens of percent between runs; compare
ratios from one run, not absolute numbers across machines.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from situflow.events import EventBatch
from situflow.trends.query import compile

SEMANTICS = ("skip-till-any-match", "skip-till-next-match", "contiguous")
AGGREGATES = ("COUNT(*)", "AVG(A.x)")
CHUNK = 10_000


def query(aggregate: str, semantics: str, window: int) -> str:
    return (f"RETURN {aggregate} PATTERN (SEQ(A+, B))+ SEMANTICS {semantics} "
            f"WITHIN {window}")


def chunk(rng: np.random.Generator, start: int, n: int) -> EventBatch:
    """Events ``start .. start+n-1``: types A (60%), B (30%), C (10%), time = position."""
    draw = rng.random(n)
    types = np.where(draw < 0.6, "A", np.where(draw < 0.9, "B", "C")).astype(object)
    ts = np.arange(start, start + n, dtype=np.int64)
    return EventBatch({"x": rng.integers(0, 100, n).astype(np.float64)}, ts, ts, ts, types)


def generate(n: int, seed: int) -> Iterator[EventBatch]:
    """The benchmark stream of ``n`` events, in batches of CHUNK."""
    rng = np.random.default_rng(seed)
    for start in range(0, n, CHUNK):
        yield chunk(rng, start, min(CHUNK, n - start))


def events_as_dicts(n: int, seed: int) -> list[dict[str, Any]]:
    """The same stream as :func:`generate`, as event dicts for the baselines."""
    out = []
    for batch in generate(n, seed):
        assert batch.types is not None
        out += [{"type": t, "ts": ts, "x": x} for t, ts, x in
                zip(batch.types.tolist(), batch.ts.tolist(), batch.columns["x"].tolist(),
                    strict=True)]
    return out


def online(text: str, n: int, seed: int) -> tuple[float, int, Any]:
    """Seconds, peak traced bytes and the first result value for ``n`` events in one window
    (the sum of the values when several are returned)."""
    op = compile(text).operator()
    op.process(chunk(np.random.default_rng(seed + 1), 0, 8))  # compile the kernel first
    op = compile(text).operator()
    tracemalloc.start()
    elapsed = 0.0
    for batch in generate(n, seed):
        t0 = time.perf_counter()
        op.process(batch)
        elapsed += time.perf_counter() - t0
    t0 = time.perf_counter()
    results = op.finish()
    elapsed += time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    values = list(results[0].values.values())
    return elapsed, peak, values[0] if len(values) == 1 else _sum(values)


def _sum(values: list[Any]) -> Any:
    """Sum of counts that may be decimal text beyond float range (as text, roughly)."""
    logs = [log10_of(v) for v in values]
    top = max(logs)
    total = top + math.log10(sum(10 ** (x - top) for x in logs))
    return f"{10 ** (total - math.floor(total)):.6f}e+{math.floor(total)}"


def _enumerate(text: str, n: int, seed: int, out: Any) -> None:
    from tests.trends import reference

    events = events_as_dicts(n, seed)
    tracemalloc.start()
    t0 = time.perf_counter()
    result = reference.evaluate(text, events)
    elapsed = time.perf_counter() - t0
    out.put((elapsed, tracemalloc.get_traced_memory()[1], next(iter(result[0]["values"].values()))))


def _two_step(text: str, n: int, seed: int, out: Any) -> None:
    """Construct every trend depth first (one trend held at a time), then aggregate it."""
    plan = compile(text).plan
    events = events_as_dicts(n, seed)
    tracemalloc.start()
    t0 = time.perf_counter()
    P = len(plan.positions)
    eligible = [[q for q in range(P) if plan.positions[q].type_name == e["type"]]
                for e in events]
    follow = [set(f) for f in plan.follow]

    def successors(i: int, p: int) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        for j in range(i + 1, n):
            found += [(j, q) for q in eligible[j] if q in follow[p]]
            if plan.semantics == "contiguous" or (found and plan.semantics != SEMANTICS[0]):
                break
        return found

    trends = a_count = 0
    a_sum = 0.0
    for i0 in range(n):
        stack = [(i0, p, 0, 0.0) for p in eligible[i0] if plan.start[p]]
        while stack:
            i, p, count, total = stack.pop()
            if plan.positions[p].variable == "A":
                count, total = count + 1, total + events[i]["x"]
            if plan.end[p]:
                trends, a_count, a_sum = trends + 1, a_count + count, a_sum + total
            stack += [(j, q, count, total) for j, q in successors(i, p)]
    value: Any = trends if text.startswith("RETURN COUNT") else (
        a_sum / a_count if a_count else None)
    elapsed = time.perf_counter() - t0
    out.put((elapsed, tracemalloc.get_traced_memory()[1], value))


def enumerated(target: Any, text: str, n: int, seed: int,
               timeout: float) -> tuple[float, int, Any] | None:
    """Run a baseline in a child process; ``None`` if it does not finish in ``timeout``."""
    out: Any = multiprocessing.Queue()
    child = multiprocessing.Process(target=target, args=(text, n, seed, out))
    child.start()
    child.join(timeout)
    if child.is_alive():
        child.kill()
        child.join()
        return None
    return out.get() if not out.empty() else None


def as_float(value: Any) -> float:
    """A result value as a float; huge counts come as decimal text ``"d.dddddde+N"``."""
    if isinstance(value, str):
        mantissa, power = value.split("e+")
        return float(mantissa) * 10.0 ** min(int(power), 300) if int(power) <= 300 else math.inf
    return float(value)


def log10_of(value: Any) -> float:
    if isinstance(value, str):
        mantissa, power = value.split("e+")
        return math.log10(float(mantissa)) + int(power)
    return math.log10(max(float(value), 1.0))


def main() -> None:
    from tests.trends import reference  # noqa: F401  (loaded once, before the children fork)

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-exp", type=int, default=7, help="largest window: 10**max_exp events")
    parser.add_argument("--budget", type=float, default=60.0,
                        help="seconds each enumerating baseline may take per query")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sizes = [10 ** e for e in range(3, args.max_exp + 1)]

    print("online COGRA operator (one window holding all events; batches of 10,000)")
    print(f"{'semantics':22} {'aggregate':10} {'events':>10} {'events/s':>13} "
          f"{'peak MiB':>9}  result")
    online_at: dict[tuple[str, str, int], float] = {}
    for semantics in SEMANTICS:
        for aggregate in AGGREGATES:
            for n in [*sizes, 30_000]:
                text = query(aggregate, semantics, 10 ** 9)
                seconds, peak, value = online(text, n, args.seed)
                online_at[(semantics, aggregate, n)] = seconds
                if n == 30_000:
                    written = online(query("COUNT(A), COUNT(B)", semantics, 10 ** 9), n,
                                     args.seed)[2]
                    lower = log10_of(written) - 9 - math.log10(seconds)
                    bound = (f"enumeration >= 10^{lower:.1f}x slower" if lower > 0 else
                             "trends too short for a useful lower bound")
                    print(f"{semantics:22} {aggregate:10} {n:>10,} {n / seconds:>13,.0f} "
                          f"{peak / 2**20:>9.2f}  {value}  ({bound})")
                    continue
                print(f"{semantics:22} {aggregate:10} {n:>10,} {n / seconds:>13,.0f} "
                      f"{peak / 2**20:>9.2f}  {value}")

    for name, target in (("brute-force reference of Definitions 2.4/2.6/2.8", _enumerate),
                         ("two-step: construct each trend depth first, then aggregate",
                          _two_step)):
        print()
        print(f"{name} (child process, budget {args.budget:g} s per query)")
        print(f"{'semantics':22} {'aggregate':10} {'events':>8} {'seconds':>9} {'peak MiB':>9} "
              f"{'online s':>9} {'speed-up':>10}  same result")
        for semantics in SEMANTICS:
            for aggregate in AGGREGATES:
                baseline(target, query(aggregate, semantics, 10 ** 9), semantics, aggregate,
                         args)


def baseline(target: Any, text: str, semantics: str, aggregate: str,
             args: argparse.Namespace) -> None:
    """Grow the stream until the baseline would pass its budget; print each run's ratio."""
    spent, n, last = 0.0, 4, 0.0
    label = f"{semantics:22} {aggregate:10}"
    while spent < args.budget:
        left = args.budget - spent
        run = enumerated(target, text, n, args.seed, left)
        if run is None:
            print(f"{label} {n:>8,}  did not finish in {left:.0f} s")
            return
        seconds, peak, value = run
        spent += seconds
        mine, _, got = online(text, n, args.seed)
        same = value == got if None in (value, got) else math.isclose(
            as_float(value), as_float(got), rel_tol=1e-9)
        print(f"{label} {n:>8,} {seconds:>9.3f} {peak / 2**20:>9.2f} {mine:>9.5f} "
              f"{seconds / mine:>10,.0f}  {same}")
        # Skip-till-any-match trends double with every event: grow by steps there.
        growth = seconds / last if last > 0 else 1.0
        last = seconds
        n = n + 4 if semantics == SEMANTICS[0] else n * 2
        if seconds * max(growth, 2.0) > args.budget - spent:
            print(f"{label} {n:>8,}  skipped: would exceed the budget")
            return


if __name__ == "__main__":
    main()
