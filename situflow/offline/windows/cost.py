"""The cost rule of windowed aggregation (thesis §3.3.2, Table 3.1): the index-based method
iff its merges per slide, C_index(slide1) + C_index(slide2), are fewer than C_replay = slide·r."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from situflow.archive.blocks import Block
from situflow.offline.windows.slices import Slicing


@dataclass(frozen=True)
class CostParameters:
    """Table 3.1: ``rate`` r (events per tick and partition), ``block_rows`` B (events per leaf),
    ``fanout`` D (children per inner node) and ``height`` h of the index tree.

    Our index is flat: a partition's segments hold its blocks, so D is the blocks per segment
    and h the levels of a D-ary tree over a partition's blocks (leaves included)."""

    rate: float
    block_rows: float
    fanout: float
    height: int

    @classmethod
    def from_blocks(cls, blocks: Mapping[int, Sequence[Block]]) -> CostParameters:
        every = [b for bs in blocks.values() for b in bs]
        if not every:
            return cls(0.0, 1.0, 2.0, 2)
        rows = sum(b.count for b in every)
        span = max(b.ts_max for b in every) - min(b.ts_min for b in every) + 1
        segments = {(p, b.segment) for p, bs in blocks.items() for b in bs}
        fanout = max(2.0, len(every) / len(segments))
        per_partition = max(len(bs) for bs in blocks.values())
        height = 1 + max(1, math.ceil(math.log(max(per_partition, 2), fanout)))
        # Each partition is its own tree: both costs are per partition, at its rate.
        partitions = sum(1 for bs in blocks.values() if bs)
        return cls(rows / span / partitions, rows / len(every), fanout, height)

    def leaves(self, slide: float) -> float:
        """L := slide·r / B, the leaves one slide covers."""
        return slide * self.rate / self.block_rows

    def split_level(self, slide: float) -> int:
        """l_s := ⌈log_D L⌉, clamped at 0 (for L ≤ 1/D the logarithm is negative)."""
        leaves = self.leaves(slide)
        if leaves <= 0:
            return 0
        return max(0, math.ceil(math.log(leaves) / math.log(self.fanout) - 1e-12))

    def index_cost(self, slide: float) -> float:
        """C_index(slide): merges of one temporal aggregation query per slide (§3.3.2)."""
        if slide <= 0:
            return 0.0
        leaves, level = self.leaves(slide), self.split_level(slide)
        return ((self.height - 1 - level)
                + min(1, level) * math.ceil(leaves / self.fanout ** (level - 1) - 1e-9)
                + max(0, level - 1) * self.fanout
                + min(1.0, leaves) * self.block_rows)

    def replay_cost(self, slide: float) -> float:
        """C_replay(slide) = slide·r: one merge per event."""
        return slide * self.rate


def costs(slicing: Slicing, params: CostParameters) -> tuple[float, float]:
    """Merges per slide of both methods: C_index(slide1) + C_index(slide2) (§3.3.3) and
    C_replay(slide)."""
    return (params.index_cost(slicing.slide1) + params.index_cost(slicing.slide2),
            params.replay_cost(slicing.slide))


def use_index(slicing: Slicing, params: CostParameters) -> bool:
    """The decision rule of §3.3.2: the index-based method iff C_index < C_replay."""
    index_cost, replay_cost = costs(slicing, params)
    return index_cost < replay_cost
