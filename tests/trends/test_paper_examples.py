"""The COGRA paper's worked examples and the research file's acceptance tests T1–T17.

Names follow ``research/seeds-cogra-igpu.md`` Part A, §A5; the pattern is the running example
``(SEQ(A+, B))+`` on ``a1 b2 a3 a4 c5 b6 a7 b8`` (Fig. 2) unless a test says otherwise. T18
(online result = enumerate-then-aggregate) is ``test_properties.py``.
"""

from __future__ import annotations

import pytest

from situflow.events import EventBatch
from situflow.trends.query import compile
from tests.trends import reference
from tests.trends.harness import ANY, CONT, NEXT, RUNNING, batch, query, run, stream, values

AGGS = ("COUNT(*), COUNT(A), SUM(A.attr), MIN(A.attr), MAX(A.attr), AVG(A.attr), "
        "COUNT(B), SUM(B.attr), MIN(B.attr), MAX(B.attr), AVG(B.attr)")


def step_counts(text: str, events: list[dict]) -> list[dict[str, float]]:
    """The operator's held counts after each event (one batch per event)."""
    op = compile(text).operator()
    out = []
    for e in events:
        op.process(batch([e]))
        out.append(op.counts())
    return out


@pytest.mark.parametrize(("semantics", "expected"), [(ANY, 43), (NEXT, 8), (CONT, 2)])
def test_t1_t3_t4_running_example_counts(semantics: str, expected: int) -> None:
    assert values(query("COUNT(*)", semantics), stream(RUNNING)) == {"COUNT(*)": expected}


def test_t2_type_grained_state_after_each_event() -> None:
    counts = step_counts(query("COUNT(*)", ANY), stream(RUNNING))
    assert [c["A"] for c in counts] == [1, 1, 4, 10, 10, 10, 32, 32]
    assert [c["B"] for c in counts] == [0, 1, 1, 1, 1, 11, 11, 43]
    # e.count is the growth of its type's aggregate: 1, 1, 3, 6, (c5), 10, 22, 32.
    before = [{"A": 0.0, "B": 0.0}, *counts[:-1]]
    grew = [max(c["A"] - b["A"], c["B"] - b["B"]) for b, c in zip(before, counts, strict=True)]
    assert grew == [1, 1, 3, 6, 0, 10, 22, 32]
    op = compile(query("COUNT(*)", ANY)).operator()
    op.process(batch(stream(RUNNING)))
    assert op.stats()["kept_events"] == 0  # only H = {A, B}


def test_t3_pattern_grained_trace() -> None:
    counts = step_counts(query("COUNT(*)", NEXT), stream(RUNNING))
    # Only the last matched event's count is held: a1 1, b2 1, a3 2, a4 3, c5 -, b6 3, ...
    held = [c["A"] + c["B"] for c in counts]
    assert held == [1, 1, 2, 3, 3, 3, 4, 4]
    assert [c["final"] for c in counts] == [0, 1, 1, 1, 1, 4, 4, 8]


def test_t4_contiguous_trends_and_reset() -> None:
    found = reference.trends(query("COUNT(*)", CONT), stream(RUNNING))
    assert sorted(found) == [((0, "A"), (1, "B")), ((6, "A"), (7, "B"))]
    counts = step_counts(query("COUNT(*)", CONT), stream(RUNNING))
    assert counts[5]["B"] == 0  # b6 is not matched after c5 reset the last event


def test_t5_mixed_grained_adjacent_predicate() -> None:
    # B.lim > NEXT(A).attr forbids (b6, a7) and allows every other b -> a transition.
    events = stream(RUNNING, lim=[None, 100, None, None, None, 0, None, None])
    text = query("COUNT(*)", ANY, where="B.lim > NEXT(A).attr")
    assert compile(text).plan.event_grained == (False, True)
    counts = step_counts(text, events)
    assert counts[6]["A"] == 22  # a7.count = A.count + b2.count + 1 = 12
    assert counts[7]["final"] == 33  # b8.count = 22
    assert values(text, events) == {"COUNT(*)": 33}


def test_t6_membership() -> None:
    ev = stream(RUNNING)
    a = {tuple(i for i, _ in t) for t in reference.trends(query("COUNT(*)", ANY), ev)}
    n = {tuple(i for i, _ in t) for t in reference.trends(query("COUNT(*)", NEXT), ev)}
    a3, a4, b6, a7, b8 = 2, 3, 5, 6, 7
    assert (a3, b6) in a and (a3, b6) not in n and (a3, a4, b6) in n
    assert (a3, b6, a7, b8) in a  # (a3, b6) was extended by a7 and also kept
    assert (0, 1) in a and min(len(t) for t in a) == 2  # (a1, b2) is a shortest trend
    assert [t for t in a if len(t) == 7] == [(0, 1, a3, a4, b6, a7, b8)]
    assert n == {(0, 1), (0, 1, 2, 3, 5), (0, 1, 2, 3, 5, 6, 7), (2, 3, 5), (2, 3, 5, 6, 7),
                 (3, 5), (3, 5, 6, 7), (6, 7)}


