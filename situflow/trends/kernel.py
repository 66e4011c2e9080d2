"""The COGRA runtime executor (§4–7) as one numba kernel over a batch of events.

Every aggregator of the paper is the same loop with a different rule for when the aggregates
of earlier partial trends stop being extendable (``mode``):

- ANY, type-grained (§4, Algorithm 1, Theorem 4.2): each position ``p`` keeps one aggregate
  ``pend[p]`` over all partial trends ending at a ``p`` event; it is never consumed;
- ANY, mixed-grained (§5, Algorithm 2, Theorem 5.2): positions read by an adjacent predicate
  keep one *node* per matched event (its aggregates and the predicate operands); the others
  stay type-grained;
- NEXT (Definition 2.6): a partial trend ending at ``(e, p)`` is extended only by the first
  later event adjacent to it, so a position's aggregate (or an event node) is *consumed* by
  the first event it is adjacent to;
- NEXT with Algorithm 3 (§6), used where :func:`~.granularity_selector.algorithm3_is_exact` proves it equal:
  any matched event replaces everything pending (the single last matched event ``e_l``);
- CONT (Definition 2.8, Algorithm 3 with its reset): every event of the sub-stream replaces
  everything pending, so only the previous event's aggregates survive.

A negation (Appendix C) splits the pending aggregate of a position whose transitions it
guards: when a negated event arrives, what is pending becomes *stale* and may still flow along
unguarded transitions (the Kleene loop of ``A+`` in ``SEQ(A+, NOT C, B)``) but not along the
guarded ones; kept event nodes carry the same flag.

The aggregates of an event ``e`` at position ``q`` follow Table 9: ``count = Σ pred counts
(+1 if q is a start position)``, ``count_E += count``, ``sum += attr · count``,
``min/max`` over ``attr`` where ``q`` is a target of the aggregate. An event's aggregates are
computed from the state before it is added, so it is never its own predecessor (Appendix C).

Windows (§7, SEMANTICS.md): window ``k`` is ``[k·slide, k·slide + size)``; every open window
has its own aggregates in slot ``k mod K``. Processing an event shares the adjacency work
(pattern, predicate and consumption decisions) across all windows that contain it. A window is
harvested, for every partition at once, when the first event at or after its end arrives, or
when the operator advances past it. Trends are never enumerated; memory is O(partitions · K ·
positions) plus, for event-grained positions, one node per kept event.
"""

from __future__ import annotations

import numpy as np

from situflow.jit import njit

# Executor modes (chosen by situflow.trends.granularity_selector from the semantics, Table 5).
ANY, NEXT, NEXT_ALG3, CONT = 0, 1, 2, 3
# Roles of an aggregate value slot (Table 9); slot 0 is always the trend count.
COUNT, COUNT_E, SUM, MIN, MAX = 0, 1, 2, 3, 4
# Comparison operators of adjacent predicates (Theorem 5.2 allows all six).
LT, LE, GT, GE, EQ, NE = range(6)

# Scalars of the state vector `scal`: the next window to close, the highest window opened,
# the free-node list, and the records written to the output buffer.
K_CLOSE, K_HI_MAX, FREE_HEAD, N_FREE, N_OUT = 0, 1, 2, 3, 4
N_SCALARS = 5
NO_WINDOW = -(1 << 62)

# How an aggregate value combines: added (counts, sums), smallest (MIN) or largest (MAX).
ADD, SMALLEST, LARGEST = 0, 1, 2
# Rescaling threshold and step: leaves 2**123 of headroom for sums of large attributes.
_BIG = 2.0 ** 900
_SHIFT = 600


@njit(cache=True, nogil=True)
def _combine(dst: np.ndarray, src: np.ndarray, kind: np.ndarray) -> None:
    for v in range(dst.shape[0]):
        if kind[v] == ADD:
            dst[v] += src[v]
        elif kind[v] == SMALLEST:
            if src[v] < dst[v]:
                dst[v] = src[v]
        elif src[v] > dst[v]:
            dst[v] = src[v]


