"""The peer benchmark's numpy and DuckDB versions of the issue-16 queries find situflow's rows
(``bench/peers.py``; Flink is left out: a job takes minutes). DuckDB's are skipped without
DuckDB (the ``peers`` extra).

On the benchmark's own workloads (about 2,000 events each), and on generated streams where what
the workloads make rare is common: A events at the C of the match before (``CONSUME`` chains),
rises that run out of the window, situations shorter than 4 s, longer than 30 s or open at the
end of the input.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench import peers
from bench.workloads import car_readings, stock_ticks

PEERS = ["numpy", pytest.param("duckdb", marks=pytest.mark.skipif(
    importlib.util.find_spec("duckdb") is None, reason="duckdb is not installed (the peers extra)"))]


def peer_rows(peer: str, w: peers.Workload) -> list[peers.Row]:
    if peer == "numpy":
        return peers.rows_of(w, w.numpy(w.columns))
    con = peers.duckdb_table(w)
    try:
        return peers.rows_of(w, con.execute(w.duckdb).fetchall())
    finally:
        con.close()


@pytest.mark.parametrize("peer", PEERS)
def test_the_stock_workload_has_the_same_matches_in_the_peer_as_in_situflow(peer):
    w = peers.stock_workload(stock_ticks(2_000))
    _, expected = peers.engine(w, runs=1)
    assert len(expected) == 3
    assert peer_rows(peer, w) == expected


@pytest.mark.parametrize("peer", PEERS)
def test_the_car_workload_has_the_same_situations_in_the_peer_as_in_situflow(peer):
    w = peers.car_workload(car_readings(20, 100))
    _, expected = peers.engine(w, runs=1)
    assert len(expected) == 8
    assert peer_rows(peer, w) == expected


# One event per step: (symbol, price, volume under 150, milliseconds since the last one). Half
# the prices are multiples of 100, so A events are common, inside another A's rise too (both
# candidates end at the same C), and at the C of the match before (CONSUME chains); the gaps of
# 30 s let rises run out of the 50 s window.
ticks = st.lists(st.tuples(st.integers(0, 1), st.sampled_from([99, 100, 101, 199, 200, 300]),
                           st.booleans(), st.sampled_from([10, 10, 10, 30_000])), min_size=100, max_size=300)


@pytest.mark.parametrize("peer", PEERS)
@given(ticks)
def test_the_peer_keeps_the_matches_situflow_keeps_under_consume(peer, steps):
    n = len(steps)
    columns = {
        "ts": np.cumsum([gap for _, _, _, gap in steps], dtype=np.int64),
        "type": np.full(n, "Stock", dtype=object),
        "symbol": np.array([f"S{s}" for s, _, _, _ in steps], dtype=object),
        "price": np.array([p for _, p, _, _ in steps], dtype=np.int64),
        "volume": np.array([100 if low else 500 for _, _, low, _ in steps], dtype=np.int64),
    }
    w = peers.stock_workload(columns)
    assert peer_rows(peer, w) == peers.engine(w, runs=1)[1]


# Per car, runs of readings: (above 70, how many seconds).
runs = st.lists(st.tuples(st.booleans(), st.integers(1, 35)), max_size=5)


@pytest.mark.parametrize("peer", PEERS)
@given(st.lists(runs, min_size=1, max_size=3))
def test_the_peer_finds_the_situations_situflow_finds(peer, cars):
    hot = [np.repeat([h for h, _ in car], [k for _, k in car]).astype(bool) for car in cars]
    seconds = max(len(h) for h in hot)
    if not seconds:
        return
    # Readings at or below 70 after a car's runs, so every car reports every second.
    speed = np.full((seconds, len(cars)), 60.5)
    for c, h in enumerate(hot):
        speed[:len(h), c] = np.where(h, 70.5 + np.arange(len(h)) % 7, 60.5)
    columns = {
        "ts": np.repeat(np.arange(seconds, dtype=np.int64), len(cars)),
        "car_id": np.tile(np.arange(len(cars), dtype=np.int64), seconds),
        "speed": speed.ravel(),
    }
    w = peers.car_workload(columns)
    assert peer_rows(peer, w) == peers.engine(w, runs=1)[1]