def test_t7_containment() -> None:
    ev = stream(RUNNING)
    sets = {s: set(reference.trends(query("COUNT(*)", s), ev)) for s in (ANY, NEXT, CONT)}
    assert sets[CONT] <= sets[NEXT] <= sets[ANY]


def test_t8_pattern_analyzer() -> None:
    plan = compile(query("COUNT(*)", ANY)).plan
    assert [p.variable for p in plan.positions] == ["A", "B"]
    assert plan.start == (True, False) and plan.end == (False, True)
    assert plan.pred_types(0) == (0, 1) and plan.pred_types(1) == (0,)


@pytest.mark.parametrize(("text", "granularity", "path"), [
    (query("COUNT(*)", ANY), "type", "type-grained"),
    (query("COUNT(*)", ANY, where="B.attr < NEXT(A).attr"), "mixed", "mixed-grained (Alg"),
    (query("COUNT(*)", NEXT, where="B.attr < NEXT(A).attr"), "pattern", "pattern-grained"),
    (query("COUNT(*)", CONT), "pattern", "pattern-grained (Algorithm 3, contiguous)"),
    (query("COUNT(*)", NEXT), "pattern", "pattern-grained, Algorithm 3"),
    ("RETURN sector, COUNT(*) PATTERN Stock S+ SEMANTICS skip-till-any-match "
     "WHERE [company, sector] AND S.price > NEXT(S).price GROUP-BY sector "
     "WITHIN 10 minutes SLIDE 10 seconds", "mixed", "fine-grained fallback"),
])
def test_t9_granularity_selector(text: str, granularity: str, path: str) -> None:
    plan = compile(text).plan
    assert plan.granularity == granularity
    assert path in plan.path


@pytest.mark.parametrize(("semantics", "where", "kept"), [
    (ANY, "", 0), (NEXT, "", 0), (CONT, "", 0), (ANY, "B.attr < NEXT(A).attr", None),
])
def test_t10_state_is_independent_of_the_stream_length(semantics: str, where: str,
                                                       kept: int | None) -> None:
    text = query("COUNT(*), SUM(A.attr)", semantics, where=where, within="WITHIN 1000000")
    sizes = []
    for n in (100, 10_000):
        op = compile(text).operator()
        events = [{"type": "AB"[i % 2], "ts": i, "attr": i} for i in range(n)]
        op.process(EventBatch.from_records(events))
        sizes.append(op.stats())
    assert sizes[0]["aggregates"] == sizes[1]["aggregates"]
    if kept is not None:
        assert sizes[0]["kept_events"] == sizes[1]["kept_events"] == kept
    else:  # mixed-grained keeps the B events (event-grained) and no A event
        assert sizes[1]["kept_events"] == 5_000


def test_t11_t12_t13_aggregates() -> None:
    ev = stream(RUNNING)
    expected = {
        ANY: (43, 100, 352, 1, 7, 3.52, 66, 404, 2, 8, 404 / 66),
        NEXT: (8, 17, 67, 1, 7, 67 / 17, 13, 74, 2, 8, 74 / 13),
        CONT: (2, 2, 8, 1, 7, 4.0, 2, 10, 2, 8, 5.0),
    }
    for semantics, numbers in expected.items():
        got = values(query(AGGS, semantics), ev)
        assert list(got.values()) == pytest.approx(list(numbers)), semantics


@pytest.mark.parametrize(("semantics", "expected"), [(ANY, 11), (NEXT, 8), (CONT, 6)])
def test_t14_stock_prices_with_adjacent_predicate(semantics: str, expected: int) -> None:
    events = [{"type": "Stock", "ts": t, "price": p} for t, p in enumerate([10, 8, 9, 7], 1)]
    text = ("RETURN COUNT(*) PATTERN Stock S+ SEMANTICS " + semantics
            + " WHERE S.price > NEXT(S).price WITHIN 10")
    assert values(text, events) == {"COUNT(*)": expected}


