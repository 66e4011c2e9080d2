"""Offline windowed aggregation from lightweight indexes (thesis §3.3, §3.3.1–§3.3.3).

**Query form.** A COGRA query over a single-event pattern, written as it runs online in the
trends service, e.g. ``RETURN COUNT(*), SUM(E.v), MIN(E.v), MAX(E.v), AVG(E.v) PATTERN
Reading E SEMANTICS skip-till-any-match WITHIN 10 minutes SLIDE 1 minute`` (COGRA's grammar
asks for a SEMANTICS clause; with one event per trend every semantics gives the same trends).
Every trend is one eligible event, so COUNT(*) and COUNT(E) count the eligible events, SUM,
MIN and MAX skip missing values, and AVG is SUM / COUNT(E): exactly what a block's
count/sum/min/max answer (§3.3.1: the index helps only when the aggregate is materialized).
:func:`index_refusal` says why another query cannot use the index (adjacent predicates,
negation, Kleene closures, sequences, ``AND``/``OR`` patterns); it then replays in full.

**GROUP-BY** (which the services ask of every COGRA query on a keyed stream) is answered per
group: a block's statistics are not per group, but when they show a single group for all of
its rows (min = max and no nulls on every GROUP-BY attribute, or no value at all) the block
counts for that group; a block that mixes groups is replayed. Archives keep a key's events
together only by chance (the ordered topic is partitioned by key, blocks are cut by seq), so
this pays for few keys per partition or long runs of one key. ``[attr]`` changes nothing for
single-event trends and is ignored.

**Local predicates** (``WHERE E.v > 3``) are allowed: a block whose statistics make every
local predicate and the event type true for all of its rows (a comparison of one attribute
with a constant, the attribute never null in the block, min/max on the right side) counts as
a whole block, a block that min/max make all-false is skipped, and every other block is
replayed (read and aggregated row by row, with the operator's own predicates). A predicate of
another form decides no block, so the query then replays every block.

**Windows** are COGRA's (SEMANTICS.md): ``[k·SLIDE, k·SLIDE + WITHIN)`` for ``k >= 0``, one
result per window with at least one eligible event, in window order, values formatted by the
operator's own :func:`~situflow.trends.operator.window_results` (ints where whole, AVG a
float, MIN/MAX null without a value).

**Algorithm** (§3.3.1, optimized variant; §3.3.3 for any slide): the time axis is cut into
slices of ``slide2 = WITHIN mod SLIDE`` and ``slide1 = SLIDE - slide2`` (just SLIDE when it
divides WITHIN), so every window is a run of whole slices. Each slice gets one partial
aggregate per group: the sum of the statistics of the blocks that lie inside it, merged with
the rows of the blocks that cross its bounds (the thesis' boundary leaves). A two-stacks sliding
aggregator (the online baseline's role, Tangwongsan et al.) combines slices into windows in
O(1) amortized merges per window. Archive partitions are merged at the slice level, so the
results are those of ``situflow run`` over the whole stream. Count windows (§3.3.3) use the
same slicing on the archive seq of one partition (:func:`count_windows`); the query languages
have no count-window syntax, so they are a core function only.

**Cost rule** (§3.3.2, Table 3.1): :func:`use_index` compares the merges per slide of both
methods, C_index(slide1) + C_index(slide2) against C_replay = slide·r.

Counts, integer sums, MIN and MAX equal the operator's bit for bit. A sum of non-integral
floats adds the same values in another order (per slice, then per window) than the operator
(event by event), so it may differ from the operator's in the last bits.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeGuard

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from situflow.archive.blocks import Block
from situflow.archive.format import ARCHIVE_SEQ
from situflow.codecs.arrow_events import is_json_text, values_of
from situflow.errors import SituflowError
from situflow.events import EventBatch, object_array
from situflow.lang import ast
from situflow.lang.cogra import TypePattern
from situflow.results import TrendResult
from situflow.trends.kernel import ADD, COUNT, COUNT_E, LARGEST, MAX, MIN, SMALLEST, SUM
from situflow.trends.operator import Record, _factorize, _plain, as_float64, window_results
from situflow.trends.query import CompiledTrendQuery

_KIND = {COUNT: ADD, COUNT_E: ADD, SUM: ADD, MIN: SMALLEST, MAX: LARGEST}
_IDENT = {ADD: 0.0, SMALLEST: math.inf, LARGEST: -math.inf}
#: Block verdicts: every row eligible, none, or unknown from the statistics (replay it).
ALL, NONE, SOME = "all", "none", "some"


class WindowError(SituflowError):
    """A windowed aggregation that cannot run as asked (e.g. the index method forced on a
    query the index cannot answer)."""


# --- slices (§3.3.3) ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Slicing:
    """The slices of windows ``[k·slide, k·slide + size)``, ``k >= 0`` (§3.3.3).

    When ``slide`` divides ``size``, slice ``s`` is ``[s·slide, (s+1)·slide)``. Otherwise each
    slide splits into ``slide2 = size mod slide`` and then ``slide1 = slide - slide2``: slice
    ``2j`` is ``[j·slide, j·slide + slide2)``, slice ``2j+1`` the rest of the slide, and
    ``size = slide2 + (size // slide)·(slide1 + slide2)``. A slide longer than the window
    (hopping windows) needs no special case: slide1 is then the gap between windows.

    >>> Slicing(10, 3).slide1, Slicing(10, 3).slide2, Slicing(10, 3).initial_lengths()
    (2, 1, [1, 2, 1, 2, 1, 2, 1])
    """

    size: int
    slide: int

    def __post_init__(self) -> None:
        if self.size <= 0 or self.slide <= 0:
            raise WindowError(f"window size {self.size} and slide {self.slide} must be positive")

    @property
    def slide2(self) -> int:
        return self.size % self.slide

    @property
    def slide1(self) -> int:
        return self.slide - self.slide2

    @property
    def _split(self) -> bool:
        return self.slide2 != 0

    def slice_of(self, t: np.ndarray) -> np.ndarray:
        """The slice of each position ``t`` (floor division, so negative times work too)."""
        t = np.asarray(t, dtype=np.int64)
        j = np.floor_divide(t, self.slide)
        if not self._split:
            return j
        return 2 * j + (t - j * self.slide >= self.slide2)

    def bounds(self, s: int) -> tuple[int, int]:
        """Slice ``s`` as ``[start, end)``."""
        if not self._split:
            return s * self.slide, (s + 1) * self.slide
        j, second = divmod(s, 2)
        start = j * self.slide + (self.slide2 if second else 0)
        return start, (j + 1) * self.slide if second else j * self.slide + self.slide2

    def window_slices(self, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The first and last slice of each window ``k`` (inclusive)."""
        k = np.asarray(k, dtype=np.int64)
        q = self.size // self.slide
        if not self._split:
            return k, k + q - 1
        return 2 * k, 2 * (k + q)

    def windows_of(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The first and last window holding each slice ``s`` (empty when first > last)."""
        s = np.asarray(s, dtype=np.int64)
        q = self.size // self.slide
        if not self._split:
            return s - q + 1, s
        j, second = np.divmod(s, 2)
        return j - q + second, j

    def initial_lengths(self) -> list[int]:
        """The slice lengths of window 0 (the thesis' initial tree ⟨slide2, slide1, ...⟩)."""
        first, last = self.window_slices(np.array([0]))
        lengths = [end - start for start, end in map(self.bounds, range(int(first[0]), int(last[0]) + 1))]
        return [n for n in lengths if n > 0]


# --- partial aggregates --------------------------------------------------------------------------


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
            if not _is_number(value) or math.isnan(value):
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


def _is_number(value: Any) -> TypeGuard[int | float]:
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


# --- the sliding aggregator -----------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def _combine_into(dst: np.ndarray, src: np.ndarray, kinds: np.ndarray) -> None:
    for v in range(dst.shape[0]):
        if kinds[v] == ADD:
            dst[v] += src[v]
        elif kinds[v] == SMALLEST:
            dst[v] = min(dst[v], src[v])
        else:
            dst[v] = max(dst[v], src[v])


@numba.njit(cache=True, nogil=True)
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


# --- the cost rule (§3.3.2) ------------------------------------------------------------------------


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


# --- the query form -------------------------------------------------------------------------------


def index_refusal(compiled: CompiledTrendQuery) -> str | None:
    """Why the lightweight index cannot answer ``compiled`` (None: it can)."""
    plan, tree = compiled.plan, compiled.tree
    if plan.factors or not isinstance(tree.pattern, TypePattern) or len(plan.positions) != 1:
        return "the pattern is not a single event type"
    if plan.atoms or plan.negations:
        return "adjacent predicates and negations depend on the order of events"
    return None


@dataclass(frozen=True)
class WindowedAggregation:
    """A COGRA single-event query evaluated from blocks; ``time_field`` and ``id_field`` are
    the stream's (the type field is the query's)."""

    compiled: CompiledTrendQuery
    time_field: str = "ts"
    id_field: str = "id"
    slicing: Slicing = field(init=False)
    measures: Measures = field(init=False)

    def __post_init__(self) -> None:
        refusal = index_refusal(self.compiled)
        if refusal is not None:
            raise WindowError(f"query {self.compiled.name!r} cannot use the lightweight index: "
                              f"{refusal}; replay it instead")
        plan = self.compiled.plan
        object.__setattr__(self, "slicing", Slicing(plan.size, plan.slide))
        object.__setattr__(self, "measures", Measures(tuple(s.role for s in plan.slots),
                                                      tuple(s.attr for s in plan.slots)))

    @property
    def type_field(self) -> str:
        return self.compiled.options.type_field

    @property
    def type_name(self) -> str:
        return self.compiled.plan.positions[0].type_name

    @property
    def predicates(self) -> tuple[ast.Node, ...]:
        return self.compiled.plan.positions[0].local

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns a replay reads: time, type, the aggregated and the filtered attributes."""
        used = [self.time_field, self.type_field]
        used += [a for a in self.measures.attributes if a is not None]
        used += [n.name for p in self.predicates for n in p.walk() if isinstance(n, ast.Ref)]
        return tuple(dict.fromkeys([*used, *self.group_by]))

    @property
    def group_by(self) -> tuple[str, ...]:
        return self.compiled.plan.group_by

    def group_of(self, block: Block) -> Group | None:
        """The one GROUP-BY group of all of a block's rows, if its statistics prove there is
        one (min = max, or no value at all), as the operator spells group values."""
        group: list[Any] = []
        for attr in self.group_by:
            stats = block.stats.get(attr)
            if stats is None:
                return None
            if stats.count == 0:
                group.append(None)
            elif stats.count == block.count and stats.min == stats.max:
                group.append(_plain(stats.min))
            else:
                return None
        return tuple(group)

    def classify(self, block: Block) -> str:
        """ALL when the statistics prove every row eligible, NONE when they prove no row is,
        else SOME (the block must be replayed)."""
        verdicts = [_decide_equal(block, self.type_field, self.type_name)]
        verdicts += [_decide(block, p) for p in self.predicates]
        if NONE in verdicts:
            return NONE
        return ALL if all(v == ALL for v in verdicts) else SOME

    def rows(self, table: pa.Table, lo: int | None = None, hi: int | None = None) -> Grouped:
        """The partial aggregates per group and slice of rows within ``[lo, hi]``. Eligibility
        is TrendProgram.prepare's for the one position (the type, then the compiled local
        predicates), with the type compared in Arrow rather than as Python strings; groups are
        the operator's (its factorization of the GROUP-BY columns)."""
        hidden = (ARCHIVE_SEQ, self.type_field)
        batch = EventBatch.from_arrow(table.select([c for c in table.column_names
                                                    if c not in hidden]),
                                      time_field=self.time_field, id_field=self.id_field)
        eligible = self._of_type(table)
        for predicate in self.compiled.programs[0].local[0]:
            eligible &= np.broadcast_to(np.asarray(predicate(batch), dtype=np.bool_), len(batch))
        if lo is not None:
            eligible &= batch.ts >= lo
        if hi is not None:
            eligible &= batch.ts <= hi
        rows = np.flatnonzero(eligible)
        if not len(rows):
            return Grouped({})
        values = {a: as_float64(batch.column(a))[rows] for a in self.measures.attributes if a}
        contributions = self.measures.of_rows(np.ones(len(rows), dtype=np.bool_), values)
        keys, codes = self._groups(batch, rows)
        return Grouped.of_rows(keys, codes, self.slicing.slice_of(batch.ts[rows]), contributions,
                               self.measures.kinds)

    def _groups(self, batch: EventBatch, rows: np.ndarray) -> tuple[list[Group], np.ndarray]:
        if not self.group_by:
            return [()], np.zeros(len(rows), dtype=np.int64)
        codes = np.empty((len(rows), len(self.group_by)), dtype=np.int64)
        uniques = []
        for j, attr in enumerate(self.group_by):
            values, codes[:, j] = _factorize(batch.column(attr)[rows])
            uniques.append(values)
        combos, inverse = np.unique(codes, axis=0, return_inverse=True)
        keys = [tuple(uniques[j][c] for j, c in enumerate(combo)) for combo in combos.tolist()]
        return keys, np.asarray(inverse, dtype=np.int64).reshape(-1)

    def _of_type(self, table: pa.Table) -> np.ndarray:
        if self.type_field not in table.column_names:
            return np.zeros(table.num_rows, dtype=np.bool_)
        field = table.schema.field(self.type_field)
        if pa.types.is_string(field.type) and not is_json_text(field):
            same = pc.fill_null(pc.equal(table.column(self.type_field), self.type_name), False)
            return np.asarray(same.to_numpy(zero_copy_only=False), dtype=np.bool_)
        types = object_array(values_of(table, self.type_field))
        return np.asarray(types == self.type_name, dtype=np.bool_)

    def results(self, partials: Grouped) -> list[TrendResult]:
        """The windows of every group, formatted and ordered (window, then group) by the
        operator's own :func:`~situflow.trends.operator.window_results`."""
        plan = self.compiled.plan
        records: list[Record] = []
        for group, group_partials in partials.groups.items():
            # The operator's partition key: GROUP-BY values where window_results reads them.
            key = tuple(group[self.group_by.index(a)] if a in self.group_by else None
                        for a in plan.partition_attrs)
            windows, values = sliding_windows(self.slicing, group_partials, self.measures)
            records += [(int(k), key, values[i], 0) for i, k in enumerate(windows.tolist())]
        return window_results(plan, self.compiled.name, records)


def _decide_equal(block: Block, attribute: str, value: str) -> str:
    stats = block.stats.get(attribute)
    if stats is None:
        return SOME
    if stats.count == 0 or not isinstance(stats.min, str) or not isinstance(stats.max, str):
        return NONE if stats.count == 0 else SOME
    if stats.max < value or stats.min > value:
        return NONE
    return ALL if stats.min == stats.max == value and stats.count == block.count else SOME


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}


def _decide(block: Block, predicate: ast.Node) -> str:
    """A comparison of one attribute with a number, decided for all of a block's rows by its
    min/max (a missing value makes a comparison false); SOME for anything else."""
    if not isinstance(predicate, ast.Binary) or predicate.op not in _FLIP:
        return SOME
    left, right, op = predicate.left, predicate.right, predicate.op
    if isinstance(left, ast.Literal) and isinstance(right, ast.Ref):
        left, right, op = right, left, _FLIP[op]
    if not isinstance(left, ast.Ref) or not isinstance(right, ast.Literal) \
            or right.unit is not None or not _is_number(right.value):
        return SOME
    stats = block.stats.get(left.name)
    if stats is None:
        return SOME
    if stats.count == 0:
        return NONE
    low, high, c = stats.min, stats.max, right.value
    if not _is_number(low) or not _is_number(high):
        return SOME
    some_true, all_true = {
        "<": (low < c, high < c), "<=": (low <= c, high <= c),
        ">": (high > c, low > c), ">=": (high >= c, low >= c),
        "=": (low <= c <= high, low == high == c), "!=": (not low == high == c, c < low or c > high),
    }[op]
    if not some_true:
        return NONE
    return ALL if all_true and stats.count == block.count else SOME


# --- planning and evaluation ----------------------------------------------------------------------


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


# --- count windows (§3.3.3) ------------------------------------------------------------------------


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
