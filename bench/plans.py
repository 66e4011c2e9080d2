"""Plan quality: throughput of cost-based plans against TRIVIAL/EFREQ on a skewed stream.

Kolchinsky & Schuster §6 (research K-14, K-15): DP-LD and DP-B plans against the CEP-native
TRIVIAL (pattern order) and EFREQ (ascending frequency) plans, and DP-B against ZSTREAM, for a
sequence of length 6 over a seeded stream whose type rates are skewed against the pattern
order and whose conditions make frequency alone a poor guide (a selective condition links two
frequent types). Statistics are measured online on the first fifth of the stream, as the
adaptive evaluator would. Every plan must find the same matches (checked); throughput is
events per second of the evaluation alone, all measured in this run, and printed as ratios.
Plan-generation time for long patterns (K-14) is printed too, and what the SASE+ default
(``AUTO``, :mod:`situflow.plan.choice`) would decide between DP-B and NFA^b on each workload.

    .venv/bin/python bench/plans.py [--events N] [--seed S]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from situflow.plan import (
    Component,
    CostModel,
    Event,
    Pattern,
    Plan,
    Predicate,
    Statistics,
    StatisticsCollector,
    choose_plan,
    evaluator_for,
)
from situflow.plan.choice import decide

TYPES = "ABCDEF"
KEYS = 20
WINDOW = 60.0


def same_key(a: Event, b: Event) -> bool:
    return a["k"] == b["k"]


def close_value(a: Event, b: Event) -> bool:
    return abs(a["v"] - b["v"]) < 10


@dataclass(frozen=True)
class Workload:
    name: str
    weights: tuple[float, ...]
    conditions: tuple[tuple[str, str, Callable[[Event, Event], bool]], ...]

    def pattern(self) -> Pattern:
        comps = tuple(Component(t.lower(), t) for t in TYPES)
        preds = tuple(Predicate(a, b, fn) for a, b, fn in self.conditions)
        return Pattern(comps, WINDOW, preds)


WORKLOADS = (
    # Selective key conditions among the frequent types: frequency alone is a poor guide.
    Workload(
        "selective-frequent",
        (0.25, 0.25, 0.25, 0.10, 0.10, 0.05),
        (("a", "c", same_key), ("a", "b", same_key), ("c", "e", same_key)),
    ),
    # Rates fall along the pattern and the conditions are spread out: rarity dominates.
    Workload(
        "rarity-dominated",
        (0.34, 0.26, 0.18, 0.12, 0.07, 0.03),
        (("a", "c", same_key), ("b", "d", close_value), ("d", "f", same_key)),
    ),
)


def stream(n: int, weights: tuple[float, ...], seed: int) -> list[Event]:
    rng = random.Random(seed)
    out = []
    for seq in range(n):
        kind = rng.choices(TYPES, weights)[0]
        attrs = {"k": rng.randrange(KEYS), "v": rng.randrange(100)}
        out.append(Event(kind, float(seq), seq, attrs))
    return out


def measure(events: list[Event], pat: Pattern) -> Statistics:
    collector = StatisticsCollector(pat, horizon=float(len(events)))
    for event in events:
        collector.observe(event)
    return collector.snapshot()


def throughput(plan: Plan, events: list[Event]) -> tuple[float, int, int]:
    evaluator = evaluator_for(plan)
    peak = 0
    start = time.perf_counter()
    found = 0
    for i, event in enumerate(events):
        found += len(evaluator.push(event))
        if i % 512 == 0:
            peak = max(peak, evaluator.state_size())
    found += len(evaluator.flush())
    elapsed = time.perf_counter() - start
    return len(events) / elapsed, found, peak


def generation_times(n: int) -> dict[str, float]:
    rng = random.Random(n)
    comps = tuple(Component(f"v{i}", f"T{i}") for i in range(n))
    preds = tuple(
        Predicate(f"v{i}", f"v{j}", same_key, rng.choice((0.002, 0.05, 0.3, 0.88)))
        for i in range(n)
        for j in range(i + 1, n)
        if rng.random() < 1.0 / n
    )
    pat = Pattern(comps, 1200.0, preds)
    stats = Statistics({f"T{i}": rng.uniform(1, 45) for i in range(n)})
    out = {}
    for name in ("GREEDY", "II-RANDOM", "II-GREEDY", "ZSTREAM", "ZSTREAM-ORD", "DP-LD", "DP-B"):
        start = time.perf_counter()
        plan = choose_plan(pat, stats, name, CostModel())
        out[plan.algorithm] = time.perf_counter() - start
    return out


def run(workload: Workload, n: int, seed: int) -> None:
    pat = workload.pattern()
    events = stream(n, workload.weights, seed)
    stats = measure(events[: len(events) // 5], pat)
    print(f"workload {workload.name}: {pat.describe()}, {n} events, seed {seed}")
    print("  measured rates: " + " ".join(f"{t}={stats.rate(t):.3f}" for t in TYPES))
    rates: dict[str, float] = {}
    expected = None
    for name in ("TRIVIAL", "EFREQ", "DP-LD", "ZSTREAM", "DP-B"):
        plan = choose_plan(pat, stats, name, CostModel())
        rate, found, peak = throughput(plan, events)
        rates[name] = rate
        shape = plan.as_tree().describe(pat) if plan.kind == "tree" else ""
        shape = shape or " → ".join(TYPES[i] for i in plan.order)
        print(
            f"  {name:8s} {plan.kind:5s} cost {plan.cost:10.4g} {rate:9.0f} ev/s "
            f"matches {found:6d} peak state {peak:6d}  {shape}"
        )
        if expected is not None and found != expected:
            raise SystemExit(f"{name} found {found} matches, other plans {expected}")
        expected = found
    ratios = [f"{b}/{a} {rates[b] / rates[a]:.2f}x" for b in ("DP-LD", "DP-B") for a in ("TRIVIAL", "EFREQ")]
    ratios.append(f"DP-B/ZSTREAM {rates['DP-B'] / rates['ZSTREAM']:.2f}x")
    print("  ratios: " + ", ".join(ratios))
    print(f"  the SASE+ default (AUTO) would choose {decide(pat, stats, ('DP-B', 'DP-LD')).describe()}")


def smaller_difference(a: Event, b: Event) -> bool:
    return a["d"] < b["d"]


def same_difference(a: Event, b: Event) -> bool:
    return a["d"] == b["d"]


def scaling(n_events: int, seed: int, per_size: int = 4) -> None:
    """K-15's shape: random sequences of length 3, 5 and 7 over a stock-like stream (one type
    per symbol, rates spread over more than an order of magnitude, about n/2 conditions on
    the price difference); mean throughput and peak-state ratios per length."""
    symbols = [f"S{i}" for i in range(12)]
    weights = [1.5**-i for i in range(12)]
    rng = random.Random(seed)
    events = [
        Event(rng.choices(symbols, weights)[0], float(seq), seq, {"d": rng.randrange(-5, 6)})
        for seq in range(n_events)
    ]
    for size in (3, 5, 7):
        ratios: dict[str, list[float]] = {"DP-LD/EFREQ": [], "DP-B/ZSTREAM": []}
        memory: dict[str, list[float]] = {"DP-LD/EFREQ": [], "DP-B/ZSTREAM": []}
        for _ in range(per_size):
            chosen = rng.sample(symbols, size)
            comps = tuple(Component(f"e{i}", t) for i, t in enumerate(chosen))
            pairs = rng.sample([(i, j) for i in range(size) for j in range(i + 1, size)], size // 2)
            preds = tuple(
                Predicate(f"e{i}", f"e{j}", rng.choice((smaller_difference, same_difference)))
                for i, j in pairs
            )
            pat = Pattern(comps, 150.0, preds)
            stats = measure(events[: n_events // 5], pat)
            runs = {}
            for name in ("EFREQ", "DP-LD", "ZSTREAM", "DP-B"):
                runs[name] = throughput(choose_plan(pat, stats, name, CostModel()), events)
            if len({found for _, found, _ in runs.values()}) != 1:
                raise SystemExit(f"plans disagree on {pat.describe()}")
            for key in ratios:
                best, base = key.split("/")
                ratios[key].append(runs[best][0] / runs[base][0])
                memory[key].append(runs[best][2] / max(runs[base][2], 1))
        print(
            f"  n={size}: "
            + ", ".join(
                f"{k} throughput {statistics.geometric_mean(v):.2f}x "
                f"peak state {statistics.geometric_mean(memory[k]):.2f}x"
                for k, v in ratios.items()
            )
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    for workload in WORKLOADS:
        run(workload, args.events, args.seed)
    print("scaling with pattern length (geometric means over random patterns):")
    scaling(args.events // 2, args.seed)
    for n in (7, 12, 22):
        times = "  ".join(f"{k} {v * 1000:.0f} ms" for k, v in generation_times(n).items())
        print(f"plan generation n={n}: {times}")


if __name__ == "__main__":
    main()
