"""``situflow up`` supervises its services (issue 12).

``situflow up`` runs with its embedded broker as a user runs it. ``kill -9`` of one service
restarts it (a new pid, ``/health`` ready again at the URL ``up`` printed); the broker and the
other services keep their pids. A Ctrl-C, sent as a terminal sends it, to ``up``'s whole process
group, then ends every process within seconds: before the fix, ``up`` stopped the whole pipeline
when one service died, and a Ctrl-C killed the broker first, so each service hung 15 s in turn.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from situflow.settings import ENV_BOOTSTRAP
from tests.integration.helpers import wait_until
from workers.broker import free_port
from workers.up import REPO_ROOT

pytestmark = [pytest.mark.integration]

#: From the Ctrl-C to the last process gone: the services stop at once, then the broker.
STOP_BOUND = 10.0


def children(pid: int) -> dict[int, str]:
    """The child processes of ``pid``: their command lines by pid."""
    listing = subprocess.run(["ps", "-o", "pid=,args=", "--ppid", str(pid)], capture_output=True,
                             text=True, check=False).stdout
    return {int(p): args for p, args in (line.strip().split(" ", 1) for line in listing.splitlines())}


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return bool(json.loads(response.read()).get("ready"))
    except (OSError, ValueError):
        return False


def test_a_killed_service_restarts_alone_and_a_ctrl_c_stops_everything_within_seconds(
    tmp_path: Path, record_property: Any
) -> None:
    out, err = tmp_path / "up.out", tmp_path / "up.err"
    env = {k: v for k, v in os.environ.items() if k != ENV_BOOTSTRAP}  # the embedded broker
    command = [str(Path(sys.executable).with_name("situflow")), "up", "--port", str(free_port()),
               "--work-dir", str(tmp_path / "work")]
    with out.open("wb") as stdout, err.open("wb") as stderr:
        # A session of its own, as a shell gives a foreground job a process group of its own.
        up = subprocess.Popen(command, stdout=stdout, stderr=stderr, env=env, cwd=REPO_ROOT,
                              start_new_session=True)
    try:
        wait_until(lambda: "trends: pid" in out.read_text(), 90, "situflow up to start")
        printed = {name: (int(pid), url) for name, pid, url in
                   re.findall(r"^(\w+): pid (\d+), (\S+)/metrics", out.read_text(), re.M)}
        assert set(printed) == {"kslack", "deriver", "matcher", "trends"}
        before = children(up.pid)
        assert {pid for pid, _ in printed.values()} < before.keys()
        [broker] = [pid for pid, args in before.items() if "tansu" in args]

        victim, url = printed["kslack"]
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: "kslack restarted as pid" in err.read_text(), 30, "kslack's restart")
        log = err.read_text()
        assert f"kslack (pid {victim}) was killed by SIGKILL after" in log
        assert f"restarting it in 1 s. The end of its log {tmp_path}/work/kslack.log" in log
        match = re.search(rf"kslack restarted as pid (\d+), {re.escape(url)}\n", log)
        assert match, log
        restarted = int(match[1])
        wait_until(lambda: ready(url), 60, "the restarted kslack to be ready at its old URL")
        assert children(up.pid) == {**{p: a for p, a in before.items() if p != victim},
                                    restarted: before[victim]}, "the broker and the others stay"
        assert all(ready(url) for _, url in printed.values())

        # As a terminal's Ctrl-C: SIGINT to the foreground process group.
        os.killpg(up.pid, signal.SIGINT)
        interrupted = time.monotonic()
        assert up.wait(STOP_BOUND) == 0, err.read_text()
        remaining = [p for p in (*before, restarted, broker) if p != victim and alive(p)]
        took = time.monotonic() - interrupted
        record_property("seconds_from_ctrl_c_to_all_stopped", round(took, 1))
        assert remaining == [] and took < STOP_BOUND
    finally:
        if up.poll() is None:
            up.kill()  # its children get SIGTERM from the kernel (setpriv --pdeathsig)
            up.wait()
