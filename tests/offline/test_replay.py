"""Replay per interval through the real operators (thesis §3.4.2, research AT-01, AT-08, AT-21;
situflow/offline/replay.py): each merged interval with a fresh operator, results identical to
a full replay (values, ids, ``emitted_at``, order)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from situflow.archive import StreamSettings
from situflow.datagen.cars import car_columns, write_jsonl
from situflow.languages import compile_query
from situflow.offline.intervals import Interval, replay_intervals
from situflow.offline.queries import ARCHIVE_SEQ, OfflineQuery, offline_query
from situflow.offline.replay import (
    ReplayRange,
    candidate_intervals,
    full_replay,
    replay,
    result_rows,
    widen,
)
from situflow.offline.source import TableSource
from situflow.operator import QueryOptions, Result
from tests.offline import test_offline_identity as identity

EXAMPLES = Path(__file__).parents[2] / "situflow" / "examples"


def prepared(text: str) -> OfflineQuery:
    return offline_query(compile_query(text, QueryOptions(name="query")), StreamSettings("s"))


def table_of(events: list[dict[str, Any]]) -> pa.Table:
    table = pa.Table.from_pylist(events)
    n = table.num_rows
    return table.append_column("_situflow_seq", pa.array(range(n), pa.int64())).append_column(
        ARCHIVE_SEQ, pa.array(range(n), pa.int64()))


def dicts(results: list[Result]) -> list[dict[str, Any]]:
    return [r.to_dict() for r in results]


def every_subset_equals_full(offline: OfflineQuery, table: pa.Table) -> list[ReplayRange]:
    """Pruned replay with every subset of indexable symbols equals the full replay; the ranges
    of the most selective subset (all indexes)."""
    assert offline.pattern is not None
    full = dicts(full_replay(offline, table))
    indexable = [i for i, s in enumerate(offline.pattern.symbols) if s.indexable]
    source = TableSource({0: table}, key_fields=offline.pattern.keys)
    found = {i: identity.hits(offline, table, i) for i in indexable}
    ranges: list[ReplayRange] = []
    for size in range(1, len(indexable) + 1):
        for selected in itertools.combinations(indexable, size):
            ranges = widen(offline, candidate_intervals(offline, selected, found), source)
            assert dicts(replay(offline, table, ranges)) == full, selected
    return ranges


# --- AT-01 -------------------------------------------------------------------------------------

TRACE = [{"ts": t, "type": kind, "id": name} for t, (kind, name) in enumerate(
    [("A", "a1"), ("B", "b1"), ("A", "a2"), ("C", "c1"), ("B", "b2"), ("C", "c2")], 1)]


@pytest.mark.parametrize(("strategy", "expected"), [
    ("strict_contiguity", [("a2", "c1")]),
    ("skip_till_next_match", [("a1", "c1"), ("a2", "c1"), ("a1", "b1", "c1"),
                              ("a1", "b1", "b2", "c2"), ("a2", "b2", "c2")]),
    ("skip_till_any_match", [("a1", "c1"), ("a2", "c1"), ("a1", "c2"), ("a2", "c2"),
                             ("a1", "b1", "c1"), ("a1", "b1", "c2"), ("a1", "b1", "b2", "c2"),
                             ("a1", "b2", "c2"), ("a2", "b2", "c2")]),
])
def test_at01_fig_2_6_through_the_sase_engine(strategy: str, expected: list[tuple[str, ...]]) -> None:
    """AT-01 (Fig. 2.6, trace a1 b1 a2 c1 b2 c2 at t = 1..6, w = 10): ``A B* C`` written as the
    union of ``SEQ(A a, C c)`` and ``SEQ(A a, B+ b[], C c)``, each replayed per interval.

    Contiguous gives the thesis' ⟨a2,c1⟩ (result time 4) and skip-till-any its 9 matches (the
    research note's corrected list, ⟨a2,c2⟩ included). Skip-till-next differs from Def. 2.16's
    {⟨a2,c1⟩, ⟨a1,b1,c1⟩}: SASE+'s skip-till-next-match skips the events irrelevant to a run,
    so ``SEQ(A, C)`` alone also pairs a1 with c1 (b1 is irrelevant to it), and a Kleene run
    ``a1 b1`` both proceeds at c1 and, skipping c1, takes b2 (SEMANTICS.md follows SASE+)."""
    table = table_of(TRACE)
    found: list[tuple[str, ...]] = []
    for pattern, variables in (("A a, C c", "a, c"), ("A a, B+ b[], C c", "a, b[], c")):
        offline = prepared(f"PATTERN SEQ({pattern}) WHERE {strategy}({variables}) "
                           "WITHIN 10 seconds")
        every_subset_equals_full(offline, table)
        for result in full_replay(offline, table):
            bindings = result.to_dict()["bindings"]
            found.append(tuple(e for v in bindings.values() for e in v))
            if found[-1] == ("a2", "c1"):
                assert result.to_dict()["ts"] == 4
    assert found == expected


# --- AT-08 -------------------------------------------------------------------------------------

AT08 = ("PATTERN SEQ(E a, E b, E c, E d) WHERE strict_contiguity(a, b, c, d) "
        "{ a.v = 1 and b.v = 2 and c.v = 3 and d.v = 4 } WITHIN 5 seconds")
AT08_EVENTS = [{"ts": t, "type": "E", "v": v}
               for t, v in enumerate([1, 2, 3, 4, 1, 2, 9, 3, 4, 9, 2, 3, 9], 1)]


def test_at08_each_interval_is_replayed_by_a_fresh_operator() -> None:
    """AT-08: indexes on B and C give the candidates (b@2, c@3) and (b@11, c@12) and, with
    strictly increasing times (Δt⁻ = 1), the intervals [-1, 6] and [8, 15]. Replayed one by
    one they give only (1,2,3,4); the concatenated pruned stream would add (5,6,8,9)."""
    offline = prepared(AT08)
    assert offline.pattern is not None
    table = table_of(AT08_EVENTS)
    found = {i: identity.hits(offline, table, i) for i in (1, 2)}
    intervals = replay_intervals(offline.pattern, [1, 2], found, min_gap=1)
    assert intervals == [Interval(-1, 6), Interval(8, 15)]
    pruned = replay(offline, table, intervals)
    assert [r.to_dict()["bindings"] for r in pruned] == [{"a": [0], "b": [1], "c": [2], "d": [3]}]
    assert dicts(pruned) == dicts(full_replay(offline, table))

    times = table.column("ts").to_pylist()
    kept = [i for i, t in enumerate(times) if any(i.lo <= t <= i.hi for i in intervals)]
    concatenated = full_replay(offline, table.take(kept))
    assert len(concatenated) == 2  # the false match a concatenated stream creates


# --- AT-21 -------------------------------------------------------------------------------------

COOLING = ("PATTERN SEQ(R a, R+ b[], R c) WHERE strict_contiguity(a, b[], c) "
           "{ b[i].temp > b[i-1].temp and c.temp >= a.temp + 5 } WITHIN 20 seconds")


def test_at21_cooling_has_no_selective_symbol_and_replays_everything() -> None:
    """AT-21 (§2.3.5 cooling): A is ``true``, B* compares with the previous event, C with A:
    no symbol has a condition beyond its type, so S_idx is empty unless the type is indexed,
    and then every event is a hit: the replay covers all of the data, with the same result."""
    offline = prepared(COOLING)
    assert offline.pattern is not None
    assert all([c.attribute for c in s.conditions] in ([], ["type"])
               for s in offline.pattern.symbols)
    temps = [20, 21, 23, 22, 24, 28, 30, 25, 26, 27, 33, 20]
    table = table_of([{"ts": t, "type": "R", "temp": v} for t, v in enumerate(temps)])
    assert full_replay(offline, table)
    ranges = every_subset_equals_full(offline, table)
    assert [(r.lo, r.hi) for r in ranges] == [(0, 11)]


# --- examples ----------------------------------------------------------------------------------

def test_aggressive_drivers_on_the_car_stream(tmp_path: Path) -> None:
    """Thesis Listing 5.1 on 8 cars: every index subset gives the full replay's results (with
    situations widened to quiet events per car), which are ``situflow run``'s."""
    text = (EXAMPLES / "aggressive_drivers.tps").read_text()
    offline = prepared(text)
    columns = car_columns(4000, 8, seed=3)
    table = pa.table(columns)
    n = table.num_rows
    table = table.append_column(ARCHIVE_SEQ, pa.array(range(n), pa.int64()))
    full = dicts(full_replay(offline, table))
    assert full
    every_subset_equals_full(offline, table)

    write_jsonl(tmp_path / "cars.jsonl", 4000, 8, seed=3)
    assert full == identity.situflow_run(text, [json.loads(line) for line in
                                                (tmp_path / "cars.jsonl").read_text().splitlines()])


