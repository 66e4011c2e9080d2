"""The pattern analyzer of COGRA (SIGMOD 2019 §3.1): the automaton of a pattern.

Every occurrence of a pattern variable is one automaton state (*position*); repeated types get
one position per variable (Appendix C: ``SEQ(A+, B, A)`` is ``SEQ(A1+, B, A2)``).
``follow[p]`` lists the positions that may come right after ``p`` in a trend, the inverse of
``P.predTypes``. A trend is a sequence of (event, position) bindings, so ``COUNT(A)`` is well
defined even when an event could take several positions. The pattern is read through the
Appendix C rewrites of :mod:`situflow.lang.cogra_sugar`. ``OR`` is the union of the trends of
its sides; the executor adds the sides' aggregates, which is GRETA's
``COUNT(P1 OR P2) = COUNT(P1) + COUNT(P2) - COUNT(P12)`` only when no trend matches both sides
(``P12`` empty), so a pattern that could match one trend in two ways is refused
(:func:`check_unambiguous`). ``SEQ(P1, NOT N, P2)`` guards the transitions from ``P1``'s last
to ``P2``'s first positions: an ``N`` event between the two events forbids that adjacency
(Appendix C's type-grained reading: earlier aggregates may not flow into the following types),
for every semantics.
"""

from __future__ import annotations

from dataclasses import dataclass

from situflow.lang import ast
from situflow.lang.cogra import KleenePattern, NegatedPattern, OrPattern, SeqPattern, TypePattern
from situflow.lang.cogra_sugar import alternatives
from situflow.lang.validate import error
from situflow.lang.validate_cogra import negation_indexes
from situflow.trends.configuration import Position


@dataclass
class PatternAutomaton:
    """What the pattern analyzer builds: positions, transitions and negation guards."""

    positions: list[Position]
    start: set[int]
    end: set[int]
    follow: list[set[int]]
    negations: list[Position]
    # Transitions (p, q) that an event of negation g between them forbids: {(p, q): g}.
    guarded: dict[tuple[int, int], int]


def analyze_pattern(pattern: ast.Node, lengths: dict[str, int]) -> PatternAutomaton:
    """Positions and transitions of ``pattern`` after the Appendix C rewrites: Glushkov's
    construction, which for type, ``SEQ``, ``+`` and ``OR`` yields exactly the trends of
    Definition 2.4."""
    negations = negation_indexes(pattern)
    found = [a for a in alternatives(pattern, lengths) if a is not None]
    positions: list[Position] = []
    follow: list[set[int]] = []
    # Every way a transition arises, with the negation that guards it (-1: none).
    guards: dict[tuple[int, int], set[int]] = {}

    def connect(last: set[int], first: set[int], guard: int) -> None:
        for p in last:
            follow[p] |= first
            for q in first:
                guards.setdefault((p, q), set()).add(guard)

    def build(node: ast.Node) -> tuple[set[int], set[int]]:
        """Glushkov: the first and last positions of ``node``; fills ``follow``."""
        if isinstance(node, TypePattern):
            positions.append(Position(node.variable, node.type_name))
            follow.append(set())
            return {len(positions) - 1}, {len(positions) - 1}
        if isinstance(node, SeqPattern):
            first, last = build(node.items[0])
            guard = -1
            for item in node.items[1:]:
                if isinstance(item, NegatedPattern):
                    guard = negations[item.inner.variable]
                    continue
                item_first, item_last = build(item)
                connect(last, item_first, guard)
                last, guard = item_last, -1
            return first, last
        if isinstance(node, KleenePattern):
            first, last = build(node.inner)
            connect(last, first, -1)
            return first, last
        assert isinstance(node, OrPattern)
        firsts, lasts = zip(*(build(item) for item in node.items), strict=True)
        return set().union(*firsts), set().union(*lasts)

    top = found[0] if len(found) == 1 else OrPattern(tuple(found))
    first, last = build(top)
    check_unambiguous(pattern, positions, first, last, follow)
    guarded: dict[tuple[int, int], int] = {}
    for (p, q), ways in guards.items():
        if -1 not in ways:  # a transition that also arises unguarded is not guarded
            if len(ways) > 1:
                raise error(pattern, "two negations guard the same transition; merge them")
            guarded[(p, q)] = ways.pop()
    by_source: dict[int, set[int]] = {}
    for (p, _), g in guarded.items():
        by_source.setdefault(p, set()).add(g)
    if any(len(gs) > 1 for gs in by_source.values()):
        raise error(pattern, "a sub-pattern is followed by two different negations; "
                             "this is not supported")
    negated = sorted(negations.items(), key=lambda item: item[1])
    types = {n.inner.variable: n.inner.type_name for n in pattern.walk()
             if isinstance(n, NegatedPattern)}
    return PatternAutomaton(positions, first, last, follow,
                      [Position(v, types[v]) for v, _ in negated], guarded)


def check_unambiguous(pattern: ast.Node, positions: list[Position], start: set[int],
                       end: set[int], follow: list[set[int]]) -> None:
    """Refuse a pattern whose automaton can match one trend along two paths.

    A trend is a sequence of (event, variable) bindings, and the trends of ``P1 OR P2`` are a
    set: GRETA (Poppe et al., VLDB 2017) counts a trend of both sides once,
    ``COUNT(P1 OR P2) = COUNT(P1) + COUNT(P2) - COUNT(P12)``. The executor adds the aggregates
    of every path, so it is exact when no two paths spell the same variables, the case
    ``COUNT(P12) = 0``. That is decided on the product of the automaton with itself: a pair of
    different positions reachable from two start positions and leading to two end positions
    by equally labelled steps is such a trend. Predicates are ignored, so this is safe.
    """
    label = [p.variable for p in positions]
    parent: dict[tuple[int, int], tuple[int, int] | None] = {
        (p, q): None for p in start for q in start if label[p] == label[q]}
    frontier = list(parent)
    while frontier:
        pair = frontier.pop()
        for p in follow[pair[0]]:
            for q in follow[pair[1]]:
                if label[p] == label[q] and (p, q) not in parent:
                    parent[(p, q)] = pair
                    frontier.append((p, q))
    # Backwards from the pairs of end positions: the pairs that can still finish a trend.
    onward: dict[tuple[int, int], tuple[int, int] | None] = {
        pair: None for pair in parent if pair[0] in end and pair[1] in end}
    frontier = list(onward)
    while frontier:
        pair = frontier.pop()
        for before in parent:
            if before not in onward and pair[0] in follow[before[0]] \
                    and pair[1] in follow[before[1]]:
                onward[before] = pair
                frontier.append(before)
    split = next((pair for pair in onward if pair[0] != pair[1]), None)
    if split is None:
        return
    trend: list[str] = []
    back: tuple[int, int] | None = split
    while back is not None:
        trend.insert(0, label[back[0]])
        back = parent[back]
    ahead = onward[split]
    while ahead is not None:
        trend.append(label[ahead[0]])
        ahead = onward[ahead]
    raise error(pattern, f"this pattern matches the trend {' '.join(trend)} in two ways (two "
                         "alternatives, or two ways through a Kleene plus), and each trend "
                         "counts once (GRETA: COUNT(P1 OR P2) = COUNT(P1) + COUNT(P2) - "
                         "COUNT(P12)); situflow does not compute COUNT(P12): make the "
                         "alternatives exclude each other, e.g. with their own variables")
