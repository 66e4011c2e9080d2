"""TPStream low-latency matching: the acceptance cases AT-06..AT-13 of the research file.

Relation names are standard Allen: the papers' ``finishes`` is ``finished-by`` here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from situflow.tpstream.match.situations import Situation, SituationBuffer
from tests.tpstream.harness import batch_of, from_intervals, query, run, summary

EXAMPLES = Path(__file__).parents[2] / "situflow" / "examples"
SPEED7 = [60, 65, 72, 75, 78, 80, 82, 82, 80, 76, 72, 68, 60, 60]
ACCEL7 = [0, 9, 9, 9, 9, 9, 0, 0, -10, -10, -10, -10, 0, 0]
SPEED8 = [60, 60, 75, 78, 80, 82, 84, 84, 80, 78, 76, 74, 72, 72, 72, 65, 60]
ACCEL8 = [0, 0, 9, 9, 9, 9, 9, 0, 0, -10, -10, -10, 0, 0, 0, 0, 0]

DRIVERS = (EXAMPLES / "aggressive_drivers.tps").read_text()
DRIVERS_UNCONSTRAINED = DRIVERS.replace(" AT LEAST 5s", "").replace(
    " BETWEEN 4s AND 30s", "").replace(" AT LEAST 3s", "")


def car(car_id: int, speed: list[int], accel: list[int]) -> list[dict]:
    return [{"ts": t, "car_id": car_id, "speed": s, "accel": a}
            for t, (s, a) in enumerate(zip(speed, accel, strict=True))]


def interleave(*streams: list[dict]) -> list[dict]:
    return sorted((e for s in streams for e in s), key=lambda e: e["ts"])


def test_at06_range_queries_intersect_per_relation_and_unite_alternatives():
    buffer = SituationBuffer()
    for ts, te in [(4, 9), (7, 12)]:
        buffer.append(Situation(1, ts, te))
    assert [buffer.items[i].ts for i in buffer.related("overlaps", 2, 6)] == [4]
    united = [*buffer.related("overlaps", 2, 6), *buffer.related("before", 2, 6)]
    assert sorted(buffer.items[i].ts for i in united) == [4, 7]


@pytest.mark.parametrize("batch_size", [1, 5, 1000])
def test_at07_unconstrained_drivers_detected_at_the_start_of_braking(batch_size):
    matches = run(DRIVERS_UNCONSTRAINED, car(7, SPEED7, ACCEL7), batch_size)
    assert summary(matches) == [(8, {"A": (1, 6), "B": (2, None), "C": (8, None)})]
    (m,) = matches
    assert m.ts == 8 and m.key == 7
    assert m.values == {"id": 7, "avg_speed": pytest.approx(549 / 7)}
    assert m.bindings["B"] == {"ts": 2, "te": None, "open": True}


@pytest.mark.parametrize("batch_size", [1, 4, 1000])
def test_at08_duration_constraints_defer_matching_to_the_bounded_end(batch_size):
    matches = run(DRIVERS, interleave(car(7, SPEED7, ACCEL7), car(8, SPEED8, ACCEL8)),
                  batch_size)
    assert summary(matches) == [
        (11, {"A": (1, 6), "B": (2, 11), "C": (8, None)}),
        (15, {"A": (2, 7), "B": (2, 15), "C": (9, 12)}),
    ]
    assert [m.key for m in matches] == [7, 8]
    assert matches[0].values["avg_speed"] == pytest.approx(697 / 9)
    assert matches[1].values["avg_speed"] == pytest.approx(1007 / 13)


def test_at08_without_constraints_car_8_is_detected_at_9():
    matches = run(DRIVERS_UNCONSTRAINED, car(8, SPEED8, ACCEL8))
    assert [m.emitted_at for m in matches] == [9]


def test_both_surface_forms_of_the_drivers_query_match_alike():
    edbt = (EXAMPLES / "aggressive_drivers_edbt.tps").read_text()
    events = interleave(car(7, SPEED7, ACCEL7), car(8, SPEED8, ACCEL8))
    assert summary(run(edbt, events)) == summary(run(DRIVERS, events))


def test_at09a_meets_is_not_before():
    accel = [0, 9, 9, 9, 9, 9, -10, -10, -10, -10, 0, 0, 0, 0]
    assert run(DRIVERS_UNCONSTRAINED, car(7, SPEED7, accel)) == []


BOOL3 = """FROM S DEFINE A AS a = 1, B AS b = 1, C AS c = 1
PATTERN A meets;overlaps;starts;during B AND B contains;finished-by;overlaps;meets C
AND A before C WITHIN 300 seconds RETURN count(B) AS n"""


def test_at09b_a_match_spanning_more_than_the_window_is_not_reported():
    events = from_intervals({"A": [(1, 6)], "B": [(2, 400)], "C": [(390, 405)]}, 406)
    assert run(BOOL3, events) == []


def test_at10_partitions_never_mix():
    car10 = car(10, SPEED7, [0, 9, 9, 9, 9, 9, 0, 0, 0, 0, 0, 0, 0, 0])
    matches = run(DRIVERS_UNCONSTRAINED, interleave(car(7, SPEED7, ACCEL7), car10))
    assert [m.key for m in matches] == [7]


FIG54 = """FROM S DEFINE A AS a = 1, B AS b = 1, C AS c = 1, D AS d = 1
PATTERN A before B AND A before C AND A before D AND C contains;finished-by;meets D
WITHIN 100 seconds RETURN count(D) AS n"""


@pytest.mark.parametrize("intervals, expected", [
    # (a) meets: at D.ts while B runs unrelated; not again at D.te
    ({"A": [(1, 3)], "B": [(6, 20)], "C": [(5, 8)], "D": [(8, 12)]}, [8]),
    # (b) B starts last: at B.ts
    ({"A": [(1, 3)], "B": [(14, 20)], "C": [(5, 8)], "D": [(8, 12)]}, [14]),
    # (c) contains: at D.te while B and C both run
    ({"A": [(1, 3)], "B": [(5, 30)], "C": [(6, 20)], "D": [(8, 12)]}, [12]),
    # (d) finished-by: at C.te = D.te
    ({"A": [(1, 3)], "B": [(5, 30)], "C": [(6, 14)], "D": [(9, 14)]}, [14]),
    # (e) C overlaps D: never (the false-positive guard)
    ({"A": [(1, 3)], "B": [(4, 9)], "C": [(5, 20)], "D": [(6, 25)]}, []),
], ids=["a", "b", "c", "d", "e"])
def test_at11_figure_5_4_detection_times(intervals, expected):
    matches = run(FIG54, from_intervals(intervals, 32))
    assert [m.emitted_at for m in matches] == expected


PAIR = "FROM S DEFINE {x} AS {xl} = 1, {y} AS {yl} = 1 PATTERN {x} {rel} {y} " \
       "WITHIN 100 seconds RETURN count({x}) AS n"


@pytest.mark.parametrize("rel, intervals, expected", [
    ("finished-by", {"C": [(5, 20)], "D": [(6, 25)]}, []),
    ("finished-by", {"C": [(5, 20)], "D": [(6, 20)]}, [20]),
    ("equals", {"C": [(3, 9)], "D": [(3, 9)]}, [9]),
])
def test_at12_equal_ends_are_not_assumed_while_both_run(rel, intervals, expected):
    text = PAIR.format(x="C", xl="c", y="D", yl="d", rel=rel)
    assert [m.emitted_at for m in run(text, from_intervals(intervals, 30))] == expected


@pytest.mark.parametrize("constraint, intervals, rel, expected", [
    ("", {"A": [(1, 4)], "B": [(4, 8)]}, "meets", [4]),
    ("BETWEEN 2s AND 10s", {"A": [(1, 4)], "B": [(4, 8)]}, "meets", [8]),
    ("BETWEEN 2s AND 10s", {"A": [(1, 4)], "B": [(4, 16)]}, "meets", []),
    ("AT LEAST 10s", {"A": [(3, 6)], "B": [(1, 20)]}, "during", [11]),
    ("", {"A": [(3, 6)], "B": [(1, 20)]}, "during", [6]),
])
def test_at13_duration_constraints_and_detection_time(constraint, intervals, rel, expected):
    text = (f"FROM S DEFINE A AS a = 1, B AS b = 1 {constraint} PATTERN A {rel} B "
            "WITHIN 100 seconds RETURN count(A) AS n")
    assert [m.emitted_at for m in run(text, from_intervals(intervals, 25))] == expected


def test_early_results_mark_open_situations_and_carry_aggregates_so_far():
    text = ("FROM S DEFINE A AS a = 1, B AS b = 1 PATTERN A overlaps B WITHIN 100 seconds "
            "RETURN count(B) AS nb, sum(A.v) AS sa, first(B.v) AS fb, last(B.v) AS lb")
    events = [{**e, "v": e["ts"]} for e in from_intervals({"A": [(1, 5)], "B": [(3, 9)]}, 12)]
    for batch_size in (1, 2, 3, 100):
        (m,) = run(text, events, batch_size)
        assert m.emitted_at == 5
        assert m.bindings == {"A": {"ts": 1, "te": 5, "open": False},
                              "B": {"ts": 3, "te": None, "open": True}}
        assert m.values == {"nb": 3, "sa": 1 + 2 + 3 + 4, "fb": 3, "lb": 5}


def test_snapshot_and_restore_continue_exactly():
    events = interleave(car(7, SPEED7, ACCEL7), car(8, SPEED8, ACCEL8))
    q = query(DRIVERS)
    whole = summary(run(q, events))
    for cut in range(1, len(events)):
        op = q.operator()
        first = op.process(batch_of(events, 0, cut))
        restored = q.restore(json.loads(json.dumps(op.snapshot())))
        rest = restored.process(batch_of(events, cut, len(events)))
        assert summary(first + rest) == whole


def test_a_restored_situation_keeps_its_aggregates_through_json():
    text = ("FROM S DEFINE A AS a = 1, B AS b = 1 PATTERN A before B WITHIN 100 seconds "
            "RETURN sum(A.v) AS sa, first(B.v) AS fb")
    events = [{**e, "v": e["ts"]} for e in from_intervals({"A": [(1, 3)], "B": [(6, 9)]}, 10)]
    q = query(text)
    for cut in range(1, len(events)):
        op = q.operator()
        first = op.process(batch_of(events, 0, cut))
        restored = q.restore(json.loads(json.dumps(op.snapshot())))
        (m,) = first + restored.process(batch_of(events, cut, len(events)))
        assert (m.emitted_at, m.values) == (6, {"sa": 3, "fb": 6})


def test_count_of_an_attribute_counts_the_events_where_it_is_present():
    """SEMANTICS.md: ``count(X.attr)`` is SQL's ``COUNT(col)`` (null and absent values are not
    counted, any other value is); ``count(X)`` counts all of X's events. Early (A overlaps B, B
    still open) and final (B with an upper bound, known at its end) results, in any batches."""
    tags = {1: "x", 2: "y", 3: None, 5: "z", 6: "", 8: "w"}  # 3 null, 0 4 7 9.. absent
    events = [{**e, **({"tag": tags[e["ts"]]} if e["ts"] in tags else {})}
              for e in from_intervals({"A": [(1, 5)], "B": [(3, 9)]}, 12)]
    early = ("FROM S DEFINE A AS a = 1, B AS b = 1 PATTERN A overlaps B WITHIN 100 seconds "
             "RETURN count(A.tag) AS na, count(B.tag) AS nb, count(B) AS all_b")
    final = early.replace("B AS b = 1", "B AS b = 1 AT MOST 20s")
    for batch_size in (1, 2, 5, 100):
        (m,) = run(early, events, batch_size)
        # At 5, A [1, 5) is over (tags x, y, null, absent), B holds the events 3, 4, 5.
        assert (m.emitted_at, m.values) == (5, {"na": 2, "nb": 1, "all_b": 3})
        (m,) = run(final, events, batch_size)
        # B [3, 9) is known at 9: null, absent, z, "", absent, w.
        assert (m.emitted_at, m.values) == (9, {"na": 2, "nb": 3, "all_b": 6})


def test_count_of_an_attribute_through_the_cli(tmp_path, capsys):
    """Issue #12: ``RETURN count(D.x)`` raised KeyError while matching."""
    from situflow.cli import main

    (tmp_path / "q.tps").write_text(
        "FROM S PARTITION BY k DEFINE A AS a = 1, D AS d = 1 AT MOST 1 minutes PATTERN A before D "
        "WITHIN 1 hours RETURN count(D.x) AS n, count(D) AS m")
    events = [{"ts": t, "k": 1, "a": int(t < 2), "d": int(4 <= t < 8),
               **({"x": "s"} if t == 5 else {"x": 3} if t == 6 else {})} for t in range(12)]
    (tmp_path / "e.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    assert main(["run", str(tmp_path / "q.tps"), "--input", str(tmp_path / "e.jsonl")]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["values"] == {"n": 2, "m": 4}


def test_a_zero_window_matches_situations_that_start_together_at_their_start():
    """WITHIN 0 (SEMANTICS.md: ``max(te) - min(ts) <= 0``, an ongoing situation's end counting
    as now): a low-latency match of situations that began at the same event, emitted there."""
    events = from_intervals({"A": [(2, 4), (7, 9)], "B": [(2, 6), (8, 9)]}, 10)
    together = ("FROM S DEFINE A AS a = 1, B AS b = 1 PATTERN A starts;started-by;equals B "
                "WITHIN 0 seconds RETURN count(A) AS n")
    assert summary(run(together, events)) == [(2, {"A": (2, None), "B": (2, None)})]
    assert run(together.replace("starts;started-by;equals", "starts"), events) == []
