"""Appendix C language extensions: Kleene star, disjunction, repeated types, minimal length."""

from __future__ import annotations

import pytest

from situflow.trends.query import compile
from tests.trends import reference
from tests.trends.harness import ANY, CONT, NEXT, query, stream, values


def count(pattern: str, semantics: str, events: str, where: str = "") -> int:
    text = query("COUNT(*)", semantics, pattern=pattern, where=where)
    got = values(text, stream(events))["COUNT(*)"]
    assert got == len(reference.trends(text, stream(events)))
    return int(got)


@pytest.mark.parametrize(("semantics", "expected"), [(ANY, 4), (NEXT, 3), (CONT, 3)])
def test_kleene_star_is_sugar_for_a_disjunction(semantics: str, expected: int) -> None:
    # SEQ(A*, B) = SEQ(A+, B) OR B on a1 a2 b3.
    assert count("SEQ(A*, B)", semantics, "a1 a2 b3") == expected


def test_each_alternative_of_the_sugar_is_judged_on_its_own() -> None:
    # SEQ(A, B*, C) = SEQ(A, B+, C) OR SEQ(A, C): in the second alternative b2 is irrelevant,
    # so (a1, c3) is a skip-till-next-match trend next to (a1, b2, c3).
    assert count("SEQ(A, B*, C)", NEXT, "a1 b2 c3") == 2
    assert count("SEQ(A, B*, C)", CONT, "a1 b2 c3") == 1


@pytest.mark.parametrize(("semantics", "expected"), [(ANY, 4), (NEXT, 4), (CONT, 1)])
def test_disjunction_adds_the_trends_of_both_sides(semantics: str, expected: int) -> None:
    # SEQ(A, B): (a1 b3), (a2 b3); SEQ(A, C): (a1 c4), (a2 c4). A -> A is no transition, so
    # a2 does not end a1's partial trends under NEXT; CONT keeps only (a2 b3).
    assert count("SEQ(A, B) OR SEQ(A, C)", semantics, "a1 a2 b3 c4") == expected


@pytest.mark.parametrize(("semantics", "expected"), [(ANY, 5), (NEXT, 3), (CONT, 3)])
def test_minimal_length_unrolls_the_kleene_plus(semantics: str, expected: int) -> None:
    assert count("A+", semantics, "a1 a2 a3 a4", where="LENGTH(A) >= 3") == expected
    assert count("A+", semantics, "a1 a2 a3 a4", where="LENGTH(A) > 2") == expected


def test_unrolled_copies_share_their_variable() -> None:
    text = query("COUNT(A), SUM(A.attr)", ANY, pattern="SEQ(A+, B)", where="LENGTH(A) >= 2")
    plan = compile(text).plan
    assert [p.variable for p in plan.positions] == ["A", "A", "B"]
    # Trends (a1 a2 b4), (a1 a3 b4), (a2 a3 b4), (a1 a2 a3 b4): 9 A events summing 18.
    assert values(text, stream("a1 a2 a3 b4")) == {"COUNT(A)": 9, "SUM(A.attr)": 18}


def test_repeated_types_without_variables_are_refused() -> None:
    with pytest.raises(Exception, match="variable A is bound twice"):
        compile(query("COUNT(*)", ANY, pattern="SEQ(A+, B, A)"))
    # Written with variables, as Appendix C's SEQ(A1+, B, A2):
    assert count("SEQ(A A1+, B, A A2)", ANY, "a1 b2 a3") == 1


def test_a_variable_may_appear_on_both_sides_of_or() -> None:
    text = query("COUNT(A)", ANY, pattern="SEQ(A, B) OR SEQ(A, C)")
    assert values(text, stream("a1 b2 c3")) == {"COUNT(A)": 2}
    with pytest.raises(Exception, match="LENGTH\\(B\\) needs a Kleene variable"):
        compile(query("COUNT(*)", ANY, pattern="SEQ(A+, B)", where="LENGTH(B) >= 2"))


@pytest.mark.parametrize(("semantics", "expected"), [(ANY, 4), (NEXT, 3), (CONT, 1)])
def test_negation_forbids_its_event_between_its_neighbours(semantics: str,
                                                          expected: int) -> None:
    # c3 separates a1 and a2 from b5; an A run that reaches a4 may still end in b5.
    assert count("SEQ(A+, NOT C, B)", semantics, "a1 a2 c3 a4 b5") == expected


def test_negation_with_a_local_predicate() -> None:
    events = stream("a1 c2 b3", x=[None, 5, None])
    for limit, expected in ((4, 1), (6, 0)):  # c2 is a negated event only when x < limit
        text = query("COUNT(*)", ANY, pattern="SEQ(A, NOT C c, B)", where=f"c.x < {limit}")
        assert values(text, events) == {"COUNT(*)": expected}


def test_negation_keeps_the_pattern_grained_path_off() -> None:
    plan = compile(query("COUNT(*)", NEXT, pattern="(SEQ(A+, NOT C, B))+")).plan
    assert "pending" in plan.path
    assert plan.guarded == (((0, 1), 0),)



@pytest.mark.parametrize("semantics", [ANY, NEXT, CONT])
def test_an_optional_sub_pattern_is_sugar_for_a_disjunction(semantics: str) -> None:
    # SEQ(P1?, P2) = SEQ(P1, P2) OR P2 (Appendix C)
    events = "a1 b2 a3 c4 b5"
    assert count("SEQ(A?, B)", semantics, events) == \
        count("SEQ(A, B) OR B", semantics, events)
    assert count("SEQ(A, C?, B)", semantics, events) == \
        count("SEQ(A, C, B) OR SEQ(A, B)", semantics, events)
