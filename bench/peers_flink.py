"""One Flink SQL ``MATCH_RECOGNIZE`` job of the peer benchmark, run by a Python with PyFlink.

    python bench/peers_flink.py stock|car EVENTS.csv WARMUP.csv [--parallelism 1]

``bench/peers.py`` starts this in its own process, with the interpreter that has PyFlink
(``apache-flink`` pins older numpy, pandas and pyarrow than situflow needs, so it may live in
another environment), and reads one JSON object from its standard output. It imports nothing
from situflow. The query (:mod:`peers_sql`) runs twice: first over the few events of
``WARMUP.csv``, since a cold JVM spends most of a first job loading and compiling Flink (44 s of
wall time for 2,000 events, then 17 s for 100,000, on the loaded machine), then over
``EVENTS.csv``. Reported, in seconds: ``start`` (PyFlink's JVM and table environment),
``warmup`` (the first job), ``job`` (the second job, submitting the query to collecting its last
row) and ``net`` (the second job's net runtime, as Flink counts it), with the second job's rows.

The CSV files have a header-less row per event: stock ``ts, symbol, price, volume``, car ``ts,
car_id, speed``. Event time is ``ts`` (stock: milliseconds, car: seconds); the watermark trails
it by one tick, since Flink drops a row whose time equals the watermark and the cars share
their timestamps.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from peers_sql import CAR_FLINK, STOCK_FLINK

QUERIES = {"stock": STOCK_FLINK, "car": CAR_FLINK}
TABLES = {
    "stock": ("ticks", """(ts BIGINT, symbol STRING, price BIGINT, volume BIGINT,
        rt AS TO_TIMESTAMP_LTZ(ts, 3), WATERMARK FOR rt AS rt - INTERVAL '0.001' SECOND)"""),
    "car": ("cars", """(ts BIGINT, car_id BIGINT, speed DOUBLE,
        rt AS TO_TIMESTAMP_LTZ(ts * 1000, 3), WATERMARK FOR rt AS rt - INTERVAL '1' SECOND)"""),
}


def job(env: Any, workload: str, path: str) -> tuple[float, float, list[list[Any]]]:
    """The query over the CSV file at ``path``: wall seconds, net seconds, rows."""
    table, schema = TABLES[workload]
    env.execute_sql(f"DROP TABLE IF EXISTS {table}")
    env.execute_sql(f"CREATE TABLE {table} {schema} WITH ('connector' = 'filesystem', "
                    f"'path' = '{path}', 'format' = 'csv')")
    started = time.perf_counter()
    result = env.execute_sql(QUERIES[workload])
    with result.collect() as rows:
        found = [list(row) for row in rows]
    wall = time.perf_counter() - started
    net = result.get_job_client().get_job_execution_result().result().get_net_runtime() / 1000
    return wall, net, found


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("workload", choices=sorted(TABLES))
    p.add_argument("events")
    p.add_argument("warmup")
    p.add_argument("--parallelism", type=int, default=1)
    a = p.parse_args()

    started = time.perf_counter()
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    env.get_config().set("parallelism.default", str(a.parallelism))
    start = time.perf_counter() - started
    warmup, _, _ = job(env, a.workload, a.warmup)
    wall, net, rows = job(env, a.workload, a.events)
    json.dump({"rows": rows, "start": start, "warmup": warmup, "job": wall, "net": net},
              sys.stdout)


if __name__ == "__main__":
    main()