@pytest.mark.parametrize("name", ["rising_stocks.sase", "rising_trends.cogra",
                                  "downtrends.cogra"])
def test_stock_examples_pruned_equal_full_equal_run(name: str) -> None:
    text = (EXAMPLES / name).read_text()
    offline = prepared(text)
    events = []
    for t in range(0, 3000, 7):
        for symbol, sector in (("ACME", "tech"), ("BOLT", "tech"), ("CORN", "food")):
            price = 100 + (t * (3 if symbol == "ACME" else -2)) % 37
            events.append({"ts": t, "type": "Stock", "symbol": symbol, "company": symbol,
                           "sector": sector, "price": price, "volume": 500 + (t * 13) % 1100})
        if t % 140 == 0:
            events.append({"ts": t, "type": "Bond", "symbol": "B", "company": "B",
                           "sector": "gov", "price": 1, "volume": 1})
    table = table_of(events)
    full = dicts(full_replay(offline, table))
    assert full and full == identity.situflow_run(text, events)
    every_subset_equals_full(offline, table)


# --- widening ----------------------------------------------------------------------------------

def test_a_trailing_negation_is_emitted_at_the_same_event_as_in_a_full_replay() -> None:
    """The match waits until event time passes ``a.t + w`` and is released by the next event
    (at t = 20), so the replay range runs ``w`` past the core and on to that event."""
    offline = prepared("PATTERN SEQ(A a, B b, ~(C c)) WHERE skip_till_any_match(a, b) "
                       "WITHIN 5 seconds")
    table = table_of([{"ts": 0, "type": "A"}, {"ts": 1, "type": "B"}, {"ts": 3, "type": "X"},
                      {"ts": 20, "type": "X"}, {"ts": 30, "type": "C"}])
    [full] = full_replay(offline, table)
    assert full.to_dict()["emitted_at"] == 20
    ranges = widen(offline, [Interval(0, 1)], TableSource({0: table}))
    assert [(r.lo, r.hi) for r in ranges] == [(0, 20)]
    assert dicts(replay(offline, table, ranges)) == [full.to_dict()]


