"""SASE+ NFA^b benchmark after the paper's §6 (Agrawal et al., SIGMOD 2008).

    python bench/sase.py [--events 1000000] [--window 500] [--budget 20] [--baseline-events 20000]

Stream (seeded, §6): one event type ``Stock``, two symbols, price in [1, 1000] moving up with
probability ``p`` (0.7) and down or staying with (1-p)/2 each, volume uniform in [1, 1000].
``mark = price % 500`` stands for the template's ``a[1].price % 500 == 0`` (the expression
language has no modulo).

Template queries: ``SEQ(Stock+ a[], Stock b) {[symbol] ∧ a[1].mark = 0 ∧ P ∧ b.volume < 150}
WITHIN W`` with P = p1 (True), p2 (``a[i].price > a[i-1].price``), p3 (``a[i].price >
min(a[..i-1].price)``) under each selection strategy; one event per second, so W events per
partition (§6: W = T·C·p) is ``WITHIN 2W seconds``.

Query 3 (Figure 1, skip till next match) is not in §6: the paper runs only the templates. On
§6's stream it never matches, since ``a[1].volume > 1000`` cannot hold for volumes in
[1, 1000]; that paper-literal run is printed first (it measures the per-event filtering, no run
ever starts). The workload chosen to measure matching keeps everything of §6 and changes the
least that lets Query 3 start runs:

* volume uniform in [1, 1002]: ``volume > 1000`` then holds for 0.2% of the events, the rate at
  which the templates' start condition ``a[1].price % 500 == 0`` holds on this stream (0.199%),
  so Query 3 starts runs as often as the queries the paper measured;
* ``WITHIN 1 hour`` spans §6's default partition window W = 500 events (Expt 1): 1,000 events
  per hour over both symbols, one every 3.6 s.

Query 3 stays output-heavy there: under skip till next match a run's ignore edge is ¬take
(§3.2 Step 3), so each run lives until its window closes, and at each event whose volume is
below 80% of the last taken one (about 40% of them) every live run of the partition emits a
match listing all its ``a[]`` events: about 0.4 matches and 90 event ids per input event,
whatever the engine. The previous stream of this benchmark (volume [1, 1010], one event per
second: 1% of events start a run, 1,800 events per partition and hour) gave 7 matches and
4,000 ids per event and measured output only; it is printed as well, for comparison. The
``ids/event`` column shows the output per input event.

Printed per query: events processed (each query gets ``--budget`` seconds of processing),
events/s (time in the operator only), matches, event ids output per input event, peak live
partial matches. Then run merging against separate runs for the skip-till-next-match
queries on the Python loop (the compiled loop, which runs these queries, does not merge), the
backtracking baseline (§5.2.3) against the NFA^b on the same ``--baseline-events`` prefix,
with the ratio and a check that both found the same matches, and the peak RSS.

The engines of one ratio run three times each, interleaved, and the fastest run counts (the
machine is shared). Last, skip-till-any-match, where backtracking is expensive (every partial run re-reads its
window; NFA^b merges equivalent runs, §5.2.2): ``SEQ(Stock a, Stock b, Stock c)`` with
``[symbol]`` at partition windows of 500, 2,000 and 5,000 events, and the same with a rarer
last component (``c.volume < 2``), so that fewer partial runs end in a match. It runs on the
NFA^b, on cost-based plans (DP-B, DP-LD: the operator's own path, see ``situflow.nfa.planned``)
and on the TRIVIAL/EFREQ plans, and through the backtracking baseline, on the same
``--any-events`` prefix; every engine must find the same matches (checked) and the ratios come
from this run. Numbers only; nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import math
import resource
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from situflow.events import EventBatch
from situflow.nfa.backtrack import BacktrackMatcher
from situflow.nfa.query import SaseCompiledQuery, compile
from situflow.results import Match

QUERY3 = """PATTERN SEQ(Stock+ a[ ], Stock b)
WHERE    skip_till_next_match(a[ ], b) {
                    [symbol]
       and       a[1].volume > 1000
       and       a[i].price > avg(a[..i-1].price)
       and       b.volume < 80%*a[a.LEN].volume }
WITHIN    1 hour"""

ITERATION = {
    "p1": "",
    "p2": " AND a[i].price > a[i-1].price",
    "p3": " AND a[i].price > min(a[..i-1].price)",
}
STRATEGIES = {
    "s1": "strict_contiguity",
    "s2": "partition_contiguity",
    "s3": "skip_till_next_match",
    "s4": "skip_till_any_match",
}
BATCH = 2_000
# The engines compared in one table run this often, interleaved, and the fastest run counts:
# the machine is shared, and a ratio of two single runs measures the load as much as the code.
REPEATS = 3


def best(run: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    """The fewest seconds ``run(*args)`` took in :data:`REPEATS` runs, and its last result."""
    fastest = math.inf
    for _ in range(REPEATS):
        started = time.perf_counter()
        out = run(*args)
        fastest = min(fastest, time.perf_counter() - started)
    return fastest, out


def evaluate(compiled: SaseCompiledQuery, events: EventBatch) -> list[Match]:
    op = compiled.operator()
    return op.process(events) + op.finish()


def backtrack(compiled: SaseCompiledQuery, events: EventBatch) -> tuple[list[Any], int]:
    """The baseline's matches and how many events it read."""
    matcher = BacktrackMatcher(compiled.automaton)
    return matcher.run(events), matcher.reads


