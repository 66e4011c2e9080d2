"""Planning and evaluation (thesis §3.3.1–§3.3.2): which blocks their statistics answer,
which are skipped and which are replayed (:func:`plan_windows`), and the window results from
both (:func:`evaluate`, or :func:`aggregate_windows` in one process)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa

from situflow.archive.blocks import Block
from situflow.offline.windows.cost import CostParameters, costs, use_index
from situflow.offline.windows.partials import Group, Grouped
from situflow.offline.windows.query import ALL, NONE, WindowedAggregation
from situflow.results import TrendResult

Method = Literal["auto", "index", "replay"]


@dataclass(frozen=True)
class WindowPlan:
    """What the evaluation reads: ``whole`` holds the partial aggregates answered by block
    statistics, ``replay`` the blocks to read row by row, per archive partition."""

    method: str
    whole: Grouped
    replay: dict[int, list[Block]]
    whole_blocks: int
    skipped_blocks: int
    index_cost: float
    replay_cost: float

    @property
    def rows_from_index(self) -> int:
        """Events answered by block statistics (never read)."""
        return self.whole.events

    @property
    def rows_to_replay(self) -> int:
        return sum(b.count for bs in self.replay.values() for b in bs)

    def explain(self) -> str:
        return "\n".join([
            f"windowed aggregation: {self.method} (C_index {self.index_cost:.1f} vs "
            f"C_replay {self.replay_cost:.1f} merges per slide, §3.3.2)",
            f"blocks from statistics: {self.whole_blocks}, skipped: {self.skipped_blocks}, "
            f"replayed: {sum(len(bs) for bs in self.replay.values())}",
            f"rows: {self.rows_from_index} from statistics, {self.rows_to_replay} replayed",
        ])


def plan_windows(aggregation: WindowedAggregation, blocks: Mapping[int, Sequence[Block]], *,
                 lo: int | None = None, hi: int | None = None, method: Method = "auto",
                 params: CostParameters | None = None) -> WindowPlan:
    """Split the blocks of every partition into those answered by statistics, those skipped
    and those replayed; ``lo``/``hi`` bound event times (inclusive), as a replay of the events
    in that range would."""
    slicing, measures = aggregation.slicing, aggregation.measures
    params = params or CostParameters.from_blocks(blocks)
    index_cost, replay_cost = costs(slicing, params)
    chosen = method if method != "auto" else "index" if use_index(slicing, params) else "replay"
    groups: list[Group] = []
    slices: list[int] = []
    values: list[np.ndarray] = []
    replay: dict[int, list[Block]] = {}
    skipped = 0
    for partition, partition_blocks in sorted(blocks.items()):
        firsts = slicing.slice_of(np.array([b.ts_min for b in partition_blocks], dtype=np.int64))
        lasts = slicing.slice_of(np.array([b.ts_max for b in partition_blocks], dtype=np.int64))
        for block, first, last in zip(partition_blocks, firsts.tolist(), lasts.tolist(),
                                      strict=True):
            if block.count == 0 or (lo is not None and block.ts_max < lo) \
                    or (hi is not None and block.ts_min > hi):
                skipped += 1
                continue
            inside = (lo is None or block.ts_min >= lo) and (hi is None or block.ts_max <= hi)
            if chosen == "index" and inside:
                verdict = aggregation.classify(block)
                if verdict == NONE:
                    skipped += 1
                    continue
                group = aggregation.group_of(block)
                partial = measures.of_block(block, aggregation.time_field) \
                    if verdict == ALL and first == last and group is not None else None
                if partial is not None and group is not None:
                    groups.append(group)
                    slices.append(first)
                    values.append(partial)
                    continue
            replay.setdefault(partition, []).append(block)
    keys = list(dict.fromkeys(groups))
    codes = {g: i for i, g in enumerate(keys)}
    whole = Grouped.of_rows(keys, np.array([codes[g] for g in groups], dtype=np.int64),
                            np.array(slices, dtype=np.int64),
                            np.array(values).reshape(len(values), len(measures.roles)),
                            measures.kinds)
    return WindowPlan(chosen, whole, replay, len(values), skipped, index_cost, replay_cost)


def evaluate(aggregation: WindowedAggregation, plan: WindowPlan,
             replayed: Iterable[Grouped]) -> list[TrendResult]:
    """The window results from the plan's block aggregates and the replayed blocks' partials."""
    return aggregation.results(Grouped.merge([plan.whole, *replayed], aggregation.measures.kinds))


Reader = Callable[[int, Sequence[Block], Sequence[str]], pa.Table]


def aggregate_windows(aggregation: WindowedAggregation, blocks: Mapping[int, Sequence[Block]],
                      read: Reader, *, lo: int | None = None, hi: int | None = None,
                      method: Method = "auto",
                      params: CostParameters | None = None) -> list[TrendResult]:
    """Plan, replay the partial blocks with ``read(partition, blocks, columns)`` in this
    process, and evaluate (the Spark job does the replay in tasks instead)."""
    plan = plan_windows(aggregation, blocks, lo=lo, hi=hi, method=method, params=params)
    replayed = [aggregation.rows(read(p, bs, aggregation.columns), lo, hi)
                for p, bs in sorted(plan.replay.items())]
    return evaluate(aggregation, plan, replayed)
