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

On that stream contiguous trends are few and short (10% of the events are of a type outside
the pattern and cut every trend), so a second workload measures the contiguous semantics the
way the paper's Fig. 7 does: a variation of q4 on physical-activity reports, where local
predicates filter the stream before contiguity is judged (§7) and every passive-activity bout
is one long run of relevant events (:func:`activity_source` states the stream model). It runs
the online operator at the same sizes and the two-step baseline up to its budget and at
exactly 30,000 events, where the ratio is measured, or bounded below by the budget.

    .venv/bin/python bench/trends.py [--max-exp 7] [--budget 60] [--seed 0]

Throughput on a shared or throttled machine varies by tens of percent between runs; compare
ratios from one run, not absolute numbers across machines.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import resource
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from situflow.events import EventBatch
from situflow.trends.query import compile

SEMANTICS = ("skip-till-any-match", "skip-till-next-match", "contiguous")
CHUNK = 10_000
WINDOW = 10 ** 9  # one window holds the whole stream

# A stream source: given a seed, a function returning events start .. start+n-1.
Source = Callable[[int], Callable[[int, int], EventBatch]]


@dataclass(frozen=True)
class Workload:
    """A query (its PATTERN and WHERE) and the stream it runs on."""

    pattern: str  # PATTERN ... with a {semantics} slot, and the WHERE clause if any
    aggregates: tuple[str, ...]  # COUNT(*) and one AVG(variable.attr)
    written: str  # aggregates counting the events of every trend (for the lower bound)
    source: Source

    def query(self, aggregate: str, semantics: str) -> str:
        return f"RETURN {aggregate} {self.pattern.format(semantics=semantics)} WITHIN {WINDOW}"


def letters_source(seed: int) -> Callable[[int, int], EventBatch]:
    """Types A (60%), B (30%), C (10%), time = position, x uniform in 0..99."""
    rng = np.random.default_rng(seed)

    def chunk(start: int, n: int) -> EventBatch:
        draw = rng.random(n)
        types = np.where(draw < 0.6, "A", np.where(draw < 0.9, "B", "C")).astype(object)
        ts = np.arange(start, start + n, dtype=np.int64)
        return EventBatch({"x": rng.integers(0, 100, n).astype(np.float64)}, ts, ts, ts, types)
    return chunk


PATIENTS = 14  # the physical activity data set of the paper's §8.1 has 14 people
BOUT = 180  # reports per activity bout on average: about 3 minutes at one report a second
PASSIVE = 6 / 18  # lying, sitting, standing, watching TV, computer work, driving of 18
REST, EXERTION = 70.0, 120.0  # the heart rate an activity pulls towards, beats per minute


@numba.njit(cache=True)
def _activity_walk(start, switch, pick, noise, passive, rate, out_passive, out_rate):
    for i in range(switch.shape[0]):
        p = (start + i) % passive.shape[0]
        if switch[i] < 1.0 / BOUT:
            passive[p] = pick[i] < PASSIVE
        level = REST if passive[p] else EXERTION
        rate[p] += 0.05 * (level - rate[p]) + noise[i]
        out_passive[i] = passive[p]
        out_rate[i] = rate[p]


def activity_source(seed: int) -> Callable[[int, int], EventBatch]:
    """Activity reports of PATIENTS people, one each per tick in turn (time = position).

    The paper names the data set (§8.1: time stamp, person, activity, heart rate) but gives no
    distribution, so this is a model of it: each person goes through activity bouts of
    geometric length (mean BOUT reports), each bout one of 18 activities picked uniformly, 6 of
    them passive; the heart rate follows an AR(1) walk pulled 5% per report towards REST during
    passive and EXERTION during other activities, with N(0, 2) noise (at rest about 70 ± 6).
    """
    rng = np.random.default_rng(seed)
    passive = rng.random(PATIENTS) < PASSIVE
    rate = np.where(passive, REST, EXERTION)

    def chunk(start: int, n: int) -> EventBatch:
        out_passive = np.empty(n, dtype=np.bool_)
        out_rate = np.empty(n)
        _activity_walk(start, rng.random(n), rng.random(n), rng.normal(0.0, 2.0, n), passive,
                       rate, out_passive, out_rate)
        ts = np.arange(start, start + n, dtype=np.int64)
        columns = {"patient": ts % PATIENTS, "rate": np.round(out_rate),
                   "activity": np.where(out_passive, "passive", "active").astype(object)}
        return EventBatch(columns, ts, ts, ts, np.full(n, "Activity", dtype=object))
    return chunk


LETTERS = Workload("PATTERN (SEQ(A+, B))+ SEMANTICS {semantics}", ("COUNT(*)", "AVG(A.x)"),
                   "COUNT(A), COUNT(B)", letters_source)