@njit(cache=True, nogil=True)
def _compare(a: float, op: int, b: float) -> bool:
    # Missing operands (NaN) make every comparison false, `!=` included (situflow.lang.compile).
    if a != a or b != b:
        return False
    if op == LT:
        return a < b
    if op == LE:
        return a <= b
    if op == GT:
        return a > b
    if op == GE:
        return a >= b
    if op == EQ:
        return a == b
    return a != b


@njit(cache=True, nogil=True)
def _free_node(node: int, node_next: np.ndarray, scal: np.ndarray) -> None:
    node_next[node] = scal[FREE_HEAD]
    scal[FREE_HEAD] = node
    scal[N_FREE] += 1


@njit(cache=True, nogil=True)
def _clear_partition(part, pend, stale, head, node_next, ident, scal):
    """Drop every pending aggregate of ``part`` (Algorithm 3's ``e_l ← null``)."""
    for p in range(pend.shape[1]):
        for s in range(pend.shape[2]):
            pend[part, p, s, :] = ident
            stale[part, p, s, :] = ident
        node = head[part, p]
        while node >= 0:
            following = node_next[node]
            _free_node(node, node_next, scal)
            node = following
        head[part, p] = -1


@njit(cache=True, nogil=True)
def _negate(i, part, neg, guard_of, pend, stale, head, node_next, node_stale, ident, kind):
    """Event ``i`` matches negations: partial trends ending before it become stale for the
    transitions those negations guard."""
    for p in range(pend.shape[1]):
        g = guard_of[p]
        if g < 0 or not neg[i, g]:
            continue
        for s in range(pend.shape[2]):
            _combine(stale[part, p, s], pend[part, p, s], kind)
            pend[part, p, s, :] = ident
        node = head[part, p]
        while node >= 0:
            node_stale[node] = True
            node = node_next[node]


@njit(cache=True, nogil=True)
def _rescale(part, s, pend, stale, final, scale, head, node_next, node_vals, kind):
    """Divide the additive aggregates of one partition's window by 2**_SHIFT.

    Skip-till-any-match counts grow like 2**n (Table 4), past float64's range after ~1000
    events. Counts, COUNT(E) and sums of a window all scale with the trends, so they share one
    binary exponent per (partition, window): ratios such as AVG stay exact and counts are
    reported as ``value * 2**scale``.
    """
    factor = 2.0 ** -_SHIFT
    for v in range(kind.shape[0]):
        if kind[v] != ADD:
            continue
        final[part, s, v] *= factor
        for p in range(pend.shape[1]):
            pend[part, p, s, v] *= factor
            stale[part, p, s, v] *= factor
            node = head[part, p]
            while node >= 0:
                node_vals[node, s, v] *= factor
                node = node_next[node]
    scale[part, s] += _SHIFT


@njit(cache=True, nogil=True)
def _harvest(k, K, n_parts, pend, stale, final, seen, slot_win, scale, head, node_next,
             node_vals, ident, scal, out_win, out_part, out_vals, out_scale):
    """Emit window ``k`` of every partition that saw an event in it, then free its slot."""
    s = k % K
    for part in range(n_parts):
        if slot_win[part, s] != k:
            continue
        if seen[part, s]:
            o = scal[N_OUT]
            out_win[o] = k
            out_part[o] = part
            out_vals[o, :] = final[part, s, :]
            out_scale[o] = scale[part, s]
            scal[N_OUT] = o + 1
        final[part, s, :] = ident
        scale[part, s] = 0
        seen[part, s] = False
        slot_win[part, s] = NO_WINDOW
        for p in range(pend.shape[1]):
            pend[part, p, s, :] = ident
            stale[part, p, s, :] = ident
            # Nodes whose every window is closed can never contribute again.
            prev = -1
            node = head[part, p]
            while node >= 0:
                following = node_next[node]
                node_vals[node, s, :] = ident
                alive = False
                for t in range(K):
                    if node_vals[node, t, 0] > 0:
                        alive = True
                if alive:
                    prev = node
                else:
                    if prev < 0:
                        head[part, p] = following
                    else:
                        node_next[prev] = following
                    _free_node(node, node_next, scal)
                node = following


