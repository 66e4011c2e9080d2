"""The COGRA operator's streaming contract: emission timing, ordering, groups, scale, state."""

from __future__ import annotations

import dataclasses
import math

import pytest

from situflow.errors import StateError
from situflow.operator import QueryOptions
from situflow.trends.kernel import NEXT_ALG3
from situflow.trends.operator import TrendOperator, TrendProgram
from situflow.trends.query import compile
from tests.trends import reference
from tests.trends.harness import ANY, NEXT, batch, query, run, stream


def test_windows_are_emitted_once_event_time_passes_their_end() -> None:
    op = compile(query("COUNT(*)", ANY, within="WITHIN 4")).operator()
    assert op.process(batch(stream("a1 b2 a3"))) == []
    emitted = op.process(batch(stream("b4")))
    assert [(r.window_start, r.values["COUNT(*)"]) for r in emitted] == [(0, 1)]
    assert [r.window_start for r in op.advance_to(8)] == [4]
    assert op.finish() == []


def test_results_are_ordered_by_window_then_group() -> None:
    events = [{"type": "A", "ts": t, "g": g} for t, g in
              [(1, "b"), (1, None), (2, "c"), (3, "a"), (3, "c"), (6, "a"), (7, None)]]
    text = "RETURN g, COUNT(*) PATTERN A+ SEMANTICS skip-till-any-match GROUP-BY g WITHIN 5"
    got = run(text, events)
    assert [(r["window_start"], r["group"], r["values"]["COUNT(*)"]) for r in got] == [
        (0, None, 1), (0, "a", 1), (0, "b", 1), (0, "c", 3), (5, None, 1), (5, "a", 1)]
    assert got == run(text, events, [1])


def test_several_grouping_attributes_give_a_list() -> None:
    events = [{"type": "A", "ts": 1, "g": 1, "h": "x"}, {"type": "A", "ts": 2, "g": 1, "h": "x"}]
    text = "RETURN h, g, COUNT(*) PATTERN A+ SEMANTICS contiguous GROUP-BY g, h WITHIN 5"
    assert run(text, events)[0]["group"] == [1, "x"]
    assert run(text, events)[0]["values"] == {"h": "x", "g": 1, "COUNT(*)": 3}


def test_hopping_windows_skip_the_gaps() -> None:
    text = query("COUNT(*)", ANY, within="WITHIN 2 SLIDE 4")
    got = run(text, stream(RUNNING_HOP))
    assert [(r["window_start"], r["values"]["COUNT(*)"]) for r in got] == [(0, 0), (4, 1)]
    assert got == [dict(r, query="query") for r in reference.evaluate(text, stream(RUNNING_HOP))]


RUNNING_HOP = "a1 b2 a3 a5 b5 b6 a7"


def test_events_before_time_zero_are_in_no_window() -> None:
    events = [{"type": "A", "ts": -3}, {"type": "A", "ts": 1}]
    got = run("RETURN COUNT(*) PATTERN A+ SEMANTICS skip-till-any-match WITHIN 5", events)
    assert [(r["window_start"], r["values"]["COUNT(*)"]) for r in got] == [(0, 1)]


def test_durations_use_the_stream_time_unit() -> None:
    text = "RETURN COUNT(*) PATTERN A+ SEMANTICS contiguous WITHIN 1 minute SLIDE 30 seconds"
    assert (compile(text).plan.size, compile(text).plan.slide) == (60, 30)
    millis = compile(text, QueryOptions(time_unit=0.001)).plan
    assert (millis.size, millis.slide) == (60_000, 30_000)


def test_missing_attributes_count_but_add_nothing() -> None:
    events = stream("a1 a2 a3", x=[4, None, 6])
    text = query("COUNT(A), SUM(A.x), MIN(A.x), MAX(A.x), AVG(A.x)", ANY, pattern="A+")
    got = run(text, events)
    assert got[0]["values"] == {"COUNT(A)": 12, "SUM(A.x)": 40, "MIN(A.x)": 4, "MAX(A.x)": 6,
                                "AVG(A.x)": 40 / 12}


def decimal(log10: float) -> str:
    return f"{10 ** (log10 - math.floor(log10)):.6f}e+{math.floor(log10)}"


