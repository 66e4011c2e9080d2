"""Peers: situflow against Flink SQL ``MATCH_RECOGNIZE``, DuckDB window SQL and numpy (issue 16,
item 7), on the two seeded workloads of ``bench/workloads.py``.

    PYTHONPATH=. python bench/peers.py [--events N] [--cars 1000] [--runs 3]
        [--workload stock|car] [--flink-python PATH] [--no-flink] [--flink-parallelism 1]
        [--duckdb-threads N]

Engines, each on the same events, each checked to return the same result rows as situflow's
engine (normal form: per match the partition key, the first and last timestamps and the
aggregates; :mod:`bench.peers_numpy`):

1. ``situflow run``: the CLI in a subprocess on the JSON-lines file, and on the same events as
   a Parquet file (:func:`bench.workloads.write_parquet`), wall time (start-up, reading and
   writing the results included);
2. situflow's engine on in-memory batches of 65,536 events (compiled before the clock starts);
3. Flink SQL ``MATCH_RECOGNIZE`` through PyFlink (:mod:`bench.peers_flink`), parallelism 1
   as situflow's one core (``--flink-parallelism``), run once (a job takes minutes) after a
   warm-up job on the first 10,000 events: the job's wall time, from submitting the query to
   collecting its last row, and its net runtime as Flink counts it;
4. DuckDB window SQL (:mod:`bench.peers_sql`), with DuckDB's threads (one per core; or
   ``--duckdb-threads``): on a table
   already in DuckDB, on the JSON-lines file and on the Parquet file (reading it included),
   and on each file in a subprocess (wall time, like the CLI's: start-up, reading, the query,
   writing the rows): each CLI row is compared with DuckDB reading the same file;
5. the same queries in vectorized numpy (:mod:`bench.peers_numpy`), the floor.

Every time but Flink's is the best of ``--runs``. Prints events/s per engine and workload and
the ratios of the issue's targets: the CLI ≥ 20× Flink's job time and ≥ DuckDB, the engine ≥ 2×
DuckDB and within 3× of numpy. Numbers only; nothing here asserts a speed.

Flink runs in the interpreter given by ``--flink-python`` or ``SITUFLOW_FLINK_PYTHON``, else in
this one if it has PyFlink: ``apache-flink`` pins older numpy, pandas and pyarrow than
situflow's development environment has, so it is best installed in an environment of its own
(``python -m venv /opt/flink && /opt/flink/bin/pip install apache-flink``). A peer whose
dependency is absent (PyFlink or Java, DuckDB) is skipped with a message.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench import peers_numpy, peers_sql
from bench.workloads import (
    CAR_TPSTREAM,
    STOCK_SASE,
    STOCK_TIME_UNIT,
    car_readings,
    stock_ticks,
    write_jsonl,
    write_parquet,
)
from situflow.events import EventBatch
from situflow.languages import compile_query
from situflow.operator import QueryOptions

Columns = dict[str, np.ndarray]
Row = tuple[Any, ...]
ROOT = Path(__file__).resolve().parents[1]
BATCH = 65_536


@dataclass(frozen=True)
class Workload:
    """One workload: its events, the situflow query and the peers' versions of it."""

    name: str
    columns: Columns
    query: str
    suffix: str
    time_unit: float
    table: str
    duckdb: str
    numpy: Callable[[Columns], list[Any]]
    normal: Callable[[Sequence[Any]], Row]
    situflow_row: Callable[[dict[str, Any], np.ndarray], Row]
    # The columns of the CSV file Flink reads, in its table's order.
    flink_columns: tuple[str, ...]
    # Which of situflow's rows Flink's query cannot find (bench/peers_sql.py says why).
    flink_misses: Callable[[Columns, list[Row]], list[Row]]

    @property
    def events(self) -> int:
        return len(self.columns["ts"])


def stock_row(row: Sequence[Any]) -> Row:
    symbol, first, last, start, top, rises = row
    return str(symbol), int(first), int(last), int(start), int(top), int(rises)


