"""The static query analyzer of COGRA §3 (Fig. 3): pattern analyzer, predicate classifier and
granularity selector, producing the immutable :class:`Plan` the runtime executor follows.

Pattern analyzer (§3.1). Every occurrence of a pattern variable is one automaton state
(*position*); repeated types get one position per variable (Appendix C: ``SEQ(A+, B, A)`` is
``SEQ(A1+, B, A2)``). ``follow[p]`` lists the positions that may come right after ``p`` in a
trend, the inverse of ``P.predTypes``, computed by Glushkov's construction, which for type,
``SEQ``, ``+`` and ``OR`` yields exactly the trends of Definition 2.4. A trend is a sequence
of (event, position) bindings, so ``COUNT(A)`` is well defined even when an event could take
several positions. Appendix C's sugar is rewritten first: ``SEQ(P1*, P2)`` becomes
``SEQ(P1+, P2) OR P2`` (so every alternative is judged by the semantics on its own, as the
paper's disjunction), and ``LENGTH(A) >= 3`` unrolls ``A+`` to ``SEQ(A, A, A+)``. ``OR`` is
the union of the trends of its sides; the executor adds the sides' aggregates, which is
GRETA's ``COUNT(P1 OR P2) = COUNT(P1) + COUNT(P2) - COUNT(P12)`` only when no trend matches
both sides (``P12`` empty), so a pattern that could match one trend in two ways is refused
(:func:`_check_unambiguous`). ``P1 AND P2`` (a pair of trends, one per side) gets one plan per
side in :attr:`Plan.factors`; :mod:`situflow.trends.conjunction` combines their aggregates.
``SEQ(P1, NOT N, P2)`` guards the transitions from ``P1``'s last to ``P2``'s first positions:
an ``N`` event between the two events forbids that adjacency (Appendix C's type-grained
reading: earlier aggregates may not flow into the following types), for every semantics.

Predicate classifier (§3.2). ``[attrs]`` partitions the stream; a predicate on one variable is
local (it filters the events that may take that position, before contiguity is judged, §7);
``X.a ⊙ NEXT(Y).b`` restricts adjacency between an ``X`` and a following ``Y`` event.

Granularity selector (Table 5): ANY without adjacent predicates is type-grained (§4), ANY
with them mixed-grained (§5; fine-grained when every position is event-grained), NEXT and CONT
pattern-grained (§6). For NEXT the paper's Algorithm 3 keeps only the last matched event; it
equals Definition 2.6 only when no matched event can leave an older partial trend waiting
(:func:`algorithm3_is_exact`). Elsewhere the executor keeps the *pending* partial-trend
aggregates of each position until their next adjacent event consumes them, which is
Definition 2.6 exactly and still never enumerates trends (``SEMANTICS.md``, COGRA).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, replace

from situflow.lang import ast
from situflow.lang.cogra import (
    Aggregate,
    AndPattern,
    CograQuery,
    Equivalence,
    KleenePattern,
    Length,
    LengthRef,
    NegatedPattern,
    NextRef,
    OrPattern,
    SeqPattern,
    TypePattern,
)
from situflow.lang.compile import literal_value
from situflow.lang.validate import Type, check_condition, error
from situflow.operator import QueryOptions
from situflow.trends.kernel import (
    ANY,
    CONT,
    COUNT,
    COUNT_E,
    EQ,
    GE,
    GT,
    LE,
    LT,
    MAX,
    MIN,
    NE,
    NEXT,
    NEXT_ALG3,
    SUM,
)

MODES = {"skip-till-any-match": ANY, "skip-till-next-match": NEXT, "contiguous": CONT}
OPS = {"<": LT, "<=": LE, ">": GT, ">=": GE, "=": EQ, "!=": NE}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}
# Window lengths in ticks: window ends (k·SLIDE + WITHIN) stay inside 64-bit event times.
MAX_TICKS = 2**62
# The operator keeps a slot per window an event belongs to (WITHIN / SLIDE rounded up).
MAX_WINDOWS_PER_EVENT = 100_000


@dataclass(frozen=True)
class Position:
    """One automaton state: a pattern variable, its event type and its local predicates."""

    variable: str
    type_name: str
    local: tuple[ast.Node, ...] = ()


@dataclass(frozen=True)
class Atom:
    """One adjacent predicate ``prev_expr op next_expr`` between positions ``prev`` → ``next``."""

    prev: int
    next: int
    op: str
    prev_expr: ast.Node  # over the earlier event (references `X.attr`)
    next_expr: ast.Node  # over the later event (references `NEXT(Y).attr`)


@dataclass(frozen=True)
class Slot:
    """One aggregate value kept per partial trend (Table 9): role, target positions, attribute."""

    role: int
    targets: tuple[int, ...] = ()
    attr: str | None = None


@dataclass(frozen=True)
class Output:
    """One RETURN item: a grouping attribute or an aggregate computed from value slots."""

    label: str
    group_attr: str | None = None
    func: str | None = None
    slots: tuple[int, ...] = ()


@dataclass(frozen=True)
class Plan:
    """The Cogra configuration (Fig. 3): automaton, predicates, granularity, windows, outputs."""

    positions: tuple[Position, ...]
    start: tuple[bool, ...]
    end: tuple[bool, ...]
    follow: tuple[tuple[int, ...], ...]
    atoms: tuple[Atom, ...]
    semantics: str
    mode: int
    granularity: str  # "type", "mixed" or "pattern" (Table 5)
    path: str  # how the executor evaluates it, for describe()
    equivalence: tuple[str, ...]
    group_by: tuple[str, ...]
    size: int  # window length in time-unit ticks
    slide: int
    slots: tuple[Slot, ...]
    outputs: tuple[Output, ...]
    # Appendix C negations (variable, type, local predicates) and the transitions they guard.
    negations: tuple[Position, ...] = ()
    guarded: tuple[tuple[tuple[int, int], int], ...] = ()
    # A conjunction ``P1 AND P2 ...``: one plan per side, and no automaton of its own.
    factors: tuple[Plan, ...] = ()

    @property
    def event_grained(self) -> tuple[bool, ...]:
        """Positions whose events are kept one by one: an adjacent predicate reads them later."""
        return tuple(any(a.prev == p for a in self.atoms) for p in range(len(self.positions)))

    @property
    def partition_attrs(self) -> tuple[str, ...]:
        """Equivalence and grouping attributes: together they split the stream (§7)."""
        return tuple(dict.fromkeys(self.equivalence + self.group_by))

    def pred_types(self, p: int) -> tuple[int, ...]:
        """``P.predTypes`` of position ``p`` (§3.1), as positions."""
        return tuple(q for q in range(len(self.positions)) if p in self.follow[q])


def analyze(query: CograQuery, options: QueryOptions) -> Plan:
    """Run the three analyzer steps of Fig. 3 on a parsed query; raises ValidationError.

    A conjunction (Appendix C) is analyzed side by side: each side is a query of its own with
    the predicates on its variables, and aggregates of variables of the other sides have no
    target in it (they stay 0 there, and the sides' values are combined later).
    """
    for node in query.pattern.walk():
        if isinstance(node, AndPattern) and node is not query.pattern:
            raise error(node, "AND joins whole patterns: P1 AND P2 matches a pair of trends, "
                              "which has no single first or last event for SEQ, + or OR to "
                              "connect; write the conjunction as the whole PATTERN")
    if not isinstance(query.pattern, AndPattern):
        return _analyze_automaton(query, options)
    sides = query.pattern.items
    _check_bindings(query.pattern)
    bound = [{name for n in side.walk() if isinstance(n, TypePattern)
              for name in (n.variable, n.type_name)} for side in sides]
    where = _split_where(query, sides)
    factors = tuple(
        _analyze_automaton(replace(query, pattern=side, where=tuple(where[k])), options,
                           set().union(*(b for j, b in enumerate(bound) if j != k)))
        for k, side in enumerate(sides))
    first = factors[0]
    return Plan(
        (), (), (), (), (), query.semantics, first.mode, "conjunction",
        f"conjunction of {len(factors)} sub-patterns: their window aggregates are combined "
        "per partition (COUNT(P1 AND P2) = COUNT(P1) * COUNT(P2))", first.equivalence,
        query.group_by, first.size, first.slide,
        tuple(Slot(s.role, (), s.attr) for s in first.slots), first.outputs, factors=factors,
    )


def _split_where(query: CograQuery, sides: tuple[ast.Node, ...]) -> list[list[ast.Node]]:
    """The WHERE conjuncts of each side of a conjunction: ``[attrs]`` go to every side, a
    predicate to the side that binds its variables."""
    side_of = {n.variable: k for k, side in enumerate(sides) for n in side.walk()
               if isinstance(n, TypePattern)}
    parts: list[list[ast.Node]] = [[] for _ in sides]
    for conjunct in query.where:
        if isinstance(conjunct, Equivalence):
            for part in parts:
                part.append(conjunct)
            continue
        refs = [(n, n.qualifier if isinstance(n, ast.Ref) else n.variable)
                for n in conjunct.walk() if isinstance(n, ast.Ref | NextRef | LengthRef)]
        for node, name in refs:
            if name is not None and name not in side_of:
                raise error(node, f"unknown pattern variable {name}; the pattern binds "
                                  f"{', '.join(side_of)}")
        owners = {side_of[name] for _, name in refs if name is not None}
        if len(owners) > 1:
            names = sorted({name for _, name in refs if name is not None})
            raise error(conjunct, f"this predicate relates {' and '.join(names)}, which are on "
                                  "different sides of AND; a conjunction pairs independent "
                                  "trends, so a predicate stays within one side")
        # A predicate without variables goes to the first side, which reports it.
        parts[owners.pop() if owners else 0].append(conjunct)
    return parts


def _analyze_automaton(query: CograQuery, options: QueryOptions,
                       elsewhere: Collection[str] = ()) -> Plan:
    """The plan of one pattern without AND; ``elsewhere`` are the variables and types that
    other sides of a conjunction bind."""
    lengths = _minimal_lengths(query)
    automaton = _analyze_pattern(query.pattern, lengths)
    variables: dict[str, list[int]] = {}
    for i, pos in enumerate(automaton.positions):
        variables.setdefault(pos.variable, []).append(i)
    negated = {n.variable: g for g, n in enumerate(automaton.negations)}
    local, negation_local, atoms, equivalence = _classify_predicates(
        query, variables, negated, automaton.follow, options)
    positions = [Position(p.variable, p.type_name, tuple(local[i]))
                 for i, p in enumerate(automaton.positions)]
    negations = tuple(Position(n.variable, n.type_name, tuple(negation_local[g]))
                      for g, n in enumerate(automaton.negations))
    follow_t = tuple(tuple(sorted(f)) for f in automaton.follow)
    start_t = tuple(i in automaton.start for i in range(len(positions)))
    end_t = tuple(i in automaton.end for i in range(len(positions)))
    slots, outputs = _aggregates(query, positions, variables, negated, elsewhere)
    size = _ticks(query.within, options, "WITHIN")
    slide = size if query.slide is None else _ticks(query.slide, options, "SLIDE")
    if -(-size // slide) > MAX_WINDOWS_PER_EVENT:
        raise error(query.slide or query.within,
                    f"WITHIN / SLIDE puts every event in {-(-size // slide):,} windows; at most "
                    f"{MAX_WINDOWS_PER_EVENT:,} are kept per event: use a longer SLIDE")
    mode, granularity, path = _select_granularity(
        MODES[query.semantics], positions, start_t, follow_t, atoms, bool(negations))
    return Plan(
        tuple(positions), start_t, end_t, follow_t, tuple(atoms), query.semantics, mode,
        granularity, path, equivalence, query.group_by, size, slide, slots, outputs,
        negations, tuple(sorted(automaton.guarded.items())),
    )


# --- pattern analyzer (§3.1) -----------------------------------------------------------------


@dataclass
class _Automaton:
    """What the pattern analyzer builds: positions, transitions and negation guards."""

    positions: list[Position]
    start: set[int]
    end: set[int]
    follow: list[set[int]]
    negations: list[Position]
    # Transitions (p, q) that an event of negation g between them forbids: {(p, q): g}.
    guarded: dict[tuple[int, int], int]


def _analyze_pattern(pattern: ast.Node, lengths: dict[str, int]) -> _Automaton:
    """Positions and transitions of ``pattern`` after the Appendix C rewrites."""
    _check_bindings(pattern)
    negations = _check_negations(pattern)
    alternatives = [a for a in _alternatives(pattern, lengths) if a is not None]
    if not alternatives:
        raise error(pattern, "this pattern only matches the empty trend; use + instead of *")
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

    top = alternatives[0] if len(alternatives) == 1 else OrPattern(tuple(alternatives))
    first, last = build(top)
    _check_unambiguous(pattern, positions, first, last, follow)
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
    return _Automaton(positions, first, last, follow,
                      [Position(v, types[v]) for v, _ in negated], guarded)


def _check_unambiguous(pattern: ast.Node, positions: list[Position], start: set[int],
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


def _nullable(node: ast.Node) -> bool:
    if isinstance(node, KleenePattern):
        return node.op in ("*", "?") or _nullable(node.inner)
    if isinstance(node, SeqPattern):
        return all(_nullable(i) for i in node.items if not isinstance(i, NegatedPattern))
    if isinstance(node, OrPattern):
        return any(_nullable(i) for i in node.items)
    return False


def _check_negations(pattern: ast.Node) -> dict[str, int]:
    """Negations sit inside SEQ between two sub-patterns that cannot be empty; each gets an
    index by its variable."""
    found: dict[str, int] = {}
    allowed: set[int] = set()
    for node in pattern.walk():
        if not isinstance(node, SeqPattern):
            continue
        items = node.items
        for k, item in enumerate(items):
            if not isinstance(item, NegatedPattern):
                continue
            inside = 0 < k < len(items) - 1
            if not inside or any(isinstance(items[j], NegatedPattern) or _nullable(items[j])
                                 for j in (k - 1, k + 1)):
                raise error(item, "NOT needs a sub-pattern on each side that cannot be empty, "
                                  "as in SEQ(A+, NOT C, B)")
            allowed.add(id(item))
            found.setdefault(item.inner.variable, len(found))
    for node in pattern.walk():
        if isinstance(node, NegatedPattern) and id(node) not in allowed:
            raise error(node, "NOT is allowed only between two items of SEQ(...)")
    return found


def _check_bindings(node: ast.Node) -> set[str]:
    """The variables ``node`` binds; a variable is bound once, except across OR branches."""
    if isinstance(node, TypePattern):
        return {node.variable}
    if isinstance(node, OrPattern):
        return set().union(*(_check_bindings(item) for item in node.items))
    bound: set[str] = set()
    for child in node.children():
        inner = _check_bindings(child)
        twice = bound & inner
        if twice:
            name = min(twice)
            where = next(n for n in child.walk()
                         if isinstance(n, TypePattern) and n.variable == name)
            assert isinstance(where, TypePattern)
            raise error(where, f"variable {name} is bound twice; give each occurrence its own "
                               f"name, as in {where.type_name} {name}1 and "
                               f"{where.type_name} {name}2")
        bound |= inner
    return bound


# Sugar expansions above this many alternatives are refused: the automaton would grow too big.
MAX_ALTERNATIVES = 256


def _alternatives(node: ast.Node, lengths: dict[str, int]) -> list[ast.Node | None]:
    """Rewrite Appendix C sugar into ``E``, ``SEQ``, ``+`` and ``OR``; ``None`` is the empty
    pattern. ``SEQ(P1*, P2) = SEQ(P1+, P2) OR P2``; ``A+`` with ``LENGTH(A) >= 3`` is unrolled
    to ``SEQ(A, A, A+)``, every copy bound to ``A``; ``SEQ(P1?, P2) = SEQ(P1, P2) OR P2``."""
    if isinstance(node, TypePattern | NegatedPattern):
        return [node]
    if isinstance(node, KleenePattern):
        minimum = lengths.get(node.inner.variable, 1) if isinstance(node.inner, TypePattern) \
            else 1
        if minimum > 1:
            unrolled = SeqPattern((node.inner,) * (minimum - 1)
                                  + (KleenePattern(node.inner, "+", span=node.span),),
                                  span=node.span)
            return [unrolled]
        inner = [a for a in _alternatives(node.inner, lengths) if a is not None]
        if node.op == "?":  # SEQ(P1?, P2) = SEQ(P1, P2) OR P2
            return [*inner, None]
        plus: list[ast.Node | None] = []
        if inner:
            body = inner[0] if len(inner) == 1 else OrPattern(tuple(inner), span=node.span)
            plus.append(KleenePattern(body, "+", span=node.span))
        # A star may match nothing, unless a LENGTH predicate asks for at least one event.
        constrained = isinstance(node.inner, TypePattern) and node.inner.variable in lengths
        return [*plus, None] if node.op == "*" and not constrained else plus
    if isinstance(node, OrPattern):
        return [a for item in node.items for a in _alternatives(item, lengths)]
    assert isinstance(node, SeqPattern)
    combos: list[tuple[ast.Node, ...]] = [()]
    for item in node.items:
        options = _alternatives(item, lengths)
        combos = [c + ((o,) if o is not None else ()) for c in combos for o in options]
        if len(combos) > MAX_ALTERNATIVES:
            raise error(node, f"this pattern expands to more than {MAX_ALTERNATIVES} "
                              "alternatives; use fewer Kleene stars")
    out: list[ast.Node | None] = []
    for combo in combos:
        if not combo:
            out.append(None)
        else:
            out.append(combo[0] if len(combo) == 1 else SeqPattern(combo, span=node.span))
    return out


# A minimal length unrolls the Kleene plus into that many positions (each a state).
MAX_MINIMUM_LENGTH = 100


def _minimal_lengths(query: CograQuery) -> dict[str, int]:
    """``LENGTH(A) >= m`` (or ``> m - 1``) conjuncts, by variable (Appendix C)."""
    kleene = {n.inner.variable: n for n in query.pattern.walk()
              if isinstance(n, KleenePattern) and isinstance(n.inner, TypePattern)
              and n.op != "?"}
    lengths: dict[str, int] = {}
    for conjunct in query.where:
        refs = [n for n in conjunct.walk() if isinstance(n, LengthRef)]
        if not refs:
            continue
        if not (isinstance(conjunct, ast.Binary) and conjunct.op in (">=", ">")
                and isinstance(conjunct.left, LengthRef)
                and isinstance(conjunct.right, ast.Literal)
                and isinstance(conjunct.right.value, int)
                and not isinstance(conjunct.right.value, bool)):
            raise error(conjunct, "a length predicate sets a minimum, as in LENGTH(A) >= 3")
        variable = conjunct.left.variable
        if variable not in kleene:
            raise error(conjunct.left, f"LENGTH({variable}) needs a Kleene variable such as "
                                       f"{variable}+ in the pattern")
        minimum = conjunct.right.value + (1 if conjunct.op == ">" else 0)
        if minimum > MAX_MINIMUM_LENGTH:
            raise error(conjunct, f"LENGTH({variable}) >= {minimum} unrolls {variable}+ into "
                                  f"{minimum} positions; at most {MAX_MINIMUM_LENGTH} are supported")
        lengths[variable] = max(lengths.get(variable, 1), minimum)
    return lengths


# --- predicate classifier (§3.2, §7) ---------------------------------------------------------


def _classify_predicates(
    query: CograQuery,
    variables: dict[str, list[int]],
    negated: dict[str, int],
    follow: list[set[int]],
    options: QueryOptions,
) -> tuple[list[list[ast.Node]], list[list[ast.Node]], list[Atom], tuple[str, ...]]:
    local: list[list[ast.Node]] = [[] for _ in follow]
    negation_local: list[list[ast.Node]] = [[] for _ in negated]
    known = {**variables, **{v: [] for v in negated}}
    atoms: list[Atom] = []
    equivalence: list[str] = []
    for conjunct in query.where:
        if isinstance(conjunct, Equivalence):
            equivalence.extend(a for a in conjunct.attrs if a not in equivalence)
            continue
        check_condition(conjunct, lambda node: _typeof(node, known, options))
        if any(isinstance(n, LengthRef) for n in conjunct.walk()):
            continue  # a minimal length, already unrolled into the pattern
        current, following = _variables_in(conjunct)
        if not following:
            if not current:
                raise error(conjunct, "a predicate must compare an attribute of a pattern "
                                      "variable, as in S.price > 10")
            if len(current) > 1:
                raise error(conjunct, "predicates on non-adjacent events are not supported "
                                      f"(COGRA §2.1); {' and '.join(sorted(current))} are "
                                      "compared here. Use NEXT(X).attr for adjacent events")
            name = current.pop()
            if name in negated:
                negation_local[negated[name]].append(conjunct)
            for p in variables.get(name, []):
                local[p].append(conjunct)
            continue
        if (current | following) & negated.keys():
            raise error(conjunct, "a negated variable binds no event of the trend, so it "
                                  "cannot be compared with NEXT(...)")
        atoms.extend(_atoms(conjunct, variables, follow))
    return local, negation_local, atoms, tuple(equivalence)


def _typeof(node: ast.Node, variables: dict[str, list[int]], options: QueryOptions) -> Type:
    if isinstance(node, ast.Ref):
        if node.qualifier is None:
            example = f"{next(iter(variables))}.{node.name}"
            raise error(node, f"qualify '{node.name}' with a pattern variable (as in {example}), "
                              f"or quote it ('{node.name}') if it is a constant")
        if node.qualifier not in variables:
            raise error(node, f"unknown pattern variable {node.qualifier}; the pattern binds "
                              f"{', '.join(variables)}")
        _visible(node, node.name, options)
        return Type.ANY
    if isinstance(node, NextRef):
        if node.variable not in variables:
            raise error(node, f"unknown pattern variable {node.variable} in NEXT(...); the "
                              f"pattern binds {', '.join(variables)}")
        _visible(node, node.name, options)
        return Type.ANY
    if isinstance(node, LengthRef):
        return Type.NUMBER
    raise error(node, "expected an attribute, a constant or NEXT(X).attr")


def _visible(node: ast.Node, name: str, options: QueryOptions) -> None:
    if name == options.type_field:
        raise error(node, f"'{name}' is the event type field and is not visible to predicates "
                          "(SEMANTICS.md); rename the attribute or choose another type field")


def _variables_in(expr: ast.Node) -> tuple[set[str], set[str]]:
    current = {n.qualifier for n in expr.walk() if isinstance(n, ast.Ref) and n.qualifier}
    following = {n.variable for n in expr.walk() if isinstance(n, NextRef)}
    return current, following


def _atoms(conjunct: ast.Node, variables: dict[str, list[int]],
           follow: list[set[int]]) -> list[Atom]:
    """The adjacent predicate ``conjunct`` on every transition from an ``X`` position to a
    ``Y`` position (a variable has several positions after the Appendix C rewrites)."""
    if not isinstance(conjunct, ast.Binary) or conjunct.op not in OPS:
        raise error(conjunct, "a predicate with NEXT(...) must compare the two adjacent events, "
                              "as in S.price > NEXT(S).price; join several with AND")
    left_cur, left_next = _variables_in(conjunct.left)
    right_cur, right_next = _variables_in(conjunct.right)
    if left_next and not left_cur and right_cur and not right_next:
        op, prev_expr, next_expr = _FLIP[conjunct.op], conjunct.right, conjunct.left
        cur, nxt = right_cur, left_next
    elif right_next and not right_cur and left_cur and not left_next:
        op, prev_expr, next_expr = conjunct.op, conjunct.left, conjunct.right
        cur, nxt = left_cur, right_next
    else:
        raise error(conjunct, "an adjacent predicate compares one variable's attributes on one "
                              "side with NEXT(...) attributes on the other, as in "
                              "L.cpu < NEXT(L).cpu")
    if len(cur) > 1 or len(nxt) > 1:
        raise error(conjunct, "an adjacent predicate relates one variable to one NEXT(...)")
    x, y = cur.pop(), nxt.pop()
    atoms = [Atom(p, q, op, prev_expr, next_expr)
             for p in variables[x] for q in variables[y] if q in follow[p]]
    if not atoms:
        raise error(conjunct, f"NEXT({y}) never follows {x} in the pattern, so this predicate "
                              "could never apply")
    return atoms


# --- aggregates (§2.3, Table 9) ----------------------------------------------------------------


def _aggregates(
    query: CograQuery, positions: list[Position], variables: dict[str, list[int]],
    negated: dict[str, int], elsewhere: Collection[str] = (),
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
            if item.name not in query.group_by:
                raise error(item, f"RETURN can list only GROUP-BY attributes; '{item.name}' is "
                                  "not one (aggregate it, as in MAX(S.attr))")
            outputs.append(Output(item.name, group_attr=item.name))
            continue
        assert isinstance(item, Aggregate)
        if item.variable is None:
            outputs.append(Output(label, func="COUNT", slots=(0,)))
            continue
        if item.variable in negated:
            raise error(item, f"{item.variable} is negated: it binds no event of a trend")
        targets = _targets(item, positions, variables, elsewhere)
        if item.func == "COUNT":
            outputs.append(Output(label, func="COUNT", slots=(slot(COUNT_E, item, targets),)))
        elif item.func == "AVG":
            pair = (slot(SUM, item, targets), slot(COUNT_E, item, targets))
            outputs.append(Output(label, func="AVG", slots=pair))
        else:
            role = {"SUM": SUM, "MIN": MIN, "MAX": MAX}[item.func]
            outputs.append(Output(label, func=item.func, slots=(slot(role, item, targets),)))
    return tuple(slots), tuple(outputs)


def _targets(item: Aggregate, positions: list[Position], variables: dict[str, list[int]],
             elsewhere: Collection[str]) -> tuple[int, ...]:
    """A variable names its positions; a type name not used as a variable names all of its."""
    assert item.variable is not None
    if item.variable in variables:
        return tuple(variables[item.variable])
    found = tuple(i for i, p in enumerate(positions) if p.type_name == item.variable)
    if not found and item.variable not in elsewhere:
        raise error(item, f"unknown pattern variable {item.variable}; the pattern binds "
                          f"{', '.join(variables)}")
    return found


def _ticks(length: Length, options: QueryOptions, clause: str) -> int:
    value = length.value
    if isinstance(value, ast.Duration):
        ticks = value.seconds / options.time_unit
    else:
        assert isinstance(value, ast.Literal)
        raw = literal_value(value)
        ticks = float(raw) if isinstance(raw, int | float) else math.nan
    if ticks > MAX_TICKS:
        raise error(length, f"{clause} exceeds 2^62 time units ({options.time_unit:g} s each), "
                            "beyond the range of 64-bit event times")
    if not (ticks >= 1 and abs(ticks - round(ticks)) < 1e-9):
        raise error(length, f"{clause} must be a whole positive number of time units "
                            f"({options.time_unit:g} s each)")
    return round(ticks)


# --- granularity selector (Table 5) ------------------------------------------------------------


def algorithm3_is_exact(
    positions: tuple[Position, ...] | list[Position],
    start: tuple[bool, ...],
    follow: tuple[tuple[int, ...], ...],
    atoms: list[Atom] | tuple[Atom, ...],
) -> bool:
    """Whether Algorithm 3's single last matched event gives Definition 2.6's trends.

    Algorithm 3 replaces the last matched event ``e_l`` by every matched event ``e``. Under
    Definition 2.6 a partial trend ending at ``e_l`` stays open until the first event adjacent
    to it; it is lost only if ``e`` is matched without being adjacent to ``e_l``. That cannot
    happen when (1) every event takes at most one position (no repeated types), so ``e_l`` is
    one partial-trend end, and (2) every start position follows every position that has a
    successor, with no adjacent predicate on that transition: then a start event ``e`` is
    adjacent to whatever ``e_l`` is, and a non-start event is matched only if adjacent to it.
    """
    types = [p.type_name for p in positions]
    if len(set(types)) != len(types):
        return False
    guarded = {(a.prev, a.next) for a in atoms}
    for p, successors in enumerate(follow):
        if not successors:
            continue
        for q, is_start in enumerate(start):
            if is_start and (q not in successors or (p, q) in guarded):
                return False
    return True


def _select_granularity(
    mode: int,
    positions: list[Position],
    start: tuple[bool, ...],
    follow: tuple[tuple[int, ...], ...],
    atoms: list[Atom],
    negated: bool,
) -> tuple[int, str, str]:
    """Table 5: the executor mode, the granularity and a description of the path taken."""
    if mode == ANY:
        if not atoms:
            return mode, "type", "type-grained (Algorithm 1): one aggregate per position"
        grained = sorted({a.prev for a in atoms})
        if len(grained) == len(positions):
            return mode, "mixed", ("mixed-grained with no type-grained position, i.e. the "
                                   "fine-grained fallback (§5): every matched event is kept")
        return mode, "mixed", "mixed-grained (Algorithm 2): matched events kept for " + \
            ", ".join(dict.fromkeys(positions[p].variable for p in grained))
    if mode == CONT:
        return mode, "pattern", ("pattern-grained (Algorithm 3, contiguous): only the last "
                                 "event's aggregates are kept")
    # A negation keeps partial trends open for other successors, as repeated types do.
    if not negated and algorithm3_is_exact(positions, start, follow, atoms):
        return NEXT_ALG3, "pattern", ("pattern-grained, Algorithm 3 (last matched event), exact "
                                      "for this pattern under Definition 2.6")
    return mode, "pattern", ("pattern-grained with pending partial-trend aggregates per "
                             "position (Definition 2.6; Algorithm 3's single last matched "
                             "event would drop partial trends for this pattern)")
