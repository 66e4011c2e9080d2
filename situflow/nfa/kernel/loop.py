"""The compiled event loop of NFA^b (§5.2.1): runs, edge evaluation and buffer writes in numba.

:class:`Tables` lays an automaton out as integer tables: per state its edges (begin, or take and
proceed with the Step 6 peek, and the ignore rule of the selection strategy), per component
where a selected event leads, the V columns and how selecting an event updates them, and every
conjunct that reads V as a postfix program (:mod:`situflow.nfa.compiler.programs`).
:func:`advance_runs` then processes the events of a batch, with every run of their partitions in
arrays, exactly as :meth:`~situflow.nfa.operator.NfaOperator._step` does per event: drop runs
out of the window (Step 5), evaluate the edges, split, write selected events to the shared
buffer as new nodes, start a run at the start state, record the runs that reach ``F``.

The arrays (:class:`~situflow.nfa.kernel.kernel_state.KernelState`) stay from batch to batch:
runs, buffer nodes (event, component, predecessor) and the events the nodes hold. A match leaves
as its last node, the paper's compressed output (§4.2); :func:`decompress` reads the events of
many matches at once when they are needed. The matches one event completes are ordered as the
Python loop orders them (:func:`order_matches`).

Runs are not merged (§5.2.1's basic algorithm; merging never changes results, §5.2.2): under
the strategies the kernel covers a run splits at most once per event, and a run that takes
one move only is updated in place. Runs carry no Dewey version: a node links to its own
predecessor, so no retrieval reads one (:mod:`situflow.nfa.sharedbuffer.versions`).

Text attributes enter as codes of :class:`~situflow.nfa.kernel.texts.Texts` (their kind
says so, to give them back as texts), and text constants as the same codes: equal texts have
equal codes, so ``=`` and ``!=`` on texts run here; :meth:`Tables.accepts` decides, per set of
text attributes, whether every program only compares texts with texts.

``CONSUME`` is applied per event as in the Python loop: when an event completes matches of a
partition, one is kept (the latest-starting, then the shortest, then the first in match order)
and every run of the partition is dropped.

The operator uses the kernel for queries under partition contiguity or skip till next match
without negation whose conjuncts all have programs, on batches whose attributes are numbers,
or texts the programs only compare for equality.

What stays on the Python loop, and why:

* negation (§3.1): its conditions relate the candidate to any event of the match
  (``w.x = a[1].x``), which V does not hold, so they are closures over the retrieved match, with
  no postfix program; the kernel would need programs over a match's buffered events, candidate
  buffers per partition and negated component kept in arrays and pruned with the window, and,
  for a trailing negation, matches held until ``first.t + w`` and released between events and
  by watermarks in the Python loop's order;
* skip till any match and strict contiguity (see :meth:`Tables.build`);
* texts ordered, added or aggregated (``<``, ``max``), or compared with numbers, and columns
  that mix texts with other values: such a batch (:meth:`Tables.accepts`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from situflow.jit import njit
from situflow.nfa.compiler import programs as ops
from situflow.nfa.compiler.automaton import Automaton, StateKind
from situflow.nfa.compiler.programs import Program
from situflow.nfa.compiler.values import SlotKind

# Slot kinds as the kernel knows them.
FIRST, NTH, LAST, LEN, SUM, COUNT, MAX, MIN = range(8)
_KINDS = {SlotKind.FIRST: FIRST, SlotKind.NTH: NTH, SlotKind.LAST: LAST, SlotKind.LEN: LEN,
          SlotKind.SUM: SUM, SlotKind.COUNT: COUNT, SlotKind.MAX: MAX, SlotKind.MIN: MIN}
# Columns of the state table, the component table and the run table.
S_BEGINS, S_COMP, S_SEL_LO, S_SEL_HI, S_GUARD_LO, S_GUARD_HI, S_LEN, S_NEXT = range(8)
S_PROC_LO, S_PROC_HI, S_IGN_SEL, S_IGN_OTHER = range(8, 12)
C_KLEENE, C_LAST, C_BEGIN_STATE, C_ITER_STATE, C_BEGIN_LO, C_BEGIN_HI = range(6)
C_PROC_LO, C_PROC_HI = 6, 7
# A run: its state, last buffer node, next run of its partition and the sequence number of its
# first event.
R_STATE, R_NODE, R_NEXT, R_FIRST = range(4)
RUN_FIELDS = 4
# A buffer node: the stored event, the component it was selected for, the previous node.
N_EVENT, N_COMP, N_PRED = range(3)
# A match: the event (in the batch) that completed it, its last node, its first event's seq.
D_EVENT, D_NODE, D_FIRST = range(3)
# A stored event: its sequence number, time and index in the batch that brought it.
E_SEQ, E_TS, E_SOURCE = range(3)
# Counters: free run slots, nodes written, matches recorded, events stored.
K_FREE, K_NODES, K_DONE, K_EVENTS = range(4)
NO_NODE = -1


@dataclass(frozen=True)
class Tables:
    states: np.ndarray  # int64, one row per state but F
    components: np.ndarray  # int64, one row per positive component
    tests: np.ndarray  # int64 (lo, hi) into the code: one conjunct
    guards: np.ndarray  # int64 (k, test): conjuncts on v[k], checked at the k-th event
    code: np.ndarray  # int64 (operation, operand, operand)
    constants: np.ndarray  # float64, per instruction
    slots: np.ndarray  # int64 (component, kind, attribute, k) per V column
    initial: np.ndarray  # float64, V of a new run (one row)
    stack: int  # deepest program stack
    consume: bool  # CONSUME: a partition keeps one match per event and drops its runs
    # The text constants, whose codes (kernel.texts) are their indexes, and per instruction
    # whether it pushes one.
    texts: tuple[str, ...]
    text_constants: np.ndarray  # bool

    @classmethod
    def build(cls, a: Automaton) -> Tables | None:
        """The tables of ``a``, or None if the kernel cannot run it."""
        if a.negations or a.selection.global_contiguity:
            return None
        if a.selection.ignores_relevant:
            # Skip till any match: runs multiply (Cor. 4.3) and merging them (§5.2.2), which
            # the kernel does not do, is what keeps them few.
            return None
        code: list[tuple[int, int, int, float | str]] = []
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
        texts = tuple(dict.fromkeys(str(x[3]) for x in code if x[0] == ops.TEXT))
        text_constants = [x[0] == ops.TEXT for x in code]
        # A text constant is pushed as its code: the index of its text in ``texts``.
        code = [(ops.CONST, 0, 0, float(texts.index(x[3]))) if x[0] == ops.TEXT else x
                for x in code]
        return cls(
            states=np.array(states, dtype=np.int64).reshape(len(states), 12),
            components=np.array(components, dtype=np.int64).reshape(len(components), 8),
            tests=np.array(tests, dtype=np.int64).reshape(len(tests), 2),
            guards=np.array(guards, dtype=np.int64).reshape(len(guards), 2),
            code=np.array([x[:3] for x in code], dtype=np.int64).reshape(len(code), 3),
            constants=np.array([x[3] for x in code], dtype=np.float64),
            slots=np.array(slots, dtype=np.int64).reshape(len(slots), 4),
            initial=np.array([a.values.initial()], dtype=np.float64).reshape(1, -1),
            stack=max((hi - lo for lo, hi in tests), default=0) + 1,
            consume=a.consume,
            texts=texts,
            text_constants=np.array(text_constants, dtype=bool),
        )

    def accepts(self, text: np.ndarray) -> bool:
        """Whether the programs give the closures' results when the attributes ``text`` marks
        hold text codes: a text may only be compared, by ``=`` or ``!=``, with another text
        (or be counted); anything else on a text (ordering, arithmetic, ``sum``, ``max``, a
        text compared with a number) is left to the Python loop."""
        if not text.any() and not self.text_constants.any():
            return True
        slot_text = []
        for _, kind, attr, _ in self.slots.tolist():
            if attr >= 0 and text[attr] and kind in (SUM, MAX, MIN):
                return False
            slot_text.append(attr >= 0 and bool(text[attr]) and kind in (FIRST, NTH, LAST))
        code = self.code.tolist()
        for lo, hi in self.tests.tolist():
            stack: list[bool] = []  # whether each operand is a text
            for i in range(lo, hi):
                op, first, _ = code[i]
                if op == ops.CONST:
                    stack.append(bool(self.text_constants[i]))
                elif op == ops.ROW:
                    stack.append(bool(text[first]))
                elif op == ops.V:
                    stack.append(slot_text[first])
                elif op in (ops.SUM, ops.AVG):
                    stack.append(False)
                elif op in (ops.NEG, ops.NOT):
                    if stack[-1]:
                        return False
                else:
                    right, left = stack.pop(), stack.pop()
                    if (left or right) and not (op in (ops.EQ, ops.NE) and left and right):
                        return False
                    stack.append(False)
            if stack[-1]:
                return False
        return True


class _NoKernel(Exception):
    """A conjunct without a program."""


@njit(cache=True, nogil=True, inline="always")
def _evaluate(lo, hi, code, constants, values, r, rows, e, stack):  # pragma: no cover - compiled
    """One postfix program on run ``r``'s V and event ``e``'s attributes."""
    sp = 0
    for i in range(lo, hi):
        op = code[i, 0]
        if op == ops.CONST:
            stack[sp] = constants[i]
            sp += 1
        elif op == ops.ROW:
            stack[sp] = rows[code[i, 1], e]
            sp += 1
        elif op == ops.V:
            stack[sp] = values[r, code[i, 1]]
            sp += 1
        elif op == ops.SUM or op == ops.AVG:
            count = values[r, code[i, 2]]
            if count == 0:
                stack[sp] = np.nan
            elif op == ops.SUM:
                stack[sp] = values[r, code[i, 1]]
            else:
                stack[sp] = values[r, code[i, 1]] / count
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
                out = x + b
            elif op == ops.SUB:
                out = x - b
            elif op == ops.MUL:
                out = x * b
            elif op == ops.DIV:
                out = x / b if b != 0 else (
                    np.nan if x == 0 or x != x else math.copysign(np.inf, x))
            elif op == ops.MOD:
                out = np.nan if b == 0 else np.fmod(x, b)
            elif op == ops.AND:
                out = 1.0 if x != 0 and b != 0 else 0.0
            elif op == ops.OR:
                out = 1.0 if x != 0 or b != 0 else 0.0
            elif x != x or b != b:
                out = 0.0  # a comparison with a missing value is false
            elif op == ops.LT:
                out = 1.0 if x < b else 0.0
            elif op == ops.GT:
                out = 1.0 if x > b else 0.0
            elif op == ops.LE:
                out = 1.0 if x <= b else 0.0
            elif op == ops.GE:
                out = 1.0 if x >= b else 0.0
            elif op == ops.EQ:
                out = 1.0 if x == b else 0.0
            else:
                out = 1.0 if x != b else 0.0
            stack[sp - 1] = out
    return stack[0]


@njit(cache=True, nogil=True, inline="always")
def _holds(lo, hi, tests, code, constants, values, r, rows, e,
           stack):  # pragma: no cover - compiled
    for t in range(lo, hi):
        if _evaluate(tests[t, 0], tests[t, 1], code, constants, values, r, rows, e,
                     stack) == 0:
            return False
    return True


@njit(cache=True, nogil=True, inline="always")
def _update(values, r, rows, e, comp, n, slots):  # pragma: no cover - compiled
    """Run ``r``'s V after selecting event ``e`` as element ``n`` of component ``comp``
    (values.py)."""
    for i in range(slots.shape[0]):
        if slots[i, 0] != comp:
            continue
        kind = slots[i, 1]
        if kind == LEN:
            values[r, i] = n
            continue
        x = rows[slots[i, 2], e]
        if kind == LAST or (kind == FIRST and n == 1) or (kind == NTH and n == slots[i, 3]):
            values[r, i] = x
        elif x == x:
            y = values[r, i]
            if kind == SUM:
                values[r, i] = y + x
            elif kind == COUNT:
                values[r, i] = y + 1
            elif kind == MAX:
                if y != y or x > y:
                    values[r, i] = x
            elif kind == MIN and (y != y or x < y):
                values[r, i] = x


@njit(cache=True, nogil=True)
def advance_runs(start, visit, slot, ts, seq, rows, kinds, begin, take, relevant, opens,
                 window, contiguous, consume, states, components, tests, guards, code, constants, slots,
                 initial, head, count, runs, starts, values, free, nodes, events, event_rows,
                 event_kinds, stored, done, counters, stack):  # pragma: no cover - compiled
    """Process the events ``visit[start:]`` of a batch; returns where it stopped (all:
    ``len(visit)``).

    Stops early, before an event, when the run, node, match or event arrays may not hold what
    the event can produce; the caller grows them and calls again from there.

    The moves of one run (select, proceed) and the begin of a new run go through one piece of
    code below: numba passes arrays to a helper function at the price of reference counting,
    which costs more than the move itself.
    """
    # The moves of one run: (component, element number).
    moves = np.empty((2, 2), dtype=np.int64)
    m = visit.shape[0]
    for i in range(start, m):
        e = visit[i]
        c = slot[e]
        if c < 0:
            continue
        need = 2 * count[c] + 2
        if (counters[K_FREE] < need or counters[K_NODES] + need > nodes.shape[0]
                or counters[K_DONE] + need > done.shape[0]
                or counters[K_EVENTS] >= events.shape[0]):
            return i
        if not relevant[e]:
            if contiguous:
                r = head[c]
                while r >= 0:
                    _free(r, free, counters)
                    r = runs[r, R_NEXT]
                head[c] = -1
                count[c] = 0
            continue
        if head[c] < 0 and not opens[e]:
            continue
        t = ts[e]
        first = -1
        last = -1
        alive = 0
        event = stored[e]
        matches = counters[K_DONE]
        r = head[c]
        # The partition's runs, then (r = -1) a new run if the event begins one.
        began = False
        while True:
            if r >= 0:
                following = runs[r, R_NEXT]
                if t - starts[r] > window:
                    _free(r, free, counters)
                    r = following
                    continue
                s = runs[r, R_STATE]
                k = states[s, S_COMP]
                length = 1
                proceeds = False
                if states[s, S_BEGINS]:
                    selects = begin[k, e] and (
                        states[s, S_SEL_LO] == states[s, S_SEL_HI]
                        or _holds(states[s, S_SEL_LO], states[s, S_SEL_HI], tests, code,
                                  constants, values, r, rows, e, stack))
                else:
                    selects = take[k, e] and (
                        states[s, S_SEL_LO] == states[s, S_SEL_HI]
                        or _holds(states[s, S_SEL_LO], states[s, S_SEL_HI], tests, code,
                                  constants, values, r, rows, e, stack))
                    length = values[r, states[s, S_LEN]] + 1
                    if selects:
                        for g in range(states[s, S_GUARD_LO], states[s, S_GUARD_HI]):
                            if guards[g, 0] == length and _evaluate(
                                    tests[guards[g, 1], 0], tests[guards[g, 1], 1], code,
                                    constants, values, r, rows, e, stack) == 0:
                                selects = False
                                break
                    nxt = states[s, S_NEXT]
                    proceeds = nxt >= 0 and begin[nxt, e] and (
                        states[s, S_PROC_LO] == states[s, S_PROC_HI]
                        or _holds(states[s, S_PROC_LO], states[s, S_PROC_HI], tests, code,
                                  constants, values, r, rows, e, stack))
                stays = states[s, S_IGN_SEL] if selects else states[s, S_IGN_OTHER]
                n_moves = 0
                if selects:
                    moves[0, 0] = k
                    moves[0, 1] = length
                    n_moves = 1
                if proceeds:
                    moves[n_moves, 0] = states[s, S_NEXT]
                    moves[n_moves, 1] = 1
                    n_moves += 1
            else:
                if began or not begin[0, e] or not (
                        components[0, C_BEGIN_LO] == components[0, C_BEGIN_HI]
                        or _holds(components[0, C_BEGIN_LO], components[0, C_BEGIN_HI], tests,
                                  code, constants, initial, 0, rows, e, stack)):
                    break
                began = True
                following = -1
                stays = False
                moves[0, 0] = 0
                moves[0, 1] = 1
                n_moves = 1
            if n_moves and event < 0:
                # The event joins the store once per batch, for the nodes that select it.
                event = counters[K_EVENTS]
                counters[K_EVENTS] += 1
                stored[e] = event
                events[event, E_SEQ] = seq[e]
                events[event, E_TS] = t
                events[event, E_SOURCE] = e
                for a in range(rows.shape[0]):
                    event_rows[event, a] = rows[a, e]
                    event_kinds[event, a] = kinds[a]
            for mv in range(n_moves):
                k = moves[mv, 0]
                node = counters[K_NODES]
                counters[K_NODES] += 1
                nodes[node, N_EVENT] = event
                nodes[node, N_COMP] = k
                nodes[node, N_PRED] = runs[r, R_NODE] if r >= 0 else NO_NODE
                if components[k, C_LAST] and not components[k, C_KLEENE]:
                    # The move into F: the match needs its node only.
                    d = counters[K_DONE]
                    counters[K_DONE] += 1
                    done[d, D_EVENT] = e
                    done[d, D_NODE] = node
                    done[d, D_FIRST] = runs[r, R_FIRST] if r >= 0 else seq[e]
                    continue
                # The last move of a run that does not stay (ignore) takes the run itself.
                if r >= 0 and not stays and mv == n_moves - 1:
                    target = r
                else:
                    counters[K_FREE] -= 1
                    target = free[counters[K_FREE]]
                    if r >= 0:
                        for x in range(values.shape[1]):
                            values[target, x] = values[r, x]
                        starts[target] = starts[r]
                        runs[target, R_FIRST] = runs[r, R_FIRST]
                    else:
                        for x in range(values.shape[1]):
                            values[target, x] = initial[0, x]
                        starts[target] = t
                        runs[target, R_FIRST] = seq[e]
                _update(values, target, rows, e, k, moves[mv, 1], slots)
                runs[target, R_NODE] = node
                # Where the run goes next (and, from a last component, the match it makes).
                matched = False
                if components[k, C_KLEENE]:
                    runs[target, R_STATE] = components[k, C_ITER_STATE]
                    # A trailing Kleene plus: every valid extension is its own match
                    # (SEMANTICS.md).
                    matched = components[k, C_LAST] and (
                        components[k, C_PROC_LO] == components[k, C_PROC_HI]
                        or _holds(components[k, C_PROC_LO], components[k, C_PROC_HI], tests,
                                  code, constants, values, target, rows, e, stack))
                    kept = True
                elif components[k, C_LAST]:
                    matched = True
                    kept = False
                else:
                    runs[target, R_STATE] = components[k + 1, C_BEGIN_STATE]
                    kept = True
                if matched:
                    d = counters[K_DONE]
                    counters[K_DONE] += 1
                    done[d, D_EVENT] = e
                    done[d, D_NODE] = node
                    done[d, D_FIRST] = runs[target, R_FIRST]
                if kept:
                    first, last, alive = _append(target, first, last, alive, runs)
                else:
                    _free(target, free, counters)
            if r >= 0:
                if stays:
                    first, last, alive = _append(r, first, last, alive, runs)
                elif n_moves == 0 or (components[moves[n_moves - 1, 0], C_LAST]
                                      and not components[moves[n_moves - 1, 0], C_KLEENE]):
                    # Nothing took the run over: it dies.
                    _free(r, free, counters)
            r = following
        if consume and counters[K_DONE] > matches:
            # CONSUME (§2's non-overlap format): the partition keeps one of the matches the
            # event completed and loses every run, the ones begun at this event included.
            kept = _consumed(matches, counters[K_DONE], done, nodes, events, components.shape[0])
            for f in range(3):
                done[matches, f] = done[kept, f]
            counters[K_DONE] = matches + 1
            while first >= 0:
                _free(first, free, counters)
                first = runs[first, R_NEXT]
            alive = 0
        head[c] = first
        count[c] = alive
    return m


@njit(cache=True, nogil=True)
def _consumed(lo, hi, done, nodes, events, components):  # pragma: no cover - compiled
    """The match ``CONSUME`` keeps of ``done[lo:hi]``, as the Python loop picks it: the
    latest-starting one, then the one with the fewest events, then the first in match order."""
    best = lo
    best_length = _length(done[lo, D_NODE], nodes)
    for d in range(lo + 1, hi):
        if done[d, D_FIRST] != done[best, D_FIRST]:
            if done[d, D_FIRST] > done[best, D_FIRST]:
                best = d
                best_length = _length(done[d, D_NODE], nodes)
            continue
        length = _length(done[d, D_NODE], nodes)
        if length < best_length or (length == best_length and _compare(
                done[d], done[best], nodes, events, components) < 0):
            best = d
            best_length = length
    return best


@njit(cache=True, nogil=True, inline="always")
def _length(node, nodes):  # pragma: no cover - compiled
    """The number of events of the match ending at ``node``."""
    n = 0
    while node >= 0:
        n += 1
        node = nodes[node, N_PRED]
    return n


@njit(cache=True, nogil=True, inline="always")
def _free(r, free, counters):  # pragma: no cover - compiled
    free[counters[K_FREE]] = r
    counters[K_FREE] += 1


@njit(cache=True, nogil=True, inline="always")
def _append(r, first, last, alive, runs):  # pragma: no cover - compiled
    runs[r, R_NEXT] = -1
    if last >= 0:
        runs[last, R_NEXT] = r
    else:
        first = r
    return first, r, alive + 1


# --- between batches --------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def prune(now, window, head, count, runs, starts, free, counters):  # pragma: no cover - compiled
    """Drop every run whose window has closed at ``now`` (§5.3), in every partition."""
    for c in range(head.shape[0]):
        r = head[c]
        first = -1
        last = -1
        alive = 0
        while r >= 0:
            following = runs[r, R_NEXT]
            if now - starts[r] > window:
                _free(r, free, counters)
            else:
                first, last, alive = _append(r, first, last, alive, runs)
            r = following
        head[c] = first
        count[c] = alive


@njit(cache=True, nogil=True)
def live(head, runs, nodes, used, stored, out):  # pragma: no cover - compiled
    """The nodes and events the runs still reach: the shared buffer after pruning (§5.3).

    Writes the reached nodes of ``nodes[:used]`` to ``out`` in their order (a predecessor still
    comes first) with their events renumbered, points the runs at them, and returns how many
    there are and the old index of each event they hold. ``nodes`` is left as it is: earlier
    results still read it.
    """
    reached = np.zeros(used, dtype=np.bool_)
    for c in range(head.shape[0]):
        r = head[c]
        while r >= 0:
            x = runs[r, R_NODE]
            while x >= 0 and not reached[x]:
                reached[x] = True
                x = nodes[x, N_PRED]
            r = runs[r, R_NEXT]
    renumber = np.full(used, -1, dtype=np.int64)
    event_index = np.full(stored, -1, dtype=np.int64)
    kept_events = np.empty(stored, dtype=np.int64)
    kept = 0
    events = 0
    for x in range(used):
        if reached[x]:
            renumber[x] = kept
            kept += 1
            ev = nodes[x, N_EVENT]
            if event_index[ev] < 0:
                event_index[ev] = events
                kept_events[events] = ev
                events += 1
    for x in range(used):
        y = renumber[x]
        if y >= 0:
            pred = nodes[x, N_PRED]
            out[y, N_EVENT] = event_index[nodes[x, N_EVENT]]
            out[y, N_COMP] = nodes[x, N_COMP]
            out[y, N_PRED] = renumber[pred] if pred >= 0 else NO_NODE
    for c in range(head.shape[0]):
        r = head[c]
        while r >= 0:
            runs[r, R_NODE] = renumber[runs[r, R_NODE]]
            r = runs[r, R_NEXT]
    return kept, kept_events[:events]


# --- matches ----------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def order_matches(done, nodes, events, components):  # pragma: no cover - compiled
    """Sort the matches of each event as the Python loop does: by the sequence numbers of
    their events per component (``Match.order``); the first events decide almost always."""
    n = done.shape[0]
    i = 0
    while i < n:
        j = i + 1
        while j < n and done[j, D_EVENT] == done[i, D_EVENT]:
            j += 1
        for a in range(i + 1, j):  # insertion sort: few matches per event
            b = a
            while b > i and _compare(done[b], done[b - 1], nodes, events, components) < 0:
                for f in range(3):
                    done[b, f], done[b - 1, f] = done[b - 1, f], done[b, f]
                b -= 1
        i = j


@njit(cache=True, nogil=True)
def _compare(x, y, nodes, events, components):  # pragma: no cover - compiled
    if x[D_FIRST] != y[D_FIRST]:
        return -1 if x[D_FIRST] < y[D_FIRST] else 1
    xs, xc = _chain(x[D_NODE], nodes, events)
    ys, yc = _chain(y[D_NODE], nodes, events)
    i = 0
    j = 0
    for k in range(components):
        i_end = i
        while i_end < xs.shape[0] and xc[i_end] == k:
            i_end += 1
        j_end = j
        while j_end < ys.shape[0] and yc[j_end] == k:
            j_end += 1
        for d in range(min(i_end - i, j_end - j)):
            if xs[i + d] != ys[j + d]:
                return -1 if xs[i + d] < ys[j + d] else 1
        if i_end - i != j_end - j:
            return -1 if i_end - i < j_end - j else 1
        i = i_end
        j = j_end
    return 0


@njit(cache=True, nogil=True)
def _chain(node, nodes, events):  # pragma: no cover - compiled
    """The sequence numbers and components of the events up to ``node``, oldest first."""
    n = 0
    x = node
    while x >= 0:
        n += 1
        x = nodes[x, N_PRED]
    seqs = np.empty(n, dtype=np.int64)
    comps = np.empty(n, dtype=np.int64)
    x = node
    for i in range(n - 1, -1, -1):
        seqs[i] = events[nodes[x, N_EVENT], E_SEQ]
        comps[i] = nodes[x, N_COMP]
        x = nodes[x, N_PRED]
    return seqs, comps


@njit(cache=True, nogil=True)
def decompress(last, nodes, components):  # pragma: no cover - compiled
    """The stored events of the matches ending at the nodes ``last``, oldest first, one match
    after the other, and per match where each component's events start (and the match ends)."""
    total = 0
    for i in range(last.shape[0]):
        x = last[i]
        while x >= 0:
            total += 1
            x = nodes[x, N_PRED]
    out = np.empty(total, dtype=np.int64)
    bounds = np.empty((last.shape[0], components + 1), dtype=np.int64)
    end = total
    for i in range(last.shape[0] - 1, -1, -1):
        bounds[i, components] = end
        k = components - 1
        x = last[i]
        while x >= 0:
            end -= 1
            out[end] = nodes[x, N_EVENT]
            comp = nodes[x, N_COMP]
            while k > comp:
                bounds[i, k] = end + 1
                k -= 1
            x = nodes[x, N_PRED]
        while k >= 0:
            bounds[i, k] = end
            k -= 1
    return out, bounds
