"""Partial aggregates (thesis §3.3.1): the values kept per slice (:class:`Measures`), from
a block's statistics or from replayed rows, combined per slice (:class:`Partials`) and per
GROUP-BY group (:class:`Grouped`, which Spark tasks exchange as Arrow tables)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np
import pyarrow as pa

from situflow.archive.blocks import Block
from situflow.trends.kernel import ADD, COUNT, COUNT_E, LARGEST, MAX, MIN, SMALLEST, SUM

_KIND = {COUNT: ADD, COUNT_E: ADD, SUM: ADD, MIN: SMALLEST, MAX: LARGEST}
_IDENT = {ADD: 0.0, SMALLEST: math.inf, LARGEST: -math.inf}


@dataclass(frozen=True)
class Measures:
    """The values kept per slice: kernel roles (COUNT, COUNT_E, SUM, MIN, MAX; the first is
    always the count of eligible events) with the attribute each reads."""

    roles: tuple[int, ...]
    attributes: tuple[str | None, ...]

    @property
    def kinds(self) -> np.ndarray:
        return np.array([_KIND[r] for r in self.roles], dtype=np.int64)

    @property
    def ident(self) -> np.ndarray:
        return np.array([_IDENT[_KIND[r]] for r in self.roles])

    def of_block(self, block: Block, time_field: str) -> np.ndarray | None:
        """The block's partial aggregate from its statistics, all rows taken as eligible; None
        when a statistic it needs is missing or not numeric (the block is then replayed)."""
        out = np.empty(len(self.roles))
        for v, (role, attr) in enumerate(zip(self.roles, self.attributes, strict=True)):
            if role in (COUNT, COUNT_E):
                out[v] = block.count
                continue
            if attr == time_field:
                low, high, total, present = block.ts_min, block.ts_max, None, block.count
            else:
                stats = block.stats.get(attr) if attr is not None else None
                if stats is None:
                    return None
                low, high, total, present = stats.min, stats.max, stats.sum, stats.count
            if present == 0:
                out[v] = _IDENT[_KIND[role]]
                continue
            value = total if role == SUM else low if role == MIN else high
            # A NaN value makes a float sum NaN, where the operator skips it: replay.
            if not is_number(value) or math.isnan(value):
                return None
            out[v] = float(value)
        return out

    def of_rows(self, eligible: np.ndarray, values: Mapping[str, np.ndarray]) -> np.ndarray:
        """Per row its contribution (identity where not eligible; missing values skipped)."""
        n = len(eligible)
        out = np.empty((n, len(self.roles)))
        for v, (role, attr) in enumerate(zip(self.roles, self.attributes, strict=True)):
            if role in (COUNT, COUNT_E):
                out[:, v] = eligible
                continue
            assert attr is not None
            x = values[attr]
            usable = eligible & ~np.isnan(x)
            out[:, v] = np.where(usable, x, _IDENT[_KIND[role]])
        return out


def is_number(value: Any) -> TypeGuard[int | float]:
    """A number that is not a bool (statistics and literals may be either)."""
    return isinstance(value, int | float | np.number) and not isinstance(value, bool)


@dataclass(frozen=True)
class Partials:
    """Partial aggregates per slice: ``slices`` ascending and distinct, ``values[i]`` the
    aggregate of slice ``slices[i]``."""

    slices: np.ndarray
    values: np.ndarray

    @classmethod
    def empty(cls, width: int) -> Partials:
        return cls(np.zeros(0, dtype=np.int64), np.zeros((0, width)))

    @classmethod
    def group(cls, slices: np.ndarray, values: np.ndarray, kinds: np.ndarray) -> Partials:
        """Combine rows (or block aggregates) that share a slice; sums add in row order."""
        if len(slices) == 0:
            return cls.empty(len(kinds))
        ordered = slices
        if not np.all(slices[1:] >= slices[:-1]):  # replayed rows mostly come in time order
            order = np.argsort(slices, kind="stable")
            ordered, values = slices[order], values[order]
        starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
        out = np.empty((len(starts), values.shape[1]))
        for v, kind in enumerate(kinds.tolist()):
            reduce = np.add if kind == ADD else np.minimum if kind == SMALLEST else np.maximum
            out[:, v] = reduce.reduceat(values[:, v], starts)
        return cls(ordered[starts].astype(np.int64), out)

    @classmethod
    def merge(cls, parts: Iterable[Partials], kinds: np.ndarray) -> Partials:
        """One aggregate per slice over several sources (blocks, replayed rows, partitions)."""
        parts = [p for p in parts if len(p.slices)]
        if not parts:
            return cls.empty(len(kinds))
        if len(parts) == 1:
            return parts[0]
        return cls.group(np.concatenate([p.slices for p in parts]),
                         np.concatenate([p.values for p in parts]), kinds)


Group = tuple[Any, ...]


@dataclass(frozen=True)
class Grouped:
    """Partial aggregates per GROUP-BY group (``()`` without GROUP-BY) and slice."""

    groups: dict[Group, Partials]

    @classmethod
    def of_rows(cls, keys: Sequence[Group], codes: np.ndarray, slices: np.ndarray,
                values: np.ndarray, kinds: np.ndarray) -> Grouped:
        """Rows of group ``keys[codes[i]]``, combined per group and slice (row order kept)."""
        order = np.argsort(codes, kind="stable")
        bounds = np.flatnonzero(np.diff(codes[order])) + 1
        return cls({keys[int(codes[rows[0]])]: Partials.group(slices[rows], values[rows], kinds)
                    for rows in np.split(order, bounds) if len(rows)})

    @classmethod
    def merge(cls, parts: Iterable[Grouped], kinds: np.ndarray) -> Grouped:
        collected: dict[Group, list[Partials]] = {}
        for part in parts:
            for group, partials in part.groups.items():
                collected.setdefault(group, []).append(partials)
        return cls({g: Partials.merge(ps, kinds) for g, ps in collected.items()})

    @property
    def events(self) -> int:
        return int(sum(p.values[:, 0].sum() for p in self.groups.values()))

    def to_arrow(self, width: int) -> pa.Table:
        """As an Arrow table for Spark: ``group`` (JSON text), ``slice``, ``v0``, ``v1``, ..."""
        parts = [Partials.empty(width), *self.groups.values()]
        groups = [json.dumps(list(g)) for g, p in self.groups.items() for _ in p.slices]
        values = np.concatenate([p.values for p in parts])
        columns = {"group": pa.array(groups, pa.string()),
                   "slice": pa.array(np.concatenate([p.slices for p in parts]), pa.int64())}
        for v in range(width):
            columns[f"v{v}"] = pa.array(values[:, v], pa.float64())
        return pa.table(columns)

    @classmethod
    def from_arrow(cls, table: pa.Table, kinds: np.ndarray) -> Grouped:
        """The partials of Spark tasks (the same group and slice may come from several)."""
        text = table.column("group").to_pylist()
        keys = list(dict.fromkeys(text))
        index = {k: i for i, k in enumerate(keys)}
        values = np.column_stack([table.column(f"v{v}").to_numpy() for v in range(len(kinds))]) \
            if table.num_rows else np.zeros((0, len(kinds)))
        return cls.of_rows([tuple(json.loads(k)) for k in keys],
                           np.array([index[t] for t in text], dtype=np.int64),
                           np.asarray(table.column("slice").to_numpy(), dtype=np.int64), values,
                           kinds)
