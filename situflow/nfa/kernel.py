"""The compiled event loop of NFA^b (§5.2.1): runs, edge evaluation and buffer writes in numba.

:class:`Tables` lays an automaton out as integer tables: per state its edges (begin, or take
and proceed with the Step 6 peek, and the ignore rule of the selection strategy), per
component where a selected event leads, the V columns and how selecting an event updates them,
and every conjunct that reads V as a postfix program (:mod:`situflow.nfa.programs`). :func:`run`
then processes the events of a batch that can change a run, with every run of their partitions
in arrays, exactly as :meth:`~situflow.nfa.operator.NfaOperator._step` does per event: drop
runs out of the window (Step 5), evaluate the edges, split, write selected events to the shared
buffer as new nodes, start a run at the start state, record the runs that reach ``F``.

Runs are not merged (§5.2.1's basic algorithm; merging never changes results, §5.2.2): under
the strategies the kernel covers a run splits at most once per event, and evaluating a run
here costs less than merging it would in Python. A run's Dewey version is its origin's plus
the moves since: increases of the origin's last digit, then one digit per stage added.

The operator uses the kernel for queries under partition contiguity or skip till next match
without negation or ``CONSUME`` whose conjuncts all have programs, on batches whose attributes
are numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from situflow.nfa import programs as ops
from situflow.nfa.automaton import Automaton, StateKind
from situflow.nfa.programs import Program
from situflow.nfa.values import SlotKind

# Slot kinds as the kernel knows them.
FIRST, NTH, LAST, LEN, SUM, COUNT, MAX, MIN = range(8)
_KINDS = {SlotKind.FIRST: FIRST, SlotKind.NTH: NTH, SlotKind.LAST: LAST, SlotKind.LEN: LEN,
          SlotKind.SUM: SUM, SlotKind.COUNT: COUNT, SlotKind.MAX: MAX, SlotKind.MIN: MIN}
# Version moves (§5.1): a new stage, an increase of the last digit, none.
ADD_STAGE, INCREASE, SAME = 0, 1, 2
# Columns of the state table, the component table and the run table.
S_BEGINS, S_COMP, S_SEL_LO, S_SEL_HI, S_GUARD_LO, S_GUARD_HI, S_LEN, S_NEXT = range(8)
S_PROC_LO, S_PROC_HI, S_IGN_SEL, S_IGN_OTHER = range(8, 12)
C_KLEENE, C_LAST, C_BEGIN_STATE, C_ITER_STATE, C_BEGIN_LO, C_BEGIN_HI = range(6)
C_PROC_LO, C_PROC_HI = 6, 7
R_STATE, R_NODE, R_NEXT, R_ORIGIN, R_INC, R_STAGES = range(6)
# Counters: free run slots, nodes written, matches recorded.
K_FREE, K_NODES, K_DONE = range(3)
NO_NODE = -1
# Integers beyond this lose precision as float64: such batches stay on the Python loop.
EXACT = 2**53


@dataclass(frozen=True)
class Tables:
    states: np.ndarray  # int64, one row per state but F
    components: np.ndarray  # int64, one row per positive component
    tests: np.ndarray  # int64 (lo, hi) into the code: one conjunct
    guards: np.ndarray  # int64 (k, test): conjuncts on v[k], checked at the k-th event
    code: np.ndarray  # int64 (operation, operand, operand)
    constants: np.ndarray  # float64, per instruction
    slots: np.ndarray  # int64 (component, kind, attribute, k) per V column
    initial: np.ndarray  # float64, V of a new run
    stages: int  # most Dewey digits a run can add within a batch
    stack: int  # deepest program stack

    @classmethod
    def build(cls, a: Automaton) -> Tables | None:
        """The tables of ``a``, or None if the kernel cannot run it."""
        if a.negations or a.consume or a.selection.global_contiguity:
            return None
        if a.selection.ignores_relevant:
            # Skip till any match: runs multiply (Cor. 4.3) and merging them (§5.2.2), which
            # the kernel does not do, is what keeps them few.
            return None
        code: list[tuple[int, int, int, float]] = []
        tests: list[tuple[int, int]] = []

        def add(programs: tuple[Program, ...] | None) -> tuple[int, int]:
            if programs is None:
                raise _NoKernel
            lo = len(tests)
            for program in programs:
                tests.append((len(code), len(code) + len(program)))
                code.extend(program)
            return lo, len(tests)

        guards: list[tuple[int, int]] = []
        try:
            components = []
            for c in a.components:
                begin_lo, begin_hi = add(c.begin.programs)
                proc_lo, proc_hi = add(c.proceed_programs)
                components.append((int(c.kleene), int(c.last), c.begin_state, c.iterate_state,
                                   begin_lo, begin_hi, proc_lo, proc_hi))
            states = []
            sel = a.selection
            for st in a.states:
                if st.kind is StateKind.FINAL:
                    continue
                c = a.components[st.component]
                ignores = (int(sel.ignores(True)), int(sel.ignores(False)))
                if st.kind is StateKind.BEGIN:
                    states.append((1, c.index, *add(c.begin.programs), 0, 0, -1, -1, 0, 0,
                                   *ignores))
                    continue
                assert c.take is not None
                sel_lo, sel_hi = add(c.take.programs)
                if c.take.guarded_programs is None:
                    raise _NoKernel
                guard_lo = len(guards)
                for k, program in c.take.guarded_programs:
                    guards.append((k, add((program,))[0]))
                nxt = -1 if c.last else c.index + 1
                proc_lo = len(tests)
                if not c.last:
                    add(c.proceed_programs)
                    add(a.components[nxt].begin.programs)
                states.append((0, c.index, sel_lo, sel_hi, guard_lo, len(guards), c.length_slot,
                               nxt, proc_lo, len(tests), *ignores))
        except _NoKernel:
            return None
        slots = [(s.component, _KINDS[s.kind], s.attr, s.k) for s in a.values.slots]
        return cls(
            states=np.array(states, dtype=np.int64).reshape(len(states), 12),
            components=np.array(components, dtype=np.int64).reshape(len(components), 8),
            tests=np.array(tests, dtype=np.int64).reshape(len(tests), 2),
            guards=np.array(guards, dtype=np.int64).reshape(len(guards), 2),
            code=np.array([x[:3] for x in code], dtype=np.int64).reshape(len(code), 3),
            constants=np.array([x[3] for x in code], dtype=np.float64),
            slots=np.array(slots, dtype=np.int64).reshape(len(slots), 4),
            initial=np.array(a.values.initial(), dtype=np.float64),
            stages=2 * len(a.states),
            stack=max((hi - lo for lo, hi in tests), default=0) + 1,
        )


class _NoKernel(Exception):
    """A conjunct without a program."""


@njit(cache=True, nogil=True)
def _evaluate(lo, hi, code, constants, v, row, stack):  # pragma: no cover - compiled
    """One postfix program on V and the current event's row."""
    sp = 0
    for i in range(lo, hi):
        op = code[i, 0]
        if op == ops.CONST:
            stack[sp] = constants[i]
            sp += 1
        elif op == ops.ROW:
            stack[sp] = row[code[i, 1]]
            sp += 1
        elif op == ops.V:
            stack[sp] = v[code[i, 1]]
            sp += 1
        elif op == ops.SUM or op == ops.AVG:
            count = v[code[i, 2]]
            if count == 0:
                stack[sp] = np.nan
            elif op == ops.SUM:
                stack[sp] = v[code[i, 1]]
            else:
                stack[sp] = v[code[i, 1]] / count
            sp += 1
        elif op == ops.NEG:
            stack[sp - 1] = -stack[sp - 1]
        elif op == ops.NOT:
            stack[sp - 1] = 1.0 if stack[sp - 1] == 0 else 0.0
        else:
            b = stack[sp - 1]
            x = stack[sp - 2]
            sp -= 1
            if op == ops.ADD:
                r = x + b
            elif op == ops.SUB:
                r = x - b
            elif op == ops.MUL:
                r = x * b
            elif op == ops.DIV:
                r = x / b if b != 0 else (
                    np.nan if x == 0 or x != x else math.copysign(np.inf, x))
            elif op == ops.MOD:
                r = np.nan if b == 0 else np.fmod(x, b)
            elif op == ops.AND:
                r = 1.0 if x != 0 and b != 0 else 0.0
            elif op == ops.OR:
                r = 1.0 if x != 0 or b != 0 else 0.0
            elif x != x or b != b:
                r = 0.0  # a comparison with a missing value is false
            elif op == ops.LT:
                r = 1.0 if x < b else 0.0
            elif op == ops.GT:
                r = 1.0 if x > b else 0.0
            elif op == ops.LE:
                r = 1.0 if x <= b else 0.0
            elif op == ops.GE:
                r = 1.0 if x >= b else 0.0
            elif op == ops.EQ:
                r = 1.0 if x == b else 0.0
            else:
                r = 1.0 if x != b else 0.0
            stack[sp - 1] = r
    return stack[0]


