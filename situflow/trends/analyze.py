"""The static query analyzer of COGRA (SIGMOD 2019 §3, Fig. 3): a validated query to the
immutable :class:`~situflow.trends.configuration.TrendPlan` the runtime executor follows.

Its three steps are one module each: the pattern analyzer (§3.1,
:mod:`situflow.trends.pattern_analyzer`), the predicate classifier (§3.2,
:mod:`situflow.trends.predicate_classifier`) and the granularity selector (§3.3, Table 5,
:mod:`situflow.trends.granularity_selector`); this module adds the windows and the aggregate
slots (§2.3, Table 9). ``P1 AND P2`` (a pair of trends, one per side) gets one plan per side in
:attr:`TrendPlan.factors`; :mod:`situflow.trends.conjunction` combines their aggregates.
:func:`situflow.lang.validate_cogra.validate` runs first.
"""

from __future__ import annotations

from dataclasses import replace

from situflow.lang import ast
from situflow.lang.cogra import Aggregate, AndPattern, CograQuery
from situflow.lang.cogra_sugar import minimal_lengths
from situflow.lang.validate_cogra import split_where, window_ticks
from situflow.operator import QueryOptions
from situflow.trends.configuration import MODES, Output, Position, Slot, TrendPlan
from situflow.trends.granularity_selector import select_granularity
from situflow.trends.kernel import COUNT, COUNT_E, MAX, MIN, SUM
from situflow.trends.pattern_analyzer import analyze_pattern
from situflow.trends.predicate_classifier import classify_predicates


def analyze(query: CograQuery, options: QueryOptions) -> TrendPlan:
    """Run the three analyzer steps of Fig. 3 on a validated query.

    A conjunction (Appendix C) is analyzed side by side: each side is a query of its own with
    the predicates on its variables, and aggregates of variables of the other sides have no
    target in it (they stay 0 there, and the sides' values are combined later).
    """
    if not isinstance(query.pattern, AndPattern):
        return _analyze_automaton(query, options)
    sides = query.pattern.items
    where = split_where(query, sides)
    factors = tuple(_analyze_automaton(replace(query, pattern=side, where=tuple(where[k])),
                                       options) for k, side in enumerate(sides))
    first = factors[0]
    return TrendPlan(
        (), (), (), (), (), query.semantics, first.mode, "conjunction",
        f"conjunction of {len(factors)} sub-patterns: their window aggregates are combined "
        "per partition (COUNT(P1 AND P2) = COUNT(P1) * COUNT(P2))", first.equivalence,
        query.group_by, first.size, first.slide,
        tuple(Slot(s.role, (), s.attr) for s in first.slots), first.outputs, factors=factors,
    )


def _analyze_automaton(query: CograQuery, options: QueryOptions) -> TrendPlan:
    """The plan of one pattern without AND."""
    automaton = analyze_pattern(query.pattern, minimal_lengths(query))
    variables: dict[str, list[int]] = {}
    for i, pos in enumerate(automaton.positions):
        variables.setdefault(pos.variable, []).append(i)
    negated = {n.variable: g for g, n in enumerate(automaton.negations)}
    predicates = classify_predicates(query, variables, negated, automaton.follow)
    positions = [Position(p.variable, p.type_name, tuple(predicates.local[i]))
                 for i, p in enumerate(automaton.positions)]
    negations = tuple(Position(n.variable, n.type_name, tuple(predicates.negation_local[g]))
                      for g, n in enumerate(automaton.negations))
    follow_t = tuple(tuple(sorted(f)) for f in automaton.follow)
    start_t = tuple(i in automaton.start for i in range(len(positions)))
    end_t = tuple(i in automaton.end for i in range(len(positions)))
    slots, outputs = _aggregates(query, positions, variables)
    size = round(window_ticks(query.within, options.time_unit))
    slide = size if query.slide is None else round(window_ticks(query.slide, options.time_unit))
    atoms = predicates.atoms
    mode, granularity, path = select_granularity(
        MODES[query.semantics], positions, start_t, follow_t, atoms, bool(negations))
    return TrendPlan(
        tuple(positions), start_t, end_t, follow_t, tuple(atoms), query.semantics, mode,
        granularity, path, predicates.equivalence, query.group_by, size, slide, slots, outputs,
        negations, tuple(sorted(automaton.guarded.items())),
    )


# --- aggregates (§2.3, Table 9) ----------------------------------------------------------------


def _aggregates(
    query: CograQuery, positions: list[Position], variables: dict[str, list[int]],
) -> tuple[tuple[Slot, ...], tuple[Output, ...]]:
    slots: list[Slot] = [Slot(COUNT)]
    # Keyed by what the query names, not by targets: the sides of a conjunction then number
    # their slots alike, whatever each side binds.
    index: dict[tuple[int, str | None, str | None], int] = {}

    def slot(role: int, item: Aggregate, targets: tuple[int, ...]) -> int:
        attr = None if role == COUNT_E else item.attr
        key = (role, item.variable, attr)
        if key not in index:
            index[key] = len(slots)
            slots.append(Slot(role, targets, attr))
        return index[key]

    outputs: list[Output] = []
    for item in query.returns:
        label = item.to_text() if isinstance(item, Aggregate) else ""
        if isinstance(item, ast.Ref):
            outputs.append(Output(item.name, group_attr=item.name))
            continue
        assert isinstance(item, Aggregate)
        if item.variable is None:
            outputs.append(Output(label, func="COUNT", slots=(0,)))
            continue
        targets = _targets(item, positions, variables)
        if item.func == "COUNT":
            outputs.append(Output(label, func="COUNT", slots=(slot(COUNT_E, item, targets),)))
        elif item.func == "AVG":
            pair = (slot(SUM, item, targets), slot(COUNT_E, item, targets))
            outputs.append(Output(label, func="AVG", slots=pair))
        else:
            role = {"SUM": SUM, "MIN": MIN, "MAX": MAX}[item.func]
            outputs.append(Output(label, func=item.func, slots=(slot(role, item, targets),)))
    return tuple(slots), tuple(outputs)


def _targets(item: Aggregate, positions: list[Position],
             variables: dict[str, list[int]]) -> tuple[int, ...]:
    """A variable names its positions; a type name not used as a variable names all of its
    (none when another side of a conjunction binds it)."""
    assert item.variable is not None
    if item.variable in variables:
        return tuple(variables[item.variable])
    return tuple(i for i, p in enumerate(positions) if p.type_name == item.variable)
