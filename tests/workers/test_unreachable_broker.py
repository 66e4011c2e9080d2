"""A service started while no broker answers says so, retries with backoff, then exits 1; started
as the image's containers start it, ``situflow serve SERVICE``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from workers.broker import free_port

REPO = Path(__file__).parents[2]


@pytest.mark.parametrize("service", ["kslack", "matcher"])
def test_an_unreachable_broker_is_retried_with_backoff_then_reported(service: str,
                                                                     tmp_path: Path) -> None:
    bootstrap = f"127.0.0.1:{free_port()}"  # nothing listens there
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "SITUFLOW_BROKER_WAIT": "1.5",
           "SITUFLOW_KEY_FIELDS": "car_id", "SITUFLOW_DATA_DIR": str(tmp_path),
           "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "situflow.cli", "serve", service], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    retries = [line for line in lines if "retrying in" in line]
    assert len(retries) >= 2
    assert all(line.startswith(f"situflow {service}: cannot reach Kafka at {bootstrap}")
               for line in retries)
    assert lines[-1] == (f"situflow {service}: cannot reach Kafka at {bootstrap} (retried for "
                         "1.5s); is it running? KAFKA_BOOTSTRAP_SERVERS names the brokers")
