"""COGRA online trend aggregation against enumerate-then-aggregate (Poppe et al. §8, Fig. 5–11).

For COUNT(*) and AVG over each workload's pattern under each semantics, prints events/s and
peak traced memory of the online operator as the number of events per window grows from 10^3
to 10^7 (one window holds the whole stream, fed in batches of 10,000 events generated on the
fly; the stream of ``n`` events is the first ``n`` of one stream). That table runs under
tracemalloc, which costs the operator 5–25% of its rate; every comparison with a baseline
times both sides untraced, because tracing every allocation slows the Python baselines more
than tenfold.

The baselines run in child processes. The brute-force reference of the definitions
(``tests/trends/reference.py``: every skip-till-any-match trend, then the semantics' filter)
and a two-step evaluator in the style of the paper's SASE baseline (§8: depth-first
construction of exactly the trends of the semantics, research file Appendix Z, one trend at a
time, then aggregation; under skip-till-any-match it never builds a partial trend that cannot
end) grow the stream until a run would pass the time budget, comparing their result, and for
the two-step its number of trends and bindings, with the operator's.

Two workloads: the running example ``(SEQ(A+, B))+`` on letters, and q4 (Appendix A) on
physical-activity reports, the workload of the paper's Fig. 5–7 (:func:`activity_source`
states the stream model). On the second, at exactly 30,000 events per window (the point of
§8.2's "6 orders of magnitude" under skip-till-any-match, Fig. 5), the two-step baseline runs
each query under every semantics with the budget. If it finishes, the speed-up is the plain
ratio. If not, it reports the trends and bindings it constructed in the budget, and the
enumeration time is bounded below by the operator's COUNT(*) (trends) and its COUNT of every
variable (bindings) over those measured rates, the smaller of the two; those counts are
checked against the baseline's on the largest prefix of the stream it can finish.

    .venv/bin/python bench/trends.py [--max-exp 7] [--budget 60] [--seed 0]

Throughput on a shared or throttled machine varies by tens of percent between runs; compare
ratios from one run, not absolute numbers across machines.
"""

from __future__ import annotations

import argparse
import bisect
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
AT = 30_000  # events per window of §8.2's comparison with Flink (Fig. 5)
REPEAT = 3
SHORT = 0.2  # seconds: runs shorter than this are repeated, up to REPEAT, keeping the best
WINDOW = 10 ** 9  # one window holds the whole stream

# A stream source: given a seed, a function returning events start .. start+n-1.
Source = Callable[[int], Callable[[int, int], EventBatch]]


@dataclass(frozen=True)
class Workload:
    """A query (its PATTERN and WHERE) and the stream it runs on."""

    pattern: str  # PATTERN ... with a {semantics} slot, and the WHERE clause if any
    aggregates: tuple[str, ...]  # COUNT(*) and one AVG(variable.attr)
    counts: str  # COUNT(*), then the COUNT of every variable: trends, then their bindings
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
                   "COUNT(*), COUNT(A), COUNT(B)", letters_source)
# q4 (Appendix A) under each semantics, as in Fig. 5–7; the activity attribute is named
# `activity` because `type` is the event type field (SEMANTICS.md).
ACTIVITY = Workload("PATTERN SEQ(Activity S, Activity A+, Activity F) SEMANTICS {semantics} "
                    "WHERE [patient] AND S.rate < 60 AND A.activity = 'passive' "
                    "AND F.rate > 100", ("COUNT(*)", "AVG(A.rate)"),
                    "COUNT(*), COUNT(S), COUNT(A), COUNT(F)", activity_source)
WORKLOADS = {"letters": LETTERS, "activity": ACTIVITY}



def generate(workload: Workload, n: int, seed: int) -> Iterator[EventBatch]:
    """The first ``n`` events of the benchmark stream, in batches of CHUNK.

    Every batch is drawn whole, so a smaller window holds a prefix of a larger one.
    """
    chunk = workload.source(seed)
    for start in range(0, n, CHUNK):
        yield chunk(start, CHUNK).slice(0, min(CHUNK, n - start))


