"""The sliding aggregator: slices' partial aggregates combined into windows with two stacks
(Tangwongsan et al.), O(1) amortized merges per window (the online baseline's role, §3.3.1)."""

from __future__ import annotations

import numpy as np

from situflow.jit import njit
from situflow.offline.windows.partials import Measures, Partials
from situflow.offline.windows.slices import Slicing
from situflow.trends.kernel import ADD, SMALLEST


@njit(cache=True, nogil=True)
def _combine_into(dst: np.ndarray, src: np.ndarray, kinds: np.ndarray) -> None:
    for v in range(dst.shape[0]):
        if kinds[v] == ADD:
            dst[v] += src[v]
        elif kinds[v] == SMALLEST:
            dst[v] = min(dst[v], src[v])
        else:
            dst[v] = max(dst[v], src[v])


@njit(cache=True, nogil=True)
def _two_stacks(values: np.ndarray, kinds: np.ndarray, ident: np.ndarray, first: np.ndarray,
                last: np.ndarray, out: np.ndarray) -> None:
    """``out[w]`` = the combination of ``values[first[w]:last[w]]``; both bounds never move
    back. The queue ``[head, tail)`` is a front stack ``[head, mid)`` of suffix aggregates and
    a back stack ``[mid, tail)`` kept as one running aggregate; popping from an empty front
    flips the back stack over, so each value is merged O(1) times (two-stacks, Tangwongsan et
    al.; the thesis' online baseline keeps the same partials in a 2–3–4 tree)."""
    m, width = values.shape
    suffix = np.empty((m, width))
    back = ident.copy()
    head = mid = tail = 0
    for w in range(first.shape[0]):
        while tail < last[w]:
            _combine_into(back, values[tail], kinds)
            tail += 1
        while head < first[w]:
            if head == mid:
                suffix[tail - 1] = values[tail - 1]
                for i in range(tail - 2, head - 1, -1):
                    suffix[i] = values[i]
                    _combine_into(suffix[i], suffix[i + 1], kinds)
                back[:] = ident
                mid = tail
            head += 1
        out[w] = back
        if head < mid:
            out[w] = suffix[head]
            _combine_into(out[w], back, kinds)


def sliding_windows(slicing: Slicing, partials: Partials, measures: Measures,
                    last_window: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The windows ``k >= 0`` (up to ``last_window``) with at least one eligible event and
    their aggregates, in window order, from the slices' partial aggregates."""
    nonempty = partials.values[:, 0] > 0
    slices, values = partials.slices[nonempty], partials.values[nonempty]
    no_windows = np.zeros(0, dtype=np.int64), np.zeros((0, len(measures.roles)))
    if len(slices) == 0:
        return no_windows
    lo, hi = slicing.windows_of(slices)
    lo = np.maximum(lo, 0)
    if last_window is not None:
        hi = np.minimum(hi, last_window)
    # The union of the slices' window ranges, ascending: each range starts after the ones
    # before it end (slices are ascending, so are both bounds).
    reach = np.maximum.accumulate(hi)
    start = np.maximum(lo, np.concatenate([[lo[0]], reach[:-1] + 1]))
    lengths = np.maximum(hi - start + 1, 0)
    total = int(lengths.sum())
    if total == 0:
        return no_windows
    offsets = np.cumsum(lengths) - lengths
    windows = np.repeat(start - offsets, lengths) + np.arange(total)
    first_slice, last_slice = slicing.window_slices(windows)
    first = np.searchsorted(slices, first_slice, side="left")
    last = np.searchsorted(slices, last_slice, side="right")
    out = np.empty((total, len(measures.roles)))
    _two_stacks(values, measures.kinds, measures.ident, first.astype(np.int64),
                last.astype(np.int64), out)
    return windows, out
