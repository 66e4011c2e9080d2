"""`situflow run` end to end against its engine, on the stock and car workloads (issue 16, item 3).

For each workload (:mod:`bench.workloads`) it prints, measured in the same run:

- the engine: the query's operator over the file's events as in-memory batches (the batches the
  CLI reads, parsed and typed before the clock starts), events/s;
- the CLI: ``situflow run`` as a new process over the JSON-lines file, wall clock (start-up,
  parsing, evaluating and writing the results), events/s, and its CPU time;
- their ratio (the target: the CLI at least 50% of the engine's speed);
- the CLI's reading alone, in this process: the reader thread parsing JSON lines ahead and the
  typing rule, without the operator (what the CLI overlaps with evaluating);
- start-up: the CLI over the file's first 1,000 events, CPU time and peak RSS of the process
  (the targets: at most 0.3 s and 100 MiB), beside a process that only imports numpy and
  pyarrow (the floor any such CLI pays).

Both runs must find the same number of results. The interleaved runs' best counts. On a
loaded machine the wall clocks measure the scheduler more than the code: the CPU times (events
per CPU second, the CLI's two threads summed) are printed beside them.

    PYTHONPATH=. python bench/cli.py [--scale 1.0] [--runs 3] [--only stock|car]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import workloads

from situflow.cli import _typed
from situflow.events import EventBatch
from situflow.io.jsonl import Fields, read_blocks
from situflow.languages import compile_query
from situflow.operator import QueryOptions

ROOT = Path(__file__).parents[1]
STARTUP_EVENTS = 1_000


@dataclass(frozen=True)
class Workload:
    name: str
    query: str
    suffix: str
    time_unit: float


WORKLOADS = (
    Workload("stock", workloads.STOCK_SASE, ".sase", workloads.STOCK_TIME_UNIT),
    Workload("car", workloads.CAR_TPSTREAM, ".tps", 1.0),
)


@dataclass(frozen=True)
class Process:
    wall: float
    cpu: float
    peak_mib: float
    results: int


def run_cli(query: Path, events: Path, time_unit: float) -> Process:
    """One ``situflow run`` process: wall clock, CPU time, peak RSS and result lines."""
    out = events.with_suffix(".results")
    argv = [sys.executable, "-m", "situflow.cli", "run", str(query), "--input", str(events),
            "--output", str(out), "--time-unit", str(time_unit), "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    usage = events.with_suffix(".usage")
    # GNU time forks the CLI itself, so the peak RSS is the CLI's alone (a child forked from
    # this process would count this process's pages too).
    subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", "-o", str(usage), *argv],
                   check=True, env=env, cwd=ROOT)
    wall, user, system, peak_kib = map(float, usage.read_text().split()[-4:])
    with open(out, "rb") as f:
        results = sum(1 for _ in f)
    return Process(wall, user + system, peak_kib / 1024, results)


def _floor() -> float:
    """CPU seconds of a process that only imports numpy and pyarrow, which the CLI needs."""
    usage = Path(tempfile.gettempdir()) / f"situflow-bench-floor-{os.getpid()}"
    subprocess.run(["/usr/bin/time", "-f", "%U %S", "-o", str(usage), sys.executable, "-c",
                    "import numpy, pyarrow"], check=True)
    user, system = map(float, usage.read_text().split()[-2:])
    usage.unlink()
    return user + system


def read_typed(workload: Workload, events: Path) -> tuple[float, float, list[EventBatch]]:
    """The CLI's reading alone (the reader thread parsing ahead, the typing rule): wall clock,
    CPU time and the batches."""
    compiled = compile_query(workload.query, QueryOptions(time_unit=workload.time_unit))
    fields = Fields(time_unit=workload.time_unit)
    types = compiled.attribute_types.without({fields.time, fields.type, fields.id})
    started, cpu = time.perf_counter(), time.process_time()
    batches = [b for b, _, _ in _typed(read_blocks(events, fields), types, set(), str(events))]
    return time.perf_counter() - started, time.process_time() - cpu, batches


def engine_seconds(workload: Workload, events: Path) -> tuple[float, float, int]:
    """The operator alone over the file's events in the CLI's batches (kernels warm): wall
    clock, CPU time and results."""
    compiled = compile_query(workload.query, QueryOptions(name=workload.name,
                                                          time_unit=workload.time_unit))
    batches = read_typed(workload, events)[2]
    compiled.operator().process(batches[0])  # compile the kernels outside the clock
    op = compiled.operator()
    started, cpu = time.perf_counter(), time.process_time()
    results = sum(len(op.process(b)) for b in batches)
    results += len(op.finish())
    return time.perf_counter() - started, time.process_time() - cpu, results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=1.0,
                   help="fraction of the issue's sizes (1M ticks, 1,100 s of 1,000 cars)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--only", choices=[w.name for w in WORKLOADS])
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for w in WORKLOADS:
            if a.only and w.name != a.only:
                continue
            measure(w, Path(tmp), a.scale, a.runs)


def measure(w: Workload, tmp: Path, scale: float, runs: int) -> None:
    columns = (workloads.stock_ticks(int(1_000_000 * scale)) if w.name == "stock"
               else workloads.car_readings(seconds=max(int(1100 * scale), 40)))
    n = len(columns["ts"])
    events = tmp / f"{w.name}.jsonl"
    size = workloads.write_jsonl(columns, events)
    small = tmp / f"{w.name}-{STARTUP_EVENTS}.jsonl"
    workloads.write_jsonl({k: v[:STARTUP_EVENTS] for k, v in columns.items()}, small)
    query = tmp / f"{w.name}{w.suffix}"
    query.write_text(w.query)

    startups = [run_cli(query, small, w.time_unit) for _ in range(runs)]
    floor = min(_floor() for _ in range(runs))
    engine, clis, reads = [], [], []
    for _ in range(runs):
        engine.append(engine_seconds(w, events))
        clis.append(run_cli(query, events, w.time_unit))
        reads.append(read_typed(w, events)[:2])
    t_read, cpu_read = min(reads)
    t_engine, cpu_engine, engine_results = min(engine)
    cli = min(clis, key=lambda c: c.wall)
    assert cli.results == engine_results, (
        f"{w.name}: the CLI wrote {cli.results} results, the engine found {engine_results}")
    start = min(startups, key=lambda c: c.cpu)

    print(f"\n{w.name}: {n:,} events, {size / 1e6:.0f} MB of JSON lines, {engine_results:,} "
          f"results; best of {runs}; load average {os.getloadavg()[0]:.1f}")
    rows = [
        ("engine, in-memory batches (events/s)", f"{n / t_engine:,.0f}"),
        ("CLI end to end, wall clock (events/s)", f"{n / cli.wall:,.0f}"),
        ("CLI / engine (target >= 0.50)", f"{t_engine / cli.wall:.2f}"),
        ("CLI CPU time / wall clock", f"{cli.cpu / cli.wall:.2f}"),
        ("reading alone, in-process: parse + typing (events/s)", f"{n / t_read:,.0f}"),
        ("CLI / reading alone", f"{t_read / cli.wall:.2f}"),
        ("engine, by CPU time (events per CPU s)", f"{n / cpu_engine:,.0f}"),
        ("reading alone, by CPU time (events per CPU s)", f"{n / cpu_read:,.0f}"),
        ("CLI, by CPU time of its threads (events per CPU s)", f"{n / cli.cpu:,.0f}"),
        ("CLI / engine by CPU time (a loaded machine's measure)", f"{cpu_engine / cli.cpu:.2f}"),
        ("CLI peak RSS (MiB)", f"{cli.peak_mib:,.0f}"),
        (f"start-up, {STARTUP_EVENTS:,} events: CPU s (target <= 0.3)", f"{start.cpu:.3f}"),
        (f"start-up, {STARTUP_EVENTS:,} events: peak RSS MiB (<= 100)", f"{start.peak_mib:.0f}"),
        ("start-up floor: python -c 'import numpy, pyarrow', CPU s", f"{floor:.3f}"),
    ]
    for label, value in rows:
        print(f"  {label:<52}{value:>14}")


if __name__ == "__main__":
    main()