@njit(cache=True, nogil=True)
def _holds(lo, hi, tests, code, constants, v, row, stack):  # pragma: no cover - compiled
    for t in range(lo, hi):
        if _evaluate(tests[t, 0], tests[t, 1], code, constants, v, row, stack) == 0:
            return False
    return True


@njit(cache=True, nogil=True)
def _update(v, row, comp, n, slots):  # pragma: no cover - compiled
    """V after selecting ``row`` as element ``n`` of component ``comp`` (values.py)."""
    for i in range(slots.shape[0]):
        if slots[i, 0] != comp:
            continue
        kind = slots[i, 1]
        if kind == LEN:
            v[i] = n
            continue
        x = row[slots[i, 2]]
        if kind == LAST or (kind == FIRST and n == 1) or (kind == NTH and n == slots[i, 3]):
            v[i] = x
        elif x == x:
            if kind == SUM:
                v[i] += x
            elif kind == COUNT:
                v[i] += 1
            elif kind == MAX:
                if v[i] != v[i] or x > v[i]:
                    v[i] = x
            elif kind == MIN and (v[i] != v[i] or x < v[i]):
                v[i] = x


@njit(cache=True, nogil=True)
def run(start, partition, ts, rows, begin, take, relevant, opens, window, contiguous,
        states, components, tests, guards, code, constants, slots, initial,
        head, count, initiations, runs, starts, values, digits, free, nodes, done,
        counters, stack):  # pragma: no cover - compiled
    """Process events ``start..`` of a batch; returns where it stopped (all: ``len(ts)``).

    Stops early, before an event, when the run, node or match arrays may not hold what the
    event can produce; the caller grows them and calls again from there.
    """
    n = ts.shape[0]
    for e in range(start, n):
        c = partition[e]
        need = 2 * count[c] + 2
        if (counters[K_FREE] < need or counters[K_NODES] + need > nodes.shape[0]
                or counters[K_DONE] + need > done.shape[0]):
            return e
        if not relevant[e]:
            if contiguous:
                r = head[c]
                while r >= 0:
                    free[counters[K_FREE]] = r
                    counters[K_FREE] += 1
                    r = runs[r, R_NEXT]
                head[c] = -1
                count[c] = 0
            continue
        if head[c] < 0 and not opens[e]:
            continue
        t = ts[e]
        row = rows[e]
        first = -1
        last = -1
        alive = 0
        r = head[c]
        while r >= 0:
            following = runs[r, R_NEXT]
            if t - starts[r] > window:
                free[counters[K_FREE]] = r
                counters[K_FREE] += 1
                r = following
                continue
            s = runs[r, R_STATE]
            k = states[s, S_COMP]
            v = values[r]
            proceeds = False
            if states[s, S_BEGINS]:
                selects = begin[k, e] and _holds(states[s, S_SEL_LO], states[s, S_SEL_HI],
                                                 tests, code, constants, v, row, stack)
                length = 1
            else:
                selects = take[k, e] and _holds(states[s, S_SEL_LO], states[s, S_SEL_HI],
                                                tests, code, constants, v, row, stack)
                length = v[states[s, S_LEN]] + 1
                if selects:
                    for g in range(states[s, S_GUARD_LO], states[s, S_GUARD_HI]):
                        if guards[g, 0] == length and _evaluate(
                                tests[guards[g, 1], 0], tests[guards[g, 1], 1], code, constants,
                                v, row, stack) == 0:
                            selects = False
                            break
                nxt = states[s, S_NEXT]
                proceeds = nxt >= 0 and begin[nxt, e] and _holds(
                    states[s, S_PROC_LO], states[s, S_PROC_HI], tests, code, constants, v, row,
                    stack)
            ignores = states[s, S_IGN_SEL] if selects else states[s, S_IGN_OTHER]
            if selects:
                move = ADD_STAGE if states[s, S_BEGINS] else (INCREASE if ignores else SAME)
                first, last, alive = _select(r, k, length, move, e, t, row, first, last, alive,
                                             components, tests, code, constants, slots, runs,
                                             starts, values, digits, free, nodes, done,
                                             counters, stack)
            if proceeds:
                first, last, alive = _select(r, states[s, S_NEXT], 1, ADD_STAGE, e, t, row,
                                             first, last, alive, components, tests, code,
                                             constants, slots, runs, starts, values, digits,
                                             free, nodes, done, counters, stack)
            if ignores:
                first, last, alive = _append(r, first, last, alive, runs)
            else:
                free[counters[K_FREE]] = r
                counters[K_FREE] += 1
            r = following
        if begin[0, e] and _holds(components[0, C_BEGIN_LO], components[0, C_BEGIN_HI], tests,
                                  code, constants, initial, row, stack):
            initiations[c] += 1
            counters[K_FREE] -= 1
            r = free[counters[K_FREE]]
            values[r, :] = initial
            _update(values[r], row, 0, 1, slots)
            runs[r, R_NODE] = _node(e, 0, NO_NODE, nodes, counters)
            starts[r] = t
            runs[r, R_ORIGIN] = -initiations[c]  # Dewey.start(initiations).add_stage()
            runs[r, R_INC] = 0
            runs[r, R_STAGES] = 1
            digits[r, 0] = 0
            first, last, alive = _arrive(r, 0, e, first, last, alive, components, tests, code,
                                         constants, runs, values, row, free, done, counters,
                                         stack)
        head[c] = first
        count[c] = alive
    return n