def stock_stream(n: int, seed: int, p_up: float, symbols: int = 2, volume: int = 1000,
                 seconds_per_event: float = 1.0) -> EventBatch:
    """§6's stream; ``volume`` is the top of its uniform range, timestamps are in seconds."""
    rng = np.random.default_rng(seed)
    symbol = rng.integers(1, symbols + 1, n)
    steps = rng.choice([1, -1, 0], size=n, p=[p_up, (1 - p_up) / 2, (1 - p_up) / 2])
    price = np.zeros(n, dtype=np.int64)
    for s in range(1, symbols + 1):
        idx = np.flatnonzero(symbol == s)
        price[idx] = (499 + np.cumsum(steps[idx])) % 1000 + 1
    columns = {"symbol": symbol, "price": price, "volume": rng.integers(1, volume + 1, n),
               "mark": price % 500}
    seq = np.arange(n, dtype=np.int64)
    ts = np.floor(seq * seconds_per_event).astype(np.int64)
    return EventBatch(columns, ts, seq, seq.copy(), np.full(n, "Stock", dtype=object))


ANY_MATCH = ("PATTERN SEQ(Stock a, Stock b, Stock c) WHERE skip_till_any_match(a, b, c) {{ "
             "[symbol] AND a.mark = 0 AND b.price > a.price AND b.volume > 990 AND "
             "c.volume < {last} }} WITHIN {window} seconds")
PLANS = (None, "DP-B", "DP-LD", "TRIVIAL", "EFREQ")


def template(strategy: str, iteration: str, window_seconds: int) -> str:
    return (f"PATTERN SEQ(Stock+ a[], Stock b) WHERE {strategy}(a[], b) {{ [symbol] AND "
            f"a[1].mark = 0{iteration} AND b.volume < 150 }} WITHIN {window_seconds} seconds")


def run_nfa(text: str, stream: EventBatch, budget: float, limit: int | None = None,
            merge_runs: bool = True, compiled: bool = True) -> tuple[int, float, int, int, int]:
    """(events processed, seconds in the operator, matches, event ids in them, peak live
    partial matches) within ``budget`` seconds in the operator."""
    op = compile(text).operator(merge_runs, compiled)
    n = len(stream) if limit is None else min(limit, len(stream))
    matches = ids = peak = done = 0
    seconds = 0.0
    while done < n and seconds < budget:
        batch = stream.slice(done, min(done + BATCH, n))
        started = time.perf_counter()
        found = op.process(batch)
        seconds += time.perf_counter() - started
        matches += len(found)
        ids += sum(len(v) for m in found for v in m.bindings.values())
        done += len(batch)
        peak = max(peak, op.live_partial_matches())
    started = time.perf_counter()
    matches += len(op.finish())
    return done, seconds + time.perf_counter() - started, matches, ids, peak


