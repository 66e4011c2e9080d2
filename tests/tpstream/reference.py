"""Brute-force references for TPStream, written from the definitions, not the algorithms.

- :func:`derive`: thesis Def 5.2 by enumerating every subsequence ``E[i..j]``.
- :func:`earliest_matches`: every configuration of derived situations (Def 5.6) reported at the
  first event at which it is certain: checked by trying *every* order of the unknown ends of
  running situations (numerically, all later than now), with the window of Def 5.7 where a
  running situation ends now (SEMANTICS.md).
- :func:`final_matches`: Def 5.6/5.7 over finished situations only.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from situflow.tpstream.match.allen import relation


@dataclass(frozen=True)
class Sit:
    defn: int
    ts: int
    te: int | None  # None: still running at the end of the stream
    start: int  # index of its first event
    end: int | None  # index of the first event that fails (None: running)


def derive(ts: list[int], cond: list[bool], dmin: float | None, dmax: float | None,
           defn: int = 0) -> list[Sit]:
    """Def 5.2: maximal runs E[i..j] with eta on (e_{j+1}.t - e_i.t); open runs kept as running."""
    n = len(ts)
    out = []
    for i in range(n):
        for j in range(i, n):
            if not all(cond[i:j + 1]) or (i > 0 and cond[i - 1]):
                continue
            if j + 1 < n and cond[j + 1]:
                continue
            if j + 1 == n:
                out.append(Sit(defn, ts[i], None, i, None))
                continue
            d = ts[j + 1] - ts[i]
            if d > 0 and (dmin is None or d >= dmin) and (dmax is None or d <= dmax):
                out.append(Sit(defn, ts[i], ts[j + 1], i, j + 1))
    return out


def visible_at(s: Sit, k: int, ts: list[int], dmin: float | None, dmax: float | None) -> bool:
    """Whether the matcher may use ``s`` while processing event ``k``."""
    if k < s.start:
        return False
    if s.end is not None and s.end <= k:
        return True
    if dmax is not None:
        return False  # an upper bound is known to hold only at the end
    return dmin is None or ts[k] - s.ts >= dmin


def certain(config: list[Sit], k: int, ts: list[int], cons, window: float) -> bool:
    now = ts[k]
    running = [i for i, s in enumerate(config) if s.end is None or s.end > k]
    for ends in itertools.product(range(1, len(running) + 2), repeat=len(running)):
        te = [s.te for s in config]
        for i, e in zip(running, ends, strict=True):
            te[i] = now + e
        for i, j in itertools.combinations(range(len(config)), 2):
            rels = cons[i][j]
            if rels is not None and relation(config[i].ts, te[i], config[j].ts, te[j]) not in rels:
                return False
    return True


def earliest_matches(ts, conds, bounds, cons, window):
    """{(tuple of (ts, te-or-None at detection)), emitted_at} for every reported configuration."""
    per_def = [derive(ts, c, lo, hi, d) for d, (c, (lo, hi)) in enumerate(zip(conds, bounds, strict=True))]
    found = set()
    for config in itertools.product(*per_def):
        for k in range(len(ts)):
            if not all(visible_at(s, k, ts, *bounds[s.defn]) for s in config):
                continue
            if certain(list(config), k, ts, cons, window):
                now = ts[k]
                span = max(now if s.end is None or s.end > k else s.te for s in config) - \
                    min(s.ts for s in config)
                if span <= window:
                    found.add((tuple((s.ts, s.te if s.end is not None and s.end <= k else None)
                                     for s in config), now))
                break
    return found


def final_matches(ts, conds, bounds, cons, window):
    """Def 5.6/5.7 over finished situations: {tuple of (ts, te)}."""
    per_def = [[s for s in derive(ts, c, lo, hi, d) if s.te is not None]
               for d, (c, (lo, hi)) in enumerate(zip(conds, bounds, strict=True))]
    out = set()
    for config in itertools.product(*per_def):
        ok = all(cons[i][j] is None or relation(config[i].ts, config[i].te, config[j].ts,
                                                  config[j].te) in cons[i][j]
                 for i, j in itertools.combinations(range(len(config)), 2))
        if ok and max(s.te for s in config) - min(s.ts for s in config) <= window:
            out.add(tuple((s.ts, s.te) for s in config))
    return out
