"""The coarse pattern map (CPM, thesis §3.4.3 "Adaption to Non-Uniform Data"): pattern matching
over the lightweight index's blocks instead of over events.

A block is a bucket of a temporal histogram: its count, period and per-attribute min/max
(:class:`situflow.archive.blocks.Block`). A basic symbol (BS) *may occur* in a block iff each
of its conditions overlaps the block's ``[min, max]`` of its attribute (AT-16: excluded ⇔ the
intersection is empty). The thesis leaves the bucket-level matching rule open (research notes
§3.4); ours is conservative: a block is kept iff it lies between the first and the last BS of
some *block chain*, blocks ``i <= … <= j`` (in seq order, one archive partition) that can host
all BSs in pattern order (several in one block allowed) with ``ts_min(j) − ts_max(i) <= w``.
Every event of a match lies in such a chain's span, so replaying only the kept blocks loses
no match; KSs at the pattern's ends stretch the span by what the window allows. Patterns whose
symbols match in any order (TPStream situations, COGRA trends) keep a block iff every BS may
occur within ``w`` of it.

Besides pruning, the CPM re-estimates the cost model's inputs per run of kept blocks (Greedy*,
Optimal*): a run's rows and period give its Δt, and a symbol's occurrences are assumed to sit
in the blocks where it may occur, not spread over the whole stream. (The thesis does this per
bucket; a run is the unit a replay interval cannot cross, so assumptions A1 and A2 are made
per run.)
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from situflow.archive.blocks import Block
from situflow.offline.cost import StreamStats
from situflow.offline.pattern import PatternQuery, Symbol


def may_occur(symbol: Symbol, block: Block) -> bool:
    """Whether an event of ``block`` may satisfy ``symbol``'s conditions: False only when some
    condition cannot hold on the block's min/max (or the attribute has no value in it); an
    attribute without statistics (a type the lightweight index skips) may hold anything."""
    for condition in symbol.conditions:
        stats = block.stats.get(condition.attribute)
        if stats is None:
            continue
        if not stats.count or stats.min is None or not condition.overlaps(stats.min, stats.max):
            return False
    return True


@dataclass(frozen=True)
class CoarsePatternMap:
    """The CPM of one archive partition: its ``blocks`` (seq order), per BS position whether the
    symbol ``may`` occur in each, and which blocks are ``kept``."""

    blocks: tuple[Block, ...]
    may: dict[int, tuple[bool, ...]]
    kept: tuple[bool, ...]

    @cached_property
    def runs(self) -> list[range]:
        """The maximal runs of kept blocks (block positions), in order."""
        runs: list[range] = []
        for b, keep in enumerate(self.kept):
            if keep and runs and runs[-1].stop == b:
                runs[-1] = range(runs[-1].start, b + 1)
            elif keep:
                runs.append(range(b, b + 1))
        return runs

    def regions(self) -> list[tuple[int, int]]:
        """The time spans ``(ts_min, ts_max)`` of the runs of kept blocks, in order."""
        # a partition's rows are in time order: a run spans its first block's start to its last's end
        return [(self.blocks[run.start].ts_min, self.blocks[run.stop - 1].ts_max) for run in self.runs]

    def stats(self, run: range) -> StreamStats:
        """Rows and period of one run: the cost model's stream, where A1 and A2 hold."""
        span = self.blocks[run.stop - 1].ts_max - self.blocks[run.start].ts_min + 1
        return StreamStats(rows=sum(self.blocks[b].count for b in run), span=span)

    @cached_property
    def _rows(self) -> int:
        return sum(block.count for block in self.blocks)

    @cached_property
    def _possible(self) -> dict[int, int]:
        """Per BS position, the rows of the blocks where the symbol may occur."""
        return {p: sum(b.count for b, may in zip(self.blocks, flags, strict=True) if may)
                for p, flags in self.may.items()}

    def selectivity(self, position: int, selectivity: float, run: range) -> float:
        """The fraction of the events of ``run`` satisfying the symbol at ``position``, given its
        fraction ``selectivity`` of all blocks' events: its occurrences are put into the blocks
        where it may occur (the thesis' "S occurs every second event in those substreams")."""
        flags = self.may.get(position)
        if flags is None:
            return selectivity
        possible = self._possible[position]
        rows = sum(self.blocks[b].count for b in run)
        if not possible or not rows:
            return 0.0
        local = min(1.0, selectivity * self._rows / possible)
        return local * sum(self.blocks[b].count for b in run if flags[b]) / rows


