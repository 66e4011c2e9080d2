"""Appendix C: conjunction ``P1 AND P2`` (a pair of trends, after GRETA) and what disjunction
may overlap. Every worked example is also checked against the enumerating reference."""

from __future__ import annotations

import pytest

from situflow.errors import QueryError
from situflow.lang.cogra import AndPattern, OrPattern, parse
from situflow.trends.query import compile
from tests.trends import reference
from tests.trends.harness import ANY, CONT, NEXT, query, run, stream, values

ALL = "COUNT(*), COUNT(A), SUM(B.attr), MIN(A.attr), MAX(B.attr), AVG(A.attr)"


def checked(text: str, events: list[dict]) -> dict:
    """The single result's values, after checking them against the reference."""
    assert run(text, events) == [{"query": "query", **row}
                                 for row in reference.evaluate(text, events)]
    return values(text, events)


def error_of(text: str) -> str:
    with pytest.raises(QueryError) as caught:
        compile(text)
    return f"{caught.value.line}:{caught.value.col}: {caught.value.message}"


# --- language ----------------------------------------------------------------------------


def test_and_binds_tighter_than_or_and_prints_back() -> None:
    tree = parse(query("COUNT(*)", ANY, pattern="A AND B OR C")).pattern
    assert isinstance(tree, OrPattern) and isinstance(tree.items[0], AndPattern)
    text = query("COUNT(*)", ANY, pattern="A+ AND (B OR C) AND SEQ(D, E+)")
    assert parse(text).to_text() == text
    assert parse(query("COUNT(*)", ANY, pattern="(A AND B) AND C")).pattern == \
        parse(query("COUNT(*)", ANY, pattern="A AND B AND C")).pattern


# --- the worked example ------------------------------------------------------------------


def test_a_match_is_a_pair_of_trends_one_of_each_side() -> None:
    # A+ on a1 a3: {a1}, {a3}, {a1 a3}: 3 trends, 4 A events, A.attr summing 8.
    # SEQ(B, C+) on b2 c4 c5: (b2 c4), (b2 c5), (b2 c4 c5): 3 trends, 3 B events summing 6.
    # 3 x 3 = 9 pairs; COUNT(A) = 4 * 3; SUM(B.attr) = 3 * 6; AVG(A.attr) = 8 * 3 / 12.
    text = query(ALL, ANY, pattern="A+ AND SEQ(B, C+)")
    assert checked(text, stream("a1 b2 a3 c4 c5")) == {
        "COUNT(*)": 9, "COUNT(A)": 12, "SUM(B.attr)": 18, "MIN(A.attr)": 1,
        "MAX(B.attr)": 2, "AVG(A.attr)": 2.0}


def test_no_pair_without_a_trend_on_every_side() -> None:
    text = query(ALL, ANY, pattern="A+ AND SEQ(B, C+)")
    assert checked(text, stream("a1 b2 a3")) == {
        "COUNT(*)": 0, "COUNT(A)": 0, "SUM(B.attr)": 0, "MIN(A.attr)": None,
        "MAX(B.attr)": None, "AVG(A.attr)": None}


@pytest.mark.parametrize(("semantics", "expected"), [(ANY, 7 * 3), (NEXT, 6 * 3), (CONT, 4 * 2)])
def test_each_side_is_judged_by_the_semantics_on_its_own(semantics: str, expected: int) -> None:
    # A+ on a1 a2 a4: ANY every subset (7), NEXT every run of consecutive A events (6), CONT
    # the runs that b3, irrelevant to A+, does not cut: a1 a2 (3) and a4 (1). B+ likewise.
    text = query("COUNT(*)", semantics, pattern="A+ AND B+")
    assert checked(text, stream("a1 a2 b3 a4 b5")) == {"COUNT(*)": expected}


def test_an_event_may_serve_both_sides() -> None:
    # Stock S+ and Stock T+ bind different variables over the same events: a1 a2 gives three
    # trends per side, and every pair of them is a match, (a1 a2, a1 a2) included.
    text = query("COUNT(*), COUNT(S)", ANY, pattern="A S+ AND A T+")
    assert checked(text, stream("a1 a2")) == {"COUNT(*)": 9, "COUNT(S)": 12}


