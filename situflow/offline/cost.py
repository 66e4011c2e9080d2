"""The cost model of index selection (thesis §3.4.3, Eqs. 3.1 and 3.5–3.7).

``C_query(S') = f(C_PIO) + g(C_SIO)`` (Eq. 3.1) with ``f(x) = ω_PIO·x`` and
``g(x) = ω_SIO·x + ω_sort·(xB·log2(xB))``, x in 8 KiB pages and xB the index rows; we add
``ω_interval`` per replay interval, the fixed cost of opening one replay (a row-group request
and a fresh operator), which the thesis' single ChronicleDB process did not have.

C_PIO follows from the fraction α of the stream the replay intervals cover: candidates are
modelled as a Poisson process (assumptions A1, A2), their lengths as a hypoexponential
distribution over the arrival rates of the selected basic blocks (BBs), and the overlap of the
intervals by Cardenas' urn formula (Eq. 3.5). Two corrections of the research notes
(seeds-offline-index.md §3.4) are applied: ``extend(µc)`` of the base case is
``2w − µc − Δt⁻·(⊕bs before + ⊕bs after)`` (ERRATUM 4), with Δt⁻ = 0 because timestamps may
repeat (AT-19); (S1) and (S3) give w, (S2) µc for one selected BB; across BBs, (S2) covers
every candidate of one first occurrence (Algorithm 3.1 merges them), up to the *latest*
occurrence of the last BB within w, so its length is w less the mean Exp(λ_last) gap before
the window's end.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import Enum

import pyarrow.fs as pafs

from situflow.offline.pattern import PatternQuery

#: The page of the thesis' cost formulas (its ChronicleDB pages are 8 KiB).
PAGE_BYTES = 8192
#: Where ``situflow index calibrate`` keeps the weights, relative to the archive root.
CALIBRATION_FILE = "_index/_calibration.json"
#: Rates closer than this (relative) are spread apart before the closed form of the
#: hypoexponential CDF, whose coefficients divide by rate differences.
_MIN_RATE_GAP = 0.01


@dataclass(frozen=True)
class CostWeights:
    """ω of Eq. 3.1: per primary page read, per secondary-index page read, per
    ``n·log2(n)`` sorted index row, per replay interval. Calibrated weights are seconds
    (:mod:`situflow.offline.calibration`); the thesis' are relative and have no interval term."""

    pio: float
    sio: float
    sort: float
    per_interval: float = 0.0

    @classmethod
    def load(cls, fs: pafs.FileSystem, root: str) -> CostWeights:
        """The calibrated weights of the archive at ``root``, else the thesis' (§3.5.3)."""
        path = f"{root.rstrip('/')}/{CALIBRATION_FILE}"
        if fs.get_file_info(path).type != pafs.FileType.File:
            return THESIS_WEIGHTS
        with fs.open_input_stream(path) as stream:
            saved = json.loads(stream.read())
        return cls(**{name: float(saved[name]) for name in ("pio", "sio", "sort", "per_interval")})

    def save(self, fs: pafs.FileSystem, root: str) -> str:
        """Write the weights next to the secondary indexes, atomically (temp file + move)."""
        path = f"{root.rstrip('/')}/{CALIBRATION_FILE}"
        directory = path.rsplit("/", 1)[0]
        fs.create_dir(directory, recursive=True)
        temporary = f"{directory}/._calibration.json"
        with fs.open_output_stream(temporary) as stream:
            stream.write(json.dumps(asdict(self), indent=2).encode())
        fs.move(temporary, path)
        return path


#: The weights the thesis calibrated for ChronicleDB (§3.5.3): used until the archive is calibrated.
THESIS_WEIGHTS = CostWeights(pio=1.13, sio=2.53, sort=12.73)


