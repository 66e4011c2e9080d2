"""Device discovery: the ranking of thesis chapter 4, and what each --device setting opens."""

import pytest

from situflow.devices import DeviceInfo, DeviceUnavailable, choose, list_devices, open_device
from situflow.devices.discovery import CPU, GPU, INTEGRATED_GPU


def device(kind: str, units: int = 4, position: tuple[int, int] = (0, 0)) -> DeviceInfo:
    return DeviceInfo(platform="p", name=f"{kind}-{units}", kind=kind, compute_units=units,
                      global_memory=1 << 30, opencl_c="OpenCL C 1.2", svm="none",
                      position=position)


def test_an_integrated_gpu_is_chosen_before_a_discrete_gpu_and_a_cpu():
    found = [device(CPU, 64), device(GPU, 56, (1, 0)), device(INTEGRATED_GPU, 11, (2, 0))]
    assert choose(found).kind == INTEGRATED_GPU


def test_among_devices_of_one_kind_the_one_with_more_compute_units_is_chosen():
    assert choose([device(GPU, 8), device(GPU, 56, (0, 1))]).compute_units == 56


def test_auto_wants_a_gpu_and_takes_no_cpu_device():
    assert choose([device(CPU)], gpu_only=True) is None
    assert choose([]) is None


def test_cpu_opens_no_device_and_an_unknown_setting_is_refused():
    assert open_device("cpu") is None
    with pytest.raises(ValueError, match="one of cpu, opencl, auto"):
        open_device("gpu")


def test_opencl_opens_the_best_device_present_and_its_lane_width_divides_work_groups():
    try:
        devices = list_devices()
    except DeviceUnavailable as e:
        pytest.skip(str(e))
    opened = open_device("opencl")
    assert opened is not None and opened.info == choose(devices)
    assert opened.lanes >= 1
    # A program is compiled once per device.
    source = "__kernel void k(__global int *x) { x[get_global_id(0)] = 1; }"
    assert opened.program(source) is opened.program(source)
