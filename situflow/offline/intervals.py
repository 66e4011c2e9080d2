"""Replay intervals from index hits (thesis §3.4.2, Algorithm 3.1, research §3.3 [OURS] notes).

A *candidate* picks one hit per selected symbol S'1..S'k (positions i1 < ... < ik) such that

* (C1) each hit satisfies its symbol's conditions (the index lookup guarantees it);
* (C2) ``ck.t - c1.t <= w`` (inclusive, not Algorithm 3.1's ``< w``: AT-04);
* (C3) two selected symbols with no KS between them lie ``ij - i(j-1)`` apart in seq, so the
  selected symbols of one basic block form *occurrences* with fixed distances; across a KS
  only the order is fixed (and each BS between them needs one event of its own).

Each candidate gives the base interval ``[ck.t - w + Δt⁻·⊕bs(ik+1, n), c1.t + w -
Δt⁻·⊕bs(1, i1-1)]``, intersected with the special case that applies: (S1) ``[c1.t, c1.t + w]``
when S'1 is the pattern's first symbol, (S2) ``[c1.t, ck.t]`` when S'1 is first and S'k last,
(S3) ``[ck.t - w, ck.t]`` when S'k is last. Δt⁻, the least gap between two events, is 0 by
default: timestamps may repeat (AT-19), and only a stream known to have strictly increasing
times may pass 1.

Not every candidate is enumerated: per anchor only the extreme one matters (its interval
contains those of the others), so the sweep is linear in the hits: the earliest chain per
first occurrence for the base case and (S1), the latest last occurrence per first occurrence
for (S2), the latest first occurrence per last occurrence for (S3).

With PARTITION BY (``pattern.keys``), seq is the per-key dense ``key_seq``, candidates are
formed per key and the intervals carry their key (research §4.4). All keys are swept at once,
each moved to a lane of its own in time and seq, so many keys cost no Python loop per key.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from situflow.offline.pattern import PatternQuery

#: Index hits of one symbol: a table (``ts``, ``seq``/``key_seq``, ``key``, as the secondary
#: index returns them) or the arrays ``(ts, seq)`` / ``(ts, seq, key)``.
Hits: TypeAlias = "pa.Table | Sequence[Any]"


@dataclass(frozen=True)
class Interval:
    """The closed tick range ``[lo, hi]`` to replay, for the events of ``key`` (None: all)."""

    lo: int
    hi: int
    key: Any = None


@dataclass(frozen=True)
class _Occurrences:
    """The occurrences of one group of selected symbols without a KS between them, sorted by
    seq: where its first and its last selected symbol matched."""

    first_seq: np.ndarray
    last_seq: np.ndarray
    first_ts: np.ndarray
    last_ts: np.ndarray


def replay_intervals(pattern: PatternQuery, selected: Sequence[int], hits: Mapping[int, Hits], *,
                     min_gap: int = 0) -> list[Interval]:
    """Algorithm 3.1: the merged replay intervals of the candidates formed by the hits of the
    ``selected`` symbol positions (0-based; BSs only), for one archive partition.

    Every match of ``pattern`` whose events are all in the data lies, with all its events, in
    one returned interval; the intervals are disjoint per key and sorted (by key, then time).
    ``min_gap`` is Δt⁻ (0 unless timestamps strictly increase).
    """
    positions = sorted(set(selected))
    if not positions:
        raise ValueError("no symbol selected: without an index the whole range is replayed")
    for position in positions:
        if not 0 <= position < len(pattern.symbols) or pattern.symbols[position].kleene:
            raise ValueError(f"position {position} is not a basic symbol of the pattern")
        if position not in hits:
            raise ValueError(f"no index hits given for the selected position {position}")
    columns = {position: _columns(pattern, hits[position], position) for position in positions}
    keys, codes = _key_codes(columns)
    if not keys or not all(len(ts) for ts, _, _ in columns.values()):
        return []
    # All keys are swept at once: each key's hits are moved to a lane of their own, far enough
    # from the next lane in time and seq that no candidate, interval or merge spans two lanes.
    origin = min(int(ts.min()) for ts, _, _ in columns.values())
    span = max(int(ts.max()) for ts, _, _ in columns.values()) - origin
    time_lane = span + 2 * pattern.window + 2
    seq_lane = max(int(seq.max()) for _, seq, _ in columns.values()) + len(pattern.symbols) + 2
    lanes_per_pass = max(1, 2**62 // max(time_lane, seq_lane))
    intervals: list[Interval] = []
    for first_code in range(0, len(keys), lanes_per_pass):
        lanes: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for position, (ts, seq, _) in columns.items():
            lane = codes[position] - first_code
            mine = (lane >= 0) & (lane < lanes_per_pass)
            lane_seq, first = np.unique(lane[mine] * seq_lane + seq[mine], return_index=True)
            lane_ts = (lane[mine] * time_lane + ts[mine] - origin)[first]
            if np.any(np.diff(lane_ts) < 0):
                back = int(np.flatnonzero(np.diff(lane_ts) < 0)[0])
                raise ValueError(f"the hits of position {position} go back in time at seq "
                                 f"{int(lane_seq[back + 1] % seq_lane)}: the archive's (ts, seq) order "
                                 "is broken (check the archive)")
            lanes[position] = (lane_ts, lane_seq)
        lo, hi = _merge(*_candidate_intervals(pattern, positions, lanes, min_gap))
        lane = (lo + pattern.window) // time_lane  # every interval lies in its lane ± w
        intervals += [Interval(a, b, keys[first_code + k]) for a, b, k in zip(
            (lo - lane * time_lane + origin).tolist(), (hi - lane * time_lane + origin).tolist(),
            lane.tolist(), strict=True)]
    return intervals


def merge_intervals(intervals: Iterable[Interval]) -> list[Interval]:
    """Per key, the union of ``intervals`` as disjoint intervals (overlapping or adjoining
    ones joined: ticks are integers), sorted by key, then time (Algorithm 3.1, line 13).

    >>> merge_intervals([Interval(30, 40), Interval(0, 10), Interval(5, 20)])
    [Interval(lo=0, hi=20, key=None), Interval(lo=30, hi=40, key=None)]
    """
    by_key: dict[Any, list[Interval]] = {}
    for interval in intervals:
        by_key.setdefault(interval.key, []).append(interval)
    merged: list[Interval] = []
    for key in sorted(by_key, key=_key_order):
        lo, hi = _merge(np.array([i.lo for i in by_key[key]], dtype=np.int64),
                        np.array([i.hi for i in by_key[key]], dtype=np.int64))
        merged += [Interval(a, b, key) for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]
    return merged


def _merge(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if not len(lo):
        return lo, hi
    order = np.lexsort((hi, lo))
    lo, hi = lo[order], hi[order]
    reach = np.maximum.accumulate(hi)
    starts = np.flatnonzero(np.r_[True, lo[1:] > reach[:-1] + 1])
    ends = np.r_[starts[1:] - 1, len(lo) - 1].astype(np.int64)
    return lo[starts], reach[ends]


def _key_order(key: Any) -> tuple[bool, str]:
    return key is not None, key if isinstance(key, str) else json.dumps(key)


# --- input ---------------------------------------------------------------------------------


def _columns(pattern: PatternQuery, hits: Hits,
             position: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(ts, seq, key) of one symbol's hits; seq is ``key_seq`` when the pattern is keyed."""
    if isinstance(hits, pa.Table):
        names = hits.column_names
        if "partition" in names and hits.num_rows and pc.count_distinct(hits["partition"]).as_py() > 1:
            raise ValueError(f"the hits of position {position} span several archive partitions: "
                             "seq is per partition, so compute the intervals per partition")
        seq_column = "key_seq" if pattern.keys and "key_seq" in names else "seq"
        ts, seq = hits["ts"].to_numpy(), hits[seq_column].to_numpy()
        key = np.array(hits["key"].to_pylist(), dtype=object) if "key" in names else None
    else:
        arrays: Sequence[Any] = hits
        ts, seq = np.asarray(arrays[0]), np.asarray(arrays[1])
        key = np.asarray(arrays[2], dtype=object) if len(arrays) > 2 else None
    if pattern.keys and key is None:
        raise ValueError(f"the pattern is partitioned by {', '.join(pattern.keys)} but the hits "
                         f"of position {position} carry no key")
    return ts.astype(np.int64), seq.astype(np.int64), key if pattern.keys else None


