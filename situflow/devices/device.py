"""An opened OpenCL device: context, in-order queue and the compiled-program cache."""

from __future__ import annotations

import hashlib
from typing import Any

from situflow.devices.discovery import DeviceInfo, DeviceUnavailable, choose, import_opencl, list_devices

PREFERENCES = ("cpu", "opencl", "auto")


class Device:
    """One OpenCL device with its context and queue.

    Programs are compiled once per process and device (:meth:`program`); pyopencl also keeps
    the binaries on disk, so a restarted worker does not pay the compiler again.
    """

    def __init__(self, info: DeviceInfo):
        cl = import_opencl()
        self.cl = cl
        self.info = info
        platform = cl.get_platforms()[info.position[0]]
        self.cl_device = platform.get_devices()[info.position[1]]
        self.context = cl.Context([self.cl_device])
        self.queue = cl.CommandQueue(self.context, self.cl_device)
        self._programs: dict[str, Any] = {}
        self._lanes: int | None = None

    def program(self, source: str, options: tuple[str, ...] = ()) -> Any:
        """``source`` compiled for this device (OpenCL C generated from a query's AST or one of
        situflow's kernels; never user text)."""
        key = hashlib.sha256("\0".join((source, *options)).encode()).hexdigest()
        built = self._programs.get(key)
        if built is None:
            built = self._programs[key] = self.cl.Program(self.context, source).build(
                options=list(options))
        return built

    @property
    def lanes(self) -> int:
        """The device's SIMD width as it reports it for a kernel (the thesis' wavefront of 64 on
        AMD, §4.2.3; 32 on NVIDIA, 8–32 on Intel and on CPU devices): batch sizes and
        work-group sizes are multiples of it."""
        if self._lanes is None:
            probe = self.program("__kernel void probe(__global int *x) { x[0] = 0; }").probe
            self._lanes = int(probe.get_work_group_info(
                self.cl.kernel_work_group_info.PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                self.cl_device))
        return self._lanes

    def __repr__(self) -> str:
        return f"Device({self.info.describe()})"


def open_device(preference: str) -> Device | None:
    """The device for ``SITUFLOW_DEVICE`` / ``--device``: None for ``cpu`` (the numba paths);
    for ``opencl`` the best OpenCL device, or :class:`DeviceUnavailable` with the reason; for
    ``auto`` a GPU when one is present, else None (on a machine without a GPU the CPU paths are
    faster than OpenCL on the same CPU)."""
    if preference not in PREFERENCES:
        raise ValueError(f"device must be one of {', '.join(PREFERENCES)}, not {preference!r}")
    if preference == "cpu":
        return None
    try:
        devices = list_devices()
    except DeviceUnavailable:
        if preference == "auto":
            return None
        raise
    info = choose(devices, gpu_only=preference == "auto")
    if info is None:
        if preference == "auto":
            return None
        raise DeviceUnavailable("no OpenCL device found (install an OpenCL driver, or "
                                "pocl-binary-distribution for the CPU)")
    return Device(info)
