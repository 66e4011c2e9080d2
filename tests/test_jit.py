"""Kernels interpreted (small ``situflow run`` inputs) give the results of compiled kernels.

Whether a kernel compiles is decided once per process, so each mode runs in its own process:
the same queries of every language over the same seeded streams, results compared whole.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]

# Runs every language's kernels: TPStream derivation, the NFA^b loop (skip till next match;
# CONSUME, the stock workload's policy), and the COGRA executor (type- and mixed-grained).
SCRIPT = r"""
import json, sys
import numpy as np
from situflow import jit
from situflow.datagen.cars import car_batches
from situflow.events import EventBatch
from situflow.languages import compile_query
from situflow.operator import QueryOptions

QUERIES = {
    "aggressive drivers": (open("situflow/examples/aggressive_drivers.tps").read(), "cars"),
    "speeding": (
        "FROM CarSensors PARTITION BY car_id "
        "DEFINE B AS speed > 70 BETWEEN 4s AND 30s, C AS speed > 70 BETWEEN 4s AND 30s "
        "PATTERN B equals C WITHIN 30 seconds "
        "RETURN first(B.car_id) AS id, count(B.speed) AS n, avg(B.speed) AS avg, "
        "max(B.speed) AS top", "cars"),
    "query 3": (open("situflow/examples/rising_stocks.sase").read()
                .replace("> 1000", "> 990"), "stocks"),
    "any match": ("PATTERN SEQ(Stock a, Stock+ b[], Stock c) "
                  "WHERE skip_till_any_match(a, b[], c) { [symbol] AND a.price % 50 = 0 "
                  "AND b[i].price > b[i-1].price AND c.volume < 100 } WITHIN 20 seconds",
                  "stocks"),
    "consume": ("PATTERN SEQ(Stock a, Stock+ b[], Stock c) "
                "WHERE partition_contiguity(a, b[], c) { [symbol] AND a.price % 10 = 0 "
                "AND b[1].price > a.price AND b[i].price > b[i-1].price "
                "AND c.price <= b[b.LEN].price AND c.volume < 500 } "
                "WITHIN 50 seconds PARTITION BY symbol CONSUME", "stocks"),
    "downtrends": (open("situflow/examples/downtrends.cogra").read(), "stocks"),
    "downtrends, next": ("RETURN sector, COUNT(*), MAX(S.price) PATTERN Stock S+ "
                         "SEMANTICS skip-till-next-match WHERE [company, sector] "
                         "AND S.price > NEXT(S).price GROUP-BY sector "
                         "WITHIN 2 minutes SLIDE 30 seconds", "stocks"),
}

def stocks():
    rng = np.random.default_rng(5)
    n = 6_000
    records = [{"type": "Stock", "ts": i, "symbol": f"S{i % 3}", "company": f"S{i % 3}",
                "sector": "tech" if i % 3 else "oil", "price": int(p), "volume": int(v)}
               for i, (p, v) in enumerate(zip(500 + np.cumsum(rng.choice([-1, 1], n)),
                                              rng.integers(1, 1001, n)))]
    for start in range(0, n, 2_000):
        yield EventBatch.from_records(records[start:start + 2_000])

out = {}
with jit.interpreted(sys.argv[1] == "interpreted"):
    for name, (text, stream) in QUERIES.items():
        op = compile_query(text, QueryOptions(name=name)).operator()
        batches = car_batches(12_000, 60, 4_000) if stream == "cars" else stocks()
        results = [r.to_dict() for b in batches for r in op.process(b)]
        out[name] = results + [r.to_dict() for r in op.finish()]
out["numba loaded"] = "numba" in sys.modules
print(json.dumps(out, sort_keys=True))
"""


def _results(mode: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    results: dict[str, object] = json.loads(done.stdout)
    return results


@pytest.fixture(scope="module")
def compiled() -> dict[str, object]:
    return _results("compiled")


@pytest.fixture(scope="module")
def interpreted() -> dict[str, object]:
    return _results("interpreted")


def test_every_language_gives_the_same_results_interpreted_as_compiled(
        compiled: dict[str, object], interpreted: dict[str, object]) -> None:
    assert {k: v for k, v in interpreted.items() if k != "numba loaded"} == \
        {k: v for k, v in compiled.items() if k != "numba loaded"}
    assert all(compiled[name] for name in ("aggressive drivers", "speeding", "query 3",
                                           "any match", "consume", "downtrends",
                                           "downtrends, next"))


def test_interpreting_never_loads_numba(compiled: dict[str, object],
                                        interpreted: dict[str, object]) -> None:
    assert compiled["numba loaded"] is True
    assert interpreted["numba loaded"] is False


def test_interpreting_ends_with_its_block() -> None:
    from situflow import jit

    with jit.interpreted():
        assert jit._interpreting
        with jit.interpreted(False):
            assert jit._interpreting
    assert not jit._interpreting


def test_run_over_a_small_input_loads_neither_numba_nor_pandas(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text("".join(f'{{"ts": {t}, "car_id": 1, "speed": {60 + t % 20}}}\n'
                              for t in range(200)))
    query = tmp_path / "speeding.tps"
    query.write_text("FROM CarSensors PARTITION BY car_id DEFINE B AS speed > 70 AT LEAST 3s, "
                     "C AS speed > 74 AND speed < 78 PATTERN B contains C WITHIN 1 minute "
                     "RETURN first(B.car_id) AS id")
    script = ("import sys, runpy; sys.argv = ['situflow', 'run', sys.argv[1], '-i', sys.argv[2]]\n"
              "try:\n    runpy.run_module('situflow.cli', run_name='__main__')\n"
              "except SystemExit:\n    pass\n"
              "print(sorted({'numba', 'pandas', 'pyarrow.compute'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", script, str(query), str(events)],
                          capture_output=True, text=True, cwd=ROOT, check=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines = done.stdout.splitlines()
    assert len(lines) > 1  # results, then the modules
    assert lines[-1] == "[]"


def test_a_read_only_install_caches_kernels_in_the_users_cache_directory(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from situflow import jit

    package = Path(jit.__file__).parent
    # Set first, so that the directory the test chooses is undone with it.
    monkeypatch.setenv("NUMBA_CACHE_DIR", "")
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(jit.os, "access", lambda path, mode: Path(path) != package)
    jit._choose_cache_dir()
    assert Path(os.environ["NUMBA_CACHE_DIR"]).parent == tmp_path
    assert Path(os.environ["NUMBA_CACHE_DIR"]).is_dir()


def test_a_writable_install_keeps_numbas_cache_beside_the_sources(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from situflow import jit

    # Set first, so that the directory the test chooses is undone with it.
    monkeypatch.setenv("NUMBA_CACHE_DIR", "")
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setattr(jit.os, "access", lambda path, mode: True)
    jit._choose_cache_dir()
    assert "NUMBA_CACHE_DIR" not in os.environ
