"""``situflow offline`` on a Spark standalone cluster: a master and a worker started on
loopback from the pyspark installation, each its own process, the query submitted by the
command in a third (``--master spark://...``). Its results are those of ``local[*]`` and of
``situflow run``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.batch.cluster import standalone_cluster
from tests.batch.test_offline import EXAMPLES, archive, offline, run, stocks

ROOT = Path(__file__).parents[2]


@pytest.mark.slow  # four JVMs (master, worker, driver, executor): minutes on a shared machine
def test_offline_on_a_standalone_cluster(spark, tmp_path):
    events = archive(tmp_path, "stocks", stocks(2_000))
    query = EXAMPLES / "downtrends.cogra"
    expected = run(query, events, tmp_path / "run.jsonl")
    local = offline(query, tmp_path, "stocks", tmp_path / "local.jsonl")
    assert local == expected
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    with standalone_cluster(tmp_path / "cluster") as master:
        done = subprocess.run(
            [sys.executable, "-m", "situflow.cli", "offline", str(query), "--archive",
             tmp_path.as_uri(), "--stream", "stocks", "--master", master, "--explain",
             "--driver-rows", "0",
             "--output", str(tmp_path / "cluster.jsonl")],
            env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "cluster.jsonl").read_text().splitlines() == expected
    assert "read:" in done.stderr and "replayed on Spark" in done.stderr
