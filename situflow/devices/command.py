"""``situflow devices``: what OpenCL devices this machine has and which one each setting uses."""

from __future__ import annotations

import sys

from situflow.devices.discovery import DeviceUnavailable, choose, list_devices


def show_devices() -> int:
    try:
        devices = list_devices()
    except DeviceUnavailable as e:
        print(f"no OpenCL: {e}")
        print("--device auto runs on the CPU; --device opencl fails")
        return 0
    if not devices:
        print("no OpenCL device found")
    for d in devices:
        print(f"[{d.position[0]}.{d.position[1]}] {d.describe()}")
    best, gpu = choose(devices), choose(devices, gpu_only=True)
    print(f"--device opencl uses: {best.name if best else 'nothing (it fails)'}")
    print(f"--device auto uses: {gpu.name if gpu else 'the CPU (no GPU present)'}")
    sys.stdout.flush()
    return 0
