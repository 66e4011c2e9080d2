"""The offline planner: from an offline query and an archive to the replay intervals and the row
groups to read (thesis §3.4; research notes §4.2). It runs on the Spark driver.

1. *Candidates*: every condition of a basic symbol (BS) whose attribute has a secondary index,
   with its selectivity φ from the index's statistics (:meth:`SecondaryIndex.estimate`).
2. *Coarse pattern map* per archive partition (:mod:`.cpm`): the blocks a match may touch and
   the local φ and Δt of the cost model (Optimal*).
3. *Selection* (``indexes="auto"``): Algorithm 3.2 over the candidates with the estimator of
   :mod:`.cost` (bytes of the query's columns in the row groups the intervals are expected to
   touch, index rows, intervals), weighted by the archive's calibrated :class:`CostWeights`.
   The bytes include the widening of step 4, estimated from the lightweight index (the blocks
   a widened interval meets) and the stream's rate: a COGRA interval's windows, a SASE+
   negation's window and the probe for the next event, TPStream's quiet events
   (:func:`~situflow.offline.cost.quiet_reach`) and the driver's reads that find them. The
   winner is compared with a plain full replay of the range; when no index and no CPM
   pruning is estimated to pay, the plan *is* the full replay (so it is never slower than it
   by more than the estimate's error).
4. *Intervals*: the chosen indexes are looked up, conditions of one symbol intersected by seq,
   and the hits turned into core intervals per partition (and key) by Algorithm 3.1 (order-free
   patterns by their own rule, :func:`situflow.offline.replay.candidate_intervals`), clipped to
   ``[lo, hi]`` and to the CPM's regions, then widened to what the query's results depend on
   (:func:`situflow.offline.replay.widen`). An index that does not cover a partition's newest
   segments yet (built before they were archived) leaves their span, from one window before
   its first uncovered event, to a full replay.
5. *Blocks*: the row groups whose time span meets an interval.

``ReplayPlan.estimate`` is the cost model's (rows, bytes, the driver's share) for the chosen
plan, with the selectivities its lookups found (the selection compared the configurations by
the indexes' estimates, which ``--explain`` lists), so ``--explain`` can set the model against
what the replay really read (the thesis' Err_PIO) apart from the histograms' error;
``ReplayPlan.planned`` counts the blocks the plan names.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from situflow.archive.blocks import Block
from situflow.archive.format import ARCHIVE_SEQ
from situflow.archive.location import Archive
from situflow.archive.ranges import Condition
from situflow.archive.secondary import SecondaryIndex
from situflow.errors import SituflowError
from situflow.kslack.positions import SEQ_FIELD
from situflow.lang.sase import SaseQuery
from situflow.offline.cost import (
    THESIS_WEIGHTS,
    CostWeights,
    Coverage,
    StreamStats,
    cardenas,
    coverage,
    merged_intervals,
    query_cost,
    quiet_reach,
)
from situflow.offline.cpm import CoarsePatternMap, coarse_pattern_map
from situflow.offline.intervals import Interval, merge_intervals
from situflow.offline.pattern import PatternQuery
from situflow.offline.queries import OfflineQuery
from situflow.offline.replay import candidate_intervals, widen
from situflow.offline.selection import Config, Costs, IndexCandidate, select_indexes
from situflow.offline.source import interval_key_text, row_keys

IndexChoice = Literal["auto", "none", "all"] | Sequence[str]
#: How many intervals of a partition ``explain`` lists before it only counts them.
_SHOWN_INTERVALS = 5
#: How many estimated configurations ``explain`` lists (the cheapest).
_SHOWN_CONFIGURATIONS = 8


class PlanError(SituflowError):
    """A plan that cannot be made as asked (an index that does not exist, a bad range)."""


class Estimate(NamedTuple):
    """Rows and bytes read; ``driver`` of the bytes are read by the driver to widen intervals."""

    rows: int
    bytes: int
    driver: int = 0


class _Widening(NamedTuple):
    """Ticks :func:`widen` adds to a core interval (before it, after it): ``replay`` to the
    range replayed, ``driver`` to the span the driver reads to find that range (None: it reads
    nothing), and ``probes``, further blocks the driver reads per merged interval."""

    replay: tuple[float, float]
    driver: tuple[float, float] | None = None
    probes: float = 0.0


@dataclass(frozen=True)
class Configuration:
    """One configuration the planner estimated: its indexes (``symbol.attribute``), the rows
    and bytes of the primary reads (``driver`` of the bytes to widen the intervals), the index
    rows, the replay intervals and Eq. 3.1's cost."""

    indexes: tuple[str, ...]
    rows: float
    bytes: float
    index_rows: float
    intervals: float
    cost: float
    cpm: bool
    driver: float = 0.0


