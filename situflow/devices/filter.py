"""The filter operator of thesis §4.3.2 in its four implementations, with identical output.

A filter applies a predicate to every event of a batch and passes on the events that satisfy
it, in input order. Each implementation returns the positions of the passing events in the
batch (``int64``, ascending), from which a caller takes the events' columns:

- :meth:`Filter.single_threaded`: the predicate compiled by ``compile_vector`` (numpy) and one
  pass over the mask: the thesis' tight loop with a compiled predicate;
- :meth:`Filter.multi_threaded`: the batch split into one contiguous slice per thread (numpy
  releases the GIL in its loops); each thread evaluates its slice into its part of the mask and
  the calling thread materializes the output, as the thesis' driver thread does;
- :meth:`Filter.dispatch`: the columns copied to the device, one kernel writing a bitmap (each
  work-item evaluates 8 consecutive events into one byte, so no two work-items share a byte),
  the bitmap copied back and compacted by the host: the thesis' dispatch-based GPU variant;
- :meth:`Filter.zero_copy`: the columns used in place (``USE_HOST_PTR``), the same bitmap
  kernel, then in-kernel compaction by **count / scan / scatter**: a counting kernel sums the
  hits of each work-group's stretch of the bitmap (every work-item reads 8 bytes = 64 events,
  the thesis' driver kernel), one work-item turns the counts into each work-group's output
  offset, and a scatter kernel writes each work-group's hits from its offset on, each work-item
  from its prefix within the group. Output order equals input order by construction; the
  thesis' single atomic per wavefront reserves output slots in completion order, which would
  need a sort afterwards to restore the temporal order it requires. Only the hits and their
  count cross back to the host, through a zero-copy buffer.

Batch sizes should be multiples of ``device.lanes × 64`` events (the thesis' 4,096 = 64 lanes ×
64 bits): then every work-item of the counting and scatter kernels has a full 64-bit word.
The predicate comes from a query's AST through :mod:`.opencl_c`, never from text.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from typing import Any

import numpy as np

from situflow.devices.buffers import HostBuffer
from situflow.devices.counters import COUNTERS
from situflow.devices.device import Device
from situflow.devices.opencl_c import FUNCTION, OPTIONS, OpenCLExpression, Unsupported
from situflow.lang import ast
from situflow.lang.compile import compile_vector

Columns = Mapping[str, np.ndarray]

KERNELS = """
__kernel void situflow_bitmap(const long n{params}, __global uchar *bitmap) {{
    const long byte = get_global_id(0);
    uchar bits = 0;
    for (int b = 0; b < 8; b++) {{
        const long i = byte * 8 + b;
        if (i < n && {function}(i{args}) != 0) bits |= (uchar)(1 << b);
    }}
    bitmap[byte] = bits;
}}

__kernel void situflow_count(__global const ulong *words, __global long *counts) {{
    __local long hits[LANES];
    const int lane = get_local_id(0);
    hits[lane] = popcount(words[get_global_id(0)]);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane == 0) {{
        long sum = 0;
        for (int l = 0; l < LANES; l++) sum += hits[l];
        counts[get_group_id(0)] = sum;
    }}
}}

__kernel void situflow_scan(const long groups, __global long *offsets) {{
    long sum = 0;
    for (long g = 0; g < groups; g++) {{
        const long count = offsets[g];
        offsets[g] = sum;
        sum += count;
    }}
    offsets[groups] = sum;
}}