def _key_codes(columns: Mapping[int, tuple[np.ndarray, np.ndarray, np.ndarray | None]],
               ) -> tuple[list[Any], dict[int, np.ndarray]]:
    """The keys with hits of every selected symbol (no other key has a candidate), sorted, and
    per position the code of each hit's key: its index in that list, -1 for the other keys."""
    if all(key is None for _, _, key in columns.values()):
        return [None], {position: np.zeros(len(seq), dtype=np.int64)
                        for position, (_, seq, _) in columns.items()}
    key_lists = {position: key.tolist() for position, (_, _, key) in columns.items() if key is not None}
    keys = sorted(set.intersection(*(set(k) for k in key_lists.values())), key=_key_order)
    code_of = {key: code for code, key in enumerate(keys)}
    return keys, {position: np.fromiter((code_of.get(key, -1) for key in k), dtype=np.int64, count=len(k))
                  for position, k in key_lists.items()}


# --- Algorithm 3.1 -------------------------------------------------------------------------


def _groups(pattern: PatternQuery, positions: list[int]) -> list[list[int]]:
    """The selected positions split where a KS lies between two of them (the selected BBs)."""
    groups = [[positions[0]]]
    for previous, position in itertools.pairwise(positions):
        if any(s.kleene for s in pattern.symbols[previous + 1:position]):
            groups.append([position])
        else:
            groups[-1].append(position)
    return groups