def query_cost(weights: CostWeights, primary_bytes: float, index_rows: float, index_row_bytes: float,
               intervals: float) -> float:
    """Eq. 3.1 with x in pages: ``f(C_PIO) + g(C_SIO)`` plus the per-interval term."""
    sort = index_rows * math.log2(index_rows) if index_rows > 1 else 0.0
    return (weights.pio * primary_bytes / PAGE_BYTES
            + weights.sio * index_rows * index_row_bytes / PAGE_BYTES
            + weights.sort * sort
            + weights.per_interval * intervals)


# -- the distribution of candidate lengths --------------------------------------------------------

def _spread(rates: Sequence[float]) -> list[float]:
    """The rates in ascending order, each at least ``1 + _MIN_RATE_GAP`` times the previous.

    The closed form needs distinct rates; near-equal ones are pushed apart by at most a few
    percent, which changes the mean by O(gap²) and keeps the coefficients (products of
    ``λj/(λj − λi)``) small enough for double precision. All-equal rates take the Erlang form
    instead (:func:`_erlang`)."""
    spread: list[float] = []
    for rate in sorted(rates):
        spread.append(max(rate, spread[-1] * (1 + _MIN_RATE_GAP)) if spread else rate)
    return spread


def _erlang(shape: int, rate: float, x: float) -> tuple[float, float]:
    """``P(Z <= x)`` and ``E[Z; Z <= x]`` for Z ~ Erlang(shape, rate)."""
    def cdf(k: int) -> float:
        term, total = 1.0, 1.0
        for n in range(1, k):
            term *= rate * x / n
            total += term
        return 1.0 - math.exp(-rate * x) * total
    # E[Z; Z <= x] = (k/λ)·P(Erlang(k+1, λ) <= x)
    return cdf(shape), shape / rate * cdf(shape + 1)


def hypoexponential(rates: Sequence[float], x: float) -> tuple[float, float]:
    """``P(Z <= x)`` and ``E[Z; Z <= x]`` for ``Z = X1 + … + Xk``, ``Xi ~ Exp(rates[i])`` (§3.4.3,
    the hypoexponential distribution; closed forms for distinct rates, Erlang for equal ones).

    >>> p, partial = hypoexponential([0.01], 300)    # AT-18: Exp(0.01) below w = 300
    >>> round(p, 4), round(partial / p, 2)
    (0.9502, 84.28)
    >>> hypoexponential([0.01, 0.0], 300)    # a symbol that never occurs (an index found none)
    (0.0, 0.0)
    """
    if not rates:
        return (1.0, 0.0) if x >= 0 else (0.0, 0.0)
    if x <= 0 or min(rates) <= 0:
        return 0.0, 0.0
    if max(rates) == min(rates):
        return _erlang(len(rates), rates[0], x)
    distinct = _spread(rates)
    cdf = partial = 0.0
    for i, rate in enumerate(distinct):
        weight = math.prod(other / (other - rate) for j, other in enumerate(distinct) if j != i)
        tail = math.exp(-rate * x)
        cdf += weight * tail
        partial += weight * (1.0 - tail * (1.0 + rate * x)) / rate
    within = min(1.0, max(0.0, 1.0 - cdf))
    # E[Z; Z <= x] <= x·P(Z <= x): the bound holds where the alternating sums cancel badly
    return within, min(max(0.0, partial), x * within)


# -- Eqs. 3.5–3.7 ----------------------------------------------------------------------------------

class Case(Enum):
    """Which formula of Interval(c, w) applies (§3.4.2)."""

    BASE = "base"
    S1 = "S1"   # first symbol selected, last not: [c1.t, c1.t + w]
    S2 = "S2"   # first and last selected: [c1.t, ck.t]
    S3 = "S3"   # last symbol selected, first not: [ck.t − w, ck.t]


def interval_case(pattern: PatternQuery, selected: Sequence[int]) -> Case:
    first, last = min(selected) == 0, max(selected) == len(pattern.symbols) - 1
    if first:
        return Case.S2 if last else Case.S1
    return Case.S3 if last else Case.BASE


