"""The check-and-propagate pass of the cooperative pattern matcher as an OpenCL kernel (thesis
§4.3.5), run by copying (dispatch) or on the host's memory in place (zero-copy).

One work-item per partial match (PM) of a state walks the micro-batch's events in order, exactly
as :func:`situflow.nfa.cooperative.passes_cpu.check_and_propagate` does; the predicates are the SASE+
compiler's postfix programs, interpreted by the kernel below (the same instruction set as the
numba interpreter in :mod:`situflow.nfa.kernel.loop`, in double precision, NaN false in every
comparison). The kernel source is fixed: a query only changes the arrays it reads, never the
code that is compiled.

Where the thesis' HSA version writes with atomics, so does this one: a clone or move reserves
the next slot of the target state's array, of the node array and of the match array with an
``atomic_cmpxchg`` that refuses to pass the region's end (so a full region leaves the counters
exact, and the pass can be run again after the host grows the arrays); a drop appends the PM's
index to the drop list. Everything an event's transitions write is reserved before any of it
is written, so that a PM stops before an event or takes it whole: when a later reservation
fails, the earlier ones become holes (a match without a node, which the host skips; a node
nothing refers to, which pruning removes; a PM marked dropped, which compaction removes). A
trailing Kleene plus reserves a match before knowing whether the extension matches, and leaves
a hole when it does not.

Two ways to hand the arrays to the kernel (thesis §4.3, research notes B3):

- *dispatch*: per pass, the PMs and output regions are copied into device buffers and the
  written parts copied back (a discrete GPU's way);
- *zero-copy*: the state's numpy arrays themselves are the buffers (``USE_HOST_PTR``; the
  arrays are allocated page-aligned for it), created once per array and passed with offsets;
  after the kernel the host maps them, which on an integrated GPU or a CPU device copies
  nothing.

The device needs double precision (``cl_khr_fp64``): the results must equal the CPU's. Devices
without it (some integrated GPUs) raise :class:`~situflow.devices.DeviceUnavailable`.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from situflow.devices.counters import COUNTERS
from situflow.devices.device import Device
from situflow.devices.discovery import DeviceUnavailable
from situflow.nfa.compiler import programs as ops
from situflow.nfa.cooperative.matcher import PAGE, Events, Pass, PatternTables
from situflow.nfa.kernel import loop

_DEFINES = {
    "OP_CONST": ops.CONST, "OP_ROW": ops.ROW, "OP_V": ops.V, "OP_SUM_OF": ops.SUM,
    "OP_AVG_OF": ops.AVG, "OP_ADD": ops.ADD, "OP_SUB": ops.SUB, "OP_MUL": ops.MUL,
    "OP_DIV": ops.DIV, "OP_MOD": ops.MOD, "OP_NEG": ops.NEG, "OP_NOT": ops.NOT,
    "OP_AND": ops.AND, "OP_OR": ops.OR, "OP_LT": ops.LT, "OP_GT": ops.GT, "OP_LE": ops.LE,
    "OP_GE": ops.GE, "OP_EQ": ops.EQ,
    "K_FIRST": loop.FIRST, "K_NTH": loop.NTH, "K_LAST": loop.LAST, "K_LEN": loop.LEN,
    "K_SUM": loop.SUM, "K_COUNT": loop.COUNT, "K_MAX": loop.MAX, "K_MIN": loop.MIN,
    "S_BEGINS": loop.S_BEGINS, "S_COMP": loop.S_COMP, "S_SEL_LO": loop.S_SEL_LO,
    "S_SEL_HI": loop.S_SEL_HI, "S_GUARD_LO": loop.S_GUARD_LO, "S_GUARD_HI": loop.S_GUARD_HI,
    "S_LEN": loop.S_LEN, "S_NEXT": loop.S_NEXT, "S_PROC_LO": loop.S_PROC_LO,
    "S_PROC_HI": loop.S_PROC_HI, "C_KLEENE": loop.C_KLEENE, "C_LAST": loop.C_LAST,
    "C_BEGIN_STATE": loop.C_BEGIN_STATE, "C_ITER_STATE": loop.C_ITER_STATE,
    "C_PROC_LO": loop.C_PROC_LO, "C_PROC_HI": loop.C_PROC_HI,
}

SOURCE = r"""
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

#define P_NODE 0
#define P_FIRST 1
#define P_START 2
#define P_PART 3
#define P_NEXT 4
#define PM_FIELDS 5
#define DROPPED (-1)

