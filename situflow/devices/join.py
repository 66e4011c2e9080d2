"""Windowed join of two streams on four implementations (thesis §4.3.4).

**The operator.** Two streams, *left* and *right*, each with a count window of its last
``window`` events. Events are taken in time order across both streams (a left and a right event
at the same time: left first), the thesis' driver that "keeps track of the heads of both input
queues": an event is taken only once the other stream has shown it cannot still deliver an
earlier one. Each new event is compared with every event in the other stream's window, then
enters its own window. The predicate is the thesis' (§4.4): the Euclidean distance of the two
events' payload vectors is at most ``radius``, evaluated as the sum over the dimensions, in
order, of the squared differences, compared with ``radius²`` (a payload of one dimension makes
it a band join, ``radius=0`` an equi-join; NaN matches nothing). A result is the pair of stream
positions ``(left, right)``; results come in the order of the new event, then of the other
window (oldest first), on every implementation.

**Which situflow queries need it.** None of the languages' operators calls it. TPStream's
matcher is a windowed join of situations: a new situation is related to the buffered situations
of the other definitions within ``WITHIN`` (thesis §5.5.2). But the situations of a definition
are disjoint and ordered, so every Allen relation is two binary searches (Fig. 5.3), O(log n)
against this operator's O(n) comparisons, over the few situations derivation emits. SASE+ and
COGRA stay on one stream. The shape "a new event against a window of stored events" is COGRA's
mixed-grained aggregator (§5: an adjacent predicate checked against every kept event node,
research notes B3 point 5), the candidate for this kernel where its predicates compare numeric
attributes. Until then it is a library operator.

**Implementations** (:data:`IMPLEMENTATIONS`): ``st`` (one thread, numba); ``mt`` (the new
events of a batch cut into one run per core, each joined by the single-threaded kernel on its
own thread without the GIL, the runs' pairs concatenated in order); ``dispatch`` (OpenCL, copy
in and out per batch) and ``zero-copy`` (OpenCL reading the payloads in the host's array,
``USE_HOST_PTR``, results in memory shared with the host: fine-grained SVM where the device
offers it, else mapped ``ALLOC_HOST_PTR``, :class:`~situflow.devices.buffers.HostBuffer`).
Both OpenCL variants
micro-batch: one launch per batch of new events, one work-group per slice of ``SLICE`` window
events per new event (the thesis' wavefront per slice), one work-item per pair.

**Publish order (thesis Fig. 4.5, B2.3), and how it maps to OpenCL.** A work-group counts its
matches (a prefix sum in local memory keeps them in window order), reserves that many contiguous
output slots with one atomic add, and writes them. In the thesis each wavefront then waits until
the queue's write index reaches its first slot before it advances the index past its own: a
spin on another work-group's progress. OpenCL promises no forward progress between
work-groups, so that spin may hang (a waiting group can hold the compute unit the awaited one
needs). Here no work-group waits: each records its reserved segment ``(start, count)``, and the
host publishes once the launch has completed, through :class:`SlotPublisher`, which advances the
write index only over a prefix of completed segments. A consumer reading the index at any moment
therefore never sees an unwritten slot, whatever order the groups finish in; the host also
gathers the segments into work-group order, which makes the output independent of the
reservation order.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numba
import numpy as np

from situflow.devices.buffers import HostBuffer

if TYPE_CHECKING:
    from situflow.devices.device import Device

SLICE = 64
IMPLEMENTATIONS = ("st", "mt", "dispatch", "zero-copy")


class SlotPublisher:
    """The write index of an output queue whose slots are reserved and written concurrently.

    Writers :meth:`reserve` contiguous slots, write them in any order and at any pace, and say
    :meth:`complete`; :attr:`idxw`, what a consumer reads, only ever covers slots whose writer
    has completed, because it advances over completed segments in slot order (thesis §4.3.4:
    a writer of ``[s1, sr]`` is published only after every writer of slots below ``s1``)."""

    def __init__(self, idxw: int = 0):
        self.idxw = idxw
        self._reserved = idxw
        self._done: dict[int, int] = {}  # completed segments not yet published: start -> end

    def reserve(self, count: int) -> int:
        start = self._reserved
        self._reserved += count
        return start

    def complete(self, start: int, count: int) -> None:
        if count == 0:
            return  # an empty segment shares its start with the next writer's
        self._done[start] = start + count
        while self.idxw in self._done:
            self.idxw = self._done.pop(self.idxw)

    def complete_all(self, starts: np.ndarray, counts: np.ndarray) -> None:
        """:meth:`complete` for many segments at once (a finished launch), vectorized."""
        keep = counts > 0
        order = np.argsort(starts[keep], kind="stable")
        starts, ends = starts[keep][order], (starts[keep] + counts[keep])[order]
        # The segments that start where the previous one ended are published at once.
        joined = np.concatenate([[self.idxw], ends[:-1]]) == starts
        prefix = ends.size if joined.all() else int(np.argmin(joined))
        if prefix:
            self.idxw = int(ends[prefix - 1])
        for start, end in zip(starts[prefix:].tolist(), ends[prefix:].tolist(), strict=True):
            self._done[start] = end
        while self.idxw in self._done:
            self.idxw = self._done.pop(self.idxw)


@numba.njit(cache=True, nogil=True)
def _join_kernel(xt, r2, row, lo, hi, first, out_probe, out_other, m):  # pragma: no cover
    """From new event ``first`` on, appends pairs at ``out[m:]`` until the output could
    overflow; returns the next new event and ``m``. ``xt`` holds the payloads dimension by
    dimension, so the distances of ``SLICE`` window events to the new event are computed side by
    side (SIMD), each summed over the dimensions in order, as every implementation does."""
    dims = xt.shape[0]
    d2 = np.empty(SLICE, xt.dtype)
    for p in range(first, row.shape[0]):
        if m + hi[p] - lo[p] > out_probe.shape[0]:
            return p, m
        rp = row[p]
        for start in range(lo[p], hi[p], SLICE):
            width = min(SLICE, hi[p] - start)
            d2[:] = 0.0
            for k in range(dims):
                a = xt[k, rp]
                window = xt[k, start:start + width]
                for jj in range(width):
                    t = a - window[jj]
                    d2[jj] = d2[jj] + t * t
            for jj in range(width):
                if d2[jj] <= r2:
                    out_probe[m] = p
                    out_other[m] = start + jj
                    m += 1
    return row.shape[0], m


def _join_st(xt: np.ndarray, r2: Any, row: np.ndarray, lo: np.ndarray,
             hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The single-threaded join: :func:`_join_kernel`, its output grown between calls."""
    capacity = 1 << 12
    out_probe, out_other = np.empty(capacity, np.int64), np.empty(capacity, np.int64)
    first = m = 0
    while True:
        first, m = _join_kernel(xt, r2, row, lo, hi, first, out_probe, out_other, m)
        if first == row.shape[0]:
            return out_probe[:m], out_other[:m]
        capacity = max(2 * capacity, m + int(hi[first] - lo[first]))
        out_probe = np.concatenate([out_probe[:m], np.empty(capacity - m, np.int64)])
        out_other = np.concatenate([out_other[:m], np.empty(capacity - m, np.int64)])


