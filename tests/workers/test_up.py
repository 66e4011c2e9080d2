"""How ``situflow up`` supervises its services (``workers/up.py``), with small Python processes
standing in for the services: a service that exits starts again after a backoff, the others
keep running, a stop ends every service at once (issue 12). The real services and broker:
``tests/integration/test_situflow_up.py``."""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from situflow.settings import KafkaSettings
from topics.catalog import StreamSpec
from workers.up import Backoff, Pipeline, ServiceProcess

#: What each stand-in service does.
BEHAVIOURS = {
    "steady": "import time; time.sleep(600)",
    "crashing": "import sys; print('cannot start: bad setting', flush=True); sys.exit(3)",
    # Exits on its own after a while, longer than a healthy run in these tests.
    "brief": "import time; time.sleep(0.4)",
    "stubborn": "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "print('ignoring SIGTERM', flush=True); time.sleep(600)",
}
QUICK = Backoff(first=0.2, ceiling=0.8, healthy=10.0)


class StandIns(Pipeline):
    """A pipeline whose services are :data:`BEHAVIOURS`, without a broker."""

    def service_command(self, kind: str) -> list[str]:
        return [sys.executable, "-c", BEHAVIOURS[kind]]


@pytest.fixture
def pipeline(tmp_path: Path) -> StandIns:
    return StandIns(StreamSpec("cars", key_fields=("car_id",)), kafka=KafkaSettings("127.0.0.1:9"),
                    work_dir=tmp_path, service_names=("steady",), restarts=QUICK)


def run(pipeline: Pipeline, *services: tuple[str, str]) -> dict[str, ServiceProcess]:
    for kind, name in services:
        pipeline.start_service(kind, name)
    return dict(pipeline.services)


def supervise_until(pipeline: Pipeline, condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        pipeline.supervise()
        time.sleep(0.01)


def supervise_for(pipeline: Pipeline, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    supervise_until(pipeline, lambda: time.monotonic() >= deadline, seconds + 1)


def restarted(pipeline: Pipeline, before: ServiceProcess) -> bool:
    now = pipeline.services[before.name]
    return now.process.pid != before.process.pid and now.process.poll() is None


class Said:
    """Everything the pipeline said on standard error so far."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys, self.text = capsys, ""

    def __call__(self) -> str:
        self.text += self.capsys.readouterr().err
        return self.text


def restart_delays(stderr: str) -> list[float]:
    return [float(d) for d in re.findall(r"restarting it in ([\d.]+) s", stderr)]


def test_a_killed_service_restarts_after_the_first_delay_and_the_others_keep_running(
    pipeline: StandIns, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        before = run(pipeline, ("steady", "kslack"), ("steady", "deriver"))
        before["kslack"].process.kill()
        killed = time.monotonic()
        supervise_until(pipeline, lambda: restarted(pipeline, before["kslack"]))
        assert time.monotonic() - killed >= QUICK.first

        kslack, deriver = pipeline.services["kslack"], pipeline.services["deriver"]
        assert kslack.web_port == before["kslack"].web_port, "its URL holds"
        assert kslack.log_path == before["kslack"].log_path
        assert deriver is before["deriver"] and deriver.process.poll() is None
        stderr = capsys.readouterr().err
        assert f"kslack (pid {before['kslack'].process.pid}) was killed by SIGKILL after" in stderr
        assert "restarting it in 0.2 s" in stderr and str(kslack.log_path) in stderr
        assert f"kslack restarted as pid {kslack.process.pid}, {kslack.url}" in stderr
        assert "deriver" not in stderr
    finally:
        pipeline.stop()


def test_a_service_that_keeps_exiting_restarts_ever_later_up_to_the_ceiling_and_it_is_said(
    pipeline: StandIns, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        said = Said(capsys)
        run(pipeline, ("crashing", "kslack"))
        started = time.monotonic()
        supervise_until(pipeline, lambda: len(restart_delays(said())) >= 4, 30)
        assert time.monotonic() - started >= 0.2 + 0.4 + 0.8, "restarts wait, never a busy loop"
        stderr = said()
        assert restart_delays(stderr)[:4] == [0.2, 0.4, 0.8, 0.8]
        assert "kslack (pid" in stderr and "exited with code 3 after" in stderr
        assert "its exit 3 in a row within 10 s of its start" in stderr
        assert "    cannot start: bad setting" in stderr, "the end of its log is quoted"
    finally:
        pipeline.stop()


def test_an_exit_after_a_healthy_run_restarts_after_the_first_delay_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pipeline = StandIns(StreamSpec("cars", key_fields=("car_id",)),
                        kafka=KafkaSettings("127.0.0.1:9"), work_dir=tmp_path,
                        service_names=("brief",), restarts=Backoff(first=0.1, healthy=0.3))
    try:
        said = Said(capsys)
        run(pipeline, ("brief", "trends"))
        supervise_until(pipeline, lambda: len(restart_delays(said())) >= 3, 30)
        stderr = said()
        assert restart_delays(stderr)[:3] == [0.1, 0.1, 0.1]
        assert "in a row" not in stderr
    finally:
        pipeline.stop()


def test_stop_ends_every_service_at_once_and_kills_those_still_running_after_the_grace(
    pipeline: StandIns
) -> None:
    services = run(pipeline, *(("stubborn", f"stubborn-{i}") for i in range(3)),
                   ("steady", "steady"))
    stubborn = [s for s in services.values() if s.kind == "stubborn"]
    supervise_until(pipeline, lambda: all("ignoring" in s.log_tail() for s in stubborn))
    started = time.monotonic()
    pipeline.stop(timeout=1.0)
    took = time.monotonic() - started
    assert took < 2.0, f"one grace for all, not one each: {took:.1f} s"
    assert {s.name: s.process.returncode for s in services.values()} == {
        "stubborn-0": -signal.SIGKILL, "stubborn-1": -signal.SIGKILL, "stubborn-2": -signal.SIGKILL,
        "steady": -signal.SIGTERM}
    supervise_for(pipeline, 0.5)
    assert pipeline.services == services, "nothing restarts once stopped"


def test_kill_ends_every_service_without_waiting(pipeline: StandIns) -> None:
    services = run(pipeline, ("stubborn", "kslack"), ("steady", "matcher"))
    supervise_until(pipeline, lambda: "ignoring" in services["kslack"].log_tail())
    pipeline.kill()
    for service in services.values():
        assert service.process.wait(1.0) == -signal.SIGKILL
    supervise_for(pipeline, 0.5)
    assert pipeline.services == services
    pipeline.stop()


def test_every_service_runs_in_a_process_group_of_its_own(pipeline: StandIns) -> None:
    """So that a Ctrl-C in the terminal reaches only ``situflow up``, which stops them."""
    try:
        service = run(pipeline, ("steady", "kslack"))["kslack"]
        assert os.getpgid(service.process.pid) == service.process.pid
    finally:
        pipeline.stop()


def test_without_restarts_an_exited_service_stays_down_for_the_caller_to_restart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the tests that kill services on purpose expect (e.g. ``test_failover.py``)."""
    pipeline = StandIns(StreamSpec("cars", key_fields=("car_id",)),
                        kafka=KafkaSettings("127.0.0.1:9"), work_dir=tmp_path)
    try:
        services = run(pipeline, ("steady", "kslack"))
        services["kslack"].process.kill()
        services["kslack"].process.wait()
        supervise_for(pipeline, 0.5)
        assert pipeline.services == services
        assert capsys.readouterr().err == ""
    finally:
        pipeline.stop()
