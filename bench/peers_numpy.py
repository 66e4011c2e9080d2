"""The floor of the peer benchmark: both queries of issue 16 (item 7) in vectorized numpy.

Each function takes the workload's columns (``bench/workloads.py``) and returns the result rows
in the normal form every engine of ``bench/peers.py`` is compared in:

* stock, ``A B+ C`` per symbol under partition contiguity with ``CONSUME`` (SEMANTICS.md,
  SASE+): ``(symbol, A's ts, C's ts, A's price, the last B's price, the number of B's)``;
* car, the situations of ``speed > 70`` lasting 4–30 s (SEMANTICS.md, TPStream, thesis Def 5.1):
  ``(car_id, ts, te, readings, average speed, maximum speed)``, where ``te`` is the time of the
  car's first reading at or below 70 after the situation's readings.

These are specifications written with array operations, not general engines: they lean on
what the two queries imply (see :func:`stock_matches`), which is why they make a floor.
"""

from __future__ import annotations

import numpy as np

Columns = dict[str, np.ndarray]
StockRow = tuple[str, int, int, int, int, int]
CarRow = tuple[int, int, int, int, float, float]

#: ``WITHIN 50 seconds`` in the stock stream's milliseconds; windows are inclusive.
STOCK_WINDOW = 50_000
#: ``BETWEEN 4s AND 30s``, inclusive, in the car stream's seconds.
CAR_MIN, CAR_MAX = 4, 30
#: Averages are compared rounded: engines add the same values in different orders.
AVG_DIGITS = 6


def stock_matches(c: Columns) -> list[StockRow]:
    """The stock query's matches, in the order of their C events.

    Under partition contiguity a run from an A event takes every following event of its symbol
    while the price rises (B), and the first event that does not rise is its only candidate C:
    "rises" and "at most the last B's price" exclude each other, so every A has at most one
    match, ending at the first non-rising event after it. ``CONSUME`` then keeps one match per
    completing event and drops every run of the symbol (runs that begin at that event too). Two
    candidates overlap only when they end at the same event (an A inside another's rise: the
    latest-starting one wins, as in the operator) or when one starts at the other's C event; the
    latter form chains, in which every other candidate survives.
    """
    order = np.argsort(_sortable(c["symbol"]), kind="stable")
    symbol, ts = c["symbol"][order], c["ts"][order]
    price, volume = c["price"][order], c["volume"][order]
    n = len(order)
    same = np.zeros(n, dtype=bool)
    same[1:] = symbol[1:] == symbol[:-1]
    up = np.zeros(n, dtype=bool)
    up[1:] = price[1:] > price[:-1]
    up &= same
    # For every position, the first position at or after it that does not rise (n: none).
    stops = np.where(up, n, np.arange(n))
    stop = np.minimum.accumulate(stops[::-1])[::-1]
    a = np.flatnonzero(price[:-1] % 100 == 0)
    a = a[up[a + 1]]
    end = stop[a + 1]
    a, end = a[end < n], end[end < n]
    ok = same[end] & (volume[end] < 150) & (ts[end] - ts[a] <= STOCK_WINDOW)
    a, end = a[ok], end[ok]
    # One match per C event, the latest-starting one (a is ascending, so the last per end).
    last_of_end = np.ones(len(end), dtype=bool)
    last_of_end[:-1] = end[:-1] != end[1:]
    a, end = a[last_of_end], end[last_of_end]
    keep = _every_other_in_chains(a, end)
    a, end = a[keep], end[keep]
    by_end = np.argsort(order[end], kind="stable")
    a, end = a[by_end], end[by_end]
    return list(zip(symbol[a].tolist(), ts[a].tolist(), ts[end].tolist(), price[a].tolist(),
                    price[end - 1].tolist(), (end - a - 1).tolist(), strict=True))


def _sortable(keys: np.ndarray) -> np.ndarray:
    """Keys numpy sorts in C: text as fixed-width strings (an object array of str is sorted by
    Python comparisons, 5–10× slower)."""
    return keys.astype(str) if keys.dtype == object else keys


def _every_other_in_chains(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Which candidates survive ``CONSUME``: in a chain of candidates each starting at the
    previous one's end, the first survives and consumes the second's start, so the third
    survives, and so on. Candidates are sorted by end (positions of one symbol are contiguous)."""
    linked = np.zeros(len(start), dtype=bool)
    linked[1:] = start[1:] == end[:-1]
    chain_start = np.maximum.accumulate(np.where(linked, 0, np.arange(len(start))))
    return (np.arange(len(start)) - chain_start) % 2 == 0


def car_situations(c: Columns) -> list[CarRow]:
    """The car query's situations, in the order of their end events."""
    order = np.argsort(c["car_id"], kind="stable")
    car, ts, speed = c["car_id"][order], c["ts"][order], c["speed"][order]
    n = len(order)
    hot = speed > 70
    was_hot = np.zeros(n, dtype=bool)
    was_hot[1:] = hot[:-1] & (car[1:] == car[:-1])
    starts = np.flatnonzero(hot & ~was_hot)
    ends = np.flatnonzero(~hot & was_hot)
    # A situation still running at its car's last reading has no end yet (not emitted).
    k = np.searchsorted(ends, starts)
    closed = k < len(ends)
    starts, k = starts[closed], k[closed]
    closed = car[ends[k]] == car[starts]
    starts, stops = starts[closed], ends[k[closed]]
    duration = ts[stops] - ts[starts]
    ok = (duration >= CAR_MIN) & (duration <= CAR_MAX)
    starts, stops = starts[ok], stops[ok]
    if not len(starts):
        return []
    bounds = np.ravel(np.column_stack([starts, stops]))
    total = np.add.reduceat(speed, bounds)[::2]
    top = np.maximum.reduceat(speed, bounds)[::2]
    count = stops - starts
    by_end = np.argsort(order[stops], kind="stable")
    return list(zip(car[starts][by_end].tolist(), ts[starts][by_end].tolist(),
                    ts[stops][by_end].tolist(), count[by_end].tolist(),
                    np.round(total / count, AVG_DIGITS)[by_end].tolist(),
                    top[by_end].tolist(), strict=True))