# q4 (Appendix A) under the contiguous semantics, as in Fig. 7; the activity attribute is
# named `activity` because `type` is the event type field (SEMANTICS.md).
ACTIVITY = Workload("PATTERN SEQ(Activity S, Activity A+, Activity F) SEMANTICS {semantics} "
                    "WHERE [patient] AND S.rate < 60 AND A.activity = 'passive' "
                    "AND F.rate > 100", ("COUNT(*)", "AVG(A.rate)"),
                    "COUNT(S), COUNT(A), COUNT(F)", activity_source)
WORKLOADS = {"letters": LETTERS, "activity": ACTIVITY}


def generate(workload: Workload, n: int, seed: int) -> Iterator[EventBatch]:
    """The benchmark stream of ``n`` events, in batches of CHUNK."""
    chunk = workload.source(seed)
    for start in range(0, n, CHUNK):
        yield chunk(start, min(CHUNK, n - start))


def events_as_dicts(workload: Workload, n: int, seed: int) -> list[dict[str, Any]]:
    """The same stream as :func:`generate`, as event dicts for the baselines."""
    out = []
    for batch in generate(workload, n, seed):
        assert batch.types is not None
        columns = {"type": batch.types.tolist(), "ts": batch.ts.tolist(),
                   **{k: v.tolist() for k, v in batch.columns.items()}}
        out += [{k: v[i] for k, v in columns.items()} for i in range(len(batch))]
    return out


def online(workload: Workload, text: str, n: int, seed: int) -> tuple[float, int, Any]:
    """Seconds, peak traced bytes and the first result value for ``n`` events in one window
    (the sum of the values when several are returned)."""
    op = compile(text).operator()
    op.process(workload.source(seed + 1)(0, 8))  # compile the kernel first
    op = compile(text).operator()
    tracemalloc.start()
    elapsed = 0.0
    for batch in generate(workload, n, seed):
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


def _enumerate(workload: Workload, text: str, n: int, seed: int, out: Any) -> None:
    from tests.trends import reference

    events = events_as_dicts(workload, n, seed)
    tracemalloc.start()
    t0 = time.perf_counter()
    result = reference.evaluate(text, events)
    elapsed = time.perf_counter() - t0
    out.put((elapsed, tracemalloc.get_traced_memory()[1], next(iter(result[0]["values"].values()))))


def _two_step(workload: Workload, text: str, n: int, seed: int, out: Any) -> None:
    """Construct every trend depth first (one trend held at a time), then aggregate it.

    Which events may take which position, and which stay in the stream, come from the
    compiled query's local predicates (vectorized, timed with the rest); the construction
    runs per partition of the equivalence attributes, over that partition's events.
    """
    compiled = compile(text)
    plan, program = compiled.plan, compiled.programs[0]
    assert not plan.atoms, "the baseline has no adjacent predicates"
    batches = list(generate(workload, n, seed))
    tracemalloc.start()
    t0 = time.perf_counter()
    inputs = [program.prepare(b) for b in batches]
    elig = np.concatenate([i.elig for i in inputs])
    in_stream = np.concatenate([i.in_stream for i in inputs])
    keys = list(zip(*(np.concatenate([b.column(a) for b in batches]).tolist()
                      for a in plan.partition_attrs), strict=True)) or [()] * n
    target = text.split("AVG(")[1].split(")")[0].split(".") if "AVG(" in text else ["", ""]
    values = np.concatenate([b.column(target[1]) for b in batches]) if target[1] else None
    P = len(plan.positions)
    eligible = [[q for q in range(P) if elig[i, q]] for i in range(n)]
    follow = [set(f) for f in plan.follow]
    members: dict[Any, list[int]] = {}
    for i in range(n):
        if in_stream[i]:
            members.setdefault(keys[i], []).append(i)

    def successors(events: list[int], k: int, p: int) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        for m in range(k + 1, len(events)):
            found += [(m, q) for q in eligible[events[m]] if q in follow[p]]
            if plan.semantics == "contiguous" or (found and plan.semantics != SEMANTICS[0]):
                break
        return found

    trends = a_count = 0
    a_sum = 0.0
    for events in members.values():
        for k0, i0 in enumerate(events):
            stack = [(k0, p, 0, 0.0) for p in eligible[i0] if plan.start[p]]
            while stack:
                k, p, count, total = stack.pop()
                if values is not None and plan.positions[p].variable == target[0]:
                    count, total = count + 1, total + float(values[events[k]])
                if plan.end[p]:
                    trends, a_count, a_sum = trends + 1, a_count + count, a_sum + total
                stack += [(m, q, count, total) for m, q in successors(events, k, p)]
    value: Any = trends if text.startswith("RETURN COUNT") else (
        a_sum / a_count if a_count else None)
    elapsed = time.perf_counter() - t0
    out.put((elapsed, tracemalloc.get_traced_memory()[1], value))


# Address space a baseline child may use: enumeration runs out of memory before time on
# some streams, and the machine is shared.
CHILD_MEMORY = 6 * 2 ** 30