@pytest.mark.parametrize("where", ["", "A.x < NEXT(A).x"])
def test_counts_beyond_float_range_keep_exact_averages(where: str) -> None:
    n = 2000
    events = [{"type": "A", "ts": t, "x": t} for t in range(n)]
    got = run(query("COUNT(*), SUM(A.x), AVG(A.x)", ANY, pattern="A+", where=where,
                    within="WITHIN 10000"), events)[0]["values"]
    # 2**n - 1 trends (x increases, so the predicate holds for every pair); each event is in
    # 2**(n-1) of them, so AVG is the mean of x.
    assert got["COUNT(*)"] == decimal(n * math.log10(2))
    assert isinstance(got["SUM(A.x)"], str)
    assert got["AVG(A.x)"] == pytest.approx((n - 1) / 2, rel=1e-12)


def test_partitions_of_different_scales_merge_into_one_group() -> None:
    events = [{"type": "A", "ts": t, "x": 1.0, "k": "big", "g": 1} for t in range(1500)]
    events += [{"type": "A", "ts": 1500 + t, "x": 3.0, "k": "small", "g": 1} for t in range(10)]
    text = ("RETURN COUNT(*), AVG(A.x) PATTERN A+ SEMANTICS skip-till-any-match WHERE [k] "
            "GROUP-BY g WITHIN 10000")
    got = run(text, events)[0]["values"]
    # 2**1500 - 1 + 2**10 - 1 trends: the small partition vanishes next to the big one.
    assert got["COUNT(*)"] == decimal(1500 * math.log10(2))
    assert got["AVG(A.x)"] == pytest.approx(1.0, rel=1e-12)


def test_algorithm3_would_lose_trends_where_the_selector_avoids_it() -> None:
    """Forcing Algorithm 3 on SEQ(A+, B+) reproduces the paper's 2 instead of Definition 2.6's 3."""
    compiled = compile(query("COUNT(*)", NEXT, pattern="SEQ(A+, B+)"))
    forced = TrendProgram.build(dataclasses.replace(compiled.plan, mode=NEXT_ALG3))
    op = TrendOperator(forced, "query", compiled.query_id)
    results = op.process(batch(stream("a1 b2 a3 b4"))) + op.finish()
    assert results[0].values["COUNT(*)"] == 2
    assert run(compiled.canonical(), stream("a1 b2 a3 b4"))[0]["values"]["COUNT(*)"] == 3


def test_describe_names_the_granularity_and_the_path() -> None:
    text = compile(query("COUNT(*)", NEXT, pattern="SEQ(A+, B+)")).describe()
    assert "granularity: pattern (Table 5)" in text
    assert "pending partial-trend aggregates" in text
    assert "A (A): predTypes {A}" in text and "B (B): predTypes {A, B}" in text


def test_snapshot_of_another_query_is_refused() -> None:
    snapshot = compile(query("COUNT(*)", ANY)).operator().snapshot()
    with pytest.raises(StateError):
        compile(query("COUNT(*)", NEXT)).restore(snapshot)


def test_state_holds_aggregates_per_open_window_only() -> None:
    op = compile(query("COUNT(*)", ANY, within="WITHIN 10 SLIDE 2")).operator()
    op.process(batch([{"type": "AB"[t % 2], "ts": t} for t in range(10_000)]))
    assert op.stats() == {"partitions": 1, "aggregates": 5 * (2 + 1), "kept_events": 0}


def test_a_late_event_never_reopens_an_emitted_window() -> None:
    op = compile(query("COUNT(*)", ANY, within="WITHIN 4 SLIDE 2")).operator()
    first = op.process(batch(stream("a1 b2 a3 b5")))
    late = op.process(batch(stream("a2 b6")))
    assert [(r.window_start, r.values["COUNT(*)"]) for r in first] == [(0, 1)]
    # [0, 4) stays as emitted; in [2, 6) the late a2 comes after b5 in the stream, so it
    # completes nothing there, and (a3, b5) is the only trend.
    assert [(r.window_start, r.values["COUNT(*)"]) for r in late] == [(2, 1)]
    assert [(r.window_start, r.values["COUNT(*)"]) for r in op.finish()] == [(4, 0), (6, 0)]


def test_adjacent_equality_compares_strings() -> None:
    events = [{"type": "S", "ts": t, "sym": sym} for t, sym in enumerate(["a", "b", "a", "7"], 1)]
    for op, expected in (("=", 5), ("!=", 13)):
        text = f"RETURN COUNT(*) PATTERN S+ SEMANTICS skip-till-any-match WHERE " \
               f"S.sym {op} NEXT(S).sym WITHIN 10"
        assert run(text, events)[0]["values"] == {"COUNT(*)": expected}
        assert reference.evaluate(text, events)[0]["values"] == {"COUNT(*)": expected}
