"""The opened OpenCL device for the device tests; they skip where OpenCL is absent."""

import pytest

from situflow.devices import DeviceUnavailable, open_device


@pytest.fixture(scope="session")
def device():
    try:
        return open_device("opencl")
    except DeviceUnavailable as e:
        pytest.skip(str(e))
