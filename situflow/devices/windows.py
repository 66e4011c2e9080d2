"""Sliding-window aggregation on four implementations (thesis §4.3.3).

As in the thesis, every result re-evaluates its whole window (no incremental partials) with a
commutative and associative function: ``sum``, ``count``, ``min``, ``max``, and ``avg`` as
``sum / count``. Missing values are NaN and are skipped: ``count`` counts the present values,
``min``/``max``/``avg`` of a window without one are NaN, its ``sum`` is 0.

**Windows** (:class:`WindowSpec`) slide in events or in time. Count windows are the positions
``[k·slide, k·slide + size)`` of the stream, ``k >= 0``, and close when complete. Time windows
are COGRA's (SEMANTICS.md): ``[k·slide, k·slide + size)`` in event time, ``k >= 0``, one result
per window holding at least one event, closed once an event at or after the window's end has
arrived (streams are in time order, as K-slack delivers them) or :meth:`SlidingAggregation.advance_to`
passes it. Either way a batch becomes a list of index ranges ``[lo, hi)`` over the events kept.

**One summation order everywhere.** Floating-point addition is not associative, so the four
implementations would disagree in the last bits if each summed in its natural order. Every
implementation therefore reduces a window with the same fixed three-level tree, the shape of the
device's reduction (thesis: thread, work-group, grid):

1. the window is cut into *chunks* of ``LANES·STEPS`` (64 · 16) consecutive values; in a chunk,
   *lane* ``j`` combines the values at offsets ``j, j + 64, j + 128, …`` in that order, starting
   from the identity (``+0.0``, ``+inf``, ``-inf``);
2. a chunk's partial combines its 64 lane partials in lane order, from the identity;
3. the window combines its chunk partials in chunk order, from the identity.

``min``/``max`` compare with ``<``/``>`` and keep the earlier value on ties, so ``-0.0``/``0.0``
come out the same too. Results are bit-identical across implementations and devices (OpenCL C
is compiled with contraction off; no fused multiply-add is involved anyway). The 64 is a
constant of the result, not the device's SIMD width: a device whose wavefront is narrower
runs the same work-group of 64 in several sub-groups.

**Implementations** (:data:`IMPLEMENTATIONS`), as in the thesis §4.3:

- ``st``: one CPU thread (numba);
- ``mt``: the chunks of all windows cut into one run per core, each run's partials computed by
  the single-threaded code on its own thread (numba releases the GIL), then one combine per
  window (threads that sleep when idle: numba's OpenMP pool spins, which on a machine shared
  by many processes made it slower than one thread);
- ``dispatch``: OpenCL with explicit copies, the thesis' dispatch variant: the events are copied
  to the device per batch, the work-groups write the chunks' partials, the partials are copied
  back and the host combines them;
- ``zero-copy``: OpenCL without copies on an integrated GPU (research notes B3): the device
  reads the events in the host's array (``USE_HOST_PTR``), and the host reads the results
  from memory both share (fine-grained SVM where the device offers it, else mapped
  ``ALLOC_HOST_PTR``: :class:`~situflow.devices.buffers.HostBuffer`); with the thesis'
  cross-work-group completion (§4.3.3): whoever writes a chunk's partial adds one to its
  window's counter in global memory, and the one that brings it to the window's chunk count
  performs the final combine and writes the result. OpenCL has no HSA signals, so the driver
  kernel's wait becomes this "last one combines" rule, which needs no work-group to wait for
  another.

The thesis found the iGPU ahead above 8K-event windows (Fig. 4.11); bench/README.md, "Devices:
windows and join", has what PoCL on this machine shows.

**A library operator.** situflow's windowed aggregations do not re-evaluate raw values, so they
do not call it: COGRA's trend aggregates (:mod:`situflow.trends.kernel`) are updated per event
in each open window's slot, over trends rather than events, with a binary exponent shared per
window; the offline windows (:mod:`situflow.offline.windows`) combine per-slice partials with
two stacks, O(1) merges per window. Putting this operator under either would change their
float summation order, which their tests pin against the online operator.
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

LANES, STEPS = 64, 16
CHUNK = LANES * STEPS
# Chunks per OpenCL work-group (at most LANES): a launch's work-groups, not its result.
RUN = 16
FUNCTIONS = ("sum", "count", "min", "max", "avg")
IMPLEMENTATIONS = ("st", "mt", "dispatch", "zero-copy")
# How the main accumulator combines values (the count is always kept beside it).
_ADD, _SMALLEST, _LARGEST = 0, 1, 2
_OPS = {"sum": _ADD, "count": _ADD, "avg": _ADD, "min": _SMALLEST, "max": _LARGEST}


@dataclass(frozen=True)
class WindowSpec:
    """``size`` and ``slide`` in events (``unit="events"``) or in event-time units
    (``unit="time"``)."""

    size: int
    slide: int
    unit: str = "events"

    def __post_init__(self) -> None:
        if self.size < 1 or self.slide < 1:
            raise ValueError(f"window size and slide must be positive, not {self.size}/{self.slide}")
        if self.unit not in ("events", "time"):
            raise ValueError(f"window unit must be events or time, not {self.unit!r}")


def _identity(op: int, dtype: Any) -> Any:
    """The value a combination starts from: nothing added, nothing smaller, nothing larger."""
    return np.dtype(dtype).type(0.0 if op == _ADD else np.inf if op == _SMALLEST else -np.inf)


@numba.njit(cache=True, nogil=True, inline="always")
def _combine(op, acc, v):  # pragma: no cover - compiled
    if op == _ADD:
        return acc + v
    if op == _SMALLEST:
        return v if v < acc else acc
    return v if v > acc else acc


@numba.njit(cache=True, nogil=True)
def _chunk(op, ident, values, start, end, lane_acc, lane_cnt):  # pragma: no cover - compiled
    """Levels 1 and 2 of the tree for the chunk ``values[start:min(start + CHUNK, end)]``.

    Written without branches on the values so that it vectorizes; the results are those of
    skipping NaN: ``v < acc`` and ``v > acc`` are false for NaN, and a sum from ``+0.0`` is
    never ``-0.0``, so adding ``0.0`` for a NaN changes nothing."""
    for j in range(LANES):
        lane_acc[j] = ident
        lane_cnt[j] = 0
    zero = values.dtype.type(0.0)
    for s in range(STEPS):
        base = start + s * LANES
        width = min(LANES, end - base)
        if width <= 0:
            break
        step = values[base:base + width]
        for j in range(width):
            v = step[j]
            present = v == v
            lane_cnt[j] += present
            if op == _ADD:
                lane_acc[j] = lane_acc[j] + (v if present else zero)
            elif op == _SMALLEST:
                lane_acc[j] = v if v < lane_acc[j] else lane_acc[j]
            else:
                lane_acc[j] = v if v > lane_acc[j] else lane_acc[j]
    acc = ident
    cnt = 0
    for j in range(LANES):
        acc = _combine(op, acc, lane_acc[j])
        cnt += lane_cnt[j]
    return acc, cnt


@numba.njit(cache=True, nogil=True)
def _windows_st(op, ident, values, lo, hi, out, out_cnt):  # pragma: no cover - compiled
    lane_acc = np.empty(LANES, values.dtype)
    lane_cnt = np.empty(LANES, np.int64)
    for w in range(lo.shape[0]):
        acc = ident
        cnt = 0
        for start in range(lo[w], hi[w], CHUNK):
            a, c = _chunk(op, ident, values, start, hi[w], lane_acc, lane_cnt)
            acc = _combine(op, acc, a)
            cnt += c
        out[w] = acc
        out_cnt[w] = cnt


@numba.njit(cache=True, nogil=True)
def _combine_chunks(op, ident, part, part_cnt, first_chunk, out, out_cnt):  # pragma: no cover
    """Level 3: window ``w`` combines ``part[first_chunk[w]:first_chunk[w + 1]]`` in order."""
    for w in range(out.shape[0]):
        acc = ident
        cnt = 0
        for g in range(first_chunk[w], first_chunk[w + 1]):
            acc = _combine(op, acc, part[g])
            cnt += part_cnt[g]
        out[w] = acc
        out_cnt[w] = cnt


@numba.njit(cache=True, nogil=True)
def _chunk_range(op, ident, values, lo, hi, window_of_chunk, first_chunk, part, part_cnt,
                 g0, g1):  # pragma: no cover - compiled
    """Levels 1 and 2 for chunks ``g0 … g1 - 1`` (one thread's share)."""
    lane_acc = np.empty(LANES, values.dtype)
    lane_cnt = np.empty(LANES, np.int64)
    for g in range(g0, g1):
        w = window_of_chunk[g]
        start = lo[w] + (g - first_chunk[w]) * CHUNK
        a, c = _chunk(op, ident, values, start, hi[w], lane_acc, lane_cnt)
        part[g] = a
        part_cnt[g] = c


def chunk_layout(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``first_chunk`` (one more entry than windows) and ``window_of_chunk``: the chunks of
    all windows numbered window by window, as the device's work-groups are."""
    chunks = -(-(hi - lo) // CHUNK)
    first_chunk = np.zeros(lo.shape[0] + 1, np.int64)
    np.cumsum(chunks, out=first_chunk[1:])
    window_of_chunk = np.repeat(np.arange(lo.shape[0], dtype=np.int64), chunks)
    return first_chunk, window_of_chunk


_KERNELS = r"""
#pragma OPENCL FP_CONTRACT OFF
#ifdef USE_DOUBLE
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double real;
#define POS_INF ((double)INFINITY)
#else
typedef float real;
#define POS_INF INFINITY
#endif
#define LANES 64
#define STEPS 16
#if OP == 0
#define IDENT ((real)0)
#define COMBINE(a, v) ((a) + (v))
#elif OP == 1
#define IDENT POS_INF
#define COMBINE(a, v) (((v) < (a)) ? (v) : (a))
#else
#define IDENT (-POS_INF)
#define COMBINE(a, v) (((v) > (a)) ? (v) : (a))
#endif

/* Levels 1 and 2 of the summation tree for the work-group's run of RUN consecutive chunks
   (of one window or several; few work-groups per launch, since per-group overhead dominates on
   CPU devices; the tree, so the result, does not depend on RUN). Level 1: every lane computes
   its lane partial of each chunk; one barrier; level 2: lane r combines chunk r's 64 lane
   partials. Returns whether this lane holds chunk *g's partial. */
inline int run_partials(__global const real *values, __global const long *lo,
                        __global const long *hi, __global const long *window_of_chunk,
                        __global const long *first_chunk, const long chunks,
                        __local real *acc_l, __local int *cnt_l, long *g, real *a, long *c)
{
    int lane = get_local_id(0);
    long first = get_group_id(0) * RUN;
    for (int r = 0; r < RUN; r++) {
        real acc = IDENT;
        int cnt = 0;
        long k = first + r;
        if (k < chunks) {
            long w = window_of_chunk[k];
            long start = lo[w] + (k - first_chunk[w]) * (LANES * STEPS);
            long end = hi[w];
            /* Branch-free (as on the CPU): NaN compares false, and a sum from +0.0 is never
               -0.0, so adding 0 for a NaN equals skipping it. */
            for (int s = 0; s < STEPS; s++) {
                long i = start + s * LANES + lane;
                real v = values[min(i, end - 1)];
                int present = (i < end) & (v == v);
                acc = present ? COMBINE(acc, v) : acc;
                cnt += present;
            }
        }
        acc_l[r * LANES + lane] = acc;
        cnt_l[r * LANES + lane] = cnt;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    *g = first + lane;
    if (lane >= RUN || *g >= chunks) return 0;
    real sum = IDENT;
    long n = 0;
    for (int j = 0; j < LANES; j++) {
        sum = COMBINE(sum, acc_l[lane * LANES + j]);
        n += cnt_l[lane * LANES + j];
    }
    *a = sum;
    *c = n;
    return 1;
}

__kernel __attribute__((reqd_work_group_size(LANES, 1, 1)))
void partials(__global const real *values, __global const long *lo, __global const long *hi,
              __global const long *window_of_chunk, __global const long *first_chunk,
              const long chunks, __global real *part, __global long *part_cnt)
{
    __local real acc_l[RUN * LANES];
    __local int cnt_l[RUN * LANES];
    long g, c;
    real a;
    if (run_partials(values, lo, hi, window_of_chunk, first_chunk, chunks, acc_l, cnt_l,
                     &g, &a, &c)) {
        part[g] = a;
        part_cnt[g] = c;
    }
}

/* The same, and whoever completes a window's last chunk combines its chunks (the thesis'
   completion signal as a counter in global memory): no work-group waits for another. The fence
   before the atomic and the volatile reads after it are OpenCL 1.2's form of the
   release/acquire pair (OpenCL 2.0 would say atomic_work_item_fence at device scope): the last
   one sees every partial written before its counter was incremented. */
__kernel __attribute__((reqd_work_group_size(LANES, 1, 1)))
void windows(__global const real *values, __global const long *lo, __global const long *hi,
             __global const long *window_of_chunk, __global const long *first_chunk,
             const long chunks, __global real *part, __global long *part_cnt,
             __global int *done, __global real *out, __global long *out_cnt)
{
    __local real acc_l[RUN * LANES];
    __local int cnt_l[RUN * LANES];
    long g, c;
    real a;
    if (!run_partials(values, lo, hi, window_of_chunk, first_chunk, chunks, acc_l, cnt_l,
                      &g, &a, &c))
        return;
    part[g] = a;
    part_cnt[g] = c;
    mem_fence(CLK_GLOBAL_MEM_FENCE);
    long w = window_of_chunk[g];
    long n = first_chunk[w + 1] - first_chunk[w];
    if (atomic_inc(&done[w]) != n - 1) return;
    volatile __global real *vp = part;
    volatile __global long *vc = part_cnt;
    real r = IDENT;
    long rc = 0;
    for (long k = first_chunk[w]; k < first_chunk[w + 1]; k++) { r = COMBINE(r, vp[k]); rc += vc[k]; }
    out[w] = r;
    out_cnt[w] = rc;
    done[w] = 0;  /* ready for the next launch */
}
"""


class _DeviceReduction:
    """The two OpenCL variants for one device, function and value type."""

    def __init__(self, device: Device, op: int, dtype: np.dtype, zero_copy: bool):
        if dtype == np.float64 and "cl_khr_fp64" not in device.cl_device.extensions:
            raise ValueError(f"{device.info.name} has no double precision: aggregate float32")
        options = [f"-DOP={op}", f"-DRUN={RUN}"] + (["-DUSE_DOUBLE"] if dtype == np.float64 else [])
        self.device, self.op, self.dtype, self.zero_copy = device, op, dtype, zero_copy
        program = device.program(_KERNELS, tuple(options))
        self.kernel = device.cl.Kernel(program, "windows" if zero_copy else "partials")
        self._buffers: dict[str, HostBuffer] = {}

    def _shared(self, name: str, count: int, dtype: Any, *, zeroed: bool = False) -> HostBuffer:
        """A reused buffer shared with the device, of at least ``count`` elements (grown by
        doubling); ``zeroed`` clears it when it is allocated."""
        held = self._buffers.get(name)
        if held is None or held.count < count:
            held = HostBuffer.allocate(self.device, max(count, 2 * held.count if held else 0),
                                       dtype)
            if zeroed:
                with held.host(read=False) as memory:
                    memory[:] = 0
            self._buffers[name] = held
        return held

    def run(self, values: np.ndarray, lo: np.ndarray, hi: np.ndarray,
            first_chunk: np.ndarray, window_of_chunk: np.ndarray,
            out: np.ndarray, out_cnt: np.ndarray) -> None:
        chunks = window_of_chunk.shape[0]
        if chunks == 0:
            out[:] = _identity(self.op, self.dtype)
            out_cnt[:] = 0
            return
        cl, queue = self.device.cl, self.device.queue
        grid = (-(-chunks // RUN) * LANES,)
        if self.zero_copy:
            # The events and the window bounds where they are; partials, counters and results
            # in memory both sides share (fine-grained SVM or mapped ALLOC_HOST_PTR).
            inputs = [HostBuffer.wrap(self.device, a)
                      for a in (values, lo, hi, window_of_chunk, first_chunk)]
            shared = [self._shared("part", chunks, self.dtype),
                      self._shared("part_cnt", chunks, np.int64),
                      self._shared("done", lo.size, np.int32, zeroed=True),
                      self._shared("out", lo.size, self.dtype),
                      self._shared("out_cnt", lo.size, np.int64)]
            self.kernel(queue, grid, (LANES,), *(b.arg for b in inputs), np.int64(chunks),
                        *(b.arg for b in shared))
            with shared[3].host(write=False) as result:
                out[:] = result[:lo.size]
            with shared[4].host(write=False) as result:
                out_cnt[:] = result[:lo.size]
            # An empty window has no work-group to write its result.
            empty = first_chunk[1:] == first_chunk[:-1]
            out[empty] = _identity(self.op, self.dtype)
            out_cnt[empty] = 0
            return
        flags = cl.mem_flags
        ctx = self.device.context

        def copy_in(a: np.ndarray) -> Any:
            return cl.Buffer(ctx, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=a)

        part = np.empty(chunks, self.dtype)
        part_cnt = np.empty(chunks, np.int64)
        part_d = cl.Buffer(ctx, flags.WRITE_ONLY, part.nbytes)
        cnt_d = cl.Buffer(ctx, flags.WRITE_ONLY, part_cnt.nbytes)
        self.kernel(queue, grid, (LANES,), copy_in(values), copy_in(lo), copy_in(hi),
                    copy_in(window_of_chunk), copy_in(first_chunk), np.int64(chunks), part_d,
                    cnt_d)
        cl.enqueue_copy(queue, part, part_d)
        cl.enqueue_copy(queue, part_cnt, cnt_d, is_blocking=True)
        _combine_chunks(self.op, _identity(self.op, self.dtype), part, part_cnt, first_chunk,
                        out, out_cnt)


@dataclass
class RangeAggregator:
    """Reduces ranges ``[lo, hi)`` of a value array with one function on one implementation;
    ``device`` is required by the two OpenCL implementations. Compiled programs and the
    zero-copy buffers are reused across calls."""

    function: str
    implementation: str = "st"
    device: Device | None = None
    _reductions: dict[Any, _DeviceReduction] = field(default_factory=dict, repr=False)
    _pool: ThreadPoolExecutor | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.function not in FUNCTIONS:
            raise ValueError(f"aggregate must be one of {', '.join(FUNCTIONS)}, not {self.function!r}")
        if self.implementation not in IMPLEMENTATIONS:
            raise ValueError(f"implementation must be one of {', '.join(IMPLEMENTATIONS)}, "
                             f"not {self.implementation!r}")
        if self.implementation in ("dispatch", "zero-copy") and self.device is None:
            raise ValueError(f"the {self.implementation} implementation needs an OpenCL device")

    def __call__(self, values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """One result per range: float for sum/min/max/avg (the values' type), int64 for count."""
        if values.dtype not in (np.float32, np.float64):
            values = values.astype(np.float64)
        values = np.ascontiguousarray(values)
        lo = np.ascontiguousarray(lo, np.int64)
        hi = np.ascontiguousarray(hi, np.int64)
        op = _OPS[self.function]
        ident = _identity(op, values.dtype)
        out = np.empty(lo.shape[0], values.dtype)
        cnt = np.empty(lo.shape[0], np.int64)
        if self.implementation == "st":
            _windows_st(op, ident, values, lo, hi, out, cnt)
        else:
            first_chunk, window_of_chunk = chunk_layout(lo, hi)
            if self.implementation == "mt":
                part = np.empty(window_of_chunk.shape[0], values.dtype)
                part_cnt = np.empty(window_of_chunk.shape[0], np.int64)
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(numba.get_num_threads(), "situflow-windows")
                threads = numba.get_num_threads()
                cuts = [window_of_chunk.shape[0] * k // threads for k in range(threads + 1)]
                list(self._pool.map(
                    lambda g0, g1: _chunk_range(op, ident, values, lo, hi, window_of_chunk,
                                                first_chunk, part, part_cnt, g0, g1),
                    cuts[:-1], cuts[1:]))
                _combine_chunks(op, ident, part, part_cnt, first_chunk, out, cnt)
            else:
                key = (op, values.dtype.str)
                reduction = self._reductions.get(key)
                if reduction is None:
                    assert self.device is not None
                    reduction = self._reductions[key] = _DeviceReduction(
                        self.device, op, values.dtype, self.implementation == "zero-copy")
                reduction.run(values, lo, hi, first_chunk, window_of_chunk, out, cnt)
        return finish(self.function, out, cnt)


def finish(function: str, acc: np.ndarray, cnt: np.ndarray) -> np.ndarray:
    """The function's result from the tree's accumulator and the count of present values."""
    if function == "count":
        return cnt
    if function == "sum":
        return acc
    if function == "avg":
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(cnt > 0, acc / cnt.astype(acc.dtype), np.nan).astype(acc.dtype)
    return np.where(cnt > 0, acc, np.nan).astype(acc.dtype)


@numba.njit(cache=True, nogil=True)
def _time_ranges(times, size, slide, k_from, close_to):  # pragma: no cover - compiled
    """The windows ``k >= k_from`` ending at or before ``close_to`` that hold an event of the
    sorted ``times``: their ``k`` and index ranges."""
    n = times.shape[0]
    ks = np.empty(0, np.int64)
    if n == 0:
        return ks, ks, ks
    cap = 16
    ks = np.empty(cap, np.int64)
    los = np.empty(cap, np.int64)
    his = np.empty(cap, np.int64)
    m = 0
    k = max(k_from, (times[0] - size) // slide + 1, 0)
    while k * slide + size <= close_to:
        lo = np.searchsorted(times, k * slide)
        if lo == n:
            break
        hi = np.searchsorted(times, k * slide + size)
        if lo == hi:
            # No event in window k: jump to the first window holding the next event.
            k = max(k + 1, (times[lo] - size) // slide + 1)
            continue
        if m == cap:
            cap *= 2
            ks, los, his = _grow(ks, cap), _grow(los, cap), _grow(his, cap)
        ks[m], los[m], his[m] = k, lo, hi
        m += 1
        k += 1
    return ks[:m], los[:m], his[:m]


@numba.njit(cache=True, nogil=True)
def _grow(a, cap):  # pragma: no cover - compiled
    b = np.empty(cap, a.dtype)
    b[:a.shape[0]] = a
    return b


class SlidingAggregation:
    """The streaming operator: batches of values (and times, for time windows) in, one result
    per closed window out, as ``(k, value)`` with ``k`` the window's number (it starts at
    ``k·slide``). Keeps the events of the windows still open, so windows span batches.

    >>> op = SlidingAggregation(WindowSpec(size=3, slide=2), "sum")
    >>> op.process(np.array([1.0, 2.0, 3.0, 4.0]))
    [(0, 6.0)]
    >>> op.process(np.array([5.0]))
    [(1, 12.0)]
    """

    def __init__(self, spec: WindowSpec, function: str, implementation: str = "st",
                 device: Device | None = None):
        self.spec = spec
        self.aggregate = RangeAggregator(function, implementation, device)
        self._values = np.empty(0, np.float64)
        self._times = np.empty(0, np.int64)
        self._offset = 0  # stream position (count windows) of self._values[0]
        self._next = 0  # the next window to close
        self._watermark = -(1 << 62)

    def process(self, values: np.ndarray, times: np.ndarray | None = None) -> list[tuple[int, Any]]:
        values = np.asarray(values, np.float64)
        self._values = np.concatenate([self._values, values])
        if self.spec.unit == "time":
            if times is None:
                raise ValueError("time windows need the events' times")
            times = np.asarray(times, np.int64)
            if times.size and (times[0] < self._watermark or (np.diff(times) < 0).any()):
                raise ValueError("time windows need events in time order (put K-slack before "
                                 "the operator)")
            self._times = np.concatenate([self._times, times])
            if times.size:
                self._watermark = max(self._watermark, int(times[-1]))
            return self._close_time(self._watermark)
        return self._close_count()

    def advance_to(self, watermark: int) -> list[tuple[int, Any]]:
        """Closes the time windows that end at or before ``watermark``."""
        if self.spec.unit == "events":
            return []
        self._watermark = max(self._watermark, int(watermark))
        return self._close_time(self._watermark)

    def finish(self) -> list[tuple[int, Any]]:
        """Closes every time window still open (end of stream); incomplete count windows are
        dropped."""
        return self.advance_to(1 << 62)

    def _close_count(self) -> list[tuple[int, Any]]:
        size, slide = self.spec.size, self.spec.slide
        end = self._offset + self._values.shape[0]
        last = (end - size) // slide  # the last complete window
        if last < self._next:
            return []
        ks = np.arange(self._next, last + 1, dtype=np.int64)
        lo = ks * slide - self._offset
        results = self.aggregate(self._values, lo, lo + size)
        self._next = last + 1
        drop = min(self._next * slide - self._offset, self._values.shape[0])
        self._values = self._values[drop:]
        self._offset += drop
        return list(zip(ks.tolist(), results.tolist(), strict=True))

    def _close_time(self, close_to: int) -> list[tuple[int, Any]]:
        size, slide = self.spec.size, self.spec.slide
        ks, lo, hi = _time_ranges(self._times, size, slide, self._next, close_to)
        results = self.aggregate(self._values, lo, hi) if ks.size else np.empty(0)
        if close_to >= size:
            self._next = max(self._next, (close_to - size) // slide + 1)
        # Events before the next open window's start are in no open window.
        drop = int(np.searchsorted(self._times, self._next * slide))
        self._values, self._times = self._values[drop:], self._times[drop:]
        return list(zip(ks.tolist(), results.tolist(), strict=True))
