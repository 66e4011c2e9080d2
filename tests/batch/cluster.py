"""A Spark standalone cluster on loopback, started from the pyspark installation: a master and
one worker, each its own JVM process, as on a real cluster."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"
#: Log lines that say a process is ready (Spark's own messages, read from its log output).
MASTER_READY = "I have been elected leader"
WORKER_READY = "Successfully registered with master"


@contextmanager
def standalone_cluster(tmp: Path) -> Iterator[str]:
    """The master's URL while a master and a worker run; both are killed afterwards."""
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_WORKER_DIR": str(tmp / "work"), "SPARK_LOG_DIR": str(tmp / "logs")}
    processes: list[subprocess.Popen[str]] = []
    try:
        processes.append(_start([MASTER, "--host", "127.0.0.1", "--port", str(port),
                                 "--webui-port", "0"], env, MASTER_READY))
        processes.append(_start([WORKER, url, "--host", "127.0.0.1", "--cores", "2",
                                 "--memory", "1g", "--webui-port", "0"], env, WORKER_READY))
        yield url
    finally:
        for process in reversed(processes):
            process.kill()
            process.wait()
            if process.stdout:
                process.stdout.close()


def _start(arguments: list[str], env: dict[str, str], ready: str) -> subprocess.Popen[str]:
    process = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *arguments], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    seen = []
    for line in process.stdout:  # blocks on the process's output, not on a timer
        seen.append(line)
        if ready in line:
            # Keep reading, or a full pipe would block the process's logging.
            threading.Thread(target=process.stdout.read, daemon=True).start()
            return process
    process.wait()
    raise RuntimeError(f"{arguments[0]} exited ({process.returncode}) before it was ready:\n"
                       + "".join(seen[-30:]))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
