"""The CPU halves of the cooperative pattern matcher (thesis §4.3.5): the check-and-propagate
pass in numba (the single- and multi-threaded implementations), and the CPU's own tasks, the
start of new partial matches and the compaction of Fig. 4.7.

A pass takes the partial matches (PMs) ``[lo, hi)`` of one NFA^b state through the events of
a micro-batch, each from the event after the one that created it (``P_NEXT``), in event order:

1. *check*: the event belongs to another partition (skip it), cannot change any run under a
   contiguity strategy (drop), is past the PM's window (drop), or takes the state's transitions:
   at a state ``p[1]`` or a single component's state the *begin* edge (forward), at a Kleene
   state ``p[i]`` the *take* edge (a self transition, with the guards on ``v[k]``) and the
   *proceed* edge with the peek at the next component's begin (forward), as the numba NFA^b
   loop evaluates them;
2. *propagate* per Table 4.1 (:data:`situflow.nfa.cooperative.matcher.TABLE_4_1`): each transition
   taken writes a buffer node for the event and either completes a match (into ``F``; a
   trailing Kleene plus matches at every valid extension) or puts the PM with the event added
   into the target state: under skip till any match a copy (the clone), otherwise the PM itself
   (a move to the end of the next state's array, or an add in place for a self transition);
   when both edges hold, the self transition works on a copy and the forward one takes the PM.
   Without a transition the PM stays, or is dropped under contiguity.

A dropped PM is only marked (``P_NEXT = DROPPED``) and its index written to the drop list; the
CPU compacts the arrays after the micro-batch. Outputs go to regions the caller hands over
(new PMs of the state itself and of the next one, nodes, matches, drops); when one may not hold
what an event produces the PM stops before the event, keeps its place in ``P_NEXT`` and the
pass reports overflow: the caller grows the arrays and runs the pass again, which continues
where each PM stopped. PMs a pass adds to its own state are taken through the rest of the
micro-batch by a further pass.

The predicates are the SASE+ compiler's postfix programs, evaluated by the numba kernel's own
interpreter (:mod:`situflow.nfa.kernel.loop`), so both loops agree to the last bit.
"""

from __future__ import annotations

import numpy as np

from situflow.jit import njit
from situflow.nfa.kernel import loop

# A PM: its last buffer node, the sequence number and time of its first event, its partition
# slot, and the micro-batch position of the next event it checks (DROPPED once it is dropped).
P_NODE, P_FIRST, P_START, P_PART, P_NEXT = range(5)
PM_FIELDS = 5
DROPPED = -1
# Counters of a pass: PMs added to the state itself (self transitions) and to the state its
# forward transition leads to, nodes, matches, and drops in the state itself and in the next.
O_SELF, O_FWD, O_NODES, O_DONE, O_DROPS, O_FWD_DROPS = range(6)
COUNTERS = 6


@njit(cache=True, nogil=True, inline="always")
def arrival(kk, components):  # pragma: no cover - compiled
    """The state a PM reaches by selecting an event for component ``kk`` (-1: it is a match)."""
    if components[kk, loop.C_KLEENE]:
        return components[kk, loop.C_ITER_STATE]
    if components[kk, loop.C_LAST]:
        return -1
    return components[kk + 1, loop.C_BEGIN_STATE]