def car_row(row: Sequence[Any]) -> Row:
    car, ts, te, readings, avg, top = row
    return (int(car), int(ts), int(te), int(readings), round(float(avg), peers_numpy.AVG_DIGITS),
            float(top))


def stock_result(result: dict[str, Any], ts: np.ndarray) -> Row:
    """A situflow match as a stock row: bindings hold the events' ids, their line numbers."""
    b, v = result["bindings"], result["values"]
    return (result["key"], int(ts[b["a"][0]]), int(ts[b["c"][-1]]), v["start"], v["top"],
            v["rises"])


def car_result(result: dict[str, Any], _ts: np.ndarray) -> Row:
    b, v = result["bindings"]["B"], result["values"]
    return (result["key"], b["ts"], b["te"], v["readings"], v["avg_speed"], v["max_speed"])


def no_rows(_c: Columns, _rows: list[Row]) -> list[Row]:
    return []


def first_reading_situations(c: Columns, rows: list[Row]) -> list[Row]:
    """The situations that begin at their car's first reading."""
    cars, first = np.unique(c["car_id"], return_index=True)
    starts = set(zip(cars.tolist(), c["ts"][first].tolist(), strict=True))
    return [r for r in rows if (r[0], r[1]) in starts]


def stock_workload(columns: Columns) -> Workload:
    return Workload("stock", columns, STOCK_SASE, ".sase", STOCK_TIME_UNIT, "ticks",
                    peers_sql.STOCK_DUCKDB, peers_numpy.stock_matches, stock_row, stock_result,
                    ("ts", "symbol", "price", "volume"), no_rows)


def car_workload(columns: Columns) -> Workload:
    return Workload("car", columns, CAR_TPSTREAM, ".tps", 1.0, "cars", peers_sql.CAR_DUCKDB,
                    peers_numpy.car_situations, car_row, car_result, ("ts", "car_id", "speed"),
                    first_reading_situations)