def any_match(stream: EventBatch, windows: tuple[int, ...], last: int) -> None:
    """Skip-till-any-match: NFA^b, plans and the backtracking baseline on one prefix."""
    n = len(stream)
    print(f"\nskip till any match, SEQ(Stock a, Stock b, Stock c), c.volume < {last}, "
          f"first {n:,} events")
    print(f"{'W (events)':>10} {'engine':<14} {'events/s':>12} {'matches':>9} {'vs backtrack':>13}"
          f" {'same':>5}")
    for w in windows:
        text = ANY_MATCH.format(window=2 * w, last=last)  # two symbols, one event per second
        rates: dict[str, float] = {}
        found: dict[str, list[str]] = {}
        for plan in PLANS:
            seconds, out = best(evaluate, compile(text, plan=plan), stream)
            name = plan or "NFA^b"
            rates[name] = n / seconds
            found[name] = sorted(str(m.bindings) for m in out)
        seconds, (matches, _) = best(backtrack, compile(text, plan=None), stream)
        baseline = sorted(map(str, matches))
        baseline_rate = n / seconds
        for name, rate in rates.items():
            print(f"{w:>10,} {name:<14} {rate:>12,.0f} {len(found[name]):>9,} "
                  f"{rate / baseline_rate:>12.1f}x {found[name] == baseline!s:>5}")
        print(f"{w:>10,} {'backtracking':<14} {baseline_rate:>12,.0f} {len(baseline):>9,}")
        print(f"{'':>10} DP-B / TRIVIAL {rates['DP-B'] / rates['TRIVIAL']:.2f}, "
              f"DP-LD / TRIVIAL {rates['DP-LD'] / rates['TRIVIAL']:.2f}, "
              f"DP-B / EFREQ {rates['DP-B'] / rates['EFREQ']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--window", type=int, default=500, help="partition window W in events")
    parser.add_argument("--p-up", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=2008)
    parser.add_argument("--budget", type=float, default=20.0, help="seconds per query")
    parser.add_argument("--baseline-events", type=int, default=20_000)
    parser.add_argument("--merge-events", type=int, default=200_000)
    parser.add_argument("--any-events", type=int, default=40_000)
    parser.add_argument("--any-window", type=int, default=6,
                        help="W for skip till any match, whose runs grow as 2^W (Cor. 4.3)")
    args = parser.parse_args()

    stream = stock_stream(args.events, args.seed, args.p_up)
    window = 2 * args.window  # two symbols, one event per second: W = T * p
    # Query 3: WITHIN 1 hour spans W events per partition (two symbols).
    spacing = 3600 / (2 * args.window)
    query3 = {
        "Q3 paper-literal": stock_stream(args.events, args.seed, args.p_up, 2, 1000, spacing),
        "Q3 chosen": stock_stream(args.events, args.seed, args.p_up, 2, 1002, spacing),
        "Q3 previous": stock_stream(args.events, args.seed, args.p_up, 2, 1010),
    }
    queries = {"Query 3 (s3)": QUERY3}
    for p_name, p in ITERATION.items():
        for s_name, strategy in STRATEGIES.items():
            w = 2 * args.any_window if s_name == "s4" else window
            queries[f"template {p_name}{s_name}"] = template(strategy, p, w)

    print(f"stream: {args.events:,} events, 2 symbols, p={args.p_up}, W={args.window} events "
          f"(WITHIN {window} seconds; s4: W={args.any_window}), budget {args.budget:g} s per query")
    print("Query 3 streams: paper-literal = volume [1, 1000], chosen = [1, 1002], both one event "
          f"per {spacing:g} s (1 hour = W); previous = [1, 1010], one event per second")
    print(f"{'query':<20} {'events':>10} {'events/s':>12} {'matches':>12} {'ids/event':>10}"
          f" {'peak runs':>10}")
    runs = [(name, QUERY3, q3) for name, q3 in query3.items()]
    runs += [(name, text, stream) for name, text in queries.items() if name != "Query 3 (s3)"]
    for name, text, events in runs:
        done, seconds, matches, ids, peak = run_nfa(text, events, args.budget)
        print(f"{name:<20} {done:>10,} {done / seconds:>12,.0f} {matches:>12,} "
              f"{ids / done:>10,.1f} {peak:>10,}")

    print(f"peak RSS after the NFA^b runs: {peak_rss_mib():,.0f} MiB")

    limit = args.merge_events
    print(f"\nrun merging (§5.2.2) on the first {limit:,} events, Python loop (the compiled one "
          "does not merge): merged vs separate runs")
    print(f"{'query':<20} {'merged ev/s':>12} {'separate ev/s':>14} {'gain':>6}")
    for name, text in queries.items():
        if not name.endswith("s3"):
            continue
        events = query3["Q3 chosen"] if text == QUERY3 else stream
        done, merged, _, _, _ = run_nfa(text, events, args.budget, limit, True, False)
        done_separate, separate, _, _, _ = run_nfa(text, events, args.budget, limit, False, False)
        print(f"{name:<20} {done / merged:>12,.0f} {done_separate / separate:>14,.0f} "
              f"{(done / merged) / (done_separate / separate):>6.2f}")

    prefix = args.baseline_events
    print(f"\nbacktracking baseline (§5.2.3) vs NFA^b on the first {prefix:,} events")
    print(f"{'query':<20} {'NFA ev/s':>12} {'backtrack ev/s':>15} {'ratio':>8} {'re-reads':>10}"
          f" {'same':>5}")
    for name, text in queries.items():
        if "s4" in name:
            continue  # exponential under both engines; the paper benchmarks s2 and s3 only
        head = (query3["Q3 chosen"] if text == QUERY3 else stream).slice(0, prefix)
        compiled = compile(text)
        nfa_seconds, nfa_out = best(evaluate, compiled, head)
        bt_seconds, (found, reads) = best(backtrack, compiled, head)
        same = sorted(map(str, found)) == sorted(str(m.bindings) for m in nfa_out)
        print(f"{name:<20} {prefix / nfa_seconds:>12,.0f} {prefix / bt_seconds:>15,.0f} "
              f"{bt_seconds / nfa_seconds:>8.1f} {reads / prefix:>10.1f} {same!s:>5}")

    print(f"\npeak RSS after the baseline (both engines' matches held to compare them): "
          f"{peak_rss_mib():,.0f} MiB")

    for last in (5, 2):
        any_match(stream.slice(0, args.any_events), (500, 2000, 5000), last)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


if __name__ == "__main__":
    main()
