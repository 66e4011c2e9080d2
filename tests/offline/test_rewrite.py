"""Table 3.2 rewrites (thesis §3.4.4, research AT-15)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from situflow.archive.ranges import Condition, Range
from situflow.offline.intervals import replay_intervals
from situflow.offline.pattern import PatternQuery, Symbol
from situflow.offline.rewrite import TRUE_STAR, Alt, Atom, Not, PatternExpr, Repeat, Seq, rewrite
from tests.offline.reference import STRATEGIES, Stream, index_hits, matches
from tests.profiles import scaled

A, B, C, D = (Atom(Symbol(name, conditions=(Condition("v", (Range("v", i, i),)),)))
              for i, name in enumerate("ABCD"))


def shape(pattern: PatternExpr, *, contiguous: bool = True) -> list[str]:
    query = rewrite(pattern, 100, contiguous=contiguous)
    return ["true*" if s == TRUE_STAR else s.name + ("*" if s.kleene else "") for s in query.symbols]


def test_at15_nested_kleene_plus() -> None:
    """(A, (B, C+)+, D) -> (A, B, C+, true*, D) -> (A, B, C, true*, true*, D) -> (A, B, C, true*, D)."""
    assert shape(Seq((A, Repeat(Seq((B, Repeat(C, 1))), 1), D))) == ["A", "B", "C", "true*", "D"]


def test_at15_optional_is_true_star() -> None:
    assert shape(Repeat(A, 0, 1)) == ["true*"]


def test_at15_bounded_repetition_keeps_the_lower_bound() -> None:
    assert shape(Repeat(A, 2, 4)) == ["A", "A", "true*"]
    assert shape(Repeat(A, 2, 2)) == ["A", "A"]  # exactly n: nothing more can occur


def test_at15_alternative_of_single_symbols_is_one_basic_symbol() -> None:
    query = rewrite(Alt((A, B)), 100, contiguous=True)
    assert len(query.symbols) == 1 and not query.symbols[0].kleene
    # A needs v = 0 and B v = 1: the BS keeps their union, still a single-attribute condition.
    assert query.symbols[0].conditions == (Condition("v", (Range("v", 0, 0), Range("v", 1, 1))),)
    assert rewrite(Alt((Atom(Symbol("X")), B)), 100, contiguous=True).symbols == (Symbol("X|B"),)


def test_at15_alternative_of_complex_patterns_is_true_star() -> None:
    assert shape(Seq((A, Alt((Seq((B, C)), D)), D))) == ["A", "true*", "D"]


def test_at15_kleene_plus_of_a_sequence() -> None:
    assert shape(Repeat(Seq((A, B)), 1)) == ["A", "B", "true*"]


def test_negation_is_zero_width() -> None:
    """SASE+ ``SEQ(A, ~(B), C)``: the negation consumes no position, so A and C are not
    adjacent; a BS in its place would demand c.seq - a.seq = 2 (research note on Table 3.2)."""
    assert shape(Seq((A, Not(B), C))) == ["A", "true*", "C"]


def test_skipping_strategies_separate_every_basic_symbol() -> None:
    assert shape(Seq((A, B, Repeat(C, 0), D)), contiguous=False) == ["A", "true*", "B", "true*", "D"]
    query = rewrite(Seq((A, B, C)), 100, contiguous=False)
    assert query.basic_blocks() == [[0], [2], [4]]


def test_a_named_kleene_symbol_stays_until_consolidated() -> None:
    b_star = Atom(Symbol("B", kleene=True))
    assert shape(Seq((A, b_star, C))) == ["A", "B*", "C"]
    assert shape(Seq((A, b_star, Repeat(C, 0), D))) == ["A", "true*", "D"]
    assert rewrite(Seq((A, b_star)), 50, contiguous=True, keys=("k",)) == PatternQuery(
        (A.symbol, b_star.symbol), 50, ("k",))


# --- AT-15 on random data: the rewritten pattern's intervals cover the original's matches ------

LABELS = "abc"


def labelled(name: str, value: str) -> Symbol:
    return Symbol(name, conditions=(Condition("label", (Range("label", value, value),)),))


def atoms() -> st.SearchStrategy[PatternExpr]:
    return st.one_of(
        st.sampled_from(LABELS).map(lambda value: Atom(labelled(value.upper(), value))),
        st.just(Atom(Symbol("T"))),
        st.sampled_from(LABELS).map(lambda value: Atom(Symbol(value.upper(), kleene=True,
                                                              conditions=labelled("", value).conditions))),
    )


def with_negation(items: list[PatternExpr], negated: Atom, where: int) -> Seq:
    """A negation strictly inside a sequence (leading and trailing ones look outside the match)."""
    if len(items) < 2:
        return Seq(tuple(items))
    where = 1 + where % (len(items) - 1)
    return Seq((*items[:where], Not(negated), *items[where:]))


patterns = st.recursive(
    atoms(),
    lambda inner: st.one_of(
        st.lists(inner, min_size=2, max_size=3).map(lambda items: Seq(tuple(items))),
        st.tuples(inner, st.integers(0, 2), st.one_of(st.none(), st.integers(0, 2))).map(
            lambda t: Repeat(t[0], t[1], None if t[2] is None else t[1] + t[2])),
        st.lists(inner, min_size=2, max_size=2).map(lambda options: Alt(tuple(options))),
        st.tuples(st.lists(inner, min_size=2, max_size=3), st.sampled_from(LABELS), st.integers(0, 5)).map(
            lambda t: with_negation(t[0], Atom(labelled("N", t[1])), t[2])),
    ),
    max_leaves=5,
)


@st.composite
def streams(draw: st.DrawFn) -> Stream:
    times = itertools.accumulate(draw(st.lists(st.integers(0, 2), min_size=1, max_size=11)))
    return Stream([{"t": t, "seq": i, "label": draw(st.sampled_from(LABELS))} for i, t in enumerate(times)])


@given(patterns, streams(), st.sampled_from(STRATEGIES), st.integers(0, 8))
@settings(max_examples=scaled(3))
def test_at15_intervals_of_the_rewrite_cover_every_match_of_the_original(
        pattern: PatternExpr, stream: Stream, strategy: str, window: int) -> None:
    full = matches(pattern, strategy, window, stream)
    rewritten = rewrite(pattern, window, contiguous=strategy == "contiguous")
    indexable = [i for i, s in enumerate(rewritten.symbols) if s.indexable]
    hits = index_hits(rewritten, indexable, stream)
    for size in range(1, len(indexable) + 1):
        for selected in itertools.combinations(indexable, size):
            intervals = replay_intervals(rewritten, selected, hits)
            for match in full:
                first, last = stream.times[match[0]], stream.times[match[-1]]
                assert any(i.lo <= first and last <= i.hi for i in intervals), (match, selected, intervals)
            pruned = set().union(*(matches(pattern, strategy, window, stream.between(i.lo, i.hi))
                                   for i in intervals))
            assert pruned == full
