"""CPU–device cooperative sequential pattern matching (thesis §4.3.5, Table 4.1, Fig. 4.7).

SASE+ queries under skip till any match and skip till next match (and partition contiguity,
which the thesis leaves to the CPU) keep their partial matches (PMs) in one dense array per
NFA^b state. Per micro-batch of events:

- the CPU starts a PM for every event that begins a match (the start state ``S0``);
- per state, in the order of the states, the *check and propagate* pass takes every PM through
  the events after the one that created it, in event order
  (:func:`situflow.nfa.cooperative.passes_cpu.check_and_propagate`, or the same pass as an OpenCL
  kernel in :mod:`situflow.nfa.cooperative.passes_opencl`): window, then the conditions of the
  state's transitions, then the actions of :data:`TABLE_4_1`. A clone or move reserves the
  first free slot at the end of the target state's array (an atomic on the device); a drop only
  marks the slot. A self transition (a Kleene plus taking one more event) that clones puts the
  copy at the end of the state's own array, and a further pass takes it on;
- the CPU compacts the arrays (Fig. 4.7) and turns the PMs that reached the final state into
  results, in the compressed form of the numba NFA (:class:`~situflow.nfa.kernel.compressed.
  MatchBatch`), ordered as the Python loop orders them.

The thesis launches a kernel per state and event. From Python a launch costs tens of
microseconds, more than checking thousands of PMs (research notes B3, point 5), so the events
come in micro-batches and each PM walks them in order inside the pass. PMs never read each
other, so a PM walking several events gives what one launch per event gives.

What a PM holds: the V columns its predicates read (§5.2.1 of SASE+, the same value vector the
numba loop keeps), its first event's time and sequence number, its partition and its last node
in the shared match buffer, whose chain names the events of the result. Predicates are the
SASE+ compiler's postfix programs (:mod:`situflow.nfa.compiler.programs`) over the numba loop's
tables (:class:`~situflow.nfa.kernel.loop.Tables`): every query the numba loop runs, and the
same queries under skip till any match, run here (sequences with Kleene plus, conjuncts on
numbers, partitions), with a batch whose attributes are not all numbers left to the Python
loop. Negation, ``CONSUME`` and strict contiguity stay on :mod:`situflow.nfa`, which is also
the default: the matcher runs only when a device is configured (``QueryOptions.device``,
:func:`situflow.nfa.cooperative.operators.cooperative_operator`).

Four implementations run the pass (thesis §4.3): :class:`CpuMatcher` with one thread (ST) or
several (MT, the PMs of a state cut in pieces, one thread each), and
:class:`~situflow.nfa.cooperative.passes_opencl.OpenclMatcher` with a copy per pass (dispatch) or on
the host's memory in place (zero-copy).
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from situflow.events import EventBatch
from situflow.jit import njit
from situflow.lang.sase import Strategy
from situflow.nfa.compiler.automaton import Automaton
from situflow.nfa.compiler.selection import SELECTIONS
from situflow.nfa.cooperative import passes_cpu as cpu
from situflow.nfa.cooperative.passes_cpu import P_NEXT, PM_FIELDS
from situflow.nfa.kernel import loop
from situflow.nfa.kernel.compressed import MatchBatch
from situflow.nfa.kernel.kernel_state import KernelState
from situflow.nfa.kernel.texts import Texts
from situflow.nfa.operator import NfaOperator
from situflow.nfa.prepass import masks, partition_codes
from situflow.results import Match

# --- Table 4.1 -----------------------------------------------------------------------------------

WINDOW_EXCEEDED, NONE, SELF, FORWARD = "window exceeded", "none", "self", "forward"
DROP, CLONE, MOVE, ADD = "drop", "clone", "move", "add"

#: Result of the check phase -> the actions per matching strategy (thesis Table 4.1).
TABLE_4_1: dict[str, dict[Strategy, tuple[str, ...]]] = {
    WINDOW_EXCEEDED: {Strategy.PARTITION: (DROP,), Strategy.NEXT: (DROP,),
                      Strategy.ANY: (DROP,)},
    NONE: {Strategy.PARTITION: (DROP,), Strategy.NEXT: (), Strategy.ANY: ()},
    SELF: {Strategy.PARTITION: (ADD,), Strategy.NEXT: (ADD,), Strategy.ANY: (CLONE, ADD)},
    FORWARD: {Strategy.PARTITION: (MOVE, ADD), Strategy.NEXT: (MOVE, ADD),
              Strategy.ANY: (CLONE, MOVE, ADD)},
}


def propagate(check: str, clones: bool, keeps_on_none: bool) -> tuple[str, ...]:
    """The actions for a check result under a strategy given by its two flags, as the passes
    implement them: ``clones`` (skip till any match: a transition leaves the PM in place and
    works on a copy) and ``keeps_on_none`` (the skip strategies ignore an event no transition
    takes; contiguity drops the PM)."""
    if check == WINDOW_EXCEEDED:
        return (DROP,)
    if check == NONE:
        return () if keeps_on_none else (DROP,)
    moves = (MOVE,) if check == FORWARD else ()
    return ((CLONE,) if clones else ()) + moves + (ADD,)


# --- what the passes read ------------------------------------------------------------------------


@dataclass(frozen=True)
class PatternTables:
    """An automaton as the passes read it: the numba loop's :class:`~situflow.nfa.kernel.loop.
    Tables` (states, components, programs, V columns) plus the strategy's two flags, and per
    state the state its forward transition leads to (-1: into ``F``, or none)."""

    tables: loop.Tables
    components: int
    clones: bool
    keeps_on_none: bool
    contiguous: bool
    forward: np.ndarray  # int64, per state
    window: float

    @property
    def states(self) -> int:
        """States with PMs (all but ``F``; the start state's array stays empty)."""
        return int(self.tables.states.shape[0])

    @classmethod
    def build(cls, a: Automaton) -> PatternTables | None:
        """The tables of ``a``, or None if the matcher does not cover it (module docstring)."""
        sel = a.selection
        if a.negations or a.consume or sel.global_contiguity:
            return None
        # The numba loop leaves skip till any match out (it would not merge runs); its tables
        # do not depend on the strategy but for the ignore columns, which the passes replace
        # by the two flags.
        tables = loop.Tables.build(dataclasses.replace(a, selection=SELECTIONS[Strategy.NEXT])
                                   if sel.ignores_relevant else a)
        if tables is None:
            return None
        forward = []
        for row in tables.states:
            kk = row[loop.S_COMP] if row[loop.S_BEGINS] else row[loop.S_NEXT]
            forward.append(-1 if kk < 0 else int(cpu.arrival(kk, tables.components)))
        return cls(tables, len(a.components), sel.ignores_relevant, sel.ignores_irrelevant,
                   sel.contiguous, np.array(forward, dtype=np.int64), a.window)


@dataclass
class Events:
    """One micro-batch of the events a pass visits, as columns (one per event, in order)."""

    ts: np.ndarray  # int64
    seq: np.ndarray  # int64
    part: np.ndarray  # int64, the partition slot (-1: no key, or a key that starts nothing)
    index: np.ndarray  # int64, position in the batch
    stored: np.ndarray  # int64, the event's row in the buffer's event store
    rows: np.ndarray  # float64 (attribute, event)
    begin: np.ndarray  # bool (component, event): type and event-only conjuncts of begin hold
    take: np.ndarray  # bool (component, event): the same for take (Kleene components)
    relevant: np.ndarray  # bool

    def __len__(self) -> int:
        return len(self.ts)


@dataclass
class Pass:
    """One pass: the PMs ``[lo, hi)`` of ``state``, and the regions its outputs go to (views
    into :class:`PatternState`'s arrays): the end of the state's own array, the end of the
    array of the state its forward transition leads to, nodes, matches, drops of either."""

    state: int
    lo: int
    hi: int
    events: Events
    pms: np.ndarray
    vals: np.ndarray
    self_pms: np.ndarray
    self_vals: np.ndarray
    fwd_pms: np.ndarray
    fwd_vals: np.ndarray
    out_nodes: np.ndarray
    node_base: int
    out_done: np.ndarray
    drops: np.ndarray
    fwd_drops: np.ndarray
    fwd_index: int  # where ``fwd_pms`` starts in the forward state's array


class Matcher(Protocol):
    """An implementation of the check-and-propagate pass."""

    name: str

    def run(self, pattern: PatternTables, p: Pass) -> tuple[np.ndarray, bool]:
        """Runs ``p``; returns the counters (:data:`~situflow.nfa.cooperative.passes_cpu.O_SELF`
        …, each output written to the start of its region) and whether a region ran full."""
        ...


class CpuMatcher:
    """The pass in numba: single-threaded (``threads=1``, the thesis' ST) or on ``threads``
    threads, each taking a contiguous piece of the state's PMs and a share of every output
    region (MT); the pieces' outputs are then moved together, in piece order."""

    def __init__(self, threads: int = 1):
        self.threads = threads
        self.name = "cpu-st" if threads == 1 else f"cpu-mt{threads}"
        self._pool = ThreadPoolExecutor(threads) if threads > 1 else None

    def run(self, pattern: PatternTables, p: Pass) -> tuple[np.ndarray, bool]:
        pieces = cpu.pass_regions(p.lo, p.hi, self.threads)
        shares = [_share(p, t, len(pieces)) for t in range(len(pieces))]
        counts = [np.zeros(cpu.COUNTERS, dtype=np.int64) for _ in pieces]
        if self._pool is None or len(pieces) == 1:
            overflow = self._piece(pattern, p, *pieces[0], shares[0], counts[0])
            return counts[0], overflow
        flags = list(self._pool.map(
            lambda t: self._piece(pattern, p, *pieces[t], shares[t], counts[t]),
            range(len(pieces))))
        return _gather(p, pieces, shares, counts), any(flags)

    @staticmethod
    def _piece(pattern: PatternTables, p: Pass, lo: int, hi: int, share: _Share,
               counters: np.ndarray) -> bool:
        t = pattern.tables
        e = p.events
        return bool(cpu.check_and_propagate(
            lo, hi, len(e), e.ts, e.seq, e.part, e.index, e.stored, e.rows, e.begin, e.take,
            e.relevant, p.state, pattern.window, pattern.clones, pattern.keeps_on_none,
            t.states, t.components, t.tests, t.guards, t.code, t.constants, t.slots, p.pms,
            p.vals, share.self_pms, share.self_vals, share.fwd_pms, share.fwd_vals,
            share.nodes, p.node_base + share.node_offset, share.done, share.drops, counters,
            np.zeros(t.stack, dtype=np.float64)))


@dataclass
class _Share:
    """One thread's share of a pass's output regions, and where each starts in its region."""

    self_pms: np.ndarray
    self_vals: np.ndarray
    fwd_pms: np.ndarray
    fwd_vals: np.ndarray
    nodes: np.ndarray
    node_offset: int
    done: np.ndarray
    drops: np.ndarray
    offsets: dict[int, int]


def _share(p: Pass, t: int, threads: int) -> _Share:
    def cut(a: np.ndarray) -> tuple[np.ndarray, int]:
        q = a.shape[0] // threads
        return a[t * q:(t + 1) * q], t * q

    self_pms, o_self = cut(p.self_pms)
    fwd_pms, o_fwd = cut(p.fwd_pms)
    nodes, o_nodes = cut(p.out_nodes)
    done, o_done = cut(p.out_done)
    drops, o_drops = cut(p.drops)
    return _Share(self_pms, cut(p.self_vals)[0], fwd_pms, cut(p.fwd_vals)[0], nodes, o_nodes,
                  done, drops, {cpu.O_SELF: o_self, cpu.O_FWD: o_fwd, cpu.O_NODES: o_nodes,
                                cpu.O_DONE: o_done, cpu.O_DROPS: o_drops})


def _gather(p: Pass, pieces: list[tuple[int, int]], shares: list[_Share],
            counts: list[np.ndarray]) -> np.ndarray:
    """The pieces' outputs moved to the start of each region, in piece order. Node ids follow
    their nodes: a piece's new nodes are referred to only by its own outputs, by its PMs
    updated in place and by its later nodes, never by another piece."""
    total = np.zeros(cpu.COUNTERS, dtype=np.int64)
    for (lo, hi), share, c in zip(pieces, shares, counts, strict=True):
        n_self, n_fwd, n_nodes, n_done, n_drops, _ = c.tolist()
        at = total.tolist()
        old = p.node_base + share.node_offset
        shift = at[cpu.O_NODES] - share.node_offset

        if shift and n_nodes:
            for column in (share.nodes[:n_nodes, loop.N_PRED], share.self_pms[:n_self, cpu.P_NODE],
                           share.fwd_pms[:n_fwd, cpu.P_NODE], share.done[:n_done, loop.D_NODE],
                           p.pms[lo:hi, cpu.P_NODE]):
                column[(column >= old) & (column < old + n_nodes)] += shift
        for target, source, n, key in (
                (p.out_nodes, share.nodes, n_nodes, cpu.O_NODES),
                (p.self_pms, share.self_pms, n_self, cpu.O_SELF),
                (p.self_vals, share.self_vals, n_self, cpu.O_SELF),
                (p.fwd_pms, share.fwd_pms, n_fwd, cpu.O_FWD),
                (p.fwd_vals, share.fwd_vals, n_fwd, cpu.O_FWD),
                (p.out_done, share.done, n_done, cpu.O_DONE),
                (p.drops, share.drops, n_drops, cpu.O_DROPS)):
            if n and at[key] != share.offsets[key]:
                target[at[key]:at[key] + n] = source[:n].copy()
        total += c
    return total


# --- the state -----------------------------------------------------------------------------------


class PatternState:
    """The PM arrays (one dense array per NFA^b state but ``F``, ``pms[s]``; ``count[s]`` are in
    use), the drop lists of the current micro-batch, and the shared buffer's nodes and events in
    a :class:`~situflow.nfa.kernel.kernel_state.KernelState` (which also knows the partition
    keys, converts from and to the Python loop's runs, and prunes the buffer, §5.3)."""

    def __init__(self, pattern: PatternTables, store: KernelState):
        self.pattern = pattern
        self.store = store
        k = pattern.states
        # At least one V column: OpenCL has no empty buffers.
        width = max(pattern.tables.initial.shape[1], 1)
        self.pms = aligned_zeros((k, 64, PM_FIELDS), np.int64)
        self.vals = aligned_zeros((k, 64, width), np.float64)
        self.count = np.zeros(k, dtype=np.int64)
        self.drops = aligned_zeros((k, 64), np.int64)
        self.dropped = np.zeros(k, dtype=np.int64)
        self.done = aligned_zeros((64, 3), np.int64)
        self.matches = 0
        self.collect_at = _COLLECT_AT

    @property
    def capacity(self) -> int:
        return self.pms.shape[1]

    def reserve(self, pms: int) -> None:
        """Room for ``pms`` more PMs in every state."""
        need = int(self.count.max()) + pms
        if need <= self.capacity:
            return
        size = self.capacity
        while size < need:
            size *= 2
        k, width = self.pms.shape[0], self.vals.shape[2]
        for name, shape, dtype in (("pms", (k, size, PM_FIELDS), np.int64),
                                   ("vals", (k, size, width), np.float64),
                                   ("drops", (k, size), np.int64)):
            old = getattr(self, name)
            new = aligned_zeros(shape, dtype)
            new[:, :old.shape[1]] = old
            setattr(self, name, new)

    def reserve_matches(self, matches: int) -> None:
        size = len(self.done)
        while self.matches + matches > size:
            size *= 2
        if size > len(self.done):
            done = aligned_zeros((size, 3), np.int64)
            done[:self.matches] = self.done[:self.matches]
            self.done = done

    def live(self) -> int:
        return int(self.count.sum())

    # --- from and to runs ---------------------------------------------------------------------

    @classmethod
    def load(cls, pattern: PatternTables, store: KernelState) -> PatternState:
        """The PMs of the runs in ``store`` (one per run), which it then forgets."""
        state = cls(pattern, store)
        state.reserve(store.live_runs())
        state.count[:] = _from_runs(store.head, store.runs, store.starts, store.values,
                                    state.pms, state.vals)
        _clear_runs(store)
        return state

    def to_store(self) -> KernelState:
        """The PMs written to the store as its runs (for export, snapshots and pruning)."""
        s = self.store
        s.reserve(self.live(), 0, 0)
        _to_runs(self.pms, self.vals, self.count, s.head, s.count, s.runs, s.starts, s.values,
                 s.free, s.counters)
        return s

    def prune(self, now: float) -> None:
        """Drop the PMs whose window has closed (§5.3); once the buffer has grown to twice what
        was live at the last collection, let the store keep only the nodes and events the PMs
        still reach, and forget the partitions left without PMs."""
        for k in range(self.pattern.states):
            n = cpu.expire(self.pms[k], int(self.count[k]), now, self.pattern.window,
                           self.drops[k])
            if n:
                self.count[k] = cpu.compact(self.pms[k], self.vals[k], int(self.count[k]),
                                            self.drops[k, :n])
        if int(self.store.counters[loop.K_NODES]) <= self.collect_at:
            return
        store = self.to_store()
        store.prune(now, self.pattern.window)
        store.release()
        self.count[:] = _from_runs(store.head, store.runs, store.starts, store.values,
                                   self.pms, self.vals)
        _clear_runs(store)
        self.collect_at = max(2 * int(store.counters[loop.K_NODES]), _COLLECT_AT)

    # --- a batch ------------------------------------------------------------------------------

    def advance(self, matcher: Matcher, events: Events) -> None:
        """One micro-batch: start PMs, the passes of each state in the order of the states
        (transitions lead forward or back to the same state), compaction (Fig. 4.7)."""
        p = self.pattern
        t = p.tables
        m = len(events)
        self.reserve(m)
        self.reserve_matches(2 * m)
        store = self.store
        store.reserve(0, m, 0)
        used = int(store.counters[loop.K_NODES])
        counters = np.zeros(cpu.COUNTERS, dtype=np.int64)
        target = max(int(cpu.arrival(0, t.components)), 0)
        at = int(self.count[target])
        cpu.begin_runs(m, events.ts, events.seq, events.part, events.index, events.stored,
                       events.rows, events.begin, events.relevant, t.components, t.tests,
                       t.code, t.constants, t.slots, t.initial, self.pms[target, at:],
                       self.vals[target, at:], store.nodes[used:], used,
                       self.done[self.matches:], counters, np.zeros(t.stack))
        self.count[target] += counters[cpu.O_FWD]
        store.counters[loop.K_NODES] += counters[cpu.O_NODES]
        self.matches += int(counters[cpu.O_DONE])
        self.dropped[:] = 0
        for s in range(p.states):
            self._state_passes(matcher, s, events)
        for s in range(p.states):
            n = int(self.dropped[s])
            if n:
                order = np.sort(self.drops[s, :n])[::-1]
                self.count[s] = cpu.compact(self.pms[s], self.vals[s], int(self.count[s]),
                                            order)
            self.pms[s, :self.count[s], P_NEXT] = 0

    def _state_passes(self, matcher: Matcher, s: int, events: Events) -> None:
        """Passes over the PMs of state ``s`` until none is left to take through the
        micro-batch: again over the same PMs after growing the arrays when an output region
        ran full, then over the PMs the last pass added to ``s`` itself."""
        store = self.store
        f = int(self.pattern.forward[s])
        lo = 0
        while lo < self.count[s]:
            hi = int(self.count[s])
            used = int(store.counters[loop.K_NODES])
            at = int(self.count[f]) if f >= 0 else 0
            fwd = (self.pms[f, at:], self.vals[f, at:], self.drops[f, self.dropped[f]:]) \
                if f >= 0 else (self.pms[s, :0], self.vals[s, :0], self.drops[s, :0])
            p = Pass(s, lo, hi, events, self.pms[s], self.vals[s], self.pms[s, hi:],
                     self.vals[s, hi:], fwd[0], fwd[1], store.nodes[used:], used,
                     self.done[self.matches:], self.drops[s, self.dropped[s]:], fwd[2], at)
            counters, overflow = matcher.run(self.pattern, p)
            self.count[s] += counters[cpu.O_SELF]
            self.dropped[s] += counters[cpu.O_DROPS]
            if f >= 0:
                self.count[f] += counters[cpu.O_FWD]
                self.dropped[f] += counters[cpu.O_FWD_DROPS]
            store.counters[loop.K_NODES] += counters[cpu.O_NODES]
            self.matches += int(counters[cpu.O_DONE])
            if overflow:
                grow = max(hi - lo, len(events))
                self.reserve(grow)
                self.reserve_matches(2 * grow)
                store.reserve(0, 2 * grow, 0)
            else:
                lo = hi


_COLLECT_AT = 1 << 14
# Zero-copy buffers over host memory want it page-aligned (Intel's OpenCL guidance, research
# notes B3): the device then uses it where it is.
PAGE = 4096


def aligned_zeros(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """A zeroed C-contiguous array whose memory starts on a page boundary."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    raw = np.zeros(nbytes + PAGE, dtype=np.uint8)
    start = -raw.ctypes.data % PAGE
    return raw[start:start + nbytes].view(dtype).reshape(shape)


@njit(cache=True, nogil=True)
def _to_runs(pms, vals, count, head, per_part, runs, starts, values, free,
             counters):  # pragma: no cover - compiled
    """Every PM as a run of its partition (state k: the one waiting for component k)."""
    head[:] = -1
    per_part[:] = 0
    tail = np.full(head.shape[0], -1, dtype=np.int64)
    for k in range(pms.shape[0]):
        for i in range(count[k]):
            counters[loop.K_FREE] -= 1
            r = free[counters[loop.K_FREE]]
            runs[r, loop.R_STATE] = k
            runs[r, loop.R_NODE] = pms[k, i, cpu.P_NODE]
            runs[r, loop.R_NEXT] = -1
            runs[r, loop.R_FIRST] = pms[k, i, cpu.P_FIRST]
            starts[r] = pms[k, i, cpu.P_START]
            for x in range(values.shape[1]):
                values[r, x] = vals[k, i, x]
            c = pms[k, i, cpu.P_PART]
            if tail[c] >= 0:
                runs[tail[c], loop.R_NEXT] = r
            else:
                head[c] = r
            tail[c] = r
            per_part[c] += 1


@njit(cache=True, nogil=True)
def _from_runs(head, runs, starts, values, pms, vals):  # pragma: no cover - compiled
    """The runs as PMs (``pms`` has room); returns the count per state."""
    count = np.zeros(pms.shape[0], dtype=np.int64)
    for c in range(head.shape[0]):
        r = head[c]
        while r >= 0:
            k = runs[r, loop.R_STATE]
            i = count[k]
            count[k] += 1
            pms[k, i, cpu.P_NODE] = runs[r, loop.R_NODE]
            pms[k, i, cpu.P_FIRST] = runs[r, loop.R_FIRST]
            pms[k, i, cpu.P_START] = starts[r]
            pms[k, i, cpu.P_PART] = c
            pms[k, i, cpu.P_NEXT] = 0
            for x in range(values.shape[1]):
                vals[k, i, x] = values[r, x]
            r = runs[r, loop.R_NEXT]
    return count


def _clear_runs(store: KernelState) -> None:
    """The store without runs (the PMs hold them), every run slot free."""
    store.head[:] = -1
    store.count[:] = 0
    size = len(store.runs)
    store.free[:] = np.arange(size - 1, -1, -1)
    store.counters[loop.K_FREE] = size


# --- the operator --------------------------------------------------------------------------------


class CooperativeOperator(NfaOperator):
    """:class:`~situflow.nfa.operator.NfaOperator` with its compiled loop replaced by the
    cooperative matcher: texts enter as codes compared for equality, and a batch the compiled
    loop would not take (texts ordered or added, values of other types) takes the Python loop,
    as there; snapshots are the NFA operator's own."""

    def __init__(self, automaton: Automaton, name: str, query_id: str, pattern: PatternTables,
                 matcher: Matcher, micro_batch: int = 1024):
        super().__init__(automaton, name, query_id, compiled=False)
        # The text constants' codes are the tables' (situflow.nfa.kernel.texts).
        self._texts = Texts(pattern.tables.texts)
        self.pattern = pattern
        self.matcher = matcher
        self.micro_batch = micro_batch
        self._pm: PatternState | None = None

    @classmethod
    def resume(cls, op: NfaOperator, pattern: PatternTables, matcher: Matcher,
               micro_batch: int = 1024) -> CooperativeOperator:
        """The cooperative operator continuing ``op`` (a restored snapshot, say)."""
        out = cls(op.automaton, op.name, op.query_id, pattern, matcher, micro_batch)
        out._partitions = op.partitions
        out.position = op.position
        out.last_ts = op.last_ts
        return out

    def _fast(self, batch: EventBatch) -> MatchBatch | list[Match] | None:
        a = self.automaton
        state = self._pm
        found = self._kernel_columns(batch, self.pattern.tables,
                                     None if state is None else state.store)
        if found is None:
            return None
        rows, kinds, store = found
        if state is None or store is not state.store:
            state = self._pm = PatternState.load(self.pattern, store)
        begin, take, _, opens, relevant = masks(a, batch)
        visit = np.arange(len(batch)) if self.pattern.contiguous else np.flatnonzero(relevant)
        codes, keys, _ = partition_codes(a, batch, {})
        opening = np.zeros(len(keys) + 1, dtype=bool)
        opening[codes[opens]] = True
        slot = store.slots(keys, opening)[codes]
        visit = visit[slot[visit] >= 0]
        begin_mask = np.stack(begin)
        take_mask = np.stack([np.zeros(len(batch), dtype=bool) if m is None else m
                              for m in take])
        store.batch(len(batch))
        first_event = int(store.counters[loop.K_EVENTS])
        state.matches = 0
        for lo in range(0, len(visit), self.micro_batch):
            index = visit[lo:lo + self.micro_batch]
            m = len(index)
            store.reserve(0, 0, m)
            base = int(store.counters[loop.K_EVENTS])
            stored = np.arange(base, base + m, dtype=np.int64)
            store.events[base:base + m, loop.E_SEQ] = batch.seq[index]
            store.events[base:base + m, loop.E_TS] = batch.ts[index]
            store.events[base:base + m, loop.E_SOURCE] = index
            store.event_rows[base:base + m] = rows[:, index].T
            store.event_kinds[base:base + m] = kinds
            store.counters[loop.K_EVENTS] += m
            events = Events(np.ascontiguousarray(batch.ts[index], dtype=np.int64),
                            np.ascontiguousarray(batch.seq[index], dtype=np.int64),
                            slot[index], index.astype(np.int64), stored,
                            np.ascontiguousarray(rows[:, index]),
                            np.ascontiguousarray(begin_mask[:, index]),
                            np.ascontiguousarray(take_mask[:, index]), relevant[index])
            state.advance(self.matcher, events)
        store.store_ids(first_event, batch.ids)
        done = state.done[:state.matches]
        # Matches a device reserved room for and did not make (module passes_opencl).
        done = done[done[:, loop.D_NODE] >= 0]
        if not len(done):
            return []
        done = done[np.argsort(done[:, loop.D_EVENT], kind="stable")]
        loop.order_matches(done, store.nodes, store.events, len(a.components))
        return MatchBatch(self.name, a, store, done, batch.ts, codes, keys)

    def _leave_kernel(self) -> None:
        if self._pm is not None:
            self._state = self._pm.to_store()
            self._pm = None
        super()._leave_kernel()

    def _current(self) -> Any:
        if self._pm is not None:
            store = self._pm.to_store()
            out = self._exported(store).values()
            _clear_runs(store)
            return out
        return super()._current()

    def _prune(self, now: int | None = None) -> None:
        if self._pm is None:
            super()._prune(now)
            return
        now = self.last_ts if now is None else max(now, self.last_ts or now)
        if now is not None:
            self._pm.prune(now)

    def stats(self) -> dict[str, int]:
        if self._pm is not None:
            return {"partial_matches": self._pm.live()}
        return super().stats()
