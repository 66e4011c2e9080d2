"""`situflow run` end to end against its engine, on the stock and car workloads (issue 16, item 3).

For each workload (:mod:`bench.workloads`) it prints, measured in the same run:

- the engine: the query's operator over the file's events as in-memory batches (the batches the
  CLI reads from that file, read and typed before the clock starts), events/s, per format (the
  batches differ only in how many ``str`` objects hold the same text);
- the CLI: ``situflow run`` as a new process over the same events as a JSON-lines file, a
  Parquet file and an Arrow IPC file (:func:`workloads.write_parquet`, :func:`write_arrow`),
  wall clock (start-up, reading, evaluating and writing the results), events/s, and its CPU
  time;
- their ratio (the target: the CLI at least 50% of the engine's speed), per input format;
- the CLI's reading alone, in this process: the reader thread reading ahead and the typing
  rule, without the operator (what the CLI overlaps with evaluating), per input format;
- start-up: the CLI over the file's first 1,000 events, CPU time and peak RSS of the process
  (the targets: at most 0.3 s and 100 MiB), beside a process that only imports numpy and
  pyarrow (the floor any such CLI pays).

Every run must find the same number of results, and the CLI the same result lines on every
format. The interleaved runs' best counts. On a
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import workloads

from situflow.cli import _typed
from situflow.events import EventBatch
from situflow.io.columnar import input_format, open_columnar, read_columnar
from situflow.io.jsonl import Block, Fields, read_blocks
from situflow.languages import compile_query
from situflow.operator import QueryOptions

ROOT = Path(__file__).parents[1]
STARTUP_EVENTS = 1_000
#: The input formats measured, by the suffix that chooses each.
FORMATS = {"JSON lines": ".jsonl", "Parquet": ".parquet", "Arrow IPC": ".arrow"}
WRITERS = {".jsonl": workloads.write_jsonl, ".parquet": workloads.write_parquet,
           ".arrow": workloads.write_arrow}


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
    output: bytes


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
    output = out.read_bytes()
    return Process(wall, user + system, peak_kib / 1024, output.count(b"\n"), output)


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
    blocks: Iterator[Block] = (read_blocks(events, fields) if events.suffix == ".jsonl" else
                               read_columnar(open_columnar(events, input_format(events)), fields))
    batches = [b for b, _, _ in _typed(blocks, types, set(), str(events))]
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
    files = {label: tmp / f"{w.name}{suffix}" for label, suffix in FORMATS.items()}
    sizes = {label: WRITERS[path.suffix](columns, path) for label, path in files.items()}
    smalls = {label: tmp / f"{w.name}-{STARTUP_EVENTS}{path.suffix}"
              for label, path in files.items()}
    for path in smalls.values():
        WRITERS[path.suffix]({k: v[:STARTUP_EVENTS] for k, v in columns.items()}, path)
    query = tmp / f"{w.name}{w.suffix}"
    query.write_text(w.query)

    startups = {label: [run_cli(query, path, w.time_unit) for _ in range(runs)]
                for label, path in smalls.items()}
    floor = min(_floor() for _ in range(runs))
    engines: dict[str, list[tuple[float, float, int]]] = {label: [] for label in files}
    clis: dict[str, list[Process]] = {label: [] for label in files}
    reads: dict[str, list[tuple[float, float]]] = {label: [] for label in files}
    for _ in range(runs):
        for label, path in files.items():
            engines[label].append(engine_seconds(w, path))
            clis[label].append(run_cli(query, path, w.time_unit))
            reads[label].append(read_typed(w, path)[:2])
    engine = {label: min(found) for label, found in engines.items()}
    t_engine = {label: e[0] for label, e in engine.items()}
    cpu_engine = {label: min(c for _, c, _ in found) for label, found in engines.items()}
    engine_results = engine["JSON lines"][2]
    best = {label: min(found, key=lambda c: c.wall) for label, found in clis.items()}
    for label, cli in best.items():
        assert cli.results == engine[label][2] == engine_results, (
            f"{w.name}: the CLI on {label} wrote {cli.results} results, the engine found "
            f"{engine[label][2]} on its batches, {engine_results} on JSON lines'")
        assert cli.output == best["JSON lines"].output, f"{w.name}: {label} gave other results"

    print(f"\n{w.name}: {n:,} events, {engine_results:,} results; best of {runs}; load average "
          f"{os.getloadavg()[0]:.1f}; files: "
          + ", ".join(f"{label} {size / 1e6:.1f} MB" for label, size in sizes.items()))
    print(f"  {'start-up floor: python -c import numpy, pyarrow, CPU s':<56}{floor:>14.3f}")
    print(f"  {'':<56}" + "".join(f"{label:>14}" for label in files))

    def row(label: str, value: Callable[[str], str]) -> None:
        print(f"  {label:<56}" + "".join(f"{value(f):>14}" for f in files))

    row("engine, in-memory batches (events/s)", lambda f: f"{n / t_engine[f]:,.0f}")
    row("engine, by CPU time (events per CPU s)", lambda f: f"{n / cpu_engine[f]:,.0f}")
    row("CLI end to end, wall clock (events/s)", lambda f: f"{n / best[f].wall:,.0f}")
    row("CLI / engine (target >= 0.50)", lambda f: f"{t_engine[f] / best[f].wall:.2f}")
    row("CLI CPU time / wall clock", lambda f: f"{best[f].cpu / best[f].wall:.2f}")
    row("reading alone, in-process (events/s)", lambda f: f"{n / min(reads[f])[0]:,.0f}")
    row("reading alone, by CPU time (events per CPU s)",
        lambda f: f"{n / min(c for _, c in reads[f]):,.0f}")
    row("CLI, by CPU time of its threads (events per CPU s)",
        lambda f: f"{n / best[f].cpu:,.0f}")
    row("CLI / engine by CPU time (a loaded machine's measure)",
        lambda f: f"{cpu_engine[f] / best[f].cpu:.2f}")
    row("CLI CPU s", lambda f: f"{best[f].cpu:.3f}")
    row("CLI peak RSS (MiB)", lambda f: f"{best[f].peak_mib:,.0f}")
    start = {f: min(startups[f], key=lambda c: c.cpu) for f in files}
    row(f"start-up, {STARTUP_EVENTS:,} events: CPU s (target <= 0.3)",
        lambda f: f"{start[f].cpu:.3f}")
    row(f"start-up, {STARTUP_EVENTS:,} events: peak RSS MiB (<= 100)",
        lambda f: f"{start[f].peak_mib:.0f}")


if __name__ == "__main__":
    main()
