"""Hypothesis strategies: small random patterns (≤ 5 events, Kleene, negation) and streams."""

from __future__ import annotations

from hypothesis import strategies as st

from situflow.plan import Component, Event, Filter, Negation, Pattern, Predicate, Statistics

TYPES = "ABC"


def same_x(a: Event, b: Event) -> bool:
    return a["x"] == b["x"]


def less_x(a: Event, b: Event) -> bool:
    return a["x"] < b["x"]


def other_x(a: Event, b: Event) -> bool:
    return a["x"] != b["x"]


def nonzero(a: Event) -> bool:
    return a["x"] != 0


def small(a: Event) -> bool:
    return a["x"] <= 2


PAIRS = (same_x, less_x, other_x)
UNARY = (nonzero, small)


@st.composite
def patterns(draw: st.DrawFn, max_size: int = 5) -> Pattern:
    n = draw(st.sampled_from((2, 3, 4, 3, 1)))
    sequence = draw(st.booleans())
    kleene_budget = 1
    comps = []
    for i in range(n):
        kleene = kleene_budget > 0 and draw(st.integers(0, 3)) == 0
        kleene_budget -= kleene
        comps.append(Component(f"v{i}", draw(st.sampled_from(TYPES)), kleene))
    negations = []
    if sequence and n < max_size and draw(st.booleans()):
        negations.append(Negation("nv", draw(st.sampled_from(TYPES)), draw(st.integers(0, n))))
    positives = [c.var for c in comps]
    plain = [c.var for c in comps if not c.kleene]
    predicates = []
    for _ in range(draw(st.integers(0, 2))):
        if n >= 2:
            a, b = draw(st.permutations(positives))[:2]
            predicates.append(Predicate(a, b, draw(st.sampled_from(PAIRS)), 0.5))
    if negations and plain and draw(st.booleans()):
        other = draw(st.sampled_from(plain))
        predicates.append(Predicate("nv", other, draw(st.sampled_from(PAIRS)), 0.5))
    filters = [
        Filter(draw(st.sampled_from([*positives, *(neg.var for neg in negations)])), fn, 0.7)
        for fn in draw(st.lists(st.sampled_from(UNARY), max_size=2))
    ]
    before: tuple[tuple[int, int], ...] = ()
    if not sequence and n >= 2 and draw(st.booleans()):
        before = ((0, n - 1),)
    return Pattern(
        tuple(comps),
        float(draw(st.integers(1, 6))),
        tuple(predicates),
        tuple(filters),
        tuple(negations),
        sequence=sequence,
        before=before,
    )


@st.composite
def streams(draw: st.DrawFn, max_events: int = 12) -> list[Event]:
    size = draw(st.integers(min(5, max_events), max_events))
    events, ts = [], 0
    for seq in range(size):
        ts += draw(st.integers(0, 1))
        attrs = {"x": draw(st.integers(0, 3))}
        events.append(Event(draw(st.sampled_from(TYPES)), float(ts), seq, attrs))
    return events


@st.composite
def statistics(draw: st.DrawFn) -> Statistics:
    rates = {t: draw(st.sampled_from((0.1, 0.5, 1.0, 3.0, 10.0))) for t in TYPES}
    return Statistics(rates)
