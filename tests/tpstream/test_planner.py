"""Evaluation orders and their cost (thesis eqs. 5.2-5.6): AT-17 and AT-18."""

from __future__ import annotations

import itertools

import pytest

from situflow.tpstream.match.planner import Planner
from tests.tpstream.harness import batch_of, from_intervals, query, run, summary

HEAD = "FROM S DEFINE A AS a = 1, B AS b = 1, C AS c = 1 PATTERN "
TAIL = " WITHIN 100 seconds RETURN count(A) AS n"
Q1 = "A overlaps B AND A overlaps C AND B starts C"
Q2 = "A overlaps B AND A before C AND B overlaps C"
Q3 = "A before B AND A before C AND B before C"


def costs(pattern):
    planner = Planner(query(HEAD + pattern + TAIL))
    names = "ABC"
    return {"".join(names[i] for i in order): planner.cost(order, [100.0] * 3)
            for order in itertools.permutations(range(3))}


def test_at17_q1_prefers_starting_with_b_and_c():
    c = costs(Q1)
    assert c["BCA"] == pytest.approx(5003.74, abs=0.01)
    assert c["CBA"] == pytest.approx(5003.74, abs=0.01)
    for order in ("ABC", "ACB", "BAC", "CAB"):
        assert c[order] == pytest.approx(10128.73, abs=0.01)


def test_at17_q2_costs():
    c = costs(Q2)
    for order in ("ABC", "BAC", "BCA", "CBA"):
        assert c[order] == pytest.approx(14529.73, abs=0.01)
    for order in ("ACB", "CAB"):
        assert c[order] == pytest.approx(643104.73, abs=0.01)


def test_at17_q3_all_orders_cost_the_same():
    assert set(round(v, 2) for v in costs(Q3).values()) == {392584085.98}


def test_cross_products_are_never_planned():
    planner = Planner(query(HEAD + "A before B AND B before C" + TAIL))
    assert planner.cost((0, 2, 1), [10.0] * 3) == float("inf")
    assert planner.order(0) == (0, 1, 2)


def test_at18_ema_of_buffer_sizes():
    planner = Planner(query(HEAD + Q3 + TAIL), alpha=0.01)
    planner.sizes = [100.0] * 3
    planner.observe([200, 200, 200])
    assert planner.sizes == pytest.approx([101.0] * 3)


def test_at18_drifting_statistics_trigger_a_new_plan():
    planner = Planner(query(HEAD + Q3 + TAIL), alpha=0.5, threshold=0.2)
    planner.order(0)
    for _ in range(32):
        planner.observe([50, 1, 1])
    assert planner.replans >= 1


def test_at18_every_evaluation_order_gives_the_same_results():
    text = HEAD + "A overlaps;before B AND B overlaps;meets C AND A before;meets C" + TAIL
    events = from_intervals({"A": [(1, 4), (6, 9), (12, 15)], "B": [(3, 7), (9, 14)],
                             "C": [(7, 11), (14, 20)]}, 22)
    q = query(text)
    expected = summary(run(q, events))
    assert expected
    for orders in itertools.product(*[[o for o in itertools.permutations(range(3)) if o[0] == d]
                                      for d in range(3)]):
        op = q.operator()
        op.matcher.planner.order = lambda d, orders=orders: orders[d]  # type: ignore[method-assign]
        assert summary(op.process(batch_of(events, 0, len(events)))) == expected


def test_constraint_selectivities_are_measured_on_the_stream():
    planner = Planner(query(HEAD + Q1 + TAIL), alpha=0.5)
    assert planner.phi[(0, 1)] == pytest.approx(0.01)  # Table 5.3: overlaps
    planner.observe_selectivity(1, 0, related=3, size=4)
    assert planner.phi[(0, 1)] == pytest.approx(0.5 * 0.75 + 0.5 * 0.01)