@dataclass
class ReplayPlan:
    """What to replay: per archive partition the ``intervals`` (replay ranges, each by a fresh
    operator) and the ``blocks`` (row groups) they need; the ``chosen`` indexes, the cost
    model's ``estimate`` of the rows and bytes read, and why (:meth:`explain`)."""

    topic: str
    intervals: dict[int, list[Interval]]
    blocks: dict[int, list[Block]]
    chosen: list[str]
    estimate: Estimate
    reason: str
    total: Estimate
    weights: CostWeights
    configurations: list[Configuration] = field(default_factory=list)
    block_bytes: dict[tuple[int, str, int], int] = field(default_factory=dict, repr=False)

    @property
    def planned(self) -> Estimate:
        """The rows and bytes of the blocks the plan names."""
        return Estimate(sum(b.count for bs in self.blocks.values() for b in bs),
                        sum(self.block_bytes.get((p, b.segment, b.row_group), 0)
                            for p, bs in self.blocks.items() for b in bs))

    def explain(self) -> str:
        """The plan for people: strategy and reason, the estimated configurations, the
        estimate against the total, and the first intervals of each partition."""
        calibrated = "thesis' (uncalibrated)" if self.weights == THESIS_WEIGHTS else "calibrated"
        w = self.weights
        lines = [f"plan for {self.topic}: {self.reason}",
                 f"indexes: {', '.join(self.chosen) if self.chosen else 'none'}",
                 f"cost weights ({calibrated}): primary page {w.pio:.3g}, index page {w.sio:.3g}, "
                 f"sort {w.sort:.3g}, interval {w.per_interval:.3g}"]
        if self.configurations:
            lines.append("configurations (estimated, cheapest first):")
            for c in sorted(self.configurations, key=lambda c: c.cost)[:_SHOWN_CONFIGURATIONS]:
                name = ", ".join(c.indexes) or ("coarse pattern map only" if c.cpm else "full replay")
                lines.append(f"  {name}: cost {c.cost:.6g}, {c.rows:.0f} rows, {c.bytes:.0f} bytes, "
                             f"{c.index_rows:.0f} index rows, {c.intervals:.0f} intervals")
            if len(self.configurations) > _SHOWN_CONFIGURATIONS:
                lines.append(f"  ... {len(self.configurations) - _SHOWN_CONFIGURATIONS} more")
        planned = self.planned
        blocks = sum(len(bs) for bs in self.blocks.values())
        driver = f", {self.estimate.driver} of them on the driver" if self.estimate.driver else ""
        found = ", with the selectivities of the index hits" if self.chosen else ""
        lines.append(f"estimated: {self.estimate.rows} rows, {self.estimate.bytes} bytes{driver} "
                     f"(of {self.total.rows} rows, {self.total.bytes} bytes in range{found})")
        lines.append(f"to read: {blocks} row groups, {planned.rows} rows, {planned.bytes} bytes")
        count = sum(len(i) for i in self.intervals.values())
        lines.append(f"intervals: {count} in {len(self.intervals)} partition(s)")
        for partition, intervals in sorted(self.intervals.items()):
            shown = ", ".join(f"[{i.lo}, {i.hi}]" + ("" if i.key is None else f" key {i.key}")
                              for i in intervals[:_SHOWN_INTERVALS])
            hidden = len(intervals) - _SHOWN_INTERVALS
            more = f" (+{hidden} more)" if hidden > 0 else ""
            lines.append(f"  partition {partition}: {shown}{more}")
        return "\n".join(lines)


