"""From a compiled query to what offline evaluation needs of it (thesis §3.2.2, §3.4.1, §3.4.4).

:func:`offline_query` reads the query's AST (every engine keeps it: ``SaseCompiledQuery.ast``,
``TPStreamQuery.ast``, ``CompiledTrendQuery.tree``/``.plan``) and builds the pattern model of
:mod:`situflow.offline.pattern`: the symbols every match must contain, each with the necessary
single-attribute conditions of :func:`situflow.offline.predicates.necessary_conditions`
(negation normal form first, AT-14), the window in ticks and the partition keys.

- **SASE+** (ordered): a positive component is a BS with its type condition and the WHERE
  conjuncts on its variable; a Kleene plus is a BS for its first, mandatory iteration (only
  ``a[1]`` conditions bind it: ``a[i]`` applies from the second event on, as the NFA's take
  edge) followed by a KS; a negation is a zero-width KS (§3.4.4, research note: it consumes no
  position). Strict and partition contiguity keep adjacent BSs in one BB (partition contiguity
  per key, by ``key_seq``); the skip strategies separate every BS by a KS. ``CONSUME`` stays
  exact per interval: a run that a match drops in a full replay is dropped by a match whose
  events overlap the run's, so both lie in one merged interval (tested by the property test).
- **TPStream** (order-free): a match's situations may lie in any order, so no sequence of
  definitions is sound for Algorithm 3.1; every definition is a BS (a situation contains at
  least one event that satisfies its condition) and :attr:`OfflineQuery.order_free` tells
  :func:`situflow.offline.replay.candidate_intervals` to use the order-free rule. Duration
  constraints neither widen nor prune the intervals: a match's situations lie within the window
  whatever their durations, and widening to quiet events (:func:`~situflow.offline.replay.widen`)
  gives each situation its true start and end, so ``AT LEAST``/``AT MOST``/``BETWEEN`` are
  decided on the true duration (a deferred match is emitted at the situation's end, at or
  before the quiet event that closes every situation). A match of ``PATTERN B`` is one
  situation, which starts at a hit of B, so its pattern's window is 0
  (:attr:`~situflow.tpstream.query.TPStreamQuery.starts_within`) whatever its WITHIN.
- **COGRA** (windows): the operator reports a window and group, with zero counts, as soon as
  one event of *any* type of the pattern falls in it (even a ``B`` of ``SEQ(A+, B)`` with no
  ``A`` before it, or an event of an optional ``B*``), so the types every trend contains are
  not necessary for a result and pruning by them would lose those rows. The pattern is
  therefore one symbol, "an event of one of the pattern's types" (negated types included),
  with the window ``size - 1``; intervals are widened to whole windows and a window is kept
  only when it lies fully inside a replayed range. The method applies to every COGRA query
  but prunes only where the pattern's types are rare; local predicates are not used (a
  condition on one type says nothing about events of the others).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Literal, Protocol

import numpy as np

from situflow.archive.ranges import Condition, Range
from situflow.events import EventBatch
from situflow.kslack.positions import SEQ_FIELD
from situflow.lang import ast
from situflow.lang.sase import Index, KleeneRef, SaseQuery, Strategy
from situflow.offline.pattern import PatternQuery, Symbol
from situflow.offline.predicates import necessary_conditions
from situflow.operator import CompiledQuery
from situflow.tpstream.query import quiet_mask

#: The archive's dense sequence number column (situflow.archive.format.ARCHIVE_SEQ).
ARCHIVE_SEQ = "_situflow_archive_seq"

Kind = Literal["events", "situations", "windows"]


class StreamFields(Protocol):
    """What offline evaluation reads of a stream's settings (``situflow.archive``'s
    ``StreamSettings`` has these fields)."""

    @property
    def stream(self) -> str: ...

    @property
    def time_field(self) -> str: ...

    @property
    def time_unit(self) -> float: ...

    @property
    def type_field(self) -> str: ...

    @property
    def key_fields(self) -> Any: ...

    @property
    def id_field(self) -> str: ...


@dataclass(frozen=True)
class OfflineQuery:
    """A compiled query prepared for offline evaluation (module doc)."""

    compiled: CompiledQuery
    # None: no symbol is mandatory in every match, so nothing prunes (full replay).
    pattern: PatternQuery | None
    # The archive columns to read; None reads them all.
    columns: tuple[str, ...] | None
    kind: Kind
    # COGRA's (size, slide) in ticks: replay covers whole windows.
    window: tuple[int, int] | None
    # TPStream: per event, whether no definition's condition holds (no situation spans it).
    quiet: Callable[[EventBatch], np.ndarray] | None
    settings: StreamFields
    # Whether a match's symbols may occur in any order (TPStream situations, COGRA trends):
    # replay intervals then come from the order-free rule, never from Algorithm 3.1.
    order_free: bool = False
    # Why ``pattern`` is None, for ``--explain``.
    reason: str = ""


def offline_query(compiled: CompiledQuery, settings: StreamFields) -> OfflineQuery:
    """The offline form of ``compiled`` over a stream with ``settings`` (module doc)."""
    builders = {"sase": _sase, "tpstream": _tpstream, "cogra": _cogra}
    return builders[compiled.language](compiled, settings)


# --- SASE+ -------------------------------------------------------------------------------------

def _sase(compiled: Any, settings: StreamFields) -> OfflineQuery:
    query: SaseQuery = compiled.ast
    window = compiled.automaton.window
    conjuncts = query.conjuncts()
    contiguous = query.effective_strategy in (Strategy.STRICT, Strategy.PARTITION)
    symbols: list[Symbol] = []
    for component in query.components:
        if component.negated:
            symbols.append(Symbol(f"~{component.var}", kleene=True))
            continue
        if symbols and not contiguous and not symbols[-1].kleene:
            symbols.append(Symbol("true", kleene=True))
        conditions = (_type_condition(settings.type_field, component.type_name),
                      *_conditions(conjuncts, _sase_attribute(component.var, component.kleene)))
        symbols.append(Symbol(component.var, conditions=_merged(conditions)))
        if component.kleene:
            symbols.append(Symbol(f"{component.var}[]", kleene=True))
    keys = compiled.partition_attributes
    used = _used(compiled)
    return _result(compiled, settings, symbols, window, keys, used, "events")


def _sase_attribute(var: str, kleene: bool) -> Callable[[ast.Node], str | None]:
    def attribute_of(node: ast.Node) -> str | None:
        if kleene:
            if isinstance(node, KleeneRef) and node.var == var and node.index is Index.CONST \
                    and node.k == 1 and node.attr is not None:
                return node.attr
            return None
        if isinstance(node, ast.Ref) and node.qualifier == var:
            return node.name
        return None
    return attribute_of


# --- TPStream ----------------------------------------------------------------------------------

def _tpstream(compiled: Any, settings: StreamFields) -> OfflineQuery:
    tree = compiled.ast
    alias = tree.alias

    def attribute_of(node: ast.Node) -> str | None:
        if isinstance(node, ast.Ref) and node.qualifier in (None, alias):
            return node.name
        return None

    symbols: list[Symbol] = []
    for definition in tree.definitions:
        if symbols:
            symbols.append(Symbol("true", kleene=True))
        symbols.append(Symbol(definition.name, conditions=_merged(
            necessary_conditions(definition.condition, attribute_of))))
    offline = _result(compiled, settings, symbols, compiled.starts_within, compiled.partition_by,
                      _used(compiled), "situations", order_free=True)
    return replace(offline, quiet=partial(quiet_mask, compiled))


# --- COGRA -------------------------------------------------------------------------------------

def _cogra(compiled: Any, settings: StreamFields) -> OfflineQuery:
    plan = compiled.plan
    types = sorted({p.type_name for side in (plan, *plan.factors)
                    for p in (*side.positions, *side.negations)})
    symbol = Symbol("event", conditions=(Condition(settings.type_field, tuple(
        Range(settings.type_field, t, t) for t in types)),))
    offline = _result(compiled, settings, [symbol], plan.size - 1, plan.partition_attrs,
                      _used(compiled), "windows", order_free=True)
    return replace(offline, window=(plan.size, plan.slide))


# --- shared ------------------------------------------------------------------------------------

def _type_condition(type_field: str, type_name: str) -> Condition:
    return Condition(type_field, (Range(type_field, type_name, type_name),))


def _conditions(exprs: Iterable[ast.Node],
                attribute_of: Callable[[ast.Node], str | None]) -> list[Condition]:
    return [c for expr in exprs for c in necessary_conditions(expr, attribute_of)]


def _merged(conditions: Iterable[Condition]) -> tuple[Condition, ...]:
    """The conditions in a stable order (by attribute); the symbol ANDs them."""
    return tuple(sorted(conditions, key=lambda c: c.attribute))


def _used(compiled: Any) -> frozenset[str]:
    return frozenset(compiled.attribute_types.used) | set(compiled.partition_attributes)


def _result(compiled: Any, settings: StreamFields, symbols: list[Symbol], window: float,
            keys: Iterable[str], used: frozenset[str], kind: Kind,
            order_free: bool = False) -> OfflineQuery:
    keys = tuple(keys)
    columns = tuple(sorted(used | {settings.time_field, settings.type_field, settings.id_field,
                                   SEQ_FIELD, ARCHIVE_SEQ, *keys}))
    pattern: PatternQuery | None = None
    reason = ""
    if not any(not s.kleene for s in symbols):
        reason = "no symbol is mandatory in every match: the whole range is replayed"
    elif not math.isfinite(window):
        reason = "no WITHIN: a match may span the whole stream, so the whole range is replayed"
    else:
        pattern = PatternQuery(tuple(symbols), int(window), keys)
    return OfflineQuery(compiled, pattern, columns, kind, None, None, settings,
                        order_free=order_free, reason=reason)


