"""Which OpenCL devices this machine has, and which one situflow would use.

The ranking follows what thesis chapter 4 found (§4.4, B2.2 of the research notes): an integrated
GPU wins because it shares the host's memory (no copies, §4.2.1); a discrete GPU loses most of its
advantage to data shipping but still comes before a CPU device, which only duplicates the CPU
paths. Device names are never matched: kinds come from the device type and its unified-memory flag.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

INTEGRATED_GPU, GPU, ACCELERATOR, CPU = "integrated-gpu", "gpu", "accelerator", "cpu"
# Lower is better.
_RANK = {INTEGRATED_GPU: 0, GPU: 1, ACCELERATOR: 2, CPU: 3}


class DeviceUnavailable(RuntimeError):
    """A device was asked for and cannot be used (no pyopencl, no platform, no device)."""


@dataclass(frozen=True)
class DeviceInfo:
    """What situflow needs to know of one OpenCL device."""

    platform: str
    name: str
    kind: str  # INTEGRATED_GPU, GPU, ACCELERATOR or CPU
    compute_units: int
    global_memory: int  # bytes
    opencl_c: str  # the OpenCL C version its compiler accepts
    svm: str  # "fine", "coarse" or "none": shared virtual memory (OpenCL 2.0)
    # Where the device sits in pyopencl's lists: (platform index, device index).
    position: tuple[int, int]

    def describe(self) -> str:
        return (f"{self.name} ({self.kind}, {self.compute_units} compute units, "
                f"{self.global_memory >> 20} MiB, {self.opencl_c}, SVM {self.svm}; "
                f"platform {self.platform})")


def list_devices() -> list[DeviceInfo]:
    """Every OpenCL device of every platform; raises :class:`DeviceUnavailable` with the reason
    when OpenCL itself cannot be used."""
    cl = import_opencl()
    try:
        platforms = cl.get_platforms()
    except cl.Error as e:  # no ICD loader or no platform installed
        raise DeviceUnavailable(f"no OpenCL platform: {e}") from e
    found = []
    for p, platform in enumerate(platforms):
        try:
            devices = platform.get_devices()
        except cl.Error:
            continue  # a platform without devices (CL_DEVICE_NOT_FOUND)
        for d, device in enumerate(devices):
            found.append(_describe(cl, platform, device, (p, d)))
    return found


def choose(devices: list[DeviceInfo], *, gpu_only: bool = False) -> DeviceInfo | None:
    """The device situflow uses among ``devices``: the best kind, then the most compute units;
    with ``gpu_only``, None unless a GPU is present (what ``SITUFLOW_DEVICE=auto`` wants)."""
    candidates = [d for d in devices if not gpu_only or d.kind in (INTEGRATED_GPU, GPU)]
    if not candidates:
        return None
    return min(candidates, key=lambda d: (_RANK[d.kind], -d.compute_units, d.position))


def import_opencl() -> Any:
    try:
        import pyopencl
    except ImportError as e:
        raise DeviceUnavailable(
            "pyopencl is not installed: pip install 'situflow[devices]' "
            "(it brings pyopencl and PoCL's CPU device)") from e
    return pyopencl


def _describe(cl: Any, platform: Any, device: Any, position: tuple[int, int]) -> DeviceInfo:
    if device.type & cl.device_type.GPU:
        # Deprecated since OpenCL 2.0 but still answered by every runtime; it is the portable
        # way to tell an integrated GPU from a discrete one.
        kind = INTEGRATED_GPU if _ask(device, "host_unified_memory", False) else GPU
    elif device.type & cl.device_type.ACCELERATOR:
        kind = ACCELERATOR
    else:
        kind = CPU
    caps = _ask(device, "svm_capabilities", 0)
    svm = ("fine" if caps & cl.device_svm_capabilities.FINE_GRAIN_BUFFER
           else "coarse" if caps & cl.device_svm_capabilities.COARSE_GRAIN_BUFFER else "none")
    return DeviceInfo(platform=platform.name.strip(), name=device.name.strip(), kind=kind,
                      compute_units=device.max_compute_units,
                      global_memory=device.global_mem_size,
                      opencl_c=device.opencl_c_version.strip(), svm=svm, position=position)


def _ask(device: Any, attribute: str, default: Any) -> Any:
    try:
        return getattr(device, attribute)
    except Exception:  # pyopencl raises LogicError/RuntimeError for what a runtime lacks
        return default
