"""The compiled per-event loop of situation derivation (thesis Alg. 5.1, §5.4.1, §5.5.3).

One pass over a batch in stream order, with the state of every (partition slot, definition)
in arrays, emits *situation records* only where something happens:

- ``START``:  a situation becomes visible while still running: at its first event, or for an
  ``AT LEAST d`` situation at the first event with ``t - ts >= d`` (deferred start, §5.5.3);
- ``FINISH``: a visible situation ends (the first event that fails the condition, Def 5.1);
- ``APPEAR``: an invisible situation ends and qualifies: an upper-bounded situation is known to
  satisfy its duration constraint only at its end, so matching that involves it waits for it.

Each record says whether matching at its event is *feasible*: every definition has a visible
situation that started within the window. Otherwise no configuration can satisfy the window and
the matcher only files the record (most records, on real streams).
"""

from __future__ import annotations

from situflow.jit import njit

START, FINISH, APPEAR = 0, 1, 2


@njit(cache=True, nogil=True)
def derive(
    codes, ts, cond, vals, agg_def, dmin, dmax, window,
    open_, visible, start_ts, first_pos, last_pos, count, last_visible,
    a_sum, a_min, a_max, a_cnt,
    r_pos, r_def, r_kind, r_start, r_feasible, r_first, r_last, r_count,
    r_sum, r_min, r_max, r_cnt,
):  # pragma: no cover - compiled
    """Run Alg. 5.1 over one batch; returns the number of records written."""
    n = ts.shape[0]
    ndef = cond.shape[0]
    nagg = agg_def.shape[0]
    m = 0
    for i in range(n):
        slot = codes[i]
        t = ts[i]
        first_record = m
        for d in range(ndef):
            if cond[d, i]:
                if not open_[slot, d]:
                    open_[slot, d] = True
                    visible[slot, d] = False
                    start_ts[slot, d] = t
                    first_pos[slot, d] = i
                    count[slot, d] = 0
                    reset_aggregates(agg_def, a_sum, a_min, a_max, a_cnt, slot, d)
                count[slot, d] += 1
                last_pos[slot, d] = i
                for k in range(nagg):
                    if agg_def[k] == d:
                        v = vals[k, i]
                        if v == v:
                            a_sum[slot, k] += v
                            if a_cnt[slot, k] == 0:
                                a_min[slot, k] = v
                                a_max[slot, k] = v
                            else:
                                a_min[slot, k] = min(a_min[slot, k], v)
                                a_max[slot, k] = max(a_max[slot, k], v)
                            a_cnt[slot, k] += 1
                # Unbounded above: visible once the lower bound (if any) is reached.
                if not visible[slot, d] and dmax[d] != dmax[d]:
                    lo = dmin[d]
                    if lo != lo or t - start_ts[slot, d] >= lo:
                        visible[slot, d] = True
                        last_visible[slot, d] = start_ts[slot, d]
                        r_pos[m] = i
                        r_def[m] = d
                        r_kind[m] = START
                        r_start[m] = start_ts[slot, d]
                        r_first[m] = first_pos[slot, d]
                        m += 1
            elif open_[slot, d]:
                open_[slot, d] = False
                duration = t - start_ts[slot, d]
                lo, hi = dmin[d], dmax[d]
                ok = duration > 0 and not (lo == lo and duration < lo) and not (
                    hi == hi and duration > hi
                )
                if ok or visible[slot, d]:
                    kind = FINISH if visible[slot, d] else APPEAR
                    if kind == APPEAR:
                        last_visible[slot, d] = start_ts[slot, d]
                    r_pos[m] = i
                    r_def[m] = d
                    r_kind[m] = kind
                    r_start[m] = start_ts[slot, d]
                    r_first[m] = first_pos[slot, d]
                    r_last[m] = last_pos[slot, d]
                    r_count[m] = count[slot, d]
                    record_aggregates(a_sum, a_min, a_max, a_cnt, r_sum, r_min, r_max, r_cnt,
                                      slot, m)
                    m += 1
                visible[slot, d] = False
        if m > first_record:
            feasible = True
            for d in range(ndef):
                if last_visible[slot, d] < t - window:
                    feasible = False
            for r in range(first_record, m):
                r_feasible[r] = feasible
    return m


# The two loops below run only where a situation opens or ends. Kept out of the per-event loop
# of derive, they leave its registers to the hot path: the kernel runs about a quarter faster.

@njit(cache=True, nogil=True)
def reset_aggregates(agg_def, a_sum, a_min, a_max, a_cnt, slot,
                     d):  # pragma: no cover - compiled
    """Empty the aggregates of definition ``d`` at ``slot`` for a new situation."""
    for k in range(agg_def.shape[0]):
        if agg_def[k] == d:
            # min/max are valid once a_cnt > 0; no infinities in the state, so it survives
            # every JSON encoder.
            a_sum[slot, k] = 0.0
            a_min[slot, k] = 0.0
            a_max[slot, k] = 0.0
            a_cnt[slot, k] = 0


@njit(cache=True, nogil=True)
def record_aggregates(a_sum, a_min, a_max, a_cnt, r_sum, r_min, r_max, r_cnt, slot,
                      m):  # pragma: no cover - compiled
    """Copy the aggregates at ``slot`` into record ``m``."""
    for k in range(a_sum.shape[1]):
        r_sum[k, m] = a_sum[slot, k]
        r_min[k, m] = a_min[slot, k]
        r_max[k, m] = a_max[slot, k]
        r_cnt[k, m] = a_cnt[slot, k]