def workload(name: str, events: int | None, cars: int) -> Workload:
    """The stock or car workload, with ``events`` events (default: the issue's sizes)."""
    if name == "stock":
        return stock_workload(stock_ticks(events or 1_000_000))
    return car_workload(car_readings(cars, 1_100 if events is None else max(1, events // cars)))


def best(runs: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """The fewest seconds ``fn()`` took in ``runs`` runs, and its last result."""
    fastest, out = math.inf, None
    for _ in range(runs):
        started = time.perf_counter()
        out = fn()
        fastest = min(fastest, time.perf_counter() - started)
    return fastest, out


def rows_of(w: Workload, rows: Sequence[Sequence[Any]]) -> list[Row]:
    """Rows in normal form, sorted: engines emit in different orders."""
    return sorted(w.normal(r) for r in rows)


# --- the engines ---------------------------------------------------------------------------

def batches(w: Workload) -> list[EventBatch]:
    c = w.columns
    seq = np.arange(w.events, dtype=np.int64)
    attributes = {k: v for k, v in c.items() if k not in ("ts", "type")}
    types = c.get("type")
    out = []
    for start in range(0, w.events, BATCH):
        stop = start + BATCH
        out.append(EventBatch({k: v[start:stop] for k, v in attributes.items()},
                              c["ts"][start:stop], seq[start:stop], seq[start:stop],
                              None if types is None else types[start:stop]))
    return out


def engine(w: Workload, runs: int) -> tuple[float, list[Row]]:
    """situflow's operator over in-memory batches."""
    compiled = compile_query(w.query, QueryOptions(name=w.name, time_unit=w.time_unit))
    todo = batches(w)
    if todo:
        compiled.operator().process(todo[0])  # compile the kernels outside the measurement

    def run() -> list[Any]:
        op = compiled.operator()
        found = [r for b in todo for r in op.process(b)]
        return found + list(op.finish())

    seconds, found = best(runs, run)
    return seconds, rows_of(w, [w.situflow_row(r.to_dict(), w.columns["ts"]) for r in found])


def cli(w: Workload, events: Path, tmp: Path, runs: int) -> tuple[float, list[Row]]:
    """``situflow run`` in a subprocess, wall time, results written to a file."""
    query = tmp / f"{w.name}{w.suffix}"
    query.write_text(w.query, encoding="utf-8")
    out = tmp / f"{w.name}.results.jsonl"
    command = [sys.executable, "-m", "situflow.cli", "run", str(query), "--input", str(events),
               "--output", str(out), "--time-unit", str(w.time_unit), "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    seconds, _ = best(runs, lambda: subprocess.run(command, env=env, check=True))
    with open(out, encoding="utf-8") as f:
        found = [json.loads(line) for line in f]
    return seconds, rows_of(w, [w.situflow_row(r, w.columns["ts"]) for r in found])


def numpy_floor(w: Workload, runs: int) -> tuple[float, list[Row]]:
    seconds, found = best(runs, lambda: w.numpy(w.columns))
    return seconds, rows_of(w, found)


def duckdb_table(w: Workload, threads: int | None = None) -> Any:
    """A DuckDB connection holding ``w``'s events as a table (``threads``: DuckDB's default)."""
    import duckdb
    import pyarrow as pa

    con = duckdb.connect(config={} if threads is None else {"threads": threads})
    # DuckDB draws a progress bar on standard output for queries of more than 2 s.
    con.execute("SET enable_progress_bar = false")
    data = pa.table({k: v.astype(str) if v.dtype == object else v
                     for k, v in w.columns.items() if k != "type"})
    con.register("data", data)
    con.execute(f"CREATE TABLE {w.table} AS SELECT * FROM data")
    con.unregister("data")
    return con


#: ``python -c`` for DuckDB end to end, as ``situflow run`` is measured: a process that reads the
#: JSON-lines file (argv[1] makes the view over it), runs the query (argv[2]) with the threads of
#: argv[3], writes the rows.
DUCKDB_PROCESS = """import duckdb, json, sys
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
con.execute(sys.argv[3])
con.execute(sys.argv[1])
json.dump(con.execute(sys.argv[2]).fetchall(), sys.stdout)"""

Measure = tuple[str, str, float, list[Row], str]


def duckdb_engine(w: Workload, events: Path, parquet: Path, runs: int, threads: int | None
                  ) -> list[Measure]:
    """DuckDB on a table already in DuckDB, on the JSON-lines file and the Parquet file, and on
    each file in a process of its own (wall time): (name, label, seconds, rows, note) each;
    none without DuckDB."""
    if importlib.util.find_spec("duckdb") is None:
        print("duckdb: skipped, not installed (pip install 'situflow[peers]')")
        return []
    con = duckdb_table(w, threads)
    threads = con.execute("SELECT current_setting('threads')").fetchone()[0]
    table_seconds, found = best(runs, lambda: con.execute(w.duckdb).fetchall())
    con.execute(f"DROP TABLE {w.table}")
    path = str(events).replace("'", "''")
    views = {"": (f"CREATE VIEW {w.table} AS SELECT * FROM read_json('{path}', "
                  "format = 'newline_delimited')", "JSON-lines file"),
             "_parquet": (f"CREATE VIEW {w.table} AS SELECT * FROM read_parquet('"
                          + str(parquet).replace("'", "''") + "')", "Parquet file")}
    measured = [("duckdb", "DuckDB window SQL, table in DuckDB", table_seconds,
                 rows_of(w, found), f"; {threads} threads")]
    for key, (view, name) in views.items():
        con.execute(view)
        file_seconds, from_file = best(runs, lambda: con.execute(w.duckdb).fetchall())
        con.execute(f"DROP VIEW {w.table}")
        command = [sys.executable, "-c", DUCKDB_PROCESS, view, w.duckdb,
                   f"SET threads = {threads}"]
        process_seconds, done = best(runs, functools.partial(
            subprocess.run, command, check=True, capture_output=True, text=True))
        measured += [(f"duckdb_file{key}", f"DuckDB, on the {name}", file_seconds,
                      rows_of(w, from_file), ""),
                     (f"duckdb_process{key}", f"DuckDB, {name}, subprocess, wall",
                      process_seconds, rows_of(w, json.loads(done.stdout)), "")]
    con.close()
    return measured


def flink_python(given: str | None) -> str | None:
    """The interpreter with PyFlink: ``given``, the environment's setting, or this one."""
    if given:
        return given
    if os.environ.get("SITUFLOW_FLINK_PYTHON"):
        return os.environ["SITUFLOW_FLINK_PYTHON"]
    return sys.executable if importlib.util.find_spec("pyflink") else None


#: Events of the Flink job that warms the JVM up before the measured one.
FLINK_WARMUP = 10_000


def flink(w: Workload, python: str | None, parallelism: int, tmp: Path
          ) -> tuple[dict[str, float], list[Row]] | None:
    """The Flink job's seconds (``start``, ``warmup``, ``job``, ``net``: see
    :mod:`bench.peers_flink`; ``process``: the whole subprocess) and rows; None if skipped."""
    if python is None:
        print("flink: skipped, no Python with PyFlink (pip install 'situflow[peers]' in an "
              "environment of its own, then --flink-python or SITUFLOW_FLINK_PYTHON)")
        return None
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        print("flink: skipped, no Java (PyFlink needs a JDK 11 or later on PATH or JAVA_HOME)")
        return None
    events, warmup = tmp / f"{w.name}.csv", tmp / f"{w.name}.warmup.csv"
    columns = [w.columns[k].tolist() for k in w.flink_columns]
    lines = [",".join(map(str, row)) + "\n" for row in zip(*columns, strict=True)]
    events.write_text("".join(lines), encoding="utf-8")
    warmup.write_text("".join(lines[:FLINK_WARMUP]), encoding="utf-8")
    started = time.perf_counter()
    done = subprocess.run([python, str(ROOT / "bench" / "peers_flink.py"), w.name, str(events),
                           str(warmup), "--parallelism", str(parallelism)],
                          capture_output=True, text=True)
    process = time.perf_counter() - started
    if done.returncode:
        print(f"flink: failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
        return None
    out = json.loads(done.stdout)
    seconds = {k: out[k] for k in ("start", "warmup", "job", "net")}
    return {**seconds, "process": process}, rows_of(w, out["rows"])


# --- the report ----------------------------------------------------------------------------

def agreement(reference: list[Row], rows: list[Row], excused: list[Row] | None = None) -> str:
    if rows == reference:
        return "same"
    if excused and rows == sorted(set(reference) - set(excused)):
        return (f"same but the {len(excused)} rows its query cannot find "
                "(bench/peers_sql.py)")
    missing = sorted(set(reference) - set(rows))
    extra = sorted(set(rows) - set(reference))
    return (f"DIFFERENT: {len(rows)} rows, {len(missing)} of situflow's missing "
            f"(first {missing[:2]}), {len(extra)} extra (first {extra[:2]})")


def measure(w: Workload, a: argparse.Namespace, python: str | None, tmp: Path
            ) -> dict[str, float]:
    """Runs every engine on ``w``; prints a line each; returns the seconds by engine."""
    runs = a.runs
    events, parquet = tmp / f"{w.name}.jsonl", tmp / f"{w.name}.parquet"
    size, parquet_size = write_jsonl(w.columns, events), write_parquet(w.columns, parquet)
    t_engine, reference = engine(w, runs)
    print(f"\n{w.name}: {w.events:,} events, JSON-lines file {size / 1e6:.0f} MB, Parquet file "
          f"{parquet_size / 1e6:.1f} MB, {len(reference):,} result rows; best of {runs} "
          "(Flink: one run)")
    print(f"{'engine':<44}{'seconds':>9}{'events/s':>14}  rows")
    seconds = {"engine": t_engine}

    def line(name: str, s: float, rows: list[Row] | None, note: str = "",
             excused: list[Row] | None = None) -> None:
        check = "reference" if rows is None else agreement(reference, rows, excused)
        print(f"{name:<44}{s:>9.3f}{w.events / s:>14,.0f}  {check}{note}")

    t_cli, rows = cli(w, events, tmp, runs)
    seconds["cli"] = t_cli
    line("situflow run (CLI, subprocess, wall)", t_cli, rows)
    t_cli_parquet, rows = cli(w, parquet, tmp, runs)
    seconds["cli_parquet"] = t_cli_parquet
    line("situflow run on Parquet (subprocess, wall)", t_cli_parquet, rows)
    line("situflow engine, in-memory batches", t_engine, None)
    found = flink(w, python, a.flink_parallelism, tmp)
    if found:
        f, rows = found
        seconds["flink"], seconds["flink_net"] = f["job"], f["net"]
        line("Flink SQL MATCH_RECOGNIZE, job (warm JVM)", f["job"], rows,
             f"; parallelism {a.flink_parallelism}", w.flink_misses(w.columns, reference))
        line("Flink SQL MATCH_RECOGNIZE, net runtime", f["net"], rows,
             f"; JVM start {f['start']:.1f} s, warm-up job ({FLINK_WARMUP:,} events) "
             f"{f['warmup']:.1f} s, process {f['process']:.1f} s",
             w.flink_misses(w.columns, reference))
    for key, label, duration, rows, note in duckdb_engine(w, events, parquet, runs,
                                                          a.duckdb_threads):
        seconds[key] = duration
        line(label, duration, rows, note)
    t_numpy, rows = numpy_floor(w, runs)
    seconds["numpy"] = t_numpy
    line("numpy, vectorized (the floor)", t_numpy, rows)
    return seconds


def ratios(name: str, s: dict[str, float]) -> None:
    """The targets of issue 16 as speed ratios (greater is faster for the first engine)."""
    targets = [("CLI / Flink job", "cli", "flink", 20.0),
               ("CLI / Flink net runtime", "cli", "flink_net", 20.0),
               ("CLI / DuckDB (table)", "cli", "duckdb", 1.0),
               ("CLI / DuckDB (JSON-lines file)", "cli", "duckdb_file", 1.0),
               ("CLI / DuckDB (file, subprocess)", "cli", "duckdb_process", 1.0),
               ("CLI on Parquet / Flink job", "cli_parquet", "flink", 20.0),
               ("CLI on Parquet / Flink net runtime", "cli_parquet", "flink_net", 20.0),
               ("CLI on Parquet / DuckDB (table)", "cli_parquet", "duckdb", 1.0),
               ("CLI on Parquet / DuckDB (Parquet file)", "cli_parquet", "duckdb_file_parquet",
                1.0),
               ("CLI on Parquet / DuckDB (Parquet, subprocess)", "cli_parquet",
                "duckdb_process_parquet", 1.0),
               ("engine / DuckDB (table)", "engine", "duckdb", 2.0),
               ("engine / numpy", "engine", "numpy", 1 / 3)]
    print(f"{name} targets{'speed ratio':>42}{'target':>10}")
    for label, fast, slow, target in targets:
        if fast in s and slow in s:
            ratio = s[slow] / s[fast]
            print(f"  {label:<44}{ratio:>10.2f}{'≥ ' + format(target, '.2f'):>10}  "
                  f"{'met' if ratio >= target else 'NOT met'}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, help="events per workload (default: stock 1,000,000, "
                   "car 1,100,000: 1,100 s of --cars cars)")
    p.add_argument("--cars", type=int, default=1_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--workload", choices=("stock", "car"), action="append",
                   help="run only this workload (repeatable; default: both)")
    p.add_argument("--flink-python", help="a Python with PyFlink (default: "
                   "$SITUFLOW_FLINK_PYTHON, else this one if it has PyFlink)")
    p.add_argument("--no-flink", action="store_true", help="leave Flink out")
    p.add_argument("--flink-parallelism", type=int, default=1)
    p.add_argument("--duckdb-threads", type=int, help="default: DuckDB's (one per core)")
    a = p.parse_args()
    python = None if a.no_flink else flink_python(a.flink_python)
    load = os.getloadavg()[0]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.workload or ("stock", "car"):
            results[name] = measure(workload(name, a.events, a.cars), a, python, Path(tmp))
    print(f"\nload average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    for name, s in results.items():
        ratios(name, s)


if __name__ == "__main__":
    main()