def _limited(target: Any, *args: Any) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))
    try:
        target(*args)
    except MemoryError:
        return  # reported as not finished


def enumerated(target: Any, workload: Workload, text: str, n: int, seed: int,
               timeout: float) -> tuple[float, int, Any] | None:
    """Run a baseline in a child process; ``None`` if it does not finish in ``timeout``
    within CHILD_MEMORY."""
    out: Any = multiprocessing.Queue()
    child = multiprocessing.Process(target=_limited,
                                    args=(target, workload, text, n, seed, out))
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
    parser.add_argument("--workload", choices=["all", *WORKLOADS], default="all")
    args = parser.parse_args()
    sizes = [10 ** e for e in range(3, args.max_exp + 1)]
    runs = [(LETTERS, SEMANTICS), (ACTIVITY, SEMANTICS[2:])]
    for workload, semantics in runs:
        if args.workload not in ("all", next(k for k, w in WORKLOADS.items() if w is workload)):
            continue
        print(f"=== {workload.pattern.format(semantics='...')}")
        online_table(workload, semantics, sizes, args)
        for name, target in (("brute-force reference of Definitions 2.4/2.6/2.8", _enumerate),
                             ("two-step: construct each trend depth first, then aggregate",
                              _two_step)):
            print()
            print(f"{name} (child process, budget {args.budget:g} s per query)")
            print(f"{'semantics':22} {'aggregate':10} {'events':>8} {'seconds':>9} "
                  f"{'peak MiB':>9} {'online s':>9} {'speed-up':>10}  same result")
            for one in semantics:
                for aggregate in workload.aggregates:
                    baseline(target, workload, workload.query(aggregate, one), one, aggregate,
                             args)
        if workload is ACTIVITY:
            print()
            print(f"two-step at exactly 30,000 events (budget {args.budget:g} s)")
            for aggregate in workload.aggregates:
                at_30k(workload, workload.query(aggregate, SEMANTICS[2]), aggregate, args)
        print()


def online_table(workload: Workload, semantics: tuple[str, ...], sizes: list[int],
                 args: argparse.Namespace) -> None:
    """Events/s, peak memory and result of the online operator as the window grows."""
    print("online COGRA operator (one window holding all events; batches of 10,000)")
    print(f"{'semantics':22} {'aggregate':10} {'events':>10} {'events/s':>13} "
          f"{'peak MiB':>9}  result")
    for one in semantics:
        for aggregate in workload.aggregates:
            for n in [*sizes, 30_000]:
                seconds, peak, value = online(workload, workload.query(aggregate, one), n,
                                              args.seed)
                line = (f"{one:22} {aggregate:10} {n:>10,} {n / seconds:>13,.0f} "
                        f"{peak / 2**20:>9.2f}  {value}")
                if n == 30_000:
                    written = online(workload, workload.query(workload.written, one), n,
                                     args.seed)[2]
                    lower = log10_of(written) - 9 - math.log10(seconds)
                    line += (f"  (enumeration >= 10^{lower:.1f}x slower)" if lower > 0 else
                             "  (trends too short for a useful lower bound)")
                print(line)


def at_30k(workload: Workload, text: str, aggregate: str, args: argparse.Namespace) -> None:
    """The two-step baseline against the online operator at 30,000 events per window."""
    n = 30_000
    mine, _, got = online(workload, text, n, args.seed)
    run = enumerated(_two_step, workload, text, n, args.seed, args.budget)
    label = f"{SEMANTICS[2]:22} {aggregate:11}"
    if run is None:
        print(f"{label} did not finish in {args.budget:g} s and {CHILD_MEMORY / 2**30:g} GiB; "
              f"online {mine:.5f} s: "
              f"speed-up >= {args.budget / mine:,.0f} (lower bound)")
        return
    seconds, _, value = run
    same = value == got if None in (value, got) else math.isclose(
        as_float(value), as_float(got), rel_tol=1e-9)
    print(f"{label} two-step {seconds:.3f} s, online {mine:.5f} s: speed-up "
          f"{seconds / mine:,.0f}, same result {same}")


def baseline(target: Any, workload: Workload, text: str, semantics: str, aggregate: str,
             args: argparse.Namespace) -> None:
    """Grow the stream until the baseline would pass its budget; print each run's ratio."""
    spent, n, last = 0.0, 4, 0.0
    label = f"{semantics:22} {aggregate:10}"
    while spent < args.budget:
        left = args.budget - spent
        run = enumerated(target, workload, text, n, args.seed, left)
        if run is None:
            print(f"{label} {n:>8,}  did not finish in {left:.0f} s and "
                  f"{CHILD_MEMORY / 2**30:g} GiB")
            return
        seconds, peak, value = run
        spent += seconds
        mine, _, got = online(workload, text, n, args.seed)
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