def test_a_leading_negation_looks_back_a_window() -> None:
    """A C at t = 2 forbids the match (a@5, b@6) (window [b.t - w, a) = [1, 5)); a replay of
    the core [5, 6] alone would not see it."""
    offline = prepared("PATTERN SEQ(~(C c), A a, B b) WHERE skip_till_any_match(a, b) "
                       "WITHIN 5 seconds")
    table = table_of([{"ts": 2, "type": "C"}, {"ts": 5, "type": "A"}, {"ts": 6, "type": "B"}])
    assert full_replay(offline, table) == []
    assert len(replay(offline, table, [Interval(5, 6)])) == 1  # the core alone is not enough
    ranges = widen(offline, [Interval(5, 6)], TableSource({0: table}))
    assert [(r.lo, r.hi) for r in ranges] == [(0, 6)]
    assert replay(offline, table, ranges) == []


def test_situations_are_widened_to_quiet_events_of_their_key() -> None:
    """Car 1's situation A holds from t = 3 (after the quiet event at t = 2) to t = 9 and ends
    at the quiet event at t = 10; car 2's events do not end it. The core [6, 7] of car 1 is
    replayed over [2, 10]; it decides the results that start in it (the match, starting at
    3, belongs to a core that contains it, as every core from index hits does)."""
    offline = prepared("FROM S PARTITION BY car DEFINE A AS x > 5, B AS y > 5 "
                       "PATTERN A contains B WITHIN 20 seconds RETURN count(A) AS n")
    events = [{"ts": t, "car": 1, "x": 9 if 3 <= t <= 9 else 0, "y": 9 if t in (6, 7) else 0}
              for t in range(0, 14)]
    events += [{"ts": t, "car": 2, "x": 0, "y": 0} for t in range(0, 14)]
    events.sort(key=lambda e: e["ts"])
    table = table_of(events)
    source = TableSource({0: table}, key_fields=("car",))
    ranges = widen(offline, [Interval(6, 7, "[1]")], source)
    assert [(r.lo, r.hi) for r in ranges] == [(2, 10)]
    full = full_replay(offline, table)
    assert [r.to_dict()["bindings"]["A"]["ts"] for r in full] == [3]
    assert replay(offline, table, ranges) == []
    assert dicts(replay(offline, table, widen(offline, [Interval(3, 7, "[1]")], source))) == \
        dicts(full)
    every_subset_equals_full(offline, table)