@dataclass(frozen=True)
class StreamStats:
    """What the estimator knows of (a part of) one archive partition: its rows and the ticks
    it covers (``e_N.t − e_1.t + 1``); Δt of assumption (A2) is ``span / rows``."""

    rows: float
    span: float

    @property
    def gap(self) -> float:
        return self.span / self.rows if self.rows else 1.0


@dataclass(frozen=True)
class Coverage:
    """The estimate of Algorithm 3.1's output for one configuration: ``intervals`` candidates
    (N_I, Eq. 3.6) of mean length ``length`` (µc, Eq. 3.7), each replayed over ``extend`` ticks,
    covering the fraction ``alpha`` of the stream (Eq. 3.5)."""

    intervals: float
    length: float
    extend: float
    alpha: float


def cardenas(intervals: float, length: float, span: float) -> float:
    """Eq. 3.5: the expected fraction of ``span`` covered by ``intervals`` intervals of
    ``length`` thrown uniformly (Cardenas' urn formula), at most ``intervals · length / span``.

    >>> round(cardenas(1000, 300, 1_000_000), 4)     # AT-18
    0.2592
    """
    if span <= 0 or intervals <= 0:
        return 0.0
    share = min(1.0, length / span)
    # the urn formula wants whole intervals; for an expected count below one (a short run of
    # blocks, a rare symbol) the union bound is the tighter estimate
    return min(intervals * share, 1.0 - (1.0 - share) ** intervals if share < 1 else 1.0)


def coverage(pattern: PatternQuery, selectivity: Mapping[int, float], stats: StreamStats,
             min_gap: float = 0.0, ordered: bool = True) -> Coverage:
    """Eqs. 3.5–3.7 for the symbols at the positions of ``selectivity`` (φ per selected symbol,
    the product of its selected conditions' selectivities).

    Selected symbols are grouped by the pattern's BBs: within a BB their distances are fixed
    (``gap`` per position under A2) and their selectivities multiply (Eq. 3.2); between BBs the
    next selected BB arrives after an Exp(φ_BB/Δt) gap, so the candidate length is a fixed part
    plus a hypoexponential one. ``min_gap`` is Δt⁻ (0 when timestamps repeat, AT-19).
    An empty selection covers everything. Patterns whose symbols match in any order
    (``ordered=False``: TPStream, COGRA) are replayed ±w around their rarest symbol's hits that
    have a hit of every other selected symbol within 2w (independent Poisson arrivals).

    >>> from situflow.offline.pattern import Symbol
    >>> a, b, c, d = Symbol("A"), Symbol("B", kleene=True), Symbol("C"), Symbol("D")
    >>> pq, stats = PatternQuery((a, b, c, d), 100), StreamStats(1_000_000, 1_000_000)
    >>> ac = coverage(pq, {0: 0.01, 2: 0.02}, stats)    # AT-13 {A, C}: S1
    >>> round(ac.intervals), round(ac.alpha, 3)
    (8647, 0.579)
    >>> cd = coverage(pq, {2: 0.02, 3: 0.03}, stats)    # AT-13 {C, D}: one BB, S3
    >>> round(cd.intervals), round(cd.alpha, 3)
    (600, 0.058)
    """
    window = float(pattern.window)
    if not selectivity:
        return Coverage(intervals=1.0, length=stats.span, extend=stats.span, alpha=1.0)
    gap = stats.gap
    if not ordered:
        # the order-free rule (situflow.offline.replay.candidate_intervals): ±w around the
        # hits of the rarest symbol, where ±w around a hit of every other symbol meets it, so
        # where every other symbol has a hit within 2w
        rarest = min(selectivity.values())
        others = [phi for p, phi in sorted(selectivity.items(), key=lambda item: item[1])][1:]
        intervals = stats.rows * rarest * math.prod(
            1.0 - math.exp(-phi * 4 * window / gap) for phi in others)
        extend = max(2 * window, 1.0)
        return Coverage(intervals=intervals, length=0.0, extend=extend,
                        alpha=cardenas(intervals, extend, stats.span))
    groups: list[list[int]] = []
    for block in pattern.basic_blocks():
        chosen = [position for position in block if position in selectivity]
        if chosen:
            groups.append(chosen)
    fixed = sum((group[-1] - group[0]) * gap for group in groups)
    rates = [math.prod(selectivity[p] for p in group) / gap for group in groups[1:]]
    within, partial = hypoexponential(rates, window - fixed) if fixed <= window else (0.0, 0.0)
    first = math.prod(selectivity[p] for p in groups[0])
    intervals = stats.rows * first * within
    length = fixed + (partial / within if within > 0 else 0.0)
    case = interval_case(pattern, sorted(selectivity))
    if case is Case.BASE:
        positions = sorted(selectivity)
        bs_before = sum(1 for s in pattern.symbols[:positions[0]] if not s.kleene)
        bs_after = sum(1 for s in pattern.symbols[positions[-1] + 1:] if not s.kleene)
        extend = 2 * window - length - min_gap * (bs_before + bs_after)
    elif case is Case.S2 and rates:
        # Algorithm 3.1 unites the candidates of one anchor: [c1.t, latest ck.t], and the
        # latest arrival of the last BB lies Exp(λ_last) before the window's end
        within_last, partial_last = hypoexponential(rates[-1:], window - fixed)
        extend = max(length, window - (partial_last / within_last if within_last > 0 else 0.0))
    elif case is Case.S2:
        extend = length
    else:
        extend = window
    # An interval of d ticks between integer bounds holds d + 1 ticks; the thesis counts d
    # (AT-18), and at least one tick is replayed.
    extend = max(extend, 1.0)
    return Coverage(intervals=intervals, length=length, extend=extend,
                    alpha=cardenas(intervals, extend, stats.span))


