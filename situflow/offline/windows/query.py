"""The query form (thesis §3.3.1): a COGRA single-event query as a windowed aggregation
(:class:`WindowedAggregation`), why another query cannot use the index
(:func:`index_refusal`), the block decisions from statistics (type, local predicates,
GROUP-BY group), replayed rows as partial aggregates, and the operator's results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from situflow.archive.blocks import Block
from situflow.archive.format import ARCHIVE_SEQ
from situflow.codecs.arrow_events import is_json_text, values_of
from situflow.events import EventBatch, object_array
from situflow.lang import ast
from situflow.lang.cogra import TypePattern
from situflow.offline.windows.partials import Group, Grouped, Measures, is_number
from situflow.offline.windows.slices import Slicing, WindowError
from situflow.offline.windows.sliding import sliding_windows
from situflow.results import TrendResult
from situflow.trends.operator import Record, as_float64, factorize, plain, window_results
from situflow.trends.query import CompiledTrendQuery

#: Block verdicts: every row eligible, none, or unknown from the statistics (replay it).
ALL, NONE, SOME = "all", "none", "some"


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
                group.append(plain(stats.min))
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
            values, codes[:, j] = factorize(batch.column(attr)[rows])
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
            or right.unit is not None or not is_number(right.value):
        return SOME
    stats = block.stats.get(left.name)
    if stats is None:
        return SOME
    if stats.count == 0:
        return NONE
    low, high, c = stats.min, stats.max, right.value
    if not is_number(low) or not is_number(high):
        return SOME
    some_true, all_true = {
        "<": (low < c, high < c), "<=": (low <= c, high <= c),
        ">": (high > c, low > c), ">=": (high >= c, low >= c),
        "=": (low <= c <= high, low == high == c), "!=": (not low == high == c, c < low or c > high),
    }[op]
    if not some_true:
        return NONE
    return ALL if all_true and stats.count == block.count else SOME