def events_as_dicts(workload: Workload, n: int, seed: int) -> list[dict[str, Any]]:
    """The same stream as :func:`generate`, as event dicts for the baselines."""
    out = []
    for batch in generate(workload, n, seed):
        assert batch.types is not None
        columns = {"type": batch.types.tolist(), "ts": batch.ts.tolist(),
                   **{k: v.tolist() for k, v in batch.columns.items()}}
        out += [{k: v[i] for k, v in columns.items()} for i in range(len(batch))]
    return out


@dataclass(frozen=True)
class Online:
    """The online operator on one window: seconds, peak traced bytes, results."""

    seconds: float
    peak: int  # 0 when not traced
    values: list[Any]  # the query's aggregates, in RETURN order


def _feed(text: str, workload: Workload, n: int, seed: int) -> tuple[float, list[Any]]:
    op = compile(text).operator()
    seconds = 0.0
    for batch in generate(workload, n, seed):
        t0 = time.perf_counter()
        op.process(batch)
        seconds += time.perf_counter() - t0
    t0 = time.perf_counter()
    results = op.finish()
    seconds += time.perf_counter() - t0
    return seconds, list(results[0].values.values()) if results else []


def online(workload: Workload, text: str, n: int, seed: int, trace: bool = False) -> Online:
    """The online operator on ``n`` events in one window: one run under tracemalloc if
    ``trace``, else the best of up to REPEAT runs while together they take under SHORT
    seconds (as timeit does: one pause of the shared machine swamps a run that short)."""
    _feed(text, workload, 1_000, seed + 1)  # compile the kernels first
    if trace:
        tracemalloc.start()
        seconds, values = _feed(text, workload, n, seed)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return Online(seconds, peak, values)
    runs = [_feed(text, workload, n, seed)]
    while len(runs) < REPEAT and sum(seconds for seconds, _ in runs) < SHORT:
        runs.append(_feed(text, workload, n, seed))
    seconds, values = min(runs, key=lambda run: run[0])
    return Online(seconds, 0, values)


def counted(workload: Workload, semantics: str, n: int, seed: int) -> tuple[Any, Any]:
    """The operator's number of trends (COUNT(*)) and of bindings (COUNT of every variable)."""
    values = online(workload, workload.query(workload.counts, semantics), n, seed).values
    return (values[0], total(values[1:])) if values else (0, 0)


@dataclass(frozen=True)
class Enumerated:
    """What an enumerating baseline reports from its child process."""

    seconds: float
    peak: int  # growth of the resident set, bytes
    value: Any  # the aggregate; None when not finished
    finished: bool = True
    # The two-step baseline counts the trends and bindings it constructed, and the seconds
    # it spent constructing them (after preparing the stream).
    trends: int | None = None
    bindings: int | None = None
    constructing: float = 0.0


def _resident() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def _peak_since(start: int) -> int:
    # A child's high-water mark starts at its resident set at fork and may lag the current
    # one; ru_maxrss is in KiB.
    high = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, _resident())
    return max(high - start, 0)


def _enumerate(workload: Workload, text: str, n: int, seed: int, budget: float,
               out: Any) -> None:
    """The brute-force reference; the parent stops it at the budget."""
    from tests.trends import reference

    events = events_as_dicts(workload, n, seed)
    start = _resident()
    t0 = time.perf_counter()
    result = reference.evaluate(text, events)
    out.put(Enumerated(time.perf_counter() - t0, _peak_since(start),
                       next(iter(result[0]["values"].values()))))


