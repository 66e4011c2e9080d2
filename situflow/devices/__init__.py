"""The device layer: OpenCL kernels for integrated GPUs beside the CPU paths (thesis chapter 4).

- :mod:`.discovery` lists the OpenCL devices and chooses one: an integrated GPU first (it shares
  the host's memory, which is what makes small batches pay, §4.2.1), then any GPU, then any other
  OpenCL device (PoCL's CPU device in tests);
- :mod:`.device` opens the chosen device: its context, an in-order queue and a cache of compiled
  programs.

pyopencl is an optional dependency (the ``devices`` extra): nothing here imports it until a
device is asked for, so the CPU paths never load it. Every device path gives results identical
to the CPU path (ARCHITECTURE.md, "Kernels and devices").
"""

from situflow.devices.device import Device, open_device
from situflow.devices.discovery import (
    DeviceInfo,
    DeviceUnavailable,
    choose,
    list_devices,
)

__all__ = ["Device", "DeviceInfo", "DeviceUnavailable", "choose", "list_devices", "open_device"]