def plan(offline: OfflineQuery, archive: Archive, topic: str, *, lo: int | None = None,
         hi: int | None = None, indexes: IndexChoice = "auto",
         weights: CostWeights | None = None) -> ReplayPlan:
    """The replay plan of ``offline`` over ``topic`` for events with ``lo <= time <= hi``
    (None: unbounded) with the indexes ``indexes`` asks for: ``"auto"`` (cost-based, Alg. 3.2
    with the CPM), ``"none"`` (full replay), ``"all"`` or a list of attribute names."""
    if lo is not None and hi is not None and lo > hi:
        raise PlanError(f"empty time range: --from {lo} is after --to {hi}")
    weights = weights or CostWeights.load(archive.fs, archive.root)
    blocks = {p: [b for b in archive.blocks(topic, p)
                  if (lo is None or b.ts_max >= lo) and (hi is None or b.ts_min <= hi)]
              for p in archive.partitions(topic)}
    blocks = {p: bs for p, bs in blocks.items() if bs}
    sizes = _block_bytes(archive, topic, blocks, _read_columns(offline))
    context = _Context(offline, archive, topic, lo, hi, weights, blocks, sizes)
    pattern = offline.pattern
    if pattern is None:
        return context.full(offline.reason or "the query has no symbol every match needs")
    if isinstance(indexes, str) and indexes == "none":
        return context.full("indexes=none")
    candidates, opened = _candidates(archive, topic, pattern)
    if isinstance(indexes, str) and indexes not in ("auto", "all"):
        raise PlanError(f"indexes={indexes!r}: expected auto, none, all or attribute names")
    if not isinstance(indexes, str):
        candidates = _requested(pattern, candidates, indexes, archive, topic)
    stream_keys = tuple(offline.settings.key_fields)
    if pattern.keys and tuple(pattern.keys) != stream_keys:
        # the index's key and key_seq are the stream's: adjacency per another key is not theirs
        if candidates and not isinstance(indexes, str):
            raise PlanError(f"--indexes: the query partitions by {', '.join(pattern.keys)} but the "
                            f"stream's key is {', '.join(stream_keys) or 'none'}: the secondary "
                            "indexes' per-key order does not apply; use --indexes auto or none")
        candidates = []
    return context.pruned(pattern, candidates, opened, automatic=indexes == "auto")


def _read_columns(offline: OfflineQuery) -> list[str] | None:
    """The columns :meth:`Archive.read_blocks` reads for the query (None: all)."""
    if offline.columns is None:
        return None
    settings = offline.settings
    return list(dict.fromkeys([ARCHIVE_SEQ, settings.time_field, SEQ_FIELD,
                               *settings.key_fields, *offline.columns]))


def _block_bytes(archive: Archive, topic: str, blocks: Mapping[int, Sequence[Block]],
                 columns: Sequence[str] | None) -> dict[tuple[int, str, int], int]:
    """Compressed bytes of ``columns`` per (partition, segment, row group), from the Parquet
    footers: what :meth:`Archive.read_blocks` counts in ``bytes_read``."""
    wanted = None if columns is None else set(columns)
    sizes: dict[tuple[int, str, int], int] = {}
    for partition, partition_blocks in blocks.items():
        needed = {b.segment for b in partition_blocks}
        for segment in archive.segments(topic, partition):
            name = segment.path.rsplit("/", 1)[-1]
            if name not in needed:
                continue
            metadata = archive.parquet_file(segment.path).metadata
            for group in range(metadata.num_row_groups):
                chunks = metadata.row_group(group)
                sizes[(partition, name, group)] = sum(
                    chunks.column(i).total_compressed_size for i in range(chunks.num_columns)
                    if wanted is None or chunks.column(i).path_in_schema in wanted)
    return sizes


def _label(pattern: PatternQuery, candidate: IndexCandidate) -> str:
    return f"{pattern.symbols[candidate.position].name}.{candidate.attribute}"


def _condition(pattern: PatternQuery, candidate: IndexCandidate) -> Condition:
    return next(c for c in pattern.symbols[candidate.position].conditions
                if c.attribute == candidate.attribute)