__kernel void situflow_scatter(__global const ulong *words, __global const long *offsets,
                               __global long *out) {{
    __local long before[LANES];
    const int lane = get_local_id(0);
    const long w = get_global_id(0);
    ulong word = words[w];
    before[lane] = popcount(word);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane == 0) {{
        long sum = offsets[get_group_id(0)];
        for (int l = 0; l < LANES; l++) {{ const long c = before[l]; before[l] = sum; sum += c; }}
    }}
    barrier(CLK_LOCAL_MEM_FENCE);
    long at = before[lane];
    while (word != 0) {{
        const int b = 63 - (int)clz(word & (~word + 1));
        out[at++] = w * 64 + b;
        word &= word - 1;
    }}
}}
"""


class Filter:
    """A predicate over a batch's columns (``Ref`` names), in the four implementations.

    ``device`` is needed for :meth:`dispatch` and :meth:`zero_copy` only. :attr:`unsupported`
    says why the predicate cannot run on a device (None when it can).
    """

    def __init__(self, predicate: ast.Node, device: Device | None = None, threads: int = 2):
        self.predicate = predicate
        self.device = device
        self.threads = threads
        self._mask = compile_vector(predicate, _column)
        self._pool = ThreadPoolExecutor(threads) if threads > 1 else None
        self.unsupported: str | None = None
        try:
            self._code: OpenCLExpression | None = OpenCLExpression(predicate, _column)
        except Unsupported as e:
            self._code, self.unsupported = None, str(e)
        self._programs: dict[tuple[np.dtype, ...], dict[str, Any]] = {}
        self._scratch: dict[str, HostBuffer] = {}

    # --- CPU ---------------------------------------------------------------------------------

    def single_threaded(self, columns: Columns) -> np.ndarray:
        return np.flatnonzero(self._truth(self._mask(columns), _length(columns)))

    def multi_threaded(self, columns: Columns) -> np.ndarray:
        n = _length(columns)
        if self._pool is None or n < 2 * self.threads:
            return self.single_threaded(columns)
        mask = np.empty(n, np.bool_)
        bounds = np.linspace(0, n, self.threads + 1).astype(np.int64)

        def evaluate(lo: int, hi: int) -> None:
            part = {name: column[lo:hi] for name, column in columns.items()}
            mask[lo:hi] = self._truth(self._mask(part), hi - lo)

        for done in [self._pool.submit(evaluate, int(lo), int(hi))
                     for lo, hi in pairwise(bounds)]:
            done.result()
        return np.flatnonzero(mask)

    @staticmethod
    def _truth(values: Any, n: int) -> np.ndarray:
        """The predicate's values as a mask of ``n`` (a constant predicate is broadcast)."""
        return np.broadcast_to(np.asarray(values, dtype=np.bool_), (n,))

    # --- device ------------------------------------------------------------------------------

    def dispatch(self, columns: Columns) -> np.ndarray:
        """Copy in, evaluate into a bitmap, copy the bitmap out, compact on the host."""
        n, device = _length(columns), self._need_device()
        kernels, arrays = self._kernels(columns)
        if n == 0 or kernels is None:
            return self.single_threaded(columns)
        cl = device.cl
        flags = cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR
        inputs = [cl.Buffer(device.context, flags, hostbuf=a) for a in arrays]
        words = self._words(n)
        bitmap = cl.Buffer(device.context, cl.mem_flags.WRITE_ONLY, words * 8)
        host = np.empty(words * 8, np.uint8)
        started = time.perf_counter()
        kernels["situflow_bitmap"](device.queue, (words * 8,), (device.lanes,), np.int64(n),
                                   *inputs, bitmap)
        cl.enqueue_copy(device.queue, host, bitmap)
        COUNTERS.add(kernel_seconds=time.perf_counter() - started, kernels=1, batches=1,
                     batch_events=n, bytes_to_device=sum(a.nbytes for a in arrays),
                     bytes_from_device=host.nbytes)
        return np.flatnonzero(np.unpackbits(host, count=n, bitorder="little"))

    def zero_copy(self, columns: Columns) -> np.ndarray:
        """Columns in place, bitmap, then count / scan / scatter on the device."""
        n, device = _length(columns), self._need_device()
        kernels, arrays = self._kernels(columns)
        if n == 0 or kernels is None:
            return self.single_threaded(columns)
        lanes, words = device.lanes, self._words(n)
        groups = words // lanes
        inputs = [HostBuffer.wrap(device, a) for a in arrays]
        bitmap = self._buffer("bitmap", words, np.uint64)
        offsets = self._buffer("offsets", groups + 1, np.int64)
        out = self._buffer("out", words * 64, np.int64)
        queue = device.queue
        started = time.perf_counter()
        kernels["situflow_bitmap"](queue, (words * 8,), (lanes,), np.int64(n),
                                   *(b.arg for b in inputs), bitmap.arg)
        kernels["situflow_count"](queue, (words,), (lanes,), bitmap.arg, offsets.arg)
        kernels["situflow_scan"](queue, (1,), (1,), np.int64(groups), offsets.arg)
        kernels["situflow_scatter"](queue, (words,), (lanes,), bitmap.arg, offsets.arg,
                                    out.arg)
        with offsets.host(write=False) as counted:
            hits = int(counted[groups])
        with out.host(write=False) as written:
            COUNTERS.add(kernel_seconds=time.perf_counter() - started, kernels=4, batches=1,
                         batch_events=n)
            return written[:hits].copy()

    def _need_device(self) -> Device:
        if self.device is None:
            raise ValueError("this filter has no device")
        return self.device

    def _words(self, n: int) -> int:
        """64-bit bitmap words for ``n`` events, rounded up to whole work-groups."""
        lanes = self._need_device().lanes
        return -(-n // (64 * lanes)) * lanes

    def _kernels(self, columns: Columns) -> tuple[dict[str, Any] | None, list[np.ndarray]]:
        """The compiled kernels for these columns' types and the columns in argument order;
        no kernels when the device cannot take them (the CPU path runs)."""
        if self._code is None:
            return None, []
        arrays = [np.ascontiguousarray(getter(columns)) for getter in self._code.getters]
        dtypes = tuple(a.dtype for a in arrays)
        kernels = self._programs.get(dtypes)
        if kernels is None:
            try:
                generated = self._code.generate(dtypes)
            except Unsupported as e:
                self.unsupported = str(e)
                return None, arrays
            device = self._need_device()
            source = generated.source + KERNELS.format(
                params=generated.parameters, args=generated.arguments, function=FUNCTION)
            program = device.program(source, (*OPTIONS, f"-D LANES={device.lanes}"))
            kernels = self._programs[dtypes] = {
                name: device.cl.Kernel(program, name)
                for name in ("situflow_bitmap", "situflow_count", "situflow_scan",
                             "situflow_scatter")}
        return kernels, arrays

    def _buffer(self, name: str, count: int, dtype: Any) -> HostBuffer:
        """A scratch buffer of at least ``count`` elements, kept between batches."""
        buffer = self._scratch.get(name)
        if buffer is None or buffer.count < count:
            buffer = self._scratch[name] = HostBuffer.allocate(self._need_device(), count, dtype)
        return buffer

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()


def _column(node: ast.Node) -> Callable[[Columns], Any]:
    if not isinstance(node, ast.Ref):
        raise TypeError(f"a filter predicate reads columns, not {type(node).__name__}")
    name = node.name
    return lambda columns: columns[name]


def _length(columns: Columns) -> int:
    return len(next(iter(columns.values()))) if columns else 0
