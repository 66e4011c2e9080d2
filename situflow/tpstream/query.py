"""The compiled TPStream query (thesis §5.3): plain, immutable data shared by every partition
and every operator. :mod:`situflow.tpstream.compiler` builds it; the operators read it. It
imports no operator: the one that evaluates it is bound as its :class:`Engine`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from situflow.lang import tpstream as lang
from situflow.lang.attributes import AttributeTypes
from situflow.lang.identity import query_id
from situflow.operator import Operator, QueryOptions

TIME_FIELD = "ts"


@dataclass(frozen=True)
class AggregateRef:
    """One aggregate a RETURN expression needs: ``func`` over ``attr`` of situation ``defn``.

    ``attr`` is None for ``count(B)`` and ``count(*)``-style counts of a situation's events.
    """

    defn: int
    func: str
    attr: str | None


@dataclass(frozen=True)
class SituationDef:
    name: str
    condition: Callable[[Any], Any]
    # Duration bounds in event-time ticks; None means unbounded (thesis Def 5.2, eta).
    dmin: float | None
    dmax: float | None


class Engine(Protocol):
    """What evaluates a compiled query: :func:`situflow.tpstream.compile` binds the fused
    operator, :mod:`situflow.tpstream.split.halves` rebinds a query to a half of distributed
    TPStream. The query holds it as data, so this module imports no operator and sits below all
    of them."""

    def __call__(self, query: TPStreamQuery) -> Operator: ...

    def restore(self, query: TPStreamQuery, snapshot: dict[str, Any]) -> Operator: ...

    def plan(self, query: TPStreamQuery) -> list[str]: ...


@dataclass(frozen=True)
class TPStreamQuery:
    """A compiled TPStream query: definitions, constraints, window and outputs, and the
    engine that evaluates it."""

    name: str
    ast: lang.Query
    options: QueryOptions
    definitions: tuple[SituationDef, ...]
    # constraints[i][j]: relations allowed for "situation i <rel> situation j", None if free.
    constraints: tuple[tuple[frozenset[str] | None, ...], ...]
    window: float
    partition_by: tuple[str, ...]
    aggregates: tuple[AggregateRef, ...]
    outputs: tuple[tuple[str, Callable[[Any], Any]], ...]
    # Per output, the position in ``aggregates`` of the aggregate it returns as it is (None: an
    # expression over aggregates), so results can be built a column at a time.
    output_aggregates: tuple[int | None, ...]
    engine: Engine = field(compare=False, repr=False)
    language: str = field(default="tpstream")

    @functools.cached_property
    def query_id(self) -> str:
        # Cached: every situation batch and its merge check it.
        return query_id(self.canonical())

    def canonical(self) -> str:
        return self.ast.to_text()

    @property
    def single(self) -> bool:
        """Whether the pattern is one situation (``PATTERN B``): a constraint relates two
        different situations, so a query with one definition has none."""
        return len(self.definitions) == 1

    @property
    def starts_within(self) -> float:
        """How far apart the starts of one match's situations may lie: the window, and 0 for
        ``PATTERN B``. Offline replay (:mod:`situflow.offline.queries`) and the backfill's
        hand-off (workers/handoff.py) reach this far from a situation for the rest of its
        match; a single situation's match is the situation, whatever its WITHIN."""
        return 0.0 if self.single else self.window

    @property
    def partition_attributes(self) -> tuple[str, ...]:
        """``PARTITION BY``."""
        return self.partition_by

    @functools.cached_property
    def attribute_types(self) -> AttributeTypes:
        return lang.attribute_types(self.ast).without({self.options.type_field})

    @functools.cached_property
    def refs_by_def(self) -> tuple[tuple[int, ...], ...]:
        """Per definition, the positions in ``aggregates`` of the aggregates over it."""
        return tuple(tuple(k for k, ref in enumerate(self.aggregates) if ref.defn == d)
                     for d in range(len(self.definitions)))

    def describe(self) -> str:
        lines = [self.canonical(), "", "evaluation order (thesis eqs. 5.2-5.5, prior statistics):"]
        lines += self.engine.plan(self)
        return "\n".join(lines)

    def operator(self) -> Operator:
        return self.engine(self)

    def restore(self, snapshot: dict[str, Any]) -> Operator:
        return self.engine.restore(self, snapshot)


def condition_mask(defn: SituationDef, batch: Any) -> np.ndarray:
    """The condition of ``defn`` over a batch as a boolean array (missing values are false)."""
    mask = np.asarray(defn.condition(batch))
    if mask.dtype.kind == "f":
        mask = (mask != 0) & ~np.isnan(mask)
    elif mask.dtype.kind in "iu":
        mask = mask != 0
    elif mask.dtype != bool:
        mask = np.array([v is True for v in mask.ravel()], dtype=bool).reshape(mask.shape)
    return np.broadcast_to(mask, (len(batch),))


def quiet_mask(query: TPStreamQuery, batch: Any) -> np.ndarray:
    """Per event of ``batch`` whether none of ``query``'s definitions holds on it: no situation
    of the query spans such an event, so one that begins after it is whole. Offline widening
    (:mod:`situflow.offline.queries`) and the hand-off's per-key begin (batch/README.md,
    "Backfill") cut the stream there."""
    held = np.zeros(len(batch), dtype=bool)
    for definition in query.definitions:
        held |= condition_mask(definition, batch)
    return ~held