@njit(cache=True, nogil=True)
def check_and_propagate(lo, hi, m, ts, seq, part, index, stored, rows, begin, take, relevant,
                        s, window, clones, keeps_on_none, states, components, tests, guards,
                        code, constants, slots, pms, vals, self_pms, self_vals, fwd_pms,
                        fwd_vals, out_nodes, node_base, out_done, drops,
                        counters, stack):  # pragma: no cover - compiled
    """The pass over the PMs ``[lo, hi)`` of state ``s`` (see the module docstring); returns
    whether an output region ran full. ``pms``, ``vals``: the state's arrays; ``self_*``: where
    its own array continues (clones that stay in ``s``); ``fwd_*``: the end of the array of the
    state its forward transition leads to."""
    k = states[s, loop.S_COMP]
    begins = states[s, loop.S_BEGINS]
    nxt = states[s, loop.S_NEXT]
    sel_lo, sel_hi = states[s, loop.S_SEL_LO], states[s, loop.S_SEL_HI]
    proc_lo, proc_hi = states[s, loop.S_PROC_LO], states[s, loop.S_PROC_HI]
    # Which output regions the state's transitions may write to.
    forward = (arrival(k, components) >= 0 if begins
               else nxt >= 0 and arrival(nxt, components) >= 0)
    overflow = False
    for i in range(lo, hi):
        j = pms[i, P_NEXT]
        if j == DROPPED:
            continue
        mine = pms[i, P_PART]
        dropped = False
        while j < m:
            if part[j] != mine:
                j += 1
                continue
            if not relevant[j] or ts[j] - pms[i, P_START] > window:
                dropped = True  # contiguity broken, or the window exceeded
                break
            # check: the transitions' conditions on the PM's V and the event
            length = 1
            proceeds = False
            if begins:
                selects = begin[k, j] and (sel_lo == sel_hi or loop._holds(
                    sel_lo, sel_hi, tests, code, constants, vals, i, rows, j, stack))
            else:
                selects = take[k, j] and (sel_lo == sel_hi or loop._holds(
                    sel_lo, sel_hi, tests, code, constants, vals, i, rows, j, stack))
                length = int(vals[i, states[s, loop.S_LEN]]) + 1
                if selects:
                    for g in range(states[s, loop.S_GUARD_LO], states[s, loop.S_GUARD_HI]):
                        if guards[g, 0] == length and loop._evaluate(
                                tests[guards[g, 1], 0], tests[guards[g, 1], 1], code,
                                constants, vals, i, rows, j, stack) == 0:
                            selects = False
                            break
                proceeds = nxt >= 0 and begin[nxt, j] and (proc_lo == proc_hi or loop._holds(
                    proc_lo, proc_hi, tests, code, constants, vals, i, rows, j, stack))
            stays = clones if selects else keeps_on_none
            if not selects and not proceeds:
                if not stays:
                    dropped = True
                    break
                j += 1
                continue
            # propagate (Table 4.1): room for the worst case first, or stop before the event
            if (counters[O_NODES] + 2 > out_nodes.shape[0]
                    or counters[O_DONE] + 2 > out_done.shape[0]
                    or (not begins and counters[O_SELF] + 1 > self_pms.shape[0])
                    or (forward and counters[O_FWD] + 1 > fwd_pms.shape[0])):
                overflow = True
                break
            n_moves = int(selects) + int(proceeds)
            kept = False
            for mv in range(n_moves):
                if mv == 0 and selects:
                    kk, n = k, length
                else:
                    kk, n = nxt, 1
                node = counters[O_NODES]
                counters[O_NODES] += 1
                out_nodes[node, loop.N_EVENT] = stored[j]
                out_nodes[node, loop.N_COMP] = kk
                out_nodes[node, loop.N_PRED] = pms[i, P_NODE]
                target = arrival(kk, components)
                if target < 0:
                    d = counters[O_DONE]
                    counters[O_DONE] += 1
                    out_done[d, loop.D_EVENT] = index[j]
                    out_done[d, loop.D_NODE] = node_base + node
                    out_done[d, loop.D_FIRST] = pms[i, P_FIRST]
                    continue
                if not stays and mv == n_moves - 1 and target == s:
                    # add e_new to the PM in place
                    loop._update(vals, i, rows, j, kk, n, slots)
                    pms[i, P_NODE] = node_base + node
                    out, out_vals, r = pms, vals, i
                    kept = True
                else:
                    # clone, or move: the copy at the end of the target state's array
                    if target == s:
                        out, out_vals, r = self_pms, self_vals, counters[O_SELF]
                        counters[O_SELF] += 1
                    else:
                        out, out_vals, r = fwd_pms, fwd_vals, counters[O_FWD]
                        counters[O_FWD] += 1
                    out[r, P_NODE] = node_base + node
                    out[r, P_FIRST] = pms[i, P_FIRST]
                    out[r, P_START] = pms[i, P_START]
                    out[r, P_PART] = mine
                    out[r, P_NEXT] = j + 1
                    for x in range(vals.shape[1]):
                        out_vals[r, x] = vals[i, x]
                    loop._update(out_vals, r, rows, j, kk, n, slots)
                if components[kk, loop.C_KLEENE] and components[kk, loop.C_LAST] and (
                        components[kk, loop.C_PROC_LO] == components[kk, loop.C_PROC_HI]
                        or loop._holds(components[kk, loop.C_PROC_LO],
                                       components[kk, loop.C_PROC_HI], tests, code, constants,
                                       out_vals, r, rows, j, stack)):
                    # a trailing Kleene plus: every valid extension is its own match
                    d = counters[O_DONE]
                    counters[O_DONE] += 1
                    out_done[d, loop.D_EVENT] = index[j]
                    out_done[d, loop.D_NODE] = node_base + node
                    out_done[d, loop.D_FIRST] = pms[i, P_FIRST]
            if not stays and not kept:
                dropped = True  # moved on, or completed
                break
            j += 1
        if overflow:
            pms[i, P_NEXT] = j
            break
        if dropped:
            pms[i, P_NEXT] = DROPPED
            drops[counters[O_DROPS]] = i
            counters[O_DROPS] += 1
        else:
            pms[i, P_NEXT] = m
    return overflow