@njit(cache=True, nogil=True)
def _node(e, comp, pred, nodes, counters):  # pragma: no cover - compiled
    i = counters[K_NODES]
    nodes[i, 0] = e
    nodes[i, 1] = comp
    nodes[i, 2] = pred
    counters[K_NODES] += 1
    return i


@njit(cache=True, nogil=True)
def _append(r, first, last, alive, runs):  # pragma: no cover - compiled
    runs[r, R_NEXT] = -1
    if last >= 0:
        runs[last, R_NEXT] = r
    else:
        first = r
    return first, r, alive + 1


@njit(cache=True, nogil=True)
def _select(r, k, length, move, e, t, row, first, last, alive, components, tests, code,
            constants, slots, runs, starts, values, digits, free, nodes, done, counters,
            stack):  # pragma: no cover - compiled
    """A begin or take move of run ``r``: the event becomes element ``length`` of ``k``."""
    node = _node(e, k, runs[r, R_NODE], nodes, counters)
    if components[k, C_LAST] and not components[k, C_KLEENE]:
        _done(e, node, done, counters)  # the move into F
        return first, last, alive
    counters[K_FREE] -= 1
    clone = free[counters[K_FREE]]
    values[clone, :] = values[r]
    _update(values[clone], row, k, length, slots)
    runs[clone, R_NODE] = node
    starts[clone] = starts[r]
    runs[clone, R_ORIGIN] = runs[r, R_ORIGIN]
    runs[clone, R_INC] = runs[r, R_INC]
    stages = runs[r, R_STAGES]
    digits[clone, :stages] = digits[r, :stages]
    if move == ADD_STAGE:
        digits[clone, stages] = 0
        stages += 1
    elif move == INCREASE:
        if stages == 0:
            runs[clone, R_INC] += 1
        else:
            digits[clone, stages - 1] += 1
    runs[clone, R_STAGES] = stages
    return _arrive(clone, k, e, first, last, alive, components, tests, code, constants, runs,
                   values, row, free, done, counters, stack)


