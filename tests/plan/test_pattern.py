"""The pattern model rejects what the planner cannot represent, with a message naming it."""

from __future__ import annotations

import pytest

from situflow.plan import Component, Filter, Negation, Pattern, PatternError, Predicate

A, B = Component("a", "A"), Component("b", "B")
KB = Component("b", "B", kleene=True)


def never(x, y) -> bool:
    return False


CASES = [
    ("no components", dict(components=()), "at least one positive event"),
    ("negative window", dict(window=-1.0), "window must not be negative"),
    ("no window", dict(window=float("nan")), "window must not be negative"),
    ("twice bound", dict(components=(A, Component("a", "C"))), "variables bound twice: a"),
    ("negation in AND", dict(sequence=False, negations=(Negation("n", "N", 1),)), "inside SEQ"),
    ("before in SEQ", dict(before=((0, 1),)), "'before' pairs are for AND"),
    ("bad before", dict(sequence=False, before=((0, 5),)), "bad precedence pair (0, 5)"),
    ("cycle", dict(sequence=False, before=((0, 1), (1, 0))), "form a cycle"),
    ("position", dict(negations=(Negation("n", "N", 3),)), "at position 3 of 2"),
    ("unknown", dict(predicates=(Predicate("a", "z", never),)), "unknown variable 'z'"),
    ("one var", dict(predicates=(Predicate("a", "a", never),)), "use a Filter"),
    (
        "negated vs Kleene",
        dict(components=(A, KB), negations=(Negation("n", "N", 2),),
             predicates=(Predicate("n", "b", never),)),
        "cannot be compared with a Kleene variable",
    ),
    ("filter", dict(filters=(Filter("q", bool),)), "filter on unknown variable 'q'"),
]  # fmt: skip


@pytest.mark.parametrize(("title", "fields", "message"), CASES, ids=[c[0] for c in CASES])
def test_invalid_patterns_are_rejected(title, fields, message):
    arguments = dict(components=(A, B), window=5.0) | fields
    with pytest.raises(PatternError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Pattern(**arguments)


def test_conditions_get_stable_names_for_their_statistics():
    pattern = Pattern((A, B), 5.0, (Predicate("a", "b", never),), (Filter("b", bool),))
    assert [p.name for p in pattern.predicates] == ["a~b#0"]
    assert [f.name for f in pattern.filters] == ["b#0"]
    assert pattern.describe() == "SEQ(A a, B b) WITHIN 5"


def test_a_zero_window_is_a_pattern_of_events_with_one_timestamp():
    """Windows are inclusive (SEMANTICS.md), so W = 0 is meaningful and plans can be costed."""
    from situflow.plan import GENERATORS, Statistics, choose_plan

    pattern = Pattern((A, KB, Component("c", "C")), 0.0, (Predicate("a", "c", never),))
    for algorithm in GENERATORS:
        assert choose_plan(pattern, Statistics({"A": 2.0, "B": 3.0, "C": 1.0}), algorithm)