def coarse_pattern_map(pattern: PatternQuery, blocks: Sequence[Block], *,
                       ordered: bool = True) -> CoarsePatternMap:
    """The CPM of ``pattern`` over the ``blocks`` of one archive partition (seq order);
    ``ordered=False`` for patterns whose symbols match in any order (TPStream, COGRA)."""
    blocks = tuple(blocks)
    count = len(blocks)
    positions = [i for i, symbol in enumerate(pattern.symbols) if not symbol.kleene]
    may = {p: tuple(may_occur(pattern.symbols[p], block) for block in blocks) for p in positions}
    if not positions or not count:
        return CoarsePatternMap(blocks, may, (True,) * count)
    if not ordered:
        return CoarsePatternMap(blocks, may, _unordered(pattern.window, blocks, may))
    # next_may[p][b]: the first block >= b where symbol p may occur (count: none).
    next_may: dict[int, list[int]] = {}
    for p in positions:
        following, upcoming = [count] * (count + 1), count
        for b in range(count - 1, -1, -1):
            if may[p][b]:
                upcoming = b
            following[b] = upcoming
        next_may[p] = following
    last = positions[-1]
    # prev_may[b]: the last block <= b where the last BS may occur (-1: none).
    prev_may, seen = [], -1
    for b in range(count):
        if may[last][b]:
            seen = b
        prev_may.append(seen)
    starts = [block.ts_min for block in blocks]
    ends = [block.ts_max for block in blocks]
    window = pattern.window
    leading, trailing = pattern.symbols[0].kleene, pattern.symbols[-1].kleene
    keep = [0] * (count + 1)   # +1/-1 marks of the kept spans, summed below

    def mark(first: int, after: int) -> None:
        keep[first] += 1
        keep[after] -= 1

    for i in range(count):
        if not may[positions[0]][i]:
            continue
        chain = i
        for p in positions[1:]:
            chain = next_may[p][chain]
            if chain == count:
                break
        if chain == count or starts[chain] - blocks[i].ts_max > window:
            continue
        reach = bisect.bisect_right(starts, blocks[i].ts_max + window) - 1
        end = i if len(positions) == 1 else prev_may[reach]
        first = bisect.bisect_left(ends, blocks[i].ts_min - window, 0, i) if leading else i
        after = reach + 1 if trailing else end + 1
        mark(first, max(after, end + 1))
    kept, depth = [], 0
    for b in range(count):
        depth += keep[b]
        kept.append(depth > 0)
    return CoarsePatternMap(blocks, may, tuple(kept))


def _unordered(window: int, blocks: tuple[Block, ...], may: dict[int, tuple[bool, ...]]
               ) -> tuple[bool, ...]:
    """Without an order, a block is kept iff every BS may occur in a block within ``window`` of
    it: every block between a match's first and last one has all the match's events that close
    (they lie within ``window`` of each other)."""
    starts = [block.ts_min for block in blocks]
    ends = [block.ts_max for block in blocks]
    # counts[p][b]: blocks before b where symbol p may occur
    counts = {p: [0, *itertools.accumulate(flags)] for p, flags in may.items()}
    kept = []
    for block in blocks:
        first = bisect.bisect_left(ends, block.ts_min - window)
        after = bisect.bisect_right(starts, block.ts_max + window)
        kept.append(all(count[after] > count[first] for count in counts.values()))
    return tuple(kept)