@njit(cache=True, nogil=True)
def begin_runs(m, ts, seq, part, index, stored, rows, begin, relevant, components, tests,
               code, constants, slots, initial, out_pms, out_vals, out_nodes, node_base,
               out_done, counters, stack):  # pragma: no cover - compiled
    """The start state: a PM for every event that satisfies the first component's begin
    condition, at the end of the array of the state that component leads to (or a match). The
    caller leaves room for ``m`` PMs and nodes and ``2 m`` matches."""
    lo, hi = components[0, loop.C_BEGIN_LO], components[0, loop.C_BEGIN_HI]
    target = arrival(0, components)
    for j in range(m):
        if part[j] < 0 or not relevant[j] or not begin[0, j] or not (
                lo == hi or loop._holds(lo, hi, tests, code, constants, initial, 0, rows, j,
                                        stack)):
            continue
        node = counters[O_NODES]
        counters[O_NODES] += 1
        out_nodes[node, loop.N_EVENT] = stored[j]
        out_nodes[node, loop.N_COMP] = 0
        out_nodes[node, loop.N_PRED] = loop.NO_NODE
        if target < 0:
            d = counters[O_DONE]
            counters[O_DONE] += 1
            out_done[d, loop.D_EVENT] = index[j]
            out_done[d, loop.D_NODE] = node_base + node
            out_done[d, loop.D_FIRST] = seq[j]
            continue
        r = counters[O_FWD]
        counters[O_FWD] += 1
        out_pms[r, P_NODE] = node_base + node
        out_pms[r, P_FIRST] = seq[j]
        out_pms[r, P_START] = ts[j]
        out_pms[r, P_PART] = part[j]
        out_pms[r, P_NEXT] = j + 1
        for x in range(initial.shape[1]):
            out_vals[r, x] = initial[0, x]
        loop._update(out_vals, r, rows, j, 0, 1, slots)
        if components[0, loop.C_LAST] and (
                components[0, loop.C_PROC_LO] == components[0, loop.C_PROC_HI]
                or loop._holds(components[0, loop.C_PROC_LO], components[0, loop.C_PROC_HI],
                               tests, code, constants, out_vals, r, rows, j, stack)):
            d = counters[O_DONE]
            counters[O_DONE] += 1
            out_done[d, loop.D_EVENT] = index[j]
            out_done[d, loop.D_NODE] = node_base + node
            out_done[d, loop.D_FIRST] = seq[j]


@njit(cache=True, nogil=True)
def compact(pms, vals, count, drops):  # pragma: no cover - compiled
    """Fig. 4.7: remove the dropped PMs ``drops`` (in descending order of position) from the
    dense array of ``count`` PMs by moving the last PM into each hole; returns the new count.

    Descending order guarantees that the last PM is never one still to be removed."""
    for d in drops:
        count -= 1
        if d != count:
            for f in range(pms.shape[1]):
                pms[d, f] = pms[count, f]
            for x in range(vals.shape[1]):
                vals[d, x] = vals[count, x]
    return count


@njit(cache=True, nogil=True)
def expire(pms, count, now, window, drops):  # pragma: no cover - compiled
    """Write to ``drops`` the PMs whose window has closed at ``now`` (§5.3), in descending order
    of position; returns how many."""
    n = 0
    for i in range(count - 1, -1, -1):
        if now - pms[i, P_START] > window:
            drops[n] = i
            n += 1
    return n


def pass_regions(lo: int, hi: int, threads: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` cut into at most ``threads`` contiguous pieces of near-equal size."""
    count = max(1, min(threads, hi - lo))
    bounds = np.linspace(lo, hi, count + 1).astype(np.int64).tolist()
    return [(bounds[t], bounds[t + 1]) for t in range(count)]