def _candidates(archive: Archive, topic: str, pattern: PatternQuery
                ) -> tuple[list[IndexCandidate], dict[str, SecondaryIndex]]:
    """Every (BS, condition) with a secondary index on the condition's attribute, and the
    indexes opened."""
    opened: dict[str, SecondaryIndex] = {}
    candidates = []
    for position, symbol in enumerate(pattern.symbols):
        if not symbol.indexable:
            continue
        for condition in symbol.conditions:
            if condition.attribute not in opened:
                index = SecondaryIndex.open(archive, topic, condition.attribute)
                if index is None:
                    continue
                opened[condition.attribute] = index
            index = opened[condition.attribute]
            selectivity = index.estimate(condition) / index.rows if index.rows else 0.0
            candidates.append(IndexCandidate(position, condition.attribute, min(1.0, selectivity)))
    return candidates, opened


def _requested(pattern: PatternQuery, candidates: list[IndexCandidate], names: Sequence[str],
               archive: Archive, topic: str) -> list[IndexCandidate]:
    """The candidates on the attributes ``names``; a name the query has no condition on, or
    that has no index, is an error (never a silently different plan)."""
    usable = {c.attribute for c in candidates}
    conditioned = {c.attribute for s in pattern.symbols if s.indexable for c in s.conditions}
    for name in names:
        if name not in conditioned:
            raise PlanError(f"--indexes {name}: the query has no indexable condition on {name!r} "
                            f"(indexable: {', '.join(sorted(conditioned)) or 'none'})")
        if name not in usable:
            raise PlanError(f"--indexes {name}: {archive.uri} has no secondary index on {name!r} "
                            f"for {topic}; build it with `situflow index build --attributes {name}`")
    return [c for c in candidates if c.attribute in names]


def _overlapping(blocks: Sequence[Block], intervals: Sequence[Interval]) -> list[Block]:
    """The blocks whose time span meets one of the (sorted by lo) ``intervals``."""
    if not intervals:
        return []
    ordered = sorted(intervals, key=lambda i: i.lo)
    los = np.array([i.lo for i in ordered], dtype=np.int64)
    reach = np.maximum.accumulate(np.array([i.hi for i in ordered], dtype=np.int64))
    kept = []
    for block in blocks:
        # the last interval starting at or before the block's end reaches furthest right
        last = int(np.searchsorted(los, block.ts_max, side="right")) - 1
        if last >= 0 and reach[last] >= block.ts_min:
            kept.append(block)
    return kept


def _clip(intervals: Sequence[Interval], lo: int | None, hi: int | None) -> list[Interval]:
    clipped = []
    for interval in intervals:
        low = interval.lo if lo is None else max(lo, interval.lo)
        high = interval.hi if hi is None else min(hi, interval.hi)
        if low <= high:
            clipped.append(replace(interval, lo=low, hi=high))
    return clipped


def _within(intervals: Sequence[Interval], regions: Sequence[tuple[int, int]]) -> list[Interval]:
    """``intervals`` intersected with the CPM's ``regions`` (both sorted per key): a match lies
    in one interval and in one region, hence in their intersection."""
    out = []
    for interval in intervals:
        for low, high in regions:
            if low > interval.hi:
                break
            if high >= interval.lo:
                out.append(replace(interval, lo=max(low, interval.lo), hi=min(high, interval.hi)))
    return out


def _decoded(key: Any) -> Any:
    """An index's key (JSON array text) as the tuple results carry (None stays None)."""
    return tuple(json.loads(key)) if isinstance(key, str) else key


@dataclass
class _ArchiveSource:
    """The :class:`~situflow.offline.source.EventSource` of widening: the archive's events of
    the planned range ``[lo, hi]`` (nothing outside it, as a full replay of the range sees)."""

    archive: Archive
    topic: str
    columns: list[str] | None
    key_fields: tuple[str, ...]
    lo: int | None
    hi: int | None
    blocks: Mapping[int, Sequence[Block]]

    def events(self, partition: int, lo: int | None, hi: int | None, key: Any = None) -> pa.Table:
        low = self.lo if lo is None else lo if self.lo is None else max(lo, self.lo)
        high = self.hi if hi is None else hi if self.hi is None else min(hi, self.hi)
        table = self.archive.read(self.topic, partition, low, high, self.columns)
        if key is not None and table.num_rows:
            wanted = np.array(row_keys(table, self.key_fields)) == interval_key_text(key)
            table = table.filter(pa.array(wanted, pa.bool_()))
        return table

    def bounds(self, partition: int) -> tuple[int, int] | None:
        blocks = self.blocks.get(partition)
        if not blocks:
            return None
        first, last = blocks[0].ts_min, blocks[-1].ts_max
        return (first if self.lo is None else max(first, self.lo),
                last if self.hi is None else min(last, self.hi))