def _two_step(workload: Workload, text: str, n: int, seed: int, budget: float,
              out: Any) -> None:
    """Construct every trend depth first (one trend held at a time), then aggregate it.

    Which events may take which position, and which stay in the stream, come from the
    compiled query's local predicates (vectorized, timed with the rest); the construction
    runs per partition of the equivalence attributes, over that partition's events. At the
    budget it stops and reports the trends and bindings constructed so far.
    """
    compiled = compile(text)
    plan, program = compiled.plan, compiled.programs[0]
    assert not plan.atoms, "the baseline has no adjacent predicates"
    batches = list(generate(workload, n, seed))
    start = _resident()
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
    anything = plan.semantics == SEMANTICS[0]

    def usable(events: list[int]) -> list[set[int]]:
        """The positions each event of a partition may take in a trend. Under
        skip-till-any-match only those from which a trend can still end: a partial trend that
        cannot end has exponentially many extensions, none of them a trend, so they are never
        built (under the other semantics a start has few extensions)."""
        if not anything:
            return [set(eligible[i]) for i in events]
        alive: list[set[int]] = []
        later: set[int] = set()  # positions taken by a later event that can still end
        for i in reversed(events):
            alive.append({q for q in eligible[i] if plan.end[q] or follow[q] & later})
            later |= alive[-1]
        return alive[::-1]

    def successors(at: list[list[int]], usable: list[set[int]], k: int,
                   p: int) -> list[tuple[int, int]]:
        """The (event, position) pairs that extend a partial trend ending at (k, p); ``at``
        lists, per position, the partition's events that may take it, in stream order."""
        if anything:  # every later event that can take a next position
            return [(m, q) for q in follow[p] for m in at[q][bisect.bisect_right(at[q], k):]]
        if plan.semantics == "contiguous":  # the next event of the sub-stream
            m = k + 1
        else:  # skip-till-next-match: the next event that can take a next position
            m = min((at[q][j] for q in follow[p]
                     if (j := bisect.bisect_right(at[q], k)) < len(at[q])), default=len(usable))
        return [(m, q) for q in usable[m] & follow[p]] if m < len(usable) else []

    trends = bindings = a_count = 0
    a_sum = 0.0

    def report(finished: bool) -> None:
        now = time.perf_counter()
        value: Any = trends if text.startswith("RETURN COUNT") else (
            a_sum / a_count if a_count else None)
        out.put(Enumerated(now - t0, _peak_since(start), value if finished else None, finished,
                           trends, bindings, now - t1))

    t1 = time.perf_counter()
    deadline = t0 + budget
    steps = 0
    for events in members.values():
        positions = usable(events)
        at: list[list[int]] = [[] for _ in range(P)]
        for k, taken in enumerate(positions):
            for q in taken:
                at[q].append(k)
        for k0, taken in enumerate(positions):
            # A partial trend: its last event and position, its length, and the count and
            # sum of the AVG target's values in it.
            stack = [(k0, p, 1, 0, 0.0) for p in taken if plan.start[p]]
            while stack:
                steps += 1
                if steps % 256 == 0 and time.perf_counter() > deadline:
                    report(False)
                    return
                k, p, length, count, summed = stack.pop()
                if values is not None and plan.positions[p].variable == target[0]:
                    count, summed = count + 1, summed + float(values[events[k]])
                if plan.end[p]:
                    trends, bindings = trends + 1, bindings + length
                    a_count, a_sum = a_count + count, a_sum + summed
                stack += [(m, q, length + 1, count, summed)
                          for m, q in successors(at, positions, k, p)]
    report(True)


# Address space a baseline child may use: enumeration runs out of memory before time on
# some streams, and the machine is shared.
CHILD_MEMORY = 6 * 2 ** 30
# Beyond the budget, time for the two-step baseline to report what it constructed (it
# checks its clock every few hundred steps); the reference is stopped at the budget.
GRACE = 10.0


def _limited(target: Any, *args: Any) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))
    try:
        target(*args)
    except MemoryError:
        return  # reported as not finished


def enumerated(target: Any, workload: Workload, text: str, n: int, seed: int,
               budget: float) -> Enumerated | None:
    """Run a baseline in a child process: its report, or ``None`` if it ran out of
    CHILD_MEMORY or had not reported in time."""
    out: Any = multiprocessing.Queue()
    child = multiprocessing.Process(target=_limited,
                                    args=(target, workload, text, n, seed, budget, out))
    child.start()
    child.join(budget + GRACE if target is _two_step else budget)
    if child.is_alive():
        child.kill()
        child.join()
        return None
    return out.get() if not out.empty() else None


def as_float(value: Any) -> float:
    """A result value as a float; huge counts come as decimal text ``"d.dddddde+N"``."""
    if isinstance(value, str):
        mantissa, power = value.split("e+")
        return float(mantissa) * 10.0 ** int(power) if int(power) <= 300 else math.inf
    return float(value)


def log10_of(value: Any) -> float:
    """log10 of a positive count, also of decimal text beyond float range."""
    if isinstance(value, str):
        mantissa, power = value.split("e+")
        return math.log10(float(mantissa)) + int(power)
    return math.log10(value)


