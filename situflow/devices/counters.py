"""What the device layer did in this process: kernel time, batches, bytes moved, CPU fallbacks.

Plain counters (the core has no Prometheus); a service exports them as ``situflow_device_*``
(``workers/metrics.py``). One process opens one device, so the counters are process-wide.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, fields


@dataclass
class DeviceCounters:
    # Seconds from a kernel's launch to its completion, as the host waits for it.
    kernel_seconds: float = 0.0
    kernels: int = 0
    # Batches evaluated on the device and the events in them (their mean is the batch size).
    batches: int = 0
    batch_events: int = 0
    # Bytes copied host -> device and device -> host (zero-copy buffers count nothing).
    bytes_to_device: int = 0
    bytes_from_device: int = 0
    # Evaluations that ran on the CPU although a device was configured (see :mod:`.vector`).
    cpu_fallbacks: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def add(self, **amounts: float) -> None:
        with self._lock:
            for name, amount in amounts.items():
                setattr(self, name, getattr(self, name) + amount)

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return {f.name: getattr(self, f.name) for f in fields(self)}


COUNTERS = DeviceCounters()
