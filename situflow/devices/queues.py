"""Event queues between operators: array-backed ring buffers with logical indexes (thesis §4.3.1).

A queue has a fixed capacity (``size``) and two *logical* indexes that only grow: ``idxw``, the
next slot to write, and ``idxr``, the next slot to read. Enqueueing advances ``idxw``, dequeueing
advances ``idxr``; the physical slot of a logical index is ``index mod size``. Two invariants hold
after every operation:

1. ``idxr <= idxw``
2. ``idxw - idxr <= size``

and the valid data are the logical slots ``[idxr, idxw)``. (Fig. 4.3: with ``size = 9``,
``idxr = 22`` and ``idxw = 29``, the valid slots 22 … 28 sit at physical 4 … 8, 0, 1.)

The thesis publishes the indexes through HSA signals so that a reader waits on ``idxw`` and a
writer on ``idxr``; OpenCL 1.2 has no device-side wait (research notes B3), so here the host
owns the indexes and a kernel receives ``idxr`` and ``size`` as arguments. The publish rule stays:
a writer fills slots first and advances ``idxw`` after (:meth:`EventQueue.reserve` then
:meth:`EventQueue.publish`), so a reader never sees an index covering an unwritten slot (Fig. 4.5).
One producer and one consumer may use a queue from two threads.

The backing array is plain numpy memory, or a :class:`~situflow.devices.buffers.HostBuffer`
that kernels read in place.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from situflow.devices.buffers import HostBuffer

if TYPE_CHECKING:
    from situflow.devices.device import Device


class QueueFull(RuntimeError):
    """More slots were reserved or published than the queue has free."""


class EventQueue:
    """A ring buffer of ``size`` elements of ``dtype`` (a structured dtype holds whole events).

    With a ``device`` the backing array is a zero-copy :class:`HostBuffer`; without, numpy
    memory.
    """

    def __init__(self, size: int, dtype: Any, device: Device | None = None):
        if size < 1:
            raise ValueError(f"a queue needs at least one slot, not {size}")
        self.size = int(size)
        self.dtype = np.dtype(dtype)
        self.idxr = 0
        self.idxw = 0
        self._reserved = 0  # slots handed out by reserve() and not yet published
        self.buffer: HostBuffer | None = (
            HostBuffer.allocate(device, self.size, self.dtype) if device is not None else None)
        self._array = np.empty(self.size, self.dtype) if device is None else None

    def __len__(self) -> int:
        return self.idxw - self.idxr

    @property
    def free(self) -> int:
        return self.size - (self.idxw - self.idxr) - self._reserved

    def physical(self, logical: int) -> int:
        return logical % self.size

    def segments(self, start: int, stop: int) -> list[tuple[int, int]]:
        """The physical ``[begin, end)`` ranges holding logical slots ``[start, stop)``, in
        logical order: one range, or two where the slots wrap around the array's end."""
        if stop - start > self.size or start > stop:
            raise ValueError(f"logical slots [{start}, {stop}) do not fit {self.size} slots")
        if start == stop:
            return []
        begin = start % self.size
        end = begin + (stop - start)
        if end <= self.size:
            return [(begin, end)]
        return [(begin, self.size), (0, end - self.size)]

    @contextmanager
    def _host(self, *, read: bool = True) -> Iterator[np.ndarray]:
        if self.buffer is None:
            yield self._array  # type: ignore[misc]
            return
        with self.buffer.host(read=read) as array:
            yield array

    # --- writing ---------------------------------------------------------------------------

    def reserve(self, count: int) -> tuple[int, int]:
        """Claim the next ``count`` free slots for writing; returns their logical range. They
        become readable only when :meth:`publish` is called."""
        if count > self.free:
            raise QueueFull(f"{count} slots asked, {self.free} free of {self.size}")
        start = self.idxw + self._reserved
        self._reserved += count
        return start, start + count

    def publish(self, count: int) -> None:
        """Make the next ``count`` reserved slots readable (the data must be written)."""
        if count > self._reserved:
            raise QueueFull(f"{count} slots published, {self._reserved} reserved")
        self._reserved -= count
        self.idxw += count

    def enqueue(self, values: np.ndarray) -> int:
        """Write as many of ``values`` as fit, in order, and publish them; returns how many."""
        count = min(len(values), self.free)
        start, stop = self.reserve(count)
        with self._host() as array:
            done = 0
            for begin, end in self.segments(start, stop):
                array[begin:end] = values[done:done + end - begin]
                done += end - begin
        self.publish(count)
        return count

    # --- reading ---------------------------------------------------------------------------

    def peek(self, count: int | None = None) -> np.ndarray:
        """A copy of the first ``count`` readable elements (all by default), in order."""
        count = len(self) if count is None else min(count, len(self))
        parts = []
        with self._host() as array:
            for begin, end in self.segments(self.idxr, self.idxr + count):
                parts.append(array[begin:end].copy())
        return np.concatenate(parts) if parts else np.empty(0, self.dtype)

    def release(self, count: int) -> None:
        """Free the first ``count`` readable slots (after a kernel consumed them in place)."""
        if count > len(self):
            raise ValueError(f"{count} slots released, {len(self)} readable")
        self.idxr += count

    def dequeue(self, count: int | None = None) -> np.ndarray:
        """Read and free the first ``count`` readable elements (all by default), in order."""
        values = self.peek(count)
        self.release(len(values))
        return values
