"""Zero-copy host buffers: memory that the host and the device both use in place.

Thesis §4.2.1 rests on HSA's fine-grained shared virtual memory: on an integrated GPU, host and
device share one address space, so nothing is copied and nothing is mapped. OpenCL offers the
same where the device reports fine-grained SVM (OpenCL 2.0); elsewhere (OpenCL 1.2, research
notes B3) the portable zero-copy path is a buffer the runtime allocates in host-visible memory
(``CL_MEM_ALLOC_HOST_PTR``), or one over an existing host array (``CL_MEM_USE_HOST_PTR``), which
the host maps before it touches the memory and unmaps before a kernel does. On an integrated GPU
mapping is free (no copy); on a discrete GPU the runtime copies, which is why discovery ranks
those lower.

:class:`HostBuffer` hides the difference: :meth:`HostBuffer.host` gives the host a numpy view for
the span of a ``with`` block, and :attr:`HostBuffer.arg` is what a kernel takes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from situflow.devices.device import Device

FINE_SVM, HOST_MEMORY, HOST_ARRAY = "fine-svm", "alloc-host-ptr", "use-host-ptr"


class HostBuffer:
    """``count`` elements of ``dtype`` that a kernel and the host share.

    Build one with :meth:`allocate` (new memory: fine-grained SVM where the device offers it,
    else ``ALLOC_HOST_PTR``) or :meth:`wrap` (an existing numpy array, ``USE_HOST_PTR``).
    The host may only touch the memory inside :meth:`host`; a kernel only outside it.
    """

    def __init__(self, device: Device, kind: str, array: np.ndarray | None, buffer: Any):
        self.device = device
        self.kind = kind
        self.dtype = np.dtype(array.dtype if array is not None else buffer.dtype)
        self._array = array  # the host's view, when the memory is always visible (SVM, wrap)
        self._buffer = buffer  # the cl.Buffer, when there is one

    @classmethod
    def allocate(cls, device: Device, count: int, dtype: Any, *, svm: bool = True) -> HostBuffer:
        """New shared memory for ``count`` elements (at least one: OpenCL has no empty buffers).

        With ``svm`` (the default) a device reporting fine-grained SVM gets an SVM allocation,
        which the host reads and writes without mapping (thesis §4.2.1)."""
        cl, dtype = device.cl, np.dtype(dtype)
        count = max(int(count), 1)
        if svm and device.info.svm == "fine":
            array = cl.fsvm_empty(device.context, (count,), dtype)
            return cls(device, FINE_SVM, array, cl.SVM(array))
        flags = cl.mem_flags.READ_WRITE | cl.mem_flags.ALLOC_HOST_PTR
        buffer = cl.Buffer(device.context, flags, count * dtype.itemsize)
        buffer.dtype = dtype  # pyopencl buffers accept attributes; the map needs the type
        buffer.count = count
        return cls(device, HOST_MEMORY, None, buffer)

    @classmethod
    def wrap(cls, device: Device, array: np.ndarray) -> HostBuffer:
        """The existing contiguous ``array`` as a kernel argument, without a copy where the
        runtime can use host memory in place (integrated GPUs, CPU devices). A read-only array
        (an Arrow column, say) gives a buffer kernels may only read."""
        cl = device.cl
        if array.size == 0:
            return cls.allocate(device, 1, array.dtype, svm=False)
        array = np.ascontiguousarray(array)
        access = cl.mem_flags.READ_WRITE if array.flags.writeable else cl.mem_flags.READ_ONLY
        flags = access | cl.mem_flags.USE_HOST_PTR
        return cls(device, HOST_ARRAY, array, cl.Buffer(device.context, flags, hostbuf=array))

    @property
    def arg(self) -> Any:
        """The kernel argument for this memory."""
        return self._buffer

    @property
    def count(self) -> int:
        return int(self._array.size if self._array is not None else self._buffer.count)

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.itemsize

    @contextmanager
    def host(self, *, read: bool = True, write: bool = True) -> Iterator[np.ndarray]:
        """The memory as a numpy array for the host, for the span of the ``with`` block.

        Waits for the device's queued work first. Fine-grained SVM needs nothing more; the other
        kinds are mapped and unmapped (``read=False`` lets the runtime skip fetching contents
        the host is about to overwrite; ``write=False`` skips writing them back)."""
        queue = self.device.queue
        queue.finish()
        if self.kind == FINE_SVM:
            yield self._array  # type: ignore[misc]
            return
        cl = self.device.cl
        flags = ((cl.map_flags.READ if read or not write else 0)
                 | (cl.map_flags.WRITE if write and read else 0)
                 | (cl.map_flags.WRITE_INVALIDATE_REGION if write and not read else 0))
        mapped, _ = cl.enqueue_map_buffer(queue, self._buffer, flags, 0, (self.count,),
                                          self.dtype, is_blocking=True)
        try:
            yield mapped
        finally:
            mapped.base.release(queue)
