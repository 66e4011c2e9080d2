"""How a device is configured and observed: situflow run --device, SITUFLOW_DEVICE, the
services' query sets and their situflow_device_* metrics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import faust
import pytest

from situflow.cli import main
from situflow.devices import DeviceUnavailable, discovery
from situflow.devices.counters import COUNTERS
from situflow.devices.vector import shared_device
from situflow.runtime import QuerySet
from workers.metrics import DEVICE_COUNTERS, ServiceMetrics

REPO = Path(__file__).parents[2]
QUERY = ("FROM S DEFINE A AS speed > 70, B AS speed < 65 PATTERN A before B WITHIN 10 seconds "
         "RETURN count(A) AS n")


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    query = tmp_path / "fast.tps"
    query.write_text(QUERY)
    events = tmp_path / "events.jsonl"
    events.write_text("".join(json.dumps({"ts": t, "car_id": 1, "speed": 60 + 5 * (t % 5)})
                              + "\n" for t in range(30)))
    return query, events


@pytest.fixture
def no_opencl(monkeypatch):
    """A machine without OpenCL: discovery fails as it does without a platform."""
    def absent():
        raise DeviceUnavailable("no OpenCL platform: none installed")

    shared_device.cache_clear()
    monkeypatch.setattr(discovery, "import_opencl", absent)
    monkeypatch.setattr("situflow.devices.device.list_devices", lambda: absent())
    yield
    shared_device.cache_clear()


def run(files, *extra):
    query, events = files
    return main(["run", str(query), "--input", str(events), *extra])


@pytest.mark.usefixtures("no_opencl")
def test_opencl_asked_for_and_absent_is_a_clear_error_with_exit_1(files, capsys):
    assert run(files, "--device", "opencl") == 1
    err = capsys.readouterr().err
    assert "--device opencl" in err and "no OpenCL platform" in err


@pytest.mark.usefixtures("no_opencl")
def test_auto_without_a_gpu_runs_on_the_cpu_and_says_nothing(files, capsys):
    assert run(files, "--device", "auto") == 0
    out, err = capsys.readouterr()
    assert err == "" and out


def test_situflow_device_is_the_default_and_a_bad_value_is_refused(files, monkeypatch, capsys):
    monkeypatch.setenv("SITUFLOW_DEVICE", "gpu")
    assert run(files) == 1
    assert "SITUFLOW_DEVICE must be one of cpu, opencl, auto" in capsys.readouterr().err


def test_every_device_gives_the_same_output(files, device, capsys):
    outputs = []
    for name in ("cpu", "opencl", "auto"):
        assert run(files, "--device", name) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] and outputs[0] == outputs[1] == outputs[2]


def test_a_service_query_set_opens_its_device_once_and_compiles_its_queries_for_it(device):
    queries = QuerySet("deriver", frozenset({"tpstream"}), time_field="ts", device="opencl")
    assert queries.options("q").device == "opencl"
    assert shared_device("opencl") is shared_device("opencl")


@pytest.mark.usefixtures("no_opencl")
def test_a_service_asked_for_opencl_without_it_stops_at_its_start():
    with pytest.raises(DeviceUnavailable, match="no OpenCL platform"):
        QuerySet("deriver", frozenset({"tpstream"}), time_field="ts", device="opencl")


def test_the_device_counters_are_exported_as_situflow_device_metrics(device, files, capsys):
    run(files, "--device", "opencl")
    metrics = ServiceMetrics(faust.App("test-device"), "deriver")
    counters = COUNTERS.snapshot()
    for name in DEVICE_COUNTERS:
        value = metrics.registry.get_sample_value(f"situflow_device_{name}_total",
                                                  {"service": "deriver"})
        assert value == pytest.approx(counters[name])
    assert counters["kernels"] > 0 and counters["batch_events"] >= 30


def test_the_cpu_path_never_loads_pyopencl(files):
    query, events = files
    script = ("import sys; from situflow.cli import main; "
              f"main(['run', {str(query)!r}, '--input', {str(events)!r}, '--device', 'cpu']); "
              "assert 'pyopencl' not in sys.modules, 'pyopencl was imported'")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