def total(values: list[Any]) -> Any:
    """The sum of counts, as decimal text when it is beyond float range."""
    plain = math.fsum(as_float(v) for v in values)
    if math.isfinite(plain):
        return plain
    logs = [log10_of(v) for v in values if as_float(v) > 0]
    top = max(logs)
    power = top + math.log10(sum(10 ** (x - top) for x in logs))
    return f"{10 ** (power - math.floor(power)):.6f}e+{math.floor(power)}"


def agrees(a: Any, b: Any) -> bool:
    """Two results (numbers, None, or decimal text) are the same."""
    if a is None or b is None:
        return a is b
    return math.isclose(as_float(a), as_float(b), rel_tol=1e-9)


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
    # Per workload: the semantics of the growing baselines, and those measured at AT events.
    runs = [(LETTERS, SEMANTICS, ()), (ACTIVITY, SEMANTICS[2:], SEMANTICS)]
    for workload, growing, at_window in runs:
        if args.workload not in ("all", next(k for k, w in WORKLOADS.items() if w is workload)):
            continue
        print(f"=== {workload.pattern.format(semantics='...')}")
        online_table(workload, sizes, args)
        for name, target in (("brute-force reference of Definitions 2.4/2.6/2.8", _enumerate),
                             ("two-step: construct each trend depth first, then aggregate",
                              _two_step)):
            print()
            print(f"{name} (child process, budget {args.budget:g} s per query)")
            print(f"{'semantics':22} {'aggregate':11} {'events':>9} {'seconds':>9} "
                  f"{'peak MiB':>9} {'online s':>9} {'speed-up':>10}  same result"
                  + (" and counts" if target is _two_step else ""))
            for one in growing:
                for aggregate in workload.aggregates:
                    baseline(target, workload, workload.query(aggregate, one), one, aggregate,
                             args)
        if at_window:
            print()
            print(f"two-step at exactly {AT:,} events (budget {args.budget:g} s per query; "
                  "trends and bindings: the operator's COUNT(*) and COUNT of every variable)")
            print(f"{'semantics':22} {'aggregate':11} {'trends':>12} {'bindings':>12} "
                  f"{'online s':>9}  two-step")
            for one in at_window:
                at_30k(workload, one, args)
        print()


def online_table(workload: Workload, sizes: list[int], args: argparse.Namespace) -> None:
    """Events/s, peak memory and result of the online operator as the window grows."""
    print("online COGRA operator (one window holding all events; batches of 10,000)")
    print(f"{'semantics':22} {'aggregate':11} {'events':>10} {'events/s':>13} "
          f"{'peak MiB':>9}  result")
    for one in SEMANTICS:
        for aggregate in workload.aggregates:
            for n in [*sizes, AT]:
                run = online(workload, workload.query(aggregate, one), n, args.seed, trace=True)
                print(f"{one:22} {aggregate:11} {n:>10,} {n / run.seconds:>13,.0f} "
                      f"{run.peak / 2**20:>9.2f}  {run.values[0]}")


def at_30k(workload: Workload, semantics: str, args: argparse.Namespace) -> None:
    """The two-step baseline against the online operator at AT events per window.

    Unfinished, the baseline's measured rates bound the enumeration time from below: it
    would need at least the operator's trends over its trends per second, and likewise for
    bindings; the smaller of the two is taken.
    """
    trends, bindings = counted(workload, semantics, AT, args.seed)
    rate = 0.0
    for aggregate in workload.aggregates:
        text = workload.query(aggregate, semantics)
        # The baseline too runs REPEAT times, keeping the best, where that fits its budget.
        mine = online(workload, text, AT, args.seed)
        run = enumerated(_two_step, workload, text, AT, args.seed, args.budget)
        for _ in range(REPEAT - 1):
            if run is None or not run.finished or run.seconds * REPEAT > args.budget:
                break
            again = enumerated(_two_step, workload, text, AT, args.seed, args.budget)
            run = again if again is not None and again.seconds < run.seconds else run
        line = (f"{semantics:22} {aggregate:11} {count_text(trends):>12} "
                f"{count_text(bindings):>12} {mine.seconds:>9.5f}  ")
        if run is None:
            print(line + f"did not report in {args.budget + GRACE:g} s and "
                  f"{CHILD_MEMORY / 2**30:g} GiB")
        elif run.finished:
            same = (agrees(run.value, mine.values[0]) and agrees(run.trends, trends)
                    and agrees(run.bindings, bindings))
            print(line + f"{run.seconds:.3f} s, same result and counts {same}: "
                  f"speed-up {run.seconds / mine.seconds:,.0f}")
        elif not run.trends:
            print(line + f"constructed no trend in {run.seconds:.0f} s: no rate to bound by")
        else:
            assert run.bindings is not None
            rate = run.trends / run.constructing
            needed = min(log10_of(trends) - math.log10(rate),
                         log10_of(bindings) - math.log10(run.bindings / run.constructing))
            print(line + f"{run.trends:.3g} trends ({rate:.3g}/s), {run.bindings:.3g} bindings "
                  f"({run.bindings / run.constructing:.3g}/s) in {run.seconds:.0f} s: "
                  f"enumeration >= 10^{needed:.1f} s, "
                  f"speed-up >= 10^{needed - math.log10(mine.seconds):.1f}")
    if rate:
        check_counts(workload, semantics, rate, args)


