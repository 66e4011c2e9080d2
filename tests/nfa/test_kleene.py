"""Kleene plus (SASE+ §2): iteration predicates, aggregates over prefixes, lengths, constant
indexes, trailing Kleene plus, RETURN values over Kleene variables."""

from __future__ import annotations

import pytest

from situflow.errors import ValidationError
from tests.nfa.harness import QUERY3, Harness, figure3

QUERY2 = """PATTERN SEQ(Alert a, Shipment+ b[ ])
WHERE    skip_till_any_match(a, b[ ]) {
                    a.type = 'contaminated'
       and       b[1].from = a.site
       and       b[i].from = b[i-1].to }
WITHIN    3 hours"""


def ev(i: int, kind: str, ts: int | None = None, **attrs):
    return {"id": f"{kind.lower()}{i}", "type": kind, "ts": i if ts is None else ts, **attrs}


def test_query2_verbatim_needs_another_type_field():
    # SEMANTICS.md: an attribute named like the type field is invisible to predicates.
    with pytest.raises(ValidationError) as info:
        Harness.for_query(QUERY2)
    assert (info.value.line, info.value.col) == (3, 21)
    assert "type field" in info.value.message


def test_s13_query2_detects_both_series_from_x_but_never_x_to_y_to_z():
    h = Harness.for_query(QUERY2, type_field="event")
    events = [
        {"id": "alert", "event": "Alert", "type": "contaminated", "site": "S", "ts": 0},
        {"id": "sx", "event": "Shipment", "from": "S", "to": "X", "ts": 1},
        {"id": "xy", "event": "Shipment", "from": "X", "to": "Y", "ts": 2},
        {"id": "xz", "event": "Shipment", "from": "X", "to": "Z", "ts": 3},
    ]
    series = [m["b"] for m in h.matches(events)]
    # Each valid extension of the trailing Kleene plus is a match of its own (SEMANTICS.md),
    # so the prefix {S->X} is reported too.
    assert series == [["sx"], ["sx", "xy"], ["sx", "xz"]]


def test_trailing_kleene_plus_under_skip_till_next_match_reports_one_match_per_extension():
    h = Harness.for_query("PATTERN SEQ(A a, B+ b[]) WHERE skip_till_next_match(a, b[]) { }")
    results = h.run([ev(1, "A"), ev(2, "B"), ev(3, "C"), ev(4, "B")])
    assert [(m.bindings["b"], m.emitted_at) for m in results] == [
        (["b2"], 2), (["b2", "b4"], 4)]


@pytest.mark.parametrize(("bound", "expected"), [
    ("a.LEN >= 2", [["a1", "a2"]]),
    # The bound applies to the finished iteration, not to each step: the e1-run takes a3 and
    # then fails at b4; the runs from a2 and a3 succeed.
    ("a.LEN <= 2", [["a2", "a3"], ["a3"]]),
])
def test_length_bounds_apply_to_the_finished_iteration(bound, expected):
    h = Harness.for_query(f"PATTERN SEQ(A+ a[], B b) WHERE skip_till_next_match(a[], b) "
                          f"{{ {bound} }}")
    events = [ev(1, "A"), ev(2, "A"), ev(4, "B")] if ">=" in bound else [
        ev(1, "A"), ev(2, "A"), ev(3, "A"), ev(4, "B")]
    assert [m["a"] for m in h.matches(events)] == expected


def test_a_constant_index_refers_to_the_kth_selected_event():
    h = Harness.for_query("PATTERN SEQ(A+ a[], B b) WHERE skip_till_next_match(a[], b) "
                          "{ a[2].x > 5 }")
    # a2 (x=1) cannot be the second event, so skip till next match skips it for a3; an
    # iteration shorter than two events has no a[2] and fails the predicate.
    events = [ev(1, "A", x=1), ev(2, "A", x=1), ev(3, "A", x=9), ev(4, "B")]
    assert [m["a"] for m in h.matches(events)] == [["a1", "a3"], ["a2", "a3"]]


def test_return_values_over_kleene_variables():
    h = Harness.for_query(QUERY3 + " RETURN a[1].price AS start, a[a.LEN].price AS top, "
                          "avg(a[].price) AS mean, a.LEN AS n, a[2].volume, b.volume AS drop")
    r1 = h.run(figure3())[0]
    assert r1.values == {"start": 100, "top": 120, "mean": 581 / 5, "n": 5,
                         "a[2].volume": 990, "drop": 750}


def test_iteration_predicates_compare_with_the_previous_selected_event():
    h = Harness.for_query("PATTERN SEQ(A+ a[], B b) WHERE skip_till_next_match(a[], b) "
                          "{ a[i].x > a[i-1].x }")
    events = [ev(1, "A", x=1), ev(2, "A", x=0), ev(3, "A", x=2), ev(4, "B")]
    assert [m["a"] for m in h.matches(events)] == [["a1", "a3"], ["a2", "a3"], ["a3"]]


def test_count_of_an_attribute_counts_the_selected_events_where_it_is_present():
    """SEMANTICS.md: ``count(v[ ].attr)`` is SQL's ``COUNT(col)``, in WHERE and in RETURN; the
    length of the iteration is ``v.LEN``."""
    text = """PATTERN SEQ(Stock+ a[ ], Stock b)
WHERE skip_till_next_match(a[ ], b) { a[i].kind = 'up' and b.kind = 'end' and b.n = count(a[ ].price) }
WITHIN 1 hour
RETURN count(a[ ].price) AS priced, a.LEN AS n"""
    events = [{"id": f"e{i}", "type": "Stock", "ts": i, "kind": kind, "price": price, "n": n}
              for i, (kind, price, n) in enumerate([("up", 1.0, 0), ("up", None, 0),
                                                    ("up", 2.0, 0), ("end", None, 2)])]
    (m,) = Harness.for_query(text).run(events)
    assert (m.bindings, m.values) == ({"a": ["e0", "e1", "e2"], "b": ["e3"]},
                                      {"priced": 2, "n": 3})