def _basic_symbols(pattern: PatternQuery, start: int, stop: int) -> int:
    """⊕bs: the number of BSs among the positions ``start .. stop - 1``."""
    return sum(not s.kleene for s in pattern.symbols[max(start, 0):stop])


def _occurrences(group: list[int], hits: Mapping[int, tuple[np.ndarray, np.ndarray]]) -> _Occurrences:
    """(C3) inside a group: the anchor's hits whose seq distances to the others' hits are fixed."""
    anchor_ts, anchor_seq = hits[group[0]]
    keep = np.ones(len(anchor_seq), dtype=bool)
    for position in group[1:]:
        keep &= _contains(hits[position][1], anchor_seq + (position - group[0]))
    last_ts, last_seq = hits[group[-1]]
    first_seq = anchor_seq[keep]
    end = first_seq + (group[-1] - group[0])
    return _Occurrences(first_seq, end, anchor_ts[keep], last_ts[np.searchsorted(last_seq, end)])


def _contains(sorted_values: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per value, whether it is in ``sorted_values`` (a binary search: both are large)."""
    if not len(sorted_values):
        return np.zeros(len(values), dtype=bool)
    index = np.minimum(np.searchsorted(sorted_values, values), len(sorted_values) - 1)
    return sorted_values[index] == values


def _candidate_intervals(pattern: PatternQuery, positions: list[int],
                         hits: Mapping[int, tuple[np.ndarray, np.ndarray]],
                         min_gap: int) -> tuple[np.ndarray, np.ndarray]:
    groups = _groups(pattern, positions)
    occurrences = [_occurrences(group, hits) for group in groups]
    # Least seq distance from one group's last symbol to the next group's first: one event
    # for each BS between them, one more for the next group's own.
    gaps = [1 + _basic_symbols(pattern, left[-1] + 1, right[0])
            for left, right in itertools.pairwise(groups)]
    w, n = pattern.window, len(pattern.symbols)
    starts_pattern, ends_pattern = positions[0] == 0, positions[-1] == n - 1
    before = min_gap * _basic_symbols(pattern, 0, positions[0])
    after = min_gap * _basic_symbols(pattern, positions[-1] + 1, n)
    if ends_pattern and not starts_pattern:
        alive, c1, ck = _latest_start(occurrences, gaps)
        lo, hi = ck - w + after, np.minimum(c1 + w - before, ck)            # base ∩ (S3)
    elif ends_pattern:
        alive, c1, ck = _latest_end(occurrences, gaps, w)
        lo, hi = c1, ck                                                       # base ∩ (S2)
    else:
        alive, c1, ck = _earliest_end(occurrences, gaps)
        lo, hi = ck - w + after, c1 + w - before                              # base
        if starts_pattern:
            lo = np.maximum(lo, c1)                                           # base ∩ (S1)
    valid = alive & (ck - c1 <= w) & (lo <= hi)
    return lo[valid], hi[valid]


Chains = tuple[np.ndarray, np.ndarray, np.ndarray]
"""Per anchor: whether a chain through all groups exists, and its c1.t and ck.t."""


def _earliest_end(occurrences: list[_Occurrences], gaps: list[int]) -> Chains:
    """Per first occurrence, the end of its earliest chain through the groups (base, S1)."""
    first = occurrences[0]
    alive, end_ts, _ = _chain_forward(first.last_ts, first.last_seq, occurrences[1:], gaps)
    return alive, first.first_ts, end_ts


def _chain_forward(end_ts: np.ndarray, end_seq: np.ndarray, later: list[_Occurrences],
                   gaps: list[int]) -> Chains:
    """Extend every chain by the earliest possible occurrence of each later group, in order:
    (alive, end ts, end seq)."""
    alive = np.ones(len(end_seq), dtype=bool)
    for group, gap in zip(later, gaps, strict=True):
        if not len(group.first_seq):
            return np.zeros(len(end_seq), dtype=bool), end_ts, end_seq
        index = np.searchsorted(group.first_seq, end_seq + gap, side="left")
        alive &= index < len(group.first_seq)
        index = np.minimum(index, len(group.first_seq) - 1)
        end_ts, end_seq = group.last_ts[index], group.last_seq[index]
    return alive, end_ts, end_seq


def _latest_end(occurrences: list[_Occurrences], gaps: list[int], window: int) -> Chains:
    """Per first occurrence, the latest end of a chain within the window (S2)."""
    first, last = occurrences[0], occurrences[-1]
    if len(occurrences) == 1:
        return np.ones(len(first.first_seq), dtype=bool), first.first_ts, first.last_ts
    # The last group's occurrence must follow the earliest chain through the middle groups.
    alive, _, middle_seq = _chain_forward(first.last_ts, first.last_seq, occurrences[1:-1], gaps[:-1])
    if not len(last.last_seq):
        return np.zeros(len(first.first_seq), dtype=bool), first.first_ts, first.first_ts
    latest = np.searchsorted(last.last_ts, first.first_ts + window, side="right") - 1
    earliest = np.searchsorted(last.first_seq, middle_seq + gaps[-1], side="left")
    alive &= (latest >= 0) & (earliest <= latest)
    return alive, first.first_ts, last.last_ts[np.maximum(latest, 0)]


def _latest_start(occurrences: list[_Occurrences], gaps: list[int]) -> Chains:
    """Per last occurrence, the start of its latest chain, built backwards (S3)."""
    last = occurrences[-1]
    alive = np.ones(len(last.first_seq), dtype=bool)
    start_ts, start_seq = last.first_ts, last.first_seq
    for group, gap in zip(reversed(occurrences[:-1]), reversed(gaps), strict=True):
        if not len(group.last_seq):
            return np.zeros(len(last.first_seq), dtype=bool), start_ts, last.last_ts
        index = np.searchsorted(group.last_seq, start_seq - gap, side="right") - 1
        alive &= index >= 0
        index = np.maximum(index, 0)
        start_ts, start_seq = group.first_ts[index], group.first_seq[index]
    return alive, start_ts, last.last_ts
