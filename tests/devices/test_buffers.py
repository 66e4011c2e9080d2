"""Zero-copy host buffers: what the host writes a kernel reads in place, and back."""

import numpy as np
import pytest

from situflow.devices.buffers import FINE_SVM, HOST_MEMORY, HostBuffer

DOUBLE = "__kernel void double_it(__global long *x) { x[get_global_id(0)] *= 2; }"


def run_double(device, buffer):
    kernel = device.cl.Kernel(device.program(DOUBLE), "double_it")
    kernel(device.queue, (buffer.count,), None, buffer.arg)


@pytest.mark.parametrize("svm", [True, False], ids=["svm-where-offered", "alloc-host-ptr"])
def test_an_allocated_buffer_is_written_by_the_host_doubled_by_a_kernel_and_read_back(device, svm):
    buffer = HostBuffer.allocate(device, 100, np.int64, svm=svm)
    assert buffer.kind == (FINE_SVM if svm and device.info.svm == "fine" else HOST_MEMORY)
    with buffer.host(read=False) as host:
        host[:] = np.arange(100)
    run_double(device, buffer)
    with buffer.host(write=False) as host:
        assert host.tolist() == list(range(0, 200, 2))


def test_a_wrapped_array_is_used_by_the_kernel_and_the_host_sees_the_result(device):
    values = np.arange(10, dtype=np.int64)
    buffer = HostBuffer.wrap(device, values)
    run_double(device, buffer)
    with buffer.host() as host:
        assert host.tolist() == list(range(0, 20, 2))


def test_an_empty_buffer_still_has_one_slot_because_opencl_refuses_empty_ones(device):
    assert HostBuffer.allocate(device, 0, np.float64).count == 1
    assert HostBuffer.wrap(device, np.empty(0)).nbytes == 8


def test_a_read_only_array_is_wrapped_for_kernels_that_only_read_it(device):
    values = np.arange(4, dtype=np.int64)
    values.flags.writeable = False
    with HostBuffer.wrap(device, values).host(write=False) as host:
        assert host.tolist() == [0, 1, 2, 3]