def check_counts(workload: Workload, semantics: str, rate: float,
                 args: argparse.Namespace) -> None:
    """The baseline's trends and bindings against the operator's on a smaller window: the
    largest prefix of the stream whose trends the baseline constructs, at its measured
    rate, in a quarter of its budget."""
    lo, hi = 1, AT
    while hi - lo > 1:  # trends of a prefix are trends of every longer prefix
        mid = (lo + hi) // 2
        fits = as_float(counted(workload, semantics, mid, args.seed)[0]) <= rate * args.budget / 4
        lo, hi = (mid, hi) if fits else (lo, mid)
    trends, bindings = counted(workload, semantics, lo, args.seed)
    run = enumerated(_two_step, workload, workload.query(workload.aggregates[0], semantics), lo,
                     args.seed, args.budget)
    line = f"{semantics:22} {'counts':11} {count_text(trends):>12} {count_text(bindings):>12}"
    if run is None or not run.finished:
        print(line + f"  on the first {lo:,} events: the two-step did not finish")
        return
    same = agrees(run.trends, trends) and agrees(run.bindings, bindings)
    print(line + f"  on the first {lo:,} events: two-step {run.trends:,} trends, "
          f"{run.bindings:,} bindings in {run.seconds:.1f} s, the same: {same}")


def count_text(value: Any) -> str:
    """A count in full up to 10^12, else as decimal text like the operator's beyond floats."""
    if isinstance(value, str):
        return value
    return f"{value:,.0f}" if value < 1e12 else f"{value:.6e}"


def baseline(target: Any, workload: Workload, text: str, semantics: str, aggregate: str,
             args: argparse.Namespace) -> None:
    """Grow the stream until the baseline would pass its budget; print each run's ratio."""
    spent, n, last = 0.0, 4, 0.0
    label = f"{semantics:22} {aggregate:11}"
    while spent < args.budget:
        left = args.budget - spent
        run = enumerated(target, workload, text, n, args.seed, left)
        if run is None or not run.finished:
            print(f"{label} {n:>9,}  did not finish in {left:.0f} s and "
                  f"{CHILD_MEMORY / 2**30:g} GiB")
            return
        spent += run.seconds
        mine = online(workload, text, n, args.seed)
        same = agrees(run.value, mine.values[0])
        if run.trends is not None:
            trends, bindings = counted(workload, semantics, n, args.seed)
            same = same and agrees(run.trends, trends) and agrees(run.bindings, bindings)
        print(f"{label} {n:>9,} {run.seconds:>9.3f} {run.peak / 2**20:>9.2f} "
              f"{mine.seconds:>9.5f} {run.seconds / mine.seconds:>10,.0f}  {same}")
        # Skip-till-any-match trends double with every event: grow by steps there.
        growth = run.seconds / last if last > 0 else 1.0
        last = run.seconds
        n = n + 4 if semantics == SEMANTICS[0] else n * 2
        if run.seconds * max(growth, 2.0) > args.budget - spent:
            print(f"{label} {n:>9,}  skipped: would exceed the budget")
            return


if __name__ == "__main__":
    main()