def test_t15_equivalence_partitions_within_a_group() -> None:
    events = [{"type": "Stock", "ts": t, "company": c, "sector": "tech", "price": p}
              for t, c, p in [(1, "x", 10), (2, "y", 5), (3, "x", 8), (4, "y", 6), (5, "x", 9),
                              (6, "y", 4)]]
    text = ("RETURN sector, COUNT(*) PATTERN Stock S+ SEMANTICS skip-till-any-match "
            "WHERE [company, sector] AND S.price > NEXT(S).price GROUP-BY sector WITHIN 10")
    assert run(text, events) == [{"query": "query", "group": "tech", "window_start": 0,
                                  "window_end": 10,
                                  "values": {"sector": "tech", "COUNT(*)": 10}}]


@pytest.mark.parametrize(("semantics", "expected"), [
    (ANY, [1, 3, 5, 1, 0]), (NEXT, [1, 2, 3, 1, 0]), (CONT, [1, 0, 1, 1, 0]),
])
def test_t16_sliding_windows(semantics: str, expected: list[int]) -> None:
    results = run(query("COUNT(*)", semantics, within="WITHIN 6 SLIDE 2"), stream(RUNNING))
    assert [(r["window_start"], r["window_end"]) for r in results] == [
        (0, 6), (2, 8), (4, 10), (6, 12), (8, 14)]
    assert [r["values"]["COUNT(*)"] for r in results] == expected


@pytest.mark.parametrize(("cpu", "semantics", "expected"), [
    ([10, 20, 30], CONT, {"COUNT(*)": 1, "SUM(L.cpu)": 60, "AVG(L.cpu)": 20.0}),
    ([10, 5, 30], CONT, {"COUNT(*)": 0, "SUM(L.cpu)": 0, "AVG(L.cpu)": None}),
    ([10, 5, 30], ANY, {"COUNT(*)": 5}),
    ([10, 5, 30], NEXT, {"COUNT(*)": 1, "SUM(L.cpu)": 40}),
])
def test_t17_q1_style_increasing_load(cpu: list[int], semantics: str, expected: dict) -> None:
    events = stream("s1 l2 l3 l4 e5", cpu=[None, *cpu, None])
    for e in events:
        e["type"] = {"S": "Start", "L": "Load", "E": "End"}[e["type"]]
    text = ("RETURN COUNT(*), SUM(L.cpu), AVG(L.cpu) PATTERN SEQ(Start S, Load L+, End E) "
            f"SEMANTICS {semantics} WHERE L.cpu < NEXT(L).cpu WITHIN 10")
    got = values(text, events)
    assert {k: got[k] for k in expected} == expected


# --- where Algorithm 3 and Definition 2.6 disagree (research A3.4, SEMANTICS.md) -------------


@pytest.mark.parametrize(("pattern", "where", "events", "expected"), [
    ("SEQ(A+, B+)", "", stream("a1 b2 a3 b4"), 3),
    ("Stock S+", "S.price > NEXT(S).price",
     [{"type": "Stock", "ts": t, "price": p} for t, p in enumerate([10, 8, 9, 7], 1)], 8),
    ("SEQ(P, T+, D)", "", stream("p1 t2 p3 t4 d5"), 2),
])
def test_next_follows_definition_2_6(pattern: str, where: str, events: list[dict],
                                     expected: int) -> None:
    text = query("COUNT(*)", NEXT, pattern=pattern, where=where)
    assert values(text, events) == {"COUNT(*)": expected}
    assert len(reference.trends(text, events)) == expected
    assert "Algorithm 3" not in compile(text).plan.path.split(";")[0]


def test_algorithm3_path_is_kept_where_it_is_exact() -> None:
    plan = compile(query("COUNT(*)", NEXT)).plan
    assert plan.path.startswith("pattern-grained, Algorithm 3")
    assert "Algorithm 3 (last matched event), exact" in compile(query("COUNT(*)", NEXT)).describe()


def test_q4_repeated_types_with_local_predicates() -> None:
    rates = [50, 70, 80, 120, 55, 90, 130]
    kinds = ["a", "passive", "passive", "b", "c", "passive", "d"]
    events = [{"type": "Activity", "ts": t, "patient": 1, "rate": r, "kind": k}
              for t, (r, k) in enumerate(zip(rates, kinds, strict=True), 1)]
    text = ("RETURN patient, COUNT(*) PATTERN SEQ(Activity S, Activity A+, Activity F) "
            "SEMANTICS contiguous WHERE [patient] AND S.rate < 60 AND F.rate > 100 AND "
            "A.kind = 'passive' GROUP-BY patient WITHIN 10 minutes SLIDE 30 seconds")
    got = run(text, events)
    ref = reference.evaluate(text, events)
    assert [r["values"] for r in got] == [r["values"] for r in ref]
    assert got[0]["values"]["COUNT(*)"] == 2  # (s1 a2 a3 f4) and (s5 a6 f7)