inline double missing(void) { return as_double(0x7ff8000000000000UL); }

/* One postfix program on a PM's V (v) and event e's attributes (rows, m events per row). */
inline double evaluate(int lo, int hi, __global const int *code, __global const double *constants,
                       __global const double *v, __global const double *rows, int m, int e)
{
    double stack[STACK];
    int sp = 0;
    for (int i = lo; i < hi; i++) {
        int op = code[3 * i];
        if (op == OP_CONST) { stack[sp++] = constants[i]; continue; }
        if (op == OP_ROW) { stack[sp++] = rows[(long)code[3 * i + 1] * m + e]; continue; }
        if (op == OP_V) { stack[sp++] = v[code[3 * i + 1]]; continue; }
        if (op == OP_SUM_OF || op == OP_AVG_OF) {
            double count = v[code[3 * i + 2]];
            double sum = v[code[3 * i + 1]];
            stack[sp++] = count == 0.0 ? missing() : (op == OP_SUM_OF ? sum : sum / count);
            continue;
        }
        if (op == OP_NEG) { stack[sp - 1] = -stack[sp - 1]; continue; }
        if (op == OP_NOT) { stack[sp - 1] = stack[sp - 1] == 0.0 ? 1.0 : 0.0; continue; }
        double b = stack[sp - 1];
        double x = stack[sp - 2];
        double out;
        sp -= 1;
        if (op == OP_ADD) out = x + b;
        else if (op == OP_SUB) out = x - b;
        else if (op == OP_MUL) out = x * b;
        else if (op == OP_DIV)
            out = b != 0.0 ? x / b : ((x == 0.0 || x != x) ? missing() : copysign((double)INFINITY, x));
        else if (op == OP_MOD) out = b == 0.0 ? missing() : fmod(x, b);
        else if (op == OP_AND) out = (x != 0.0 && b != 0.0) ? 1.0 : 0.0;
        else if (op == OP_OR) out = (x != 0.0 || b != 0.0) ? 1.0 : 0.0;
        else if (x != x || b != b) out = 0.0;
        else if (op == OP_LT) out = x < b ? 1.0 : 0.0;
        else if (op == OP_GT) out = x > b ? 1.0 : 0.0;
        else if (op == OP_LE) out = x <= b ? 1.0 : 0.0;
        else if (op == OP_GE) out = x >= b ? 1.0 : 0.0;
        else if (op == OP_EQ) out = x == b ? 1.0 : 0.0;
        else out = x != b ? 1.0 : 0.0;
        stack[sp - 1] = out;
    }
    return stack[0];
}

inline bool holds(int lo, int hi, __global const int *tests, __global const int *code,
                  __global const double *constants, __global const double *v,
                  __global const double *rows, int m, int e)
{
    for (int t = lo; t < hi; t++)
        if (evaluate(tests[2 * t], tests[2 * t + 1], code, constants, v, rows, m, e) == 0.0)
            return false;
    return true;
}

/* V after selecting event e as element n of component k (values.py). */
inline void update(__global double *v, __global const double *rows, int m, int e, int k, int n,
                   __global const int *slots, int nslots)
{
    for (int i = 0; i < nslots; i++) {
        if (slots[4 * i] != k) continue;
        int kind = slots[4 * i + 1];
        if (kind == K_LEN) { v[i] = n; continue; }
        double x = rows[(long)slots[4 * i + 2] * m + e];
        if (kind == K_LAST || (kind == K_FIRST && n == 1) || (kind == K_NTH && slots[4 * i + 3] == n)) {
            v[i] = x;
        } else if (x == x) {
            double y = v[i];
            if (kind == K_SUM) v[i] = y + x;
            else if (kind == K_COUNT) v[i] = y + 1.0;
            else if (kind == K_MAX) { if (y != y || x > y) v[i] = x; }
            else if (kind == K_MIN && (y != y || x < y)) v[i] = x;
        }
    }
}

/* n consecutive slots of a region of cap slots, or -1 if they do not fit (the counter stays
   exact). */
inline int reserve(volatile __global int *counter, int n, int cap)
{
    int old = *counter;
    while (old + n <= cap) {
        int seen = atomic_cmpxchg(counter, old, old + n);
        if (seen == old) return old;
        old = seen;
    }
    return -1;
}