@dataclass
class _Context:
    """What planning one query needs, shared by its steps."""

    offline: OfflineQuery
    archive: Archive
    topic: str
    lo: int | None
    hi: int | None
    weights: CostWeights
    blocks: dict[int, list[Block]]
    sizes: dict[tuple[int, str, int], int]
    # The share of events that are quiet (TPStream: no definition holds), from the indexes.
    quiet_share: float = 1.0

    def _bytes(self, partition: int, blocks: Sequence[Block]) -> int:
        return sum(self.sizes.get((partition, b.segment, b.row_group), 0) for b in blocks)

    def _total(self) -> Estimate:
        return Estimate(sum(b.count for bs in self.blocks.values() for b in bs),
                        sum(self._bytes(p, bs) for p, bs in self.blocks.items()))

    def full(self, reason: str, configurations: Sequence[Configuration] = ()) -> ReplayPlan:
        """Every event of the range, one interval per partition."""
        intervals = {p: [Interval(bs[0].ts_min if self.lo is None else self.lo,
                                  bs[-1].ts_max if self.hi is None else self.hi)]
                     for p, bs in self.blocks.items()}
        return ReplayPlan(self.topic, intervals, dict(self.blocks), [], self._total(),
                          f"full replay ({reason})", self._total(), self.weights,
                          list(configurations), self.sizes)

    def pruned(self, pattern: PatternQuery, candidates: list[IndexCandidate],
               opened: Mapping[str, SecondaryIndex], automatic: bool) -> ReplayPlan:
        ordered = not self.offline.order_free
        self.quiet_share = _quiet_share(candidates)
        maps = {p: coarse_pattern_map(pattern, bs, ordered=ordered) for p, bs in self.blocks.items()}
        estimates: dict[Config, tuple[Configuration, Costs]] = {}

        def estimator(config: Config) -> Costs:
            if config not in estimates:
                estimates[config] = self._estimate(pattern, maps, config, opened)
            return estimates[config][1]

        if automatic:
            chosen = select_indexes(pattern, candidates, estimator,
                                    lambda costs: costs.pio + costs.sio).chosen
        else:
            chosen = frozenset(candidates)
            estimator(chosen)
        total = self._total()
        full_cost = query_cost(self.weights, total.bytes, 0, 0, len(self.blocks))
        configurations = [*(found for found, _ in estimates.values()),
                          Configuration((), total.rows, total.bytes, 0, len(self.blocks), full_cost,
                                        False)]
        best = estimates[chosen][0]
        if automatic and best.cost >= full_cost:
            return self.full("no index and no coarse pattern map pruning is estimated to pay",
                             configurations)
        return self._indexed(pattern, maps, sorted(chosen), opened, best, configurations)

    def _estimate(self, pattern: PatternQuery, maps: Mapping[int, CoarsePatternMap], config: Config,
                  opened: Mapping[str, SecondaryIndex],
                  found: Mapping[int, Mapping[int, float]] | None = None
                  ) -> tuple[Configuration, Costs]:
        """Eqs. 3.5–3.7 per run of the CPM's kept blocks (its rows, period and local
        selectivities), at block granularity: an interval reads every block it meets, so a block
        is read when an interval starts within its span or the interval's length before it
        (Cardenas with buckets of that length). Each interval is widened as :func:`widen` will
        (:meth:`_widening`), over the blocks of the run widened alike (the lightweight index
        says which), and the driver's reads that find the widening are added. The costs are
        f(C_PIO) with the interval term, and g(C_SIO). ``found``: per archive partition and
        selected symbol, the share of the partition's events in range that its lookups gave,
        instead of the indexes' estimates."""
        rows = size = driver = intervals = 0.0
        # a symbol's selected conditions multiply (independence)
        symbols: dict[int, float] = {}
        for c in config:
            symbols[c.position] = symbols.get(c.position, 1.0) * c.selectivity
        for partition, cpm in maps.items():
            if found is not None:
                symbols = dict(found.get(partition, {}))
            keys = self._keys(pattern, partition, opened)
            # without an index a core is a run of blocks of every key; with one, of one key
            widening = self._widening(pattern, partition, keys, 1 if symbols else keys)
            replayed: set[int] = set()
            probed: set[int] = set()
            for run in cpm.runs:
                stats = cpm.stats(run)
                lo, hi = cpm.blocks[run.start].ts_min, cpm.blocks[run.stop - 1].ts_max
                if symbols:
                    # per key: a key's events are 1/keys of the rows over the same period
                    selectivity = {p: cpm.selectivity(p, phi, run) for p, phi in symbols.items()}
                    cover = coverage(pattern, selectivity, StreamStats(stats.rows / keys, stats.span),
                                     ordered=not self.offline.order_free)
                    # cores merge per key before they are widened, each on its own
                    cores = merged_intervals(cover, stats.span) * keys
                    cover = replace(cover, intervals=cover.intervals * keys)
                    merged = merged_intervals(cover, stats.span)
                    read_rows, read_bytes = self._covered(partition, lo, hi, cover, widening.replay)
                    rows += read_rows
                    size += read_bytes
                    if widening.driver is not None:
                        # the driver reads each merged span of cores and their surroundings on
                        # its own: the ticks they cover, and the block at each span's edge twice
                        near = replace(cover, extend=cover.extend + sum(widening.driver))
                        cores = merged_intervals(near, stats.span)
                        ticks = cardenas(near.intervals, near.extend, stats.span) * stats.span
                        block_bytes = self._bytes(partition, [cpm.blocks[b] for b in run]) / len(run)
                        driver += (ticks / (stats.span / len(run)) + cores) * block_bytes
                    intervals += merged
                else:
                    replayed.update(self._touched(partition, lo, hi, widening.replay))
                    if widening.driver is not None:
                        probed.update(self._touched(partition, lo, hi, widening.driver))
                    intervals += 1
                    cores = 1
                driver += cores * widening.probes * self._bytes(partition, self.blocks[partition]) \
                    / len(self.blocks[partition])
            whole = [self.blocks[partition][b] for b in sorted(replayed)]
            rows += sum(b.count for b in whole)
            size += self._bytes(partition, whole)
            driver += self._bytes(partition, [self.blocks[partition][b] for b in probed])
        index_rows = sum(c.selectivity * opened[c.attribute].rows for c in config)
        index_bytes = sum(c.selectivity * opened[c.attribute].bytes for c in config)
        costs = Costs(pio=query_cost(self.weights, size + driver, 0, 0, intervals),
                      sio=query_cost(self.weights, 0, index_rows,
                                     index_bytes / index_rows if index_rows else 0.0, 0))
        labels = tuple(sorted(_label(pattern, c) for c in config))
        return (Configuration(labels, rows, size + driver, index_rows, intervals,
                              costs.pio + costs.sio, True, driver), costs)

    def _touched(self, partition: int, lo: float, hi: float, widening: tuple[float, float]
                 ) -> range:
        """The positions of the partition's blocks that ``[lo, hi]`` widened by ``widening``
        (ticks before, after) meets."""
        blocks = self.blocks[partition]
        first = bisect.bisect_left([b.ts_max for b in blocks], lo - widening[0])
        after = bisect.bisect_right([b.ts_min for b in blocks], hi + widening[1])
        return range(first, max(first, after))

    def _covered(self, partition: int, lo: float, hi: float, cover: Coverage,
                 widening: tuple[float, float]) -> tuple[float, float]:
        """The rows and bytes that ``cover``'s intervals in the run ``[lo, hi]``, each widened by
        ``widening``, are expected to read: Cardenas over the blocks of the run widened alike."""
        touched = self._touched(partition, lo, hi, widening)
        if not touched:
            return 0.0, 0.0
        blocks = self.blocks[partition][touched.start:touched.stop]
        span = blocks[-1].ts_max - blocks[0].ts_min + 1
        fraction = cardenas(cover.intervals, cover.extend + sum(widening) + span / len(blocks), span)
        return fraction * sum(b.count for b in blocks), fraction * self._bytes(partition, blocks)

    def _widening(self, pattern: PatternQuery, partition: int, keys: int, core_keys: int
                  ) -> _Widening:
        """What :func:`widen` adds to a core of ``core_keys`` keys (the archive partition holds
        ``keys``): a COGRA core grows to the windows overlapping it (a window less half a slide
        on each side, on average); a TPStream core to its keys' quiet events, which the driver
        finds by reading the window around the core and then spans that double
        (:func:`quiet_reach`, with the share of quiet events from the index statistics); a
        SASE+ core by the window on the side of a leading or trailing negation, after which the
        driver probes for the next event."""
        offline = self.offline
        if offline.kind == "windows" and offline.window is not None:
            size, slide = offline.window
            side = max(0.0, size - (slide + 1) / 2)
            return _Widening((side, side))
        blocks = self.blocks[partition]
        gap = (blocks[-1].ts_max - blocks[0].ts_min + 1) / max(1, sum(b.count for b in blocks))
        if offline.kind == "situations":
            mean = gap * keys / self.quiet_share
            distance, read, reads = quiet_reach(mean, core_keys, pattern.window)
            # the reads beyond the first (the window around the cores, merged) are reads of
            # their own: each reads the blocks its span meets, the one at its edge again
            block_span = (blocks[-1].ts_max - blocks[0].ts_min + 1) / len(blocks)
            further = (reads - 1) + (read - pattern.window) / block_span
            return _Widening((distance, distance), (pattern.window, pattern.window), 2 * further)
        query = getattr(offline.compiled, "ast", None)
        if not isinstance(query, SaseQuery):
            return _Widening((0.0, 0.0))
        before = pattern.window if query.components[0].negated else 0.0
        if not query.components[-1].negated:
            return _Widening((before, 0.0))
        # the probes after the deadline span 1, 2, 4, ... ticks until one holds an event (the
        # next event uniformly within ``gap`` ticks); each reads at least a block
        probes = sum(max(0.0, 1.0 - ((1 << n) - 1) / gap) for n in range(64))
        return _Widening((before, pattern.window + gap), probes=probes)

    def _keys(self, pattern: PatternQuery, partition: int,
              opened: Mapping[str, SecondaryIndex]) -> int:
        """How many partition keys the archive partition holds: the index builds count them;
        without an index that did, the value range of a single integer key bounds them."""
        if not pattern.keys:
            return 1
        for index in opened.values():
            counted = len(index.manifest.get("key_next", {}).get(str(partition), {}))
            if counted:
                return counted
        blocks = self.blocks[partition]
        stats = [b.stats.get(pattern.keys[0]) for b in blocks] if len(pattern.keys) == 1 else []
        bounds = [(s.min, s.max) for s in stats if s is not None and s.count]
        if not stats or len(bounds) < len(stats) or \
                not all(isinstance(v, int) for bound in bounds for v in bound):
            return 1
        values = max(high for _, high in bounds) - min(low for low, _ in bounds) + 1
        return max(1, min(values, sum(b.count for b in blocks)))

    def _indexed(self, pattern: PatternQuery, maps: Mapping[int, CoarsePatternMap],
                 chosen: list[IndexCandidate], opened: Mapping[str, SecondaryIndex],
                 best: Configuration, configurations: list[Configuration]) -> ReplayPlan:
        hits = self._hits(pattern, chosen, opened)
        if chosen:
            # the estimate of the plan: the cost model with the selectivities the lookups found
            found = {partition: {p: int(np.count_nonzero(table.column("partition").to_numpy()
                                                         == partition))
                                 / max(1, sum(b.count for b in blocks)) for p, table in hits.items()}
                     for partition, blocks in self.blocks.items()}
            best = self._estimate(pattern, maps, frozenset(chosen), opened, found)[0]
        positions = sorted({c.position for c in chosen})
        settings = self.offline.settings
        source = _ArchiveSource(self.archive, self.topic, _read_columns(self.offline),
                                tuple(settings.key_fields), self.lo, self.hi, self.blocks)
        intervals: dict[int, list[Interval]] = {}
        blocks: dict[int, list[Block]] = {}
        for partition, cpm in maps.items():
            regions = cpm.regions()
            if chosen:
                # an unkeyed query on a keyed stream: one order for all keys (archive seq)
                of_partition = {p: _of_partition(table, partition, keyed=bool(pattern.keys))
                                for p, table in hits.items()}
                cores = [replace(i, key=_decoded(i.key))
                         for i in candidate_intervals(self.offline, positions, of_partition)]
                cores = _within(_clip(cores, self.lo, self.hi), regions)
                cores += self._uncovered(pattern, partition, chosen, opened)
            else:
                cores = _clip([Interval(low, high) for low, high in regions], self.lo, self.hi)
            cores = merge_intervals(cores)
            if not cores:
                continue
            # widening may leave a bound open (a sentinel) where the data ends: close it there
            first, last = self.blocks[partition][0].ts_min, self.blocks[partition][-1].ts_max
            ranges = _clip(widen(self.offline, cores, source, partition, lo=self.lo, hi=self.hi),
                           first if self.lo is None else self.lo, last if self.hi is None else self.hi)
            intervals[partition] = ranges
            blocks[partition] = _overlapping(self.blocks[partition], ranges)
        labels = [_label(pattern, c) for c in chosen]
        reason = ("index-pruned replay" if chosen else "replay of the coarse pattern map's blocks")
        return ReplayPlan(self.topic, intervals, blocks, labels,
                          Estimate(round(best.rows), round(best.bytes), round(best.driver)),
                          reason, self._total(),
                          self.weights, configurations, self.sizes)

    def _hits(self, pattern: PatternQuery, chosen: Sequence[IndexCandidate],
              opened: Mapping[str, SecondaryIndex]) -> dict[int, pa.Table]:
        """The index rows of each selected symbol in ``[lo, hi]``: a symbol with several chosen
        conditions keeps the events all of them found (same partition and seq)."""
        hits: dict[int, pa.Table] = {}
        for candidate in chosen:
            table = opened[candidate.attribute].lookup(_condition(pattern, candidate))
            if self.lo is not None:
                table = table.filter(pc.greater_equal(table.column("ts"), self.lo))
            if self.hi is not None:
                table = table.filter(pc.less_equal(table.column("ts"), self.hi))
            if candidate.position in hits:   # a filter keeps the lookup's order
                earlier = hits[candidate.position]
                table = earlier.filter(pc.is_in(_event_ids(earlier), value_set=_event_ids(table)))
            hits[candidate.position] = table
        return hits

    def _uncovered(self, pattern: PatternQuery, partition: int, chosen: Sequence[IndexCandidate],
                   opened: Mapping[str, SecondaryIndex]) -> list[Interval]:
        """The span an index built before the partition's newest segments does not know: from
        one window before its first unindexed event to the end, replayed in full."""
        covered = min(opened[c.attribute].covered.get(partition, 0) for c in chosen)
        newer = [b for b in self.blocks[partition] if b.seq_max >= covered]
        if not newer:
            return []
        start = newer[0].ts_min - pattern.window
        return _clip([Interval(start, newer[-1].ts_max)], self.lo, self.hi)


def _quiet_share(candidates: Sequence[IndexCandidate]) -> float:
    """The share of events no symbol matches, as far as the indexes tell: an event matches a
    symbol at most as often as its most selective indexed condition holds (symbols without an
    index count as never matching; at least a tenth of the events is taken as quiet)."""
    rarest: dict[int, float] = {}
    for c in candidates:
        rarest[c.position] = min(rarest.get(c.position, 1.0), c.selectivity)
    return max(0.1, 1.0 - sum(rarest.values()))


def _event_ids(table: pa.Table) -> pa.Array:
    """One integer per archived event of index rows: its partition and archive seq."""
    partition = pc.cast(table.column("partition"), pa.int64())
    return pc.add(pc.shift_left(partition, 40), table.column("seq")).combine_chunks()


def _of_partition(table: pa.Table, partition: int, keyed: bool) -> pa.Table:
    rows = table.filter(pc.equal(table.column("partition"), partition))
    return rows if keyed else rows.drop_columns(["key"])
