"""TPStream throughput: the aggressive-drivers query over a generated car-sensor stream.

Prints, measured in the same run on the same events:
- the operator on in-memory columnar batches (events/s),
- the CLI on the same events as a JSON-lines file (events/s, parsing included),
- the floor: a plain numpy pass that only evaluates the three conditions (events/s),
- the ratio of the operator to that floor.

    python bench/tpstream.py [--events 2000000] [--cars 10000] [--batch 65536]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
import time
from pathlib import Path

from situflow.cli import main as cli_main
from situflow.datagen.cars import car_batches, write_jsonl
from situflow.languages import compile_query
from situflow.operator import QueryOptions

QUERY = Path(__file__).parents[1] / "situflow" / "examples" / "aggressive_drivers.tps"


def best_of(runs: int, fn) -> tuple[float, object]:
    best, value = float("inf"), None
    for _ in range(runs):
        started = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - started)
    return best, value


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=2_000_000)
    p.add_argument("--cars", type=int, default=10_000)
    p.add_argument("--batch", type=int, default=65_536)
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()

    query = compile_query(QUERY.read_text(), QueryOptions(name="aggressive_drivers"))
    batches = list(car_batches(a.events, a.cars, a.batch))
    query.operator().process(batches[0])  # compile the kernels outside the measurement

    def operator() -> int:
        op = query.operator()
        return sum(len(op.process(b)) for b in batches)

    def floor() -> int:
        n = 0
        for b in batches:
            accel, speed = b.columns["accel"], b.columns["speed"]
            n += int((accel > 8).sum() + (speed > 70).sum() + (accel < -9).sum())
        return n

    t_op, matches = best_of(a.runs, operator)
    t_floor, _ = best_of(a.runs, floor)
    with tempfile.TemporaryDirectory() as tmp:
        events = Path(tmp) / "cars.jsonl"
        write_jsonl(events, a.events, a.cars)
        size = events.stat().st_size

        def cli() -> int:
            with contextlib.redirect_stdout(io.StringIO()) as out:
                cli_main(["run", str(QUERY), "--input", str(events), "--no-progress"])
            return out.getvalue().count("\n")

        t_cli, cli_matches = best_of(a.runs, cli)
    assert cli_matches == matches, "the CLI and the operator disagree"

    rate = a.events / t_op
    print(f"events: {a.events:,} from {a.cars:,} cars, batches of {a.batch:,}; "
          f"{matches} matches; JSON file {size / 1e6:.0f} MB; best of {a.runs}")
    print(f"{'measure':<44}{'events/s':>14}")
    print(f"{'operator, in-memory batches':<44}{rate:>14,.0f}")
    print(f"{'CLI, JSON lines file (parse + operator)':<44}{a.events / t_cli:>14,.0f}")
    print(f"{'floor: numpy evaluates the 3 conditions':<44}{a.events / t_floor:>14,.0f}")
    print(f"{'operator / floor':<44}{t_floor / t_op:>14.3f}")
    print(f"{'target (operator, one core)':<44}{2_000_000:>14,}  "
          f"{'met' if rate >= 2_000_000 else 'NOT met'}")


if __name__ == "__main__":
    main()