/* The state a PM reaches by selecting an event for component kk (-1: a match). */
inline int arrival(int kk, __global const int *components)
{
    if (components[COMPONENT_FIELDS * kk + C_KLEENE]) return components[COMPONENT_FIELDS * kk + C_ITER_STATE];
    if (components[COMPONENT_FIELDS * kk + C_LAST]) return -1;
    return components[COMPONENT_FIELDS * (kk + 1) + C_BEGIN_STATE];
}

inline void copy_pm(__global long *to, __global const long *from, long node, int next)
{
    to[P_NODE] = node;
    to[P_FIRST] = from[P_FIRST];
    to[P_START] = from[P_START];
    to[P_PART] = from[P_PART];
    to[P_NEXT] = next;
}

/* Counters: PMs added to the state itself and to the forward state, nodes, matches, drops in
   either state, and the overflow flag. */
#define O_SELF 0
#define O_FWD 1
#define O_NODES 2
#define O_DONE 3
#define O_DROPS 4
#define O_FWD_DROPS 5
#define O_OVERFLOW 6

__kernel void check_and_propagate(
    int lo, int hi, int m,
    __global const long *ts, __global const long *part, __global const long *index,
    __global const long *stored, __global const double *rows, __global const uchar *begin,
    __global const uchar *take, __global const uchar *relevant,
    int s, double window, int clones, int keeps_on_none,
    __global const int *states, __global const int *components, __global const int *tests,
    __global const int *guards, __global const int *code, __global const double *constants,
    __global const int *slots, int nslots, int width,
    __global long *pms_all, long pms_at, __global double *vals_all, long vals_at,
    __global long *self_all, long self_at, __global double *self_vals_all, long self_vals_at,
    int cap_self, long self_index,
    __global long *fwd_all, long fwd_at, __global double *fwd_vals_all, long fwd_vals_at,
    int cap_fwd, long fwd_index,
    __global long *nodes_all, long nodes_at, int cap_nodes, long node_base,
    __global long *done_all, long done_at, int cap_done,
    __global long *drops_all, long drops_at, __global long *fwd_drops_all, long fwd_drops_at,
    volatile __global int *counters)
{
    long i = lo + get_global_id(0);
    if (i >= hi) return;
    __global long *pm = pms_all + (pms_at + i * PM_FIELDS);
    __global double *v = vals_all + (vals_at + i * width);
    int j = (int)pm[P_NEXT];
    if (j == DROPPED) return;
    __global const int *state = states + STATE_FIELDS * s;
    int k = state[S_COMP], begins = state[S_BEGINS], nxt = state[S_NEXT];
    long mine = pm[P_PART];
    bool dropped = false;
    for (; j < m; j++) {
        if (part[j] != mine) continue;
        if (!relevant[j] || (double)(ts[j] - pm[P_START]) > window) { dropped = true; break; }
        /* check */
        int length = 1;
        bool selects, proceeds = false;
        if (begins) {
            selects = begin[(long)k * m + j] && (state[S_SEL_LO] == state[S_SEL_HI]
                || holds(state[S_SEL_LO], state[S_SEL_HI], tests, code, constants, v, rows, m, j));
        } else {
            selects = take[(long)k * m + j] && (state[S_SEL_LO] == state[S_SEL_HI]
                || holds(state[S_SEL_LO], state[S_SEL_HI], tests, code, constants, v, rows, m, j));
            length = (int)v[state[S_LEN]] + 1;
            for (int g = state[S_GUARD_LO]; selects && g < state[S_GUARD_HI]; g++) {
                int t = guards[2 * g + 1];
                if (guards[2 * g] == length
                    && evaluate(tests[2 * t], tests[2 * t + 1], code, constants, v, rows, m, j) == 0.0)
                    selects = false;
            }
            proceeds = nxt >= 0 && begin[(long)nxt * m + j] && (state[S_PROC_LO] == state[S_PROC_HI]
                || holds(state[S_PROC_LO], state[S_PROC_HI], tests, code, constants, v, rows, m, j));
        }
        bool stays = selects ? clones : keeps_on_none;
        if (!selects && !proceeds) {
            if (!stays) { dropped = true; break; }
            continue;
        }
        /* propagate (Table 4.1): the moves, what they need, all reserved before any is made */
        int n_moves = (int)selects + (int)proceeds;
        int kks[2], ns[2], targets[2];
        int need_done = 0, need_self = 0, need_fwd = 0;
        for (int mv = 0; mv < n_moves; mv++) {
            kks[mv] = (mv == 0 && selects) ? k : nxt;
            ns[mv] = (mv == 0 && selects) ? length : 1;
            targets[mv] = arrival(kks[mv], components);
            if (targets[mv] < 0) { need_done++; continue; }
            __global const int *comp = components + COMPONENT_FIELDS * kks[mv];
            if (comp[C_KLEENE] && comp[C_LAST]) need_done++;
            if (!stays && mv == n_moves - 1 && targets[mv] == s) continue;  /* in place */
            if (targets[mv] == s) need_self++;
            else need_fwd++;
        }
        int d0 = need_done ? reserve(&counters[O_DONE], need_done, cap_done) : 0;
        int n0 = d0 < 0 ? -1 : reserve(&counters[O_NODES], n_moves, cap_nodes);
        int s0 = n0 < 0 ? -1 : (need_self ? reserve(&counters[O_SELF], 1, cap_self) : 0);
        int f0 = s0 < 0 ? -1 : (need_fwd ? reserve(&counters[O_FWD], 1, cap_fwd) : 0);
        if (f0 < 0) {
            /* a region is full: undo what was reserved (holes the host skips), stop here */
            for (int d = 0; d0 >= 0 && d < need_done; d++) {
                __global long *x = done_all + (done_at + 3L * (d0 + d));
                x[0] = index[j]; x[1] = -1; x[2] = pm[P_FIRST];
            }
            for (int mv = 0; n0 >= 0 && mv < n_moves; mv++) {
                __global long *x = nodes_all + (nodes_at + 3L * (n0 + mv));
                x[0] = stored[j]; x[1] = kks[mv]; x[2] = pm[P_NODE];
            }
            if (s0 >= 0 && need_self) {
                copy_pm(self_all + (self_at + (long)s0 * PM_FIELDS), pm, pm[P_NODE], DROPPED);
                drops_all[drops_at + atomic_inc(&counters[O_DROPS])] = self_index + s0;
            }
            pm[P_NEXT] = j;
            counters[O_OVERFLOW] = 1;
            return;
        }
        bool kept = false;
        int used_done = 0;
        long pred = pm[P_NODE];
        for (int mv = 0; mv < n_moves; mv++) {
            int kk = kks[mv], target = targets[mv];
            long node = node_base + n0 + mv;
            __global long *x = nodes_all + (nodes_at + 3L * (n0 + mv));
            x[0] = stored[j]; x[1] = kk; x[2] = pred;
            if (target < 0) {
                __global long *d = done_all + (done_at + 3L * (d0 + used_done++));
                d[0] = index[j]; d[1] = node; d[2] = pm[P_FIRST];
                continue;
            }
            __global double *w;
            if (!stays && mv == n_moves - 1 && target == s) {
                /* add e_new to the PM in place */
                update(v, rows, m, j, kk, ns[mv], slots, nslots);
                pm[P_NODE] = node;
                w = v;
                kept = true;
            } else {
                /* clone, or move: a copy at the end of the target state's array */
                __global long *q;
                if (target == s) {
                    q = self_all + (self_at + (long)s0 * PM_FIELDS);
                    w = self_vals_all + (self_vals_at + (long)s0 * width);
                } else {
                    q = fwd_all + (fwd_at + (long)f0 * PM_FIELDS);
                    w = fwd_vals_all + (fwd_vals_at + (long)f0 * width);
                }
                copy_pm(q, pm, node, j + 1);
                for (int c = 0; c < width; c++) w[c] = v[c];
                update(w, rows, m, j, kk, ns[mv], slots, nslots);
            }
            __global const int *comp = components + COMPONENT_FIELDS * kk;
            if (comp[C_KLEENE] && comp[C_LAST]) {
                /* a trailing Kleene plus: every valid extension is its own match */
                __global long *d = done_all + (done_at + 3L * (d0 + used_done++));
                bool matched = comp[C_PROC_LO] == comp[C_PROC_HI]
                    || holds(comp[C_PROC_LO], comp[C_PROC_HI], tests, code, constants, w, rows, m, j);
                d[0] = index[j]; d[1] = matched ? node : -1; d[2] = pm[P_FIRST];
            }
        }
        if (!stays && !kept) { dropped = true; break; }
    }
    if (dropped) {
        pm[P_NEXT] = DROPPED;
        drops_all[drops_at + atomic_inc(&counters[O_DROPS])] = i;
    } else {
        pm[P_NEXT] = m;
    }
}
"""


def _offset(view: np.ndarray) -> tuple[np.ndarray, int]:
    """The memory a buffer should cover for ``view`` and where (in elements of ``view``) the
    view starts in it: the whole array ``view`` slices, from its first page boundary for the
    page-aligned arrays of :func:`~situflow.nfa.cooperative.matcher.aligned_zeros`."""
    owner = view if view.base is None else view.base
    assert isinstance(owner, np.ndarray) and owner.flags.c_contiguous
    start = owner.__array_interface__["data"][0]
    if owner.dtype == np.uint8:
        pad = -start % PAGE
        owner, start = owner[pad:], start + pad
    return owner, (view.__array_interface__["data"][0] - start) // view.itemsize


class OpenclMatcher:
    """The pass on an OpenCL device (see the module docstring)."""

    def __init__(self, device: Device, zero_copy: bool = True):
        if "cl_khr_fp64" not in device.cl_device.extensions:
            raise DeviceUnavailable(f"{device.info.describe()} has no double precision "
                                    "(cl_khr_fp64), which pattern matching needs")
        self.device = device
        self.zero_copy = zero_copy
        self.name = "opencl-zero-copy" if zero_copy else "opencl-dispatch"
        self._tables: dict[int, tuple[Any, ...]] = {}
        self._events: tuple[Events, tuple[Any, ...]] | None = None
        self._buffers: dict[tuple[int, int], tuple[np.ndarray, Any]] = {}
        self._used: set[tuple[int, int]] = set()
        self._counters = np.zeros(7, dtype=np.int32)

    def _program(self, stack: int) -> Any:
        options = (*(f"-D{k}={v}" for k, v in _DEFINES.items()), f"-DSTACK={stack}",
                   f"-DSTATE_FIELDS={loop.S_IGN_OTHER + 1}",
                   f"-DCOMPONENT_FIELDS={loop.C_PROC_HI + 1}")
        return self.device.program(SOURCE, options)

    def _constant(self, array: np.ndarray) -> Any:
        cl = self.device.cl
        data = array if array.size else np.zeros(1, dtype=array.dtype)
        return cl.Buffer(self.device.context,
                         cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=data)

    def _pattern(self, pattern: PatternTables) -> tuple[Any, ...]:
        found = self._tables.get(id(pattern))
        if found is None:
            t = pattern.tables
            kernel = self.device.cl.Kernel(self._program(max(t.stack, 1)), "check_and_propagate")
            found = (pattern, kernel, *(self._constant(np.ascontiguousarray(a, dtype=a.dtype))
                                         for a in (t.states.astype(np.int32),
                                                   t.components.astype(np.int32),
                                                   t.tests.astype(np.int32),
                                                   t.guards.astype(np.int32),
                                                   t.code.astype(np.int32), t.constants,
                                                   t.slots.astype(np.int32))))
            self._tables[id(pattern)] = found
        return found[1:]

    def _event_buffers(self, e: Events) -> tuple[Any, ...]:
        if self._events is None or self._events[0] is not e:
            self._used = set()
            arrays = (e.ts, e.part, e.index, e.stored, e.rows, e.begin.view(np.uint8),
                      e.take.view(np.uint8), e.relevant.view(np.uint8))
            make = self._shared if self.zero_copy else self._copy
            self._events = (e, tuple(make(np.ascontiguousarray(a)) for a in arrays))
            COUNTERS.add(batches=1, batch_events=len(e), bytes_to_device=0 if self.zero_copy
                         else sum(a.nbytes for a in arrays))
        return self._events[1]

    def _shared(self, array: np.ndarray) -> Any:
        """A buffer over ``array`` in place, made once per memory range (the cache keeps the
        memory alive, so a range cannot be reused by another array meanwhile; :meth:`run`
        forgets the ranges a pass no longer uses, such as arrays replaced by larger ones)."""
        cl = self.device.cl
        key = (array.__array_interface__["data"][0], array.nbytes)
        self._used.add(key)
        found = self._buffers.get(key)
        if found is None:
            data = array if array.size else np.zeros(1, dtype=array.dtype)
            buffer = cl.Buffer(self.device.context,
                               cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR, hostbuf=data)
            found = self._buffers[key] = (array, buffer)
        return found[1]

    def _copy(self, array: np.ndarray) -> Any:
        cl = self.device.cl
        data = array if array.size else np.zeros(1, dtype=array.dtype)
        return cl.Buffer(self.device.context,
                         cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                         hostbuf=np.ascontiguousarray(data))

    def run(self, pattern: PatternTables, p: Pass) -> tuple[np.ndarray, bool]:
        cl = self.device.cl
        queue = self.device.queue
        kernel, *tables = self._pattern(pattern)
        events = self._event_buffers(p.events)
        counters = self._counters
        counters[:] = 0
        outputs = (p.self_pms, p.self_vals, p.fwd_pms, p.fwd_vals, p.out_nodes, p.out_done,
                   p.drops, p.fwd_drops)
        if self.zero_copy:
            # Everything in place: the state's arrays, at the offsets of the views.
            placed = [_offset(a) for a in (p.pms, p.vals, *outputs)]
            args = [(self._shared(owner), at) for owner, at in placed]
            counter_buffer = self._shared(counters)
        else:
            # Copies: the pass's PMs in (indexed from ``lo``), fresh buffers for the outputs.
            args = [(self._copy(p.pms[p.lo:p.hi]), -p.lo * p.pms.shape[1]),
                    (self._copy(p.vals[p.lo:p.hi]), -p.lo * p.vals.shape[1])]
            args += [(cl.Buffer(self.device.context, cl.mem_flags.READ_WRITE,
                                max(a.nbytes, 8)), 0) for a in outputs]
            counter_buffer = self._copy(counters)
        (pms, pms_at), (vals, vals_at), (self_pms, self_at), (self_vals, self_vals_at), \
            (fwd, fwd_at), (fwd_vals, fwd_vals_at), (nodes, nodes_at), (done, done_at), \
            (drops, drops_at), (fwd_drops, fwd_drops_at) = args
        i32, i64 = np.int32, np.int64
        f = int(pattern.forward[p.state])
        lanes = self.device.lanes
        size = max(p.hi - p.lo, 1)
        started = time.perf_counter()
        kernel(queue, ((size + lanes - 1) // lanes * lanes,), None,
               i32(p.lo), i32(p.hi), i32(len(p.events)), *events, i32(p.state),
               np.float64(pattern.window), i32(pattern.clones), i32(pattern.keeps_on_none),
               *tables, i32(len(pattern.tables.slots)), i32(p.vals.shape[1]),
               pms, i64(pms_at), vals, i64(vals_at),
               self_pms, i64(self_at), self_vals, i64(self_vals_at), i32(len(p.self_pms)),
               i64(p.hi), fwd, i64(fwd_at), fwd_vals, i64(fwd_vals_at), i32(len(p.fwd_pms)),
               i64(p.fwd_index if f >= 0 else 0), nodes, i64(nodes_at), i32(len(p.out_nodes)),
               i64(p.node_base), done, i64(done_at), i32(len(p.out_done)), drops,
               i64(drops_at), fwd_drops, i64(fwd_drops_at), counter_buffer)
        if self.zero_copy:
            # Mapping is what makes the kernel's writes visible to the host (no copy where the
            # memory is shared).
            for buffer in {id(b): b for b, _ in args}.values():
                self._sync(buffer)
            self._sync(counter_buffer)
            self._buffers = {k: v for k, v in self._buffers.items() if k in self._used}
            moved = (0, 0)
        else:
            cl.enqueue_copy(queue, counters, counter_buffer)
            n_self, n_fwd, n_nodes, n_done, n_drops, n_fwd_drops, _ = counters.tolist()
            copies = ((p.pms[p.lo:p.hi], pms), (p.vals[p.lo:p.hi], vals),
                      (p.self_pms[:n_self], self_pms), (p.self_vals[:n_self], self_vals),
                      (p.fwd_pms[:n_fwd], fwd), (p.fwd_vals[:n_fwd], fwd_vals),
                      (p.out_nodes[:n_nodes], nodes), (p.out_done[:n_done], done),
                      (p.drops[:n_drops], drops), (p.fwd_drops[:n_fwd_drops], fwd_drops))
            for host, buffer in copies:
                if host.size:
                    cl.enqueue_copy(queue, host, buffer)
            queue.finish()
            moved = (p.pms[p.lo:p.hi].nbytes + p.vals[p.lo:p.hi].nbytes + counters.nbytes,
                     sum(host.nbytes for host, _ in copies) + counters.nbytes)
        COUNTERS.add(kernel_seconds=time.perf_counter() - started, kernels=1,
                     bytes_to_device=moved[0], bytes_from_device=moved[1])
        return counters[:6].astype(np.int64), bool(counters[6])

    def _sync(self, buffer: Any) -> None:
        cl = self.device.cl
        mapped, _ = cl.enqueue_map_buffer(self.device.queue, buffer, cl.map_flags.READ, 0,
                                          (buffer.size,), np.int8, is_blocking=True)
        mapped.base.release(self.device.queue)
