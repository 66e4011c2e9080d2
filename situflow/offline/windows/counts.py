"""Count windows (thesis §2.3.1, §3.3.3): the same slicing on the archive seq of one
partition. The query languages have no count-window syntax, so this is a core function only."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from situflow.archive.blocks import Block
from situflow.archive.format import ARCHIVE_SEQ
from situflow.offline.windows.partials import Measures, Partials
from situflow.offline.windows.slices import Slicing, WindowError
from situflow.offline.windows.sliding import sliding_windows
from situflow.trends.kernel import COUNT, COUNT_E, MAX, MIN, SUM
from situflow.trends.operator import as_float64


@dataclass(frozen=True)
class CountWindow:
    """One count window of a partition: the events with archive seq ``first_seq`` up to
    ``first_seq + count - 1``, its result time ``ts`` (the largest event time in it, §2.3.1)
    and the aggregates of the attribute over the ``present`` events that have a value."""

    first_seq: int
    ts: int
    count: int
    present: int
    sum: float
    min: float | None
    max: float | None

    @property
    def avg(self) -> float | None:
        return self.sum / self.present if self.present else None


def count_windows(blocks: Sequence[Block], read: Callable[[Sequence[Block]], pa.Table],
                  size: int, slide: int, attribute: str, *,
                  time_field: str = "ts") -> list[CountWindow]:
    """The complete count windows ``W^C_{size,slide}`` of one archive partition (§2.3.1):
    window ``i`` holds the events with archive seq in ``[i·slide, i·slide + size)``. Slices
    are cut on the seq axis exactly as time slices (§3.3.3), a block's seq span locating it,
    so whole blocks answer from statistics and only blocks crossing a slice bound are read."""
    if slide > size:
        raise WindowError(f"a count window's slide ({slide}) must not exceed its size ({size})")
    slicing = Slicing(size, slide)
    measures = Measures((COUNT, SUM, MIN, MAX, COUNT_E, MAX),
                        (None, attribute, attribute, attribute, attribute, time_field))
    slices: list[int] = []
    values: list[np.ndarray] = []
    partial: list[Block] = []
    for block in blocks:
        first, last = slicing.slice_of(np.array([block.seq_min, block.seq_max]))
        stats = block.stats.get(attribute)
        whole = measures.of_block(block, time_field) if first == last else None
        if whole is not None and stats is not None:
            whole[4] = stats.count  # values present, for AVG
            slices.append(int(first))
            values.append(whole)
        else:
            partial.append(block)
    parts = [Partials.group(np.array(slices, dtype=np.int64),
                            np.array(values).reshape(len(values), len(measures.roles)),
                            measures.kinds)]
    if partial:
        table = read(partial)
        seq = np.asarray(table.column(ARCHIVE_SEQ).to_numpy(), dtype=np.int64)
        x = as_float64(table.column(attribute).to_numpy(zero_copy_only=False)) \
            if attribute in table.column_names else np.full(len(seq), math.nan)
        ts = np.asarray(table.column(time_field).to_numpy(), dtype=np.float64)
        rows = measures.of_rows(np.ones(len(seq), dtype=np.bool_),
                                {attribute: x, time_field: ts})
        rows[:, 4] = ~np.isnan(x)
        parts.append(Partials.group(slicing.slice_of(seq), rows, measures.kinds))
    partials = Partials.merge(parts, measures.kinds)
    events = max((b.seq_max + 1 for b in blocks), default=0)
    if events < size:
        return []
    windows, out = sliding_windows(slicing, partials, measures, (events - size) // slide)
    return [CountWindow(int(k) * slide, int(v[5]), int(v[0]), int(v[4]), float(v[1]),
                        float(v[2]) if v[4] else None, float(v[3]) if v[4] else None)
            for k, v in zip(windows.tolist(), out, strict=True)]