def test_cogra_ranges_are_whole_windows() -> None:
    offline = prepared("RETURN COUNT(*) PATTERN SEQ(A+, B) SEMANTICS skip-till-any-match "
                       "WITHIN 10 SLIDE 4")
    source = TableSource({0: table_of([{"ts": t, "type": "A"} for t in range(40)])})
    ranges = widen(offline, [Interval(13, 14)], source)
    # windows [4, 14), [8, 18), [12, 22) overlap [13, 14]
    assert [(r.lo, r.hi) for r in ranges] == [(4, 21)]
    clipped = widen(offline, [Interval(13, 14)], source, lo=6, hi=30)
    assert [(r.lo, r.hi, r.within) for r in clipped] == [(6, 21, (6, 30))]
    assert widen(offline, [Interval(13, 14)], TableSource({0: table_of([])})) == []


# --- results for Spark -------------------------------------------------------------------------

def test_result_rows_carry_id_order_and_the_cli_line() -> None:
    offline = prepared(AT08)
    results = full_replay(offline, table_of(AT08_EVENTS))
    rows = result_rows(results)
    assert rows.column_names == ["result_id", "order_ts", "order_seq", "json"]
    assert rows.column("result_id").to_pylist() == [r.result_id for r in results]
    assert rows.column("order_ts").to_pylist() == [4]
    assert [json.loads(line) for line in rows.column("json").to_pylist()] == dicts(results)


def test_consume_stays_exact_per_interval() -> None:
    """``CONSUME`` drops a partition's other runs after a match: a run that a full replay
    drops is dropped by a match that overlaps it in time, and both lie in one merged interval
    (every match lies in one), so each interval's fresh operator drops the same runs."""
    offline = prepared("PATTERN SEQ(A a, B b) WHERE skip_till_any_match(a, b) WITHIN 10 seconds "
                       "CONSUME")
    events = [{"ts": t, "type": kind} for t, kind in
              [(0, "A"), (1, "A"), (2, "B"), (3, "A"), (4, "B"), (30, "A"), (31, "B")]]
    table = table_of(events)
    assert [r.to_dict()["bindings"] for r in full_replay(offline, table)] == [
        {"a": [1], "b": [2]}, {"a": [3], "b": [4]}, {"a": [5], "b": [6]}]
    ranges = every_subset_equals_full(offline, table)
    assert [(r.lo, r.hi) for r in ranges] == [(0, 4), (30, 31)]


def test_two_results_with_one_id_are_both_kept_as_a_full_replay_keeps_them() -> None:
    """Events without ``v`` end the situations and the next events start others at the same
    timestamp: two matches get equal bindings, hence one result id, and ``situflow run``
    prints both; only a result that an earlier range gave is dropped."""
    text = ("FROM S DEFINE A AS v <= 0, B AS v <= 0 PATTERN A before;meets;overlaps B "
            "WITHIN 2 seconds RETURN count(A) AS n")
    offline = prepared(text)
    events = [{"ts": 0, "type": "E", "v": 0}, {"ts": 1, "type": "E"},
              {"ts": 1, "type": "E", "v": 0}, {"ts": 1, "type": "E"},
              {"ts": 1, "type": "E", "v": 0}]
    table = table_of(events)
    full = dicts(full_replay(offline, table))
    assert len(full) == 2 and full[0] == full[1]
    assert full == identity.situflow_run(text, events)
    assert dicts(replay(offline, table, [Interval(0, 1)])) == full
    every_subset_equals_full(offline, table)