def test_pairs_stay_in_one_partition_and_one_window() -> None:
    events = stream("a1 b2 a3 b4 a6 b7", g=[0, 1, 1, 0, 0, 0])
    text = ("RETURN g, COUNT(*) PATTERN A AND B SEMANTICS skip-till-any-match "
            "WHERE [g] GROUP-BY g WITHIN 5 SLIDE 5")
    assert [(r["window_start"], r["values"]) for r in run(text, events)] == [
        (0, {"g": 0, "COUNT(*)": 1}),  # a1 with b4
        (0, {"g": 1, "COUNT(*)": 1}),  # a3 with b2
        (5, {"g": 0, "COUNT(*)": 1}),  # a6 with b7
    ]
    assert run(text, events) == [{"query": "query", **row}
                                 for row in reference.evaluate(text, events)]


def test_counts_beyond_float_range_multiply() -> None:
    # Each side has 2**600 - 1 trends; their product is about 10**361.2.
    events = [{"type": t, "ts": i, "attr": 1} for i in range(600) for t in "AB"]
    text = query("COUNT(*)", ANY, pattern="A+ AND B+", within="WITHIN 1000")
    got = values(text, events)["COUNT(*)"]
    assert isinstance(got, str) and got.endswith("e+361") and got.startswith("1.7")


def test_describe_names_each_side() -> None:
    text = query("COUNT(*)", NEXT, pattern="SEQ(A+, B+) AND C+")
    lines = compile(text).describe().splitlines()
    assert lines[2] == "granularity: conjunction"
    assert "side 1:" in lines and "side 2:" in lines


# --- refused -----------------------------------------------------------------------------


@pytest.mark.parametrize(("pattern", "where", "expected"), [
    ("SEQ(A AND B, C)", "", "1:29: AND joins whole patterns"),
    ("(A AND B)+", "", "1:26: AND joins whole patterns"),
    ("A AND B OR C", "", "1:25: AND joins whole patterns"),
    ("A+ AND SEQ(B, A)", "", "1:39: variable A is bound twice"),
    ("A+ AND B+", "A.x < NEXT(B).x", "1:71: this predicate relates A and B, which are on "
                                     "different sides of AND"),
    ("A+ AND B+", "Z.x > 1", "1:71: unknown pattern variable Z; the pattern binds A, B"),
])
def test_what_a_conjunction_cannot_express_is_refused_where_it_is_written(
        pattern: str, where: str, expected: str) -> None:
    assert error_of(query("COUNT(*)", ANY, pattern=pattern, where=where)).startswith(expected)


def test_a_disjunction_whose_sides_share_a_trend_is_refused() -> None:
    # (a1 b2) matches both sides: GRETA counts it once, COUNT(P1) + COUNT(P2) - COUNT(P12).
    message = error_of(query("COUNT(*)", ANY, pattern="SEQ(A+, B) OR SEQ(A, B+)"))
    assert message.startswith("1:25: this pattern matches the trend A B in two ways")
    # With their own variables the sides bind differently, so no trend is in both.
    assert checked(query("COUNT(*)", ANY, pattern="SEQ(A X+, B) OR SEQ(A, B Y+)"),
                   stream("a1 b2")) == {"COUNT(*)": 2}
    # Alternatives that can never match the same trend stay as they were.
    assert checked(query("COUNT(*)", ANY, pattern="SEQ(A, B) OR SEQ(A, C)"),
                   stream("a1 b2 c3")) == {"COUNT(*)": 2}


def test_a_minimal_length_under_a_nested_kleene_plus_is_refused() -> None:
    # (A+)+ with LENGTH(A) >= 2 unrolls to (SEQ(A, A+))+, which reads a1 a2 a3 a4 as one
    # iteration or as two: the same trend, twice.
    message = error_of(query("COUNT(*)", ANY, pattern="(A+)+", where="LENGTH(A) >= 2"))
    assert "matches the trend A A A A in two ways" in message