def merged_intervals(cover: Coverage, span: float) -> float:
    """How many replay intervals remain after merging: an interval starts a new merged one when
    no earlier interval reaches it (the urn model of Eq. 3.5 again)."""
    if cover.intervals <= 1 or span <= 0:
        return min(cover.intervals, 1.0)
    return max(1.0, cover.intervals * (1.0 - min(1.0, cover.extend / span)) ** (cover.intervals - 1))


# -- widening ---------------------------------------------------------------------------------------

def quiet_reach(mean: float, keys: int, window: float) -> tuple[float, float, float]:
    """TPStream's widening of one side of a core (:func:`situflow.offline.replay.widen`): the
    expected distance to the quiet event it widens to, the expected ticks the driver reads to
    find it, and in how many reads.

    A key's quiet events are taken as a Poisson process with mean gap ``mean``; a core of
    ``keys`` keys widens to the farthest of their nearest quiet events (the maximum of ``keys``
    Exp(1/mean) distances, mean ``mean·H_keys``). The driver first reads ``window`` ticks
    around the core, then spans that double, ``window·2^n`` ticks in ``n + 1`` reads, until
    the quiet event is inside.

    >>> distance, read, reads = quiet_reach(10.0, 1, 600.0)    # quiet events close by
    >>> round(distance, 6), round(read, 6), round(reads, 6)
    (10.0, 600.0, 1.0)
    >>> distance, read, reads = quiet_reach(300.0, 100, 600.0)  # 100 keys: H_100 = 5.19 means
    >>> round(distance), round(read), round(reads, 2)
    (1556, 2290, 2.88)
    """
    if mean <= 0 or keys < 1:
        return 0.0, float(window), 1.0
    distance = mean * sum(1.0 / k for k in range(1, keys + 1))
    window = max(1.0, float(window))

    def below(x: float) -> float:     # P(the farthest nearest quiet event is within x)
        return (-math.expm1(-x / mean)) ** keys

    reach, covered, reads = window, below(window), 1.0
    read = window * covered
    while covered < 1.0 - 1e-9 and reach < 1e18:
        further = below(2 * reach)
        reads += 1.0 - covered
        read += 2 * reach * (further - covered)
        reach, covered = 2 * reach, further
    return distance, read, reads