def _join_mt(pool: ThreadPoolExecutor, threads: int, xt: np.ndarray, r2: Any, row: np.ndarray,
             lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The new events cut into ``threads`` runs of about equal work (window events to compare),
    each joined by :func:`_join_st` on its own thread (numba releases the GIL), the runs'
    pairs concatenated in order."""
    work = np.cumsum(hi - lo)
    total = int(work[-1]) if work.size else 0
    cuts = np.searchsorted(work, [total * k // threads for k in range(1, threads)])
    bounds = [0, *cuts.tolist(), row.shape[0]]

    def run(a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        probes, others = _join_st(xt, r2, row[a:b], lo[a:b], hi[a:b])
        return probes + a, others

    parts = list(pool.map(run, bounds[:-1], bounds[1:]))
    return (np.concatenate([p for p, _ in parts]), np.concatenate([o for _, o in parts]))


_KERNEL = r"""
#pragma OPENCL FP_CONTRACT OFF
#ifdef USE_DOUBLE
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double real;
#else
typedef float real;
#endif
#define SLICE 64

/* One work-group per (new event, slice of the other window): evaluate, rank the hits in window
   order, reserve their slots with one atomic, write, and record the segment for the host's
   publisher. No work-group waits for another. */
__kernel __attribute__((reqd_work_group_size(SLICE, 1, 1)))
void probe(__global const real *x, const int dims, const long n, const real r2,
           __global const long *row, __global const long *lo, __global const long *hi,
           __global const long *probe_of_group, __global const long *first_group,
           __global int *cursor, const int capacity,
           __global long *out_probe, __global long *out_other,
           __global int *seg_start, __global int *seg_count)
{
    __local int rank[SLICE];
    __local int base;
    long g = get_group_id(0);
    int lane = get_local_id(0);
    long p = probe_of_group[g];
    long j = lo[p] + (g - first_group[p]) * SLICE + lane;
    int hit = 0;
    if (j < hi[p]) {
        real d2 = 0;
        for (int k = 0; k < dims; k++) {
            real t = x[k * n + row[p]] - x[k * n + j];
            d2 = d2 + t * t;
        }
        hit = d2 <= r2;
    }
    rank[lane] = hit;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane == 0) {
        int c = 0;
        for (int i = 0; i < SLICE; i++) { int h = rank[i]; rank[i] = c; c += h; }
        base = c ? atomic_add(cursor, c) : 0;
        seg_start[g] = base;
        seg_count[g] = c;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (hit) {
        int s = base + rank[lane];
        if (s < capacity) { out_probe[s] = p; out_other[s] = j; }
    }
}
"""


class _DeviceJoin:
    """The two OpenCL variants on one device and value type."""

    def __init__(self, device: Device, dtype: np.dtype, zero_copy: bool):
        if dtype == np.float64 and "cl_khr_fp64" not in device.cl_device.extensions:
            raise ValueError(f"{device.info.name} has no double precision: join float32 payloads")
        self.device, self.dtype, self.zero_copy = device, dtype, zero_copy
        options = ("-DUSE_DOUBLE",) if dtype == np.float64 else ()
        self.kernel = device.cl.Kernel(device.program(_KERNEL, options), "probe")
        self.capacity = 1 << 12
        self._held: dict[str, tuple[Any, int]] = {}

    def _input(self, array: np.ndarray) -> Any:
        """``array`` for the kernel: the host's array in place (zero-copy, ``USE_HOST_PTR``) or
        a copy in device memory (dispatch)."""
        if self.zero_copy:
            return HostBuffer.wrap(self.device, array).arg
        cl = self.device.cl
        if array.size == 0:
            return cl.Buffer(self.device.context, cl.mem_flags.READ_ONLY, 8)
        return cl.Buffer(self.device.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                         hostbuf=array)

    def _output(self, name: str, count: int, dtype: Any) -> Any:
        """A reused output of at least ``count`` elements (grown by doubling): memory shared
        with the host (zero-copy: fine-grained SVM or mapped ``ALLOC_HOST_PTR``) or device
        memory (dispatch)."""
        held = self._held.get(name)
        if held is None or held[1] < count:
            count = max(count, 2 * held[1] if held else 0, 1)
            if self.zero_copy:
                buffer = HostBuffer.allocate(self.device, count, dtype)
            else:
                cl = self.device.cl
                buffer = cl.Buffer(self.device.context, cl.mem_flags.READ_WRITE,
                                   count * np.dtype(dtype).itemsize)
            held = self._held[name] = (buffer, count)
        return held[0]

    def _arg(self, name: str) -> Any:
        buffer = self._held[name][0]
        return buffer.arg if self.zero_copy else buffer

    def _read(self, name: str, count: int, dtype: Any) -> np.ndarray:
        buffer = self._held[name][0]
        if count == 0:
            return np.empty(0, dtype)
        if self.zero_copy:
            with buffer.host(write=False) as memory:
                return np.array(memory[:count])
        result = np.empty(count, dtype)
        self.device.cl.enqueue_copy(self.device.queue, result, buffer, is_blocking=True)
        return result

    def _clear_cursor(self) -> None:
        cursor = self._output("cursor", 1, np.int32)
        if self.zero_copy:
            with cursor.host(read=False) as memory:
                memory[0] = 0
        else:
            self.device.cl.enqueue_copy(self.device.queue, cursor, np.zeros(1, np.int32))

    def run(self, xt: np.ndarray, r2: float, row: np.ndarray, lo: np.ndarray,
            hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        slices = -(-(hi - lo) // SLICE)
        first_group = np.zeros(row.shape[0] + 1, np.int64)
        np.cumsum(slices, out=first_group[1:])
        groups = int(first_group[-1])
        if groups == 0:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        probe_of_group = np.repeat(np.arange(row.shape[0], dtype=np.int64), slices)
        args = [self._input(xt), np.int32(xt.shape[0]), np.int64(xt.shape[1]),
                self.dtype.type(r2),
                *(self._input(a) for a in (row, lo, hi, probe_of_group, first_group))]
        while True:
            self._clear_cursor()
            for name, count, dtype in (("out_probe", self.capacity, np.int64),
                                       ("out_other", self.capacity, np.int64),
                                       ("seg_start", groups, np.int32),
                                       ("seg_count", groups, np.int32)):
                self._output(name, count, dtype)
            self.kernel(self.device.queue, (groups * SLICE,), (SLICE,), *args,
                        self._arg("cursor"), np.int32(self.capacity), self._arg("out_probe"),
                        self._arg("out_other"), self._arg("seg_start"), self._arg("seg_count"))
            total = int(self._read("cursor", 1, np.int32)[0])
            if total <= self.capacity:
                break
            # Slots past the capacity were reserved but not written: run the batch again.
            self.capacity = max(total, 2 * self.capacity)
        starts = self._read("seg_start", groups, np.int32).astype(np.int64)
        counts = self._read("seg_count", groups, np.int32).astype(np.int64)
        publisher = SlotPublisher()
        publisher.complete_all(starts, counts)
        assert publisher.idxw == total
        probes = self._read("out_probe", total, np.int64)
        others = self._read("out_other", total, np.int64)
        # Work-group order: segment g's slots, for g = 0, 1, …
        order = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(total)
        return probes[order], others[order]


@dataclass
class PairProbe:
    """The join's evaluation step on one implementation: for every new event ``p`` (row
    column ``row[p]`` of the payloads ``xt``, shaped (dimensions, events): each dimension
    contiguous, for SIMD on the CPU and coalesced reads on a GPU), the columns ``j`` in
    ``[lo[p], hi[p])`` within ``radius``,
    as ``(p, j)`` pairs ordered by ``p``, then ``j``."""

    radius: float
    implementation: str = "st"
    device: Device | None = None
    _device_join: _DeviceJoin | None = field(default=None, repr=False)
    _pool: ThreadPoolExecutor | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.implementation not in IMPLEMENTATIONS:
            raise ValueError(f"implementation must be one of {', '.join(IMPLEMENTATIONS)}, "
                             f"not {self.implementation!r}")
        if self.implementation in ("dispatch", "zero-copy") and self.device is None:
            raise ValueError(f"the {self.implementation} implementation needs an OpenCL device")

    def __call__(self, xt: np.ndarray, row: np.ndarray, lo: np.ndarray,
                 hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        xt = np.ascontiguousarray(xt)
        row, lo, hi = (np.ascontiguousarray(a, np.int64) for a in (row, lo, hi))
        r2 = xt.dtype.type(self.radius) * xt.dtype.type(self.radius)
        if self.implementation == "st":
            return _join_st(xt, r2, row, lo, hi)
        if self.implementation == "mt":
            if self._pool is None:
                self._pool = ThreadPoolExecutor(numba.get_num_threads(), "situflow-join")
            return _join_mt(self._pool, numba.get_num_threads(), xt, r2, row, lo, hi)
        if self._device_join is None:
            assert self.device is not None
            self._device_join = _DeviceJoin(self.device, xt.dtype,
                                            self.implementation == "zero-copy")
        return self._device_join.run(xt, float(r2), row, lo, hi)


@dataclass
class WindowedJoin:
    """The streaming join; :meth:`process` takes a batch of each stream (either may be empty)
    and returns the pairs ``(left positions, right positions)`` of the events it could take.

    >>> join = WindowedJoin(window=2, radius=0.5)
    >>> pairs = join.process(np.array([1, 3]), np.array([[0.0], [5.0]]),
    ...                      np.array([2, 4]), np.array([[0.2], [5.1]]))
    >>> [p.tolist() for p in pairs]  # right 0 (at 2) meets left 0; right 1 (at 4) must wait
    [[0], [0]]
    >>> [p.tolist() for p in join.finish()]
    [[1], [1]]
    """

    window: int
    radius: float
    implementation: str = "st"
    device: Device | None = None
    _pending: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list, repr=False)
    _kept: list[np.ndarray] = field(default_factory=list, repr=False)
    _taken: list[int] = field(default_factory=lambda: [0, 0], repr=False)
    _seen: list[int] = field(default_factory=lambda: [-(1 << 62)] * 2, repr=False)
    _probe: PairProbe = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ValueError(f"the join window must hold at least one event, not {self.window}")
        if not self.radius >= 0:
            raise ValueError(f"the join radius must be at least 0, not {self.radius}")
        self._probe = PairProbe(self.radius, self.implementation, self.device)

    def process(self, left_times: np.ndarray, left: np.ndarray, right_times: np.ndarray,
                right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``left``/``right`` are payloads of shape (events, dimensions), in time order."""
        batches = [(np.asarray(left_times, np.int64), np.asarray(left)),
                   (np.asarray(right_times, np.int64), np.asarray(right))]
        for side, (t, _) in enumerate(batches):
            if t.size and (t[0] < self._seen[side] or (np.diff(t) < 0).any()):
                raise ValueError("the join needs each stream in time order (put K-slack before "
                                 "the operator)")
        if not self._pending:
            if not len(batches[0][0]) and not len(batches[1][0]):
                return np.empty(0, np.int64), np.empty(0, np.int64)
            # The payload type and width are fixed by the first events.
            dtype = np.result_type(batches[0][1].dtype, batches[1][1].dtype, np.float32)
            dims = max(x.shape[1] if x.ndim == 2 else 1 for t, x in batches if len(t))
            self._pending = [(np.empty(0, np.int64), np.empty((0, dims), dtype))] * 2
            self._kept = [np.empty((dims, 0), dtype)] * 2  # dimension by dimension
        for side, (t, x) in enumerate(batches):
            pt, px = self._pending[side]
            self._pending[side] = (np.concatenate([pt, t]),
                                   np.concatenate([px, x.reshape(len(t), px.shape[1])]))
            if t.size:
                self._seen[side] = max(self._seen[side], int(t[-1]))
        # A left event at t is safe once the right stream reached t (ties: left first); a right
        # event at t once the left stream passed t.
        ready = (int(np.searchsorted(self._pending[0][0], self._seen[1], side="right")),
                 int(np.searchsorted(self._pending[1][0], self._seen[0], side="left")))
        return self._take(ready)

    def finish(self) -> tuple[np.ndarray, np.ndarray]:
        """Takes every pending event (end of both streams)."""
        if not self._pending:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        return self._take((len(self._pending[0][0]), len(self._pending[1][0])))

    def _take(self, ready: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        new = [self._pending[s][1][:ready[s]] for s in (0, 1)]
        times = [self._pending[s][0][:ready[s]] for s in (0, 1)]
        self._pending = [(self._pending[s][0][ready[s]:], self._pending[s][1][ready[s]:])
                         for s in (0, 1)]
        kept_n = [self._kept[0].shape[1], self._kept[1].shape[1]]
        # Merged order: by time, left before right.
        side = np.concatenate([np.zeros(ready[0], np.int64), np.ones(ready[1], np.int64)])
        order = np.lexsort((side, np.concatenate(times)))
        side = side[order]
        # How many events of each stream precede each taken event (kept ones included).
        before_left = kept_n[0] + np.cumsum(side == 0) - (side == 0)
        before_right = kept_n[1] + np.cumsum(side == 1) - (side == 1)
        xt = np.concatenate([self._kept[0], new[0].T, self._kept[1], new[1].T], axis=1)
        right_base = kept_n[0] + ready[0]
        own = np.where(side == 0, before_left, right_base + before_right)
        other_end = np.where(side == 0, right_base + before_right, before_left)
        other_start = np.where(side == 0, right_base, 0)
        hi = other_end
        lo = np.maximum(other_start, hi - self.window)
        probes, others = self._probe(xt, own, lo, hi)
        # Columns of xt to stream positions.
        left_origin = self._taken[0] - kept_n[0]
        right_origin = self._taken[1] - kept_n[1] - right_base
        is_left = side[probes] == 0
        left_pos = np.where(is_left, own[probes], others) + left_origin
        right_pos = np.where(is_left, others, own[probes]) + right_origin
        for s in (0, 1):
            self._kept[s] = np.concatenate([self._kept[s], new[s].T], axis=1)[:, -self.window:]
            self._taken[s] += ready[s]
        return left_pos, right_pos