@njit(cache=True, nogil=True)
def aggregate_events(
    # events, in stream order
    parts, ts, elig, in_stream, neg, xs, prev_vals, next_vals,
    # the plan
    mode, size, slide, follow, is_start, is_end, grained, atom_lo, atom_hi, atom_op,
    guarded, guard_of, slot_kind, slot_role, slot_target, slot_attr, ident,
    # state
    n_parts, pend, stale, final, seen, slot_win, scale, head, node_vals, node_prev, node_next,
    node_stale, scal, out_win, out_part, out_vals, out_scale,
    # where to start, and up to which time windows close after the events
    i0, close_to,
):
    """Process events ``i0..`` and close windows ending at or before ``close_to``.

    Returns ``(i, done)``: ``i`` is the first unprocessed event; ``done`` is false when the
    node pool or the output buffer ran short, so the caller grows them and calls again.
    """
    n, P = elig.shape
    K, V = final.shape[1], final.shape[2]
    inc = np.empty((P, K, V))
    own = np.empty((P, K, V))
    has_own = np.zeros((P, K), dtype=np.bool_)
    fired_pos = np.zeros(P, dtype=np.bool_)
    fired_stale = np.zeros(P, dtype=np.bool_)
    for i in range(i0, n):
        t = ts[i]
        # Close every window that ended at or before this event, for all partitions.
        while scal[K_CLOSE] <= scal[K_HI_MAX] and scal[K_CLOSE] * slide + size <= t:
            if out_win.shape[0] - scal[N_OUT] < n_parts:
                return i, False
            _harvest(scal[K_CLOSE], K, n_parts, pend, stale, final, seen, slot_win, scale, head,
                     node_next, node_vals, ident, scal, out_win, out_part, out_vals, out_scale)
            scal[K_CLOSE] += 1
        if not in_stream[i]:
            continue
        if scal[N_FREE] < P:
            return i, False
        part = parts[i]
        k_hi = t // slide if t >= 0 else -1
        # A late event (the stream is ordered upstream, by K-slack) never reopens a window
        # that was already emitted.
        k_lo = max(0, (t - size) // slide + 1, scal[K_CLOSE])
        scal[K_CLOSE] = k_lo
        if k_hi > scal[K_HI_MAX]:
            scal[K_HI_MAX] = k_hi
        n_w = k_hi - k_lo + 1
        any_elig = False
        for q in range(P):
            if elig[i, q]:
                any_elig = True
        for w in range(max(n_w, 0)):
            k = k_lo + w
            s = k % K
            if slot_win[part, s] != k:
                slot_win[part, s] = k
            if any_elig:
                seen[part, s] = True
        if n_w <= 0 or not any_elig:
            if mode == CONT:  # an irrelevant event breaks contiguity (Definition 2.8)
                _clear_partition(part, pend, stale, head, node_next, ident, scal)
            else:
                _negate(i, part, neg, guard_of, pend, stale, head, node_next, node_stale, ident,
                        slot_kind)
            continue

        # 1. Aggregates flowing into each eligible position from adjacent partial trends.
        for q in range(P):
            if elig[i, q]:
                for w in range(n_w):
                    inc[q, w, :] = ident
        fired_any = False
        for p in range(P):
            fired_pos[p] = False
            fired_stale[p] = False
            if grained[p]:
                continue
            # Only positions a negation guards ever hold stale aggregates.
            negated = guard_of[p] >= 0
            live = False
            for w in range(n_w):
                s = (k_lo + w) % K
                if pend[part, p, s, 0] > 0 or (negated and stale[part, p, s, 0] > 0):
                    live = True
            if not live:
                continue
            for q in range(P):
                if follow[p, q] and elig[i, q]:
                    fired_pos[p] = True
                    # Partial trends with a negated event after them cannot cross a guarded
                    # transition (Appendix C); they stay pending for the other successors.
                    crosses = negated and not guarded[p, q]
                    if crosses:
                        fired_stale[p] = True
                    for w in range(n_w):
                        s = (k_lo + w) % K
                        _combine(inc[q, w], pend[part, p, s], slot_kind)
                        if crosses:
                            _combine(inc[q, w], stale[part, p, s], slot_kind)
            if fired_pos[p]:
                fired_any = True
        for p in range(P):
            if not grained[p]:
                continue
            prev = -1
            node = head[part, p]
            while node >= 0:
                following = node_next[node]
                fired = False
                for q in range(P):
                    if not (follow[p, q] and elig[i, q]) or (node_stale[node] and guarded[p, q]):
                        continue
                    ok = True
                    for a in range(atom_lo[p, q], atom_hi[p, q]):
                        if not _compare(node_prev[node, a], atom_op[a], next_vals[i, a]):
                            ok = False
                            break
                    if ok:
                        fired = True
                        for w in range(n_w):
                            _combine(inc[q, w], node_vals[node, (k_lo + w) % K], slot_kind)
                if fired:
                    fired_any = True
                if fired and mode == NEXT:  # consumed: its next adjacent event has come
                    if prev < 0:
                        head[part, p] = following
                    else:
                        node_next[prev] = following
                    _free_node(node, node_next, scal)
                else:
                    prev = node
                node = following

        # 2. This event's own aggregates per eligible position and window (Table 9).
        matched = fired_any
        for q in range(P):
            if not elig[i, q]:
                continue
            if is_start[q]:
                matched = True
            for w in range(n_w):
                # A new trend counts 1, in the window's scale (see _rescale).
                unit = 2.0 ** -scale[part, (k_lo + w) % K]
                c = inc[q, w, 0] + (unit if is_start[q] else 0.0)
                has_own[q, w] = c > 0
                if c <= 0:
                    continue
                row = own[q, w]
                row[0] = c
                for v in range(1, V):
                    role = slot_role[v]
                    target = slot_target[v, q]
                    x = xs[i, slot_attr[v]] if slot_attr[v] >= 0 else 0.0
                    if role == COUNT_E:
                        row[v] = inc[q, w, v] + (c if target else 0.0)
                    elif role == SUM:
                        row[v] = inc[q, w, v] + (x * c if target and x == x else 0.0)
                    elif role == MIN:
                        row[v] = min(inc[q, w, v], x) if target and x == x else inc[q, w, v]
                    else:
                        row[v] = max(inc[q, w, v], x) if target and x == x else inc[q, w, v]

        # 3. Consume what this event ends, then make its partial trends pending.
        if mode == NEXT:
            for p in range(P):
                for s in range(K):
                    if fired_pos[p]:
                        pend[part, p, s, :] = ident
                    if fired_stale[p]:
                        stale[part, p, s, :] = ident
        elif (mode == NEXT_ALG3 and matched) or mode == CONT:
            _clear_partition(part, pend, stale, head, node_next, ident, scal)
        _negate(i, part, neg, guard_of, pend, stale, head, node_next, node_stale, ident,
                slot_kind)
        for q in range(P):
            if not elig[i, q]:
                continue
            node = -1
            for w in range(n_w):
                if not has_own[q, w]:
                    continue
                s = (k_lo + w) % K
                if is_end[q]:
                    _combine(final[part, s], own[q, w], slot_kind)
                if not grained[q]:
                    _combine(pend[part, q, s], own[q, w], slot_kind)
                    continue
                if node < 0:
                    node = scal[FREE_HEAD]
                    scal[FREE_HEAD] = node_next[node]
                    scal[N_FREE] -= 1
                    for t2 in range(K):
                        node_vals[node, t2, :] = ident
                    node_prev[node, :] = prev_vals[i, :]
                    node_stale[node] = False
                    node_next[node] = head[part, q]
                    head[part, q] = node
                node_vals[node, s, :] = own[q, w]
        for w in range(n_w):
            for q in range(P):
                if elig[i, q] and has_own[q, w] and own[q, w, 0] > _BIG:
                    _rescale(part, (k_lo + w) % K, pend, stale, final, scale, head, node_next,
                             node_vals, slot_kind)
                    break

    # Windows that the caller's watermark closes.
    while scal[K_CLOSE] <= scal[K_HI_MAX] and scal[K_CLOSE] * slide + size <= close_to:
        if out_win.shape[0] - scal[N_OUT] < n_parts:
            return n, False
        _harvest(scal[K_CLOSE], K, n_parts, pend, stale, final, seen, slot_win, scale, head,
                 node_next, node_vals, ident, scal, out_win, out_part, out_vals, out_scale)
        scal[K_CLOSE] += 1
    return n, True