@njit(cache=True, nogil=True)
def _arrive(r, k, e, first, last, alive, components, tests, code, constants, runs, values, row,
            free, done, counters, stack):  # pragma: no cover - compiled
    """Place run ``r``, which just selected an event for ``k``, in its next state."""
    if components[k, C_KLEENE]:
        runs[r, R_STATE] = components[k, C_ITER_STATE]
        first, last, alive = _append(r, first, last, alive, runs)
        # A trailing Kleene plus: every valid extension is its own match (SEMANTICS.md).
        if components[k, C_LAST] and _holds(components[k, C_PROC_LO], components[k, C_PROC_HI],
                                            tests, code, constants, values[r], row, stack):
            _done(e, runs[r, R_NODE], done, counters)
    elif components[k, C_LAST]:
        _done(e, runs[r, R_NODE], done, counters)
        free[counters[K_FREE]] = r
        counters[K_FREE] += 1
    else:
        runs[r, R_STATE] = components[k + 1, C_BEGIN_STATE]
        first, last, alive = _append(r, first, last, alive, runs)
    return first, last, alive


@njit(cache=True, nogil=True)
def _done(e, node, done, counters):  # pragma: no cover - compiled
    done[counters[K_DONE], 0] = e
    done[counters[K_DONE], 1] = node
    counters[K_DONE] += 1
