"""Cost-based plans inside the SASE+ operator (``situflow.sase.planned``): a planned query gives
exactly the NFA^b output — the same bindings, keys, RETURN values and order — for every plan
generator, across re-planning, batch sizes, snapshot/restore and missing values, and so does
the default, which warms up on NFA^b and then keeps it or switches to a plan;
``describe()`` names the plan."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from situflow.nfa.operator import NfaOperator
from situflow.plan import GENERATORS
from situflow.sase import compile
from situflow.sase.planned import WARMUP_EVENTS, PlannedOperator
from tests.nfa.harness import QUERY1, QUERY3, feed, figure3, with_strategy
from tests.profiles import scaled


@st.composite
def planned_queries(draw: Any) -> str:
    """Random queries inside the pattern model: skip-till-any-match, length <= 5, Kleene plus
    without conditions, unary and pairwise conditions, negation, partitioning, RETURN."""
    n = draw(st.integers(1, 4))
    comps = [(draw(st.sampled_from("AB")), f"v{k}", draw(st.booleans())) for k in range(n)]
    single = [v for _, v, kleene in comps if not kleene]
    c = st.integers(0, 2)
    options = [f"{v}.x > {draw(c)}" for v in single] + [f"{v}.x <= {draw(c)}" for v in single]
    options += [f"{v}.x % 2 != 1" for v in single]
    options += [f"{u}.x {op} {v}.x" for u in single for v in single if u < v
                for op in ("<=", "!=", "=")]
    preds = draw(st.lists(st.sampled_from(options), max_size=3, unique=True)) if options else []
    parts = [f"{t}+ {v}[]" if kleene else f"{t} {v}" for t, v, kleene in comps]
    negation_at = draw(st.none() | st.integers(0, n))
    if negation_at is not None:
        parts.insert(negation_at, f"~({draw(st.sampled_from('ABC'))} w)")
        if single and draw(st.booleans()):
            preds.append(f"w.x = {draw(st.sampled_from(single))}.x")
        if draw(st.booleans()):
            preds.append(f"w.x >= {draw(c)}")
    partition = draw(st.sampled_from(["", "[k]", "PARTITION BY k"]))
    if partition and not single and (negation_at is not None or n == 1):
        partition = ""  # outside the pattern model: no single-event variable to key
    if partition == "[k]":
        preds.insert(0, "[k]")
    variables = ", ".join(p.split()[-1].rstrip(")") for p in parts)
    text = f"PATTERN SEQ({', '.join(parts)}) WHERE skip_till_any_match({variables})"
    text += f" {{ {' AND '.join(preds)} }}" if preds else " { }"
    text += f" WITHIN {draw(st.integers(1, 6))} seconds"
    if partition.startswith("PARTITION"):
        text += " " + partition
    first, last = comps[0], comps[-1]
    text += f" RETURN {first[1]}[1].x AS head" if first[2] else f" RETURN {first[1]}.x AS head"
    if last[2]:
        text += f", {last[1]}.LEN AS n, sum({last[1]}[].x) AS total"
    return text


@st.composite
def streams(draw: Any) -> list[dict[str, Any]]:
    size = draw(st.integers(0, 10))
    events, ts = [], 0
    for i in range(size):
        ts += draw(st.integers(0, 2))
        event: dict[str, Any] = {"id": f"e{i}", "ts": ts, "type": draw(st.sampled_from("AABBCD")),
                                 "x": draw(st.sampled_from([0, 1, 2, 3, None]))}
        key = draw(st.sampled_from(["p", "q", "q", None]))
        if key is not None:
            event["k"] = key
        events.append(event)
    return events


def _output(op: Any, events: list[dict[str, Any]], batch: int | None = None) -> list[dict[str, Any]]:
    return [m.to_dict() for m in feed(op, events, batch)]


@settings(max_examples=scaled(8),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(planned_queries(), streams(), st.sampled_from(sorted(GENERATORS)), st.integers(1, 4),
       st.data())
def test_every_plan_gives_the_nfa_output(text, events, algorithm, size, data):
    nfa = compile(text, plan=None)
    planned = compile(text, plan=algorithm, check_every=data.draw(st.integers(1, 5)))
    assert planned.planned is not None, planned.unplanned_reason
    expected = _output(nfa.operator(), events)
    assert _output(planned.operator(), events, batch=size) == expected, text
    cut = data.draw(st.integers(0, len(events)))
    op = planned.operator()
    first = feed(op, events[:cut], finish=False)
    restored = planned.restore(json.loads(json.dumps(op.snapshot())))
    rest = feed(restored, events[cut:], offset=cut)
    assert [m.to_dict() for m in first + rest] == expected, text


def test_queries_outside_the_pattern_model_keep_nfa():
    for text, reason in [
        (QUERY3, "skip_till_any_match only"),
        (with_strategy(QUERY3, "skip_till_any_match"), "iteration predicate"),
        ("PATTERN SEQ(A a, B b) WHERE skip_till_any_match(a, b) { a.x > 1 } WITHIN 5 seconds "
         "CONSUME", "CONSUME"),
        ("PATTERN SEQ(A a, B b) WHERE skip_till_any_match(a, b) { a.x > 1 }", "WITHIN"),
    ]:
        compiled = compile(text)
        assert compiled.planned is None
        assert isinstance(compiled.operator(), NfaOperator)
        assert reason in compiled.describe()


def test_describe_shows_the_plan_and_its_cost():
    compiled = compile(with_strategy(QUERY1, "skip_till_any_match"))
    assert isinstance(compiled.operator(), PlannedOperator)
    text = compiled.describe()
    assert "plan DP-B (tree-based" in text and "cost" in text
    assert "SEQ(Shelf a, ~(Register b), Exit c) WITHIN 43200" in text
    left_deep = compile(with_strategy(QUERY1, "skip_till_any_match"), plan="DP-LD")
    assert "plan DP-LD (order-based" in left_deep.describe()


@pytest.mark.parametrize("algorithm", sorted(GENERATORS))
def test_query1_under_any_match_is_plan_independent(algorithm):
    query = with_strategy(QUERY1, "skip_till_any_match")
    events = [
        {"id": "s1", "type": "Shelf", "tag_id": 1, "ts": 0},
        {"id": "s2", "type": "Shelf", "tag_id": 2, "ts": 1},
        {"id": "r1", "type": "Register", "tag_id": 1, "ts": 2},
        {"id": "x1", "type": "Exit", "tag_id": 1, "ts": 3},
        {"id": "x2", "type": "Exit", "tag_id": 2, "ts": 4},
        {"id": "s3", "type": "Shelf", "tag_id": 1, "ts": 5},
        {"id": "x3", "type": "Exit", "tag_id": 1, "ts": 6},
    ]
    expected = _output(compile(query, plan=None).operator(), events)
    assert [m["bindings"] for m in expected] == [
        {"a": ["s2"], "c": ["x2"]}, {"a": ["s3"], "c": ["x3"]}]
    assert _output(compile(query, plan=algorithm).operator(), events) == expected


def test_figure3_kleene_without_conditions():
    query = ("PATTERN SEQ(Stock+ a[], Stock b) WHERE skip_till_any_match(a[], b) "
             "{ [symbol] AND b.volume < 800 } WITHIN 1 hour RETURN a.LEN AS n")
    events = figure3()
    expected = _output(compile(query, plan=None).operator(), events)
    assert len(expected) == (2**5 - 1) + (2**7 - 1)  # b = e6 and b = e8
    assert _output(compile(query).operator(), events) == expected


@settings(max_examples=scaled(12),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(planned_queries(), streams(), st.integers(1, 12), st.integers(1, 12),
       st.sampled_from([0.0, math.inf]), st.booleans(), st.integers(1, 4), st.data())
def test_the_default_warms_up_on_nfa_and_every_decision_gives_the_nfa_output(
        text, events, warmup, pushed, advantage, trial, size, data):
    # advantage 0 tries the plan whenever the pattern order has work; inf keeps NFA^b; the
    # trial keeps whichever engine was faster, without it the plan is kept.
    nfa = compile(text, plan=None)
    default = compile(text, check_every=data.draw(st.integers(1, 5)))
    assert default.planned is not None and default.planned.warmup == WARMUP_EVENTS
    auto = replace(default, planned=replace(default.planned, warmup=warmup, warmup_pushed=pushed,
                                            advantage=advantage, trial=trial))
    expected = _output(nfa.operator(), events)
    assert _output(auto.operator(), events, batch=size) == expected, text
    cut = data.draw(st.integers(0, len(events)))
    op = auto.operator()
    first = feed(op, events[:cut], batch=size, finish=False)
    restored = auto.restore(json.loads(json.dumps(op.snapshot())))
    rest = feed(restored, events[cut:], batch=size, offset=cut)
    assert [m.to_dict() for m in first + rest] == expected, text


def test_the_default_names_its_decision_and_why():
    query = ("PATTERN SEQ(Stock a, Stock b) WHERE skip_till_any_match(a, b) { [symbol] AND "
             "b.price > a.price } WITHIN 1 hour")
    compiled = compile(query)
    assert "NFA^b while the rates and selectivities are measured" in compiled.describe()
    op = compiled.operator()
    assert op.decision == "NFA^b (measuring)"
    feed(op, figure3(), finish=False)
    assert op.decision == "NFA^b (measuring)"  # fewer events than the warm-up
    short = replace(compiled, planned=replace(compiled.planned, warmup=3)).operator()
    feed(short, figure3())
    # One type, one condition: no plan saves tests over the pattern order.
    assert short.decision.startswith("NFA^b: pattern order")
    assert "fewer" in short.decision


def test_a_tried_plan_reports_the_measured_trial():
    query = ("PATTERN SEQ(Stock a, Stock b) WHERE skip_till_any_match(a, b) { [symbol] AND "
             "b.price > a.price } WITHIN 1 hour")
    compiled = compile(query)
    tried = replace(compiled, planned=replace(compiled.planned, warmup=3, advantage=0.0))
    op = tried.operator()
    feed(op, figure3())
    assert "trial on 3 events: plan " in op.decision and " ms CPU, NFA^b " in op.decision
    assert op.decision.startswith(("plan DP-", "NFA^b: "))
