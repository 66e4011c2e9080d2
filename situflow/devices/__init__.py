"""The device layer: OpenCL kernels for integrated GPUs beside the CPU paths (thesis chapter 4).

- :mod:`.discovery` lists the OpenCL devices and chooses one: an integrated GPU first (it shares
  the host's memory, which is what makes small batches pay, §4.2.1), then any GPU, then any other
  OpenCL device (PoCL's CPU device in tests);
- :mod:`.device` opens the chosen device: its context, an in-order queue and a cache of compiled
  programs;
- :mod:`.buffers` shares memory between host and device without copies (fine-grained SVM,
  ``ALLOC_HOST_PTR``, ``USE_HOST_PTR``); :mod:`.queues` holds the ring-buffer event queues of
  §4.3.1 on top of it;
- :mod:`.opencl_c` turns an expression's AST into OpenCL C with ``compile_vector``'s semantics;
  :mod:`.vector` runs such expressions for the engines (``QueryOptions.device``), and
  :mod:`.filter` is the filter operator of §4.3.2 in its four implementations;
- :mod:`.counters` counts what the device did (exported as ``situflow_device_*``).

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
