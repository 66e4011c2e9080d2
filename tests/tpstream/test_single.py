"""``PATTERN B``: a pattern of one situation (SEMANTICS.md, "Single-situation patterns").

Every situation of B that satisfies its duration constraint (and the window, if the query has
one) is a match, reported at its end with its aggregates. On random streams this equals:

- a brute-force reference written from thesis Def 5.2 (the situations) and Def 5.7 (a match is
  reported at its end time, with RETURN over its events);
- the twin-definition formulation the single-situation pattern replaces (``B equals B2``, B2
  defined as B), which reports the same situations at the same events with the same values;
- distributed TPStream and offline replay, whose tests draw single-situation queries too
  (``test_split.py``; the pruned-equals-full test below).

The backfill's hand-off needs no window past a key's begin for it; the timeline and
``situflow explain`` draw it; the deriver service runs it (tests/integration/test_deriver.py).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from situflow.archive import ARCHIVE_OFFSET, ARCHIVE_SEQ, StreamSettings
from situflow.datagen.cars import write_jsonl
from situflow.offline.queries import offline_query
from situflow.offline.replay import candidate_intervals
from situflow.timeline import explain_tpstream
from situflow.timeline.page import count_marks
from situflow.tpstream.query import quiet_mask
from tests.integration import test_backfill as backfill
from tests.offline import test_offline_identity as identity
from tests.profiles import scaled
from tests.timeline import test_timeline as timeline
from tests.tpstream import reference
from tests.tpstream.harness import batch_of, query, run
from topics.catalog import SEQ_FIELD, StreamSpec
from workers.handoff import archived_events, check_handoff, handoff_matches, partition_results

EXAMPLES = Path(__file__).parents[2] / "situflow" / "examples"

BOUNDS = {"none": "", "least": " AT LEAST {lo}s", "most": " AT MOST {hi}s",
          "between": " BETWEEN {lo}s AND {hi}s"}


@st.composite
def streams(draw):
    """Timestamps (gaps of 0 make duplicates), one key, the condition and the values."""
    n = draw(st.integers(1, 30))
    ts = list(itertools.accumulate(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))))
    cond = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    values = draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n))
    return ts, cond, values


@st.composite
def shapes(draw):
    """A duration constraint (as bounds and as text) and a WITHIN (None: none)."""
    lo, hi = sorted(draw(st.lists(st.integers(1, 6), min_size=2, max_size=2)))
    kind = draw(st.sampled_from(sorted(BOUNDS)))
    bounds = {"none": (None, None), "least": (lo, None), "most": (None, hi),
              "between": (lo, hi)}[kind]
    # A WITHIN below the lower bound is refused (no situation could match).
    floor = bounds[0] or 0
    return bounds, BOUNDS[kind].format(lo=lo, hi=hi), draw(st.none() | st.integers(floor, 12))


def single_text(duration: str, within: int | None) -> str:
    return (f"FROM S DEFINE B AS x = 1{duration} PATTERN B"
            + ("" if within is None else f" WITHIN {within} seconds")
            + " RETURN count(B) AS n, sum(B.v) AS s, min(B.v) AS lo, max(B.v) AS hi, "
              "first(B.v) AS f, last(B.v) AS l")


def events_of(ts: list[int], cond: list[bool], values: list[Any]) -> list[dict[str, Any]]:
    return [{"ts": t, "x": int(c), "v": v} for t, c, v in zip(ts, cond, values, strict=True)]



def summary(matches):
    """What a match says of B: the twin formulation differs only in its id and B2."""
    return [(m.key, m.ts, m.emitted_at, m.values, m.bindings["B"]) for m in matches]

@settings(max_examples=scaled(3), suppress_health_check=[HealthCheck.too_slow])
@given(streams(), shapes(), st.integers(1, 30))
def test_each_situation_is_a_match_at_its_end_with_its_aggregates(stream, shape, batch):
    ts, cond, values = stream
    bounds, duration, within = shape
    got = [(m.bindings["B"]["ts"], m.bindings["B"]["te"], m.ts, m.emitted_at,
            list(m.values.values()))
           for m in run(single_text(duration, within), events_of(ts, cond, values), batch)]
    expected = []
    for s in reference.derive(ts, cond, *bounds):
        if s.te is None or (within is not None and s.te - s.ts > within):
            continue  # still running at the end of input, or longer than the window
        run_values = values[s.start:s.end]
        expected.append((s.ts, s.te, s.te, s.te,
                         [len(run_values), sum(run_values), min(run_values), max(run_values),
                          run_values[0], run_values[-1]]))
    assert got == expected


@settings(max_examples=scaled(3), suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), shapes(), st.sampled_from(["", " PARTITION BY k"]))
def test_results_equal_the_twin_definition_formulation(data, shape, partition):
    """``B equals B2`` with B2 a copy of B: the pattern users had to write before."""
    _, duration, within = shape
    n = data.draw(st.integers(1, 30))
    ts = list(itertools.accumulate(data.draw(st.lists(st.integers(0, 3), min_size=n,
                                                      max_size=n))))
    events = [{"ts": t, "k": data.draw(st.integers(0, 2)), "x": data.draw(st.integers(0, 2)),
               "v": data.draw(st.none() | st.floats(-4, 4, allow_nan=False)),
               "s": data.draw(st.sampled_from(["a", "b", None]))} for t in ts]
    returns = ("RETURN count(B) AS n, avg(B.v) AS a, max(B.v) AS top, first(B.s) AS f, "
               "last(B.s) AS l, count(B.v) AS present")
    single = (f"FROM S{partition} DEFINE B AS x = 1{duration} PATTERN B"
              + ("" if within is None else f" WITHIN {within} seconds") + f" {returns}")
    twin = (f"FROM S{partition} DEFINE B AS x = 1{duration}, B2 AS x = 1{duration} "
            f"PATTERN B equals B2 WITHIN {1000 if within is None else within} seconds {returns}")
    batch = data.draw(st.integers(1, n))
    assert summary(run(single, events, batch)) == summary(run(twin, events, batch))


@settings(max_examples=scaled(3), suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(["", " BETWEEN 1s AND 3s"]))
def test_expressions_over_aggregates_equal_the_twin_definition_formulation(data, duration):
    """Results are built a column at a time; RETURN expressions, literals and aggregates that
    come out NaN (infinities of both signs summed) still give what each match's own values do."""
    n = data.draw(st.integers(1, 30))
    ts = list(itertools.accumulate(data.draw(st.lists(st.integers(0, 3), min_size=n,
                                                      max_size=n))))
    v = st.none() | st.sampled_from([math.inf, -math.inf]) | st.floats(-4, 4, allow_nan=False)
    events = [{"ts": t, "k": data.draw(st.integers(0, 2)), "x": data.draw(st.integers(0, 1)),
               "v": data.draw(v)} for t in ts]
    returns = ("RETURN sum(B.v) AS total, max(B.v) - min(B.v) AS spread, avg(B.v) > 0 AS up, "
               "count(B) * 2 + 1 AS odd, 7 AS seven, first(B.k) AS k")
    single = f"FROM S PARTITION BY k DEFINE B AS x = 1{duration} PATTERN B {returns}"
    twin = (f"FROM S PARTITION BY k DEFINE B AS x = 1{duration}, B2 AS x = 1{duration} "
            f"PATTERN B equals B2 WITHIN 1000 seconds {returns}")
    batch = data.draw(st.integers(1, n))
    assert summary(run(single, events, batch)) == summary(run(twin, events, batch))


def test_the_speeding_example_reports_each_phase_when_it_ends():
    """Speed above 70 for 4-30 s: a 5 s phase of car 1, a 2 s phase of car 2 (too short) and
    a 40 s phase of car 3 (too long); car 1's second phase is still running at the end."""
    q = query((EXAMPLES / "speeding.tps").read_text())
    speeds = {1: [60, 75, 80, 90, 85, 85, 60] + [80] * 3,
              2: [60, 75, 75, 60],
              3: [60] + [80] * 40 + [60]}
    events = sorted(({"ts": t, "car_id": car, "speed": v}
                     for car, series in speeds.items() for t, v in enumerate(series)),
                    key=lambda e: (e["ts"], e["car_id"]))
    [match] = run(q, events)
    assert (match.key, match.ts, match.emitted_at) == (1, 6, 6)
    assert match.values == {"id": 1, "readings": 5, "avg_speed": 83, "max_speed": 90}
    assert match.bindings == {"B": {"ts": 1, "te": 6, "open": False}}


def test_the_plan_says_there_is_nothing_to_join():
    q = query("FROM S DEFINE B AS x = 1 PATTERN B RETURN count(B) AS n")
    assert q.single and q.starts_within == 0
    assert "each situation of B is a match at its end" in q.describe()


def test_a_finished_situation_is_not_kept_for_later_matches():
    """No match of PATTERN B joins an earlier situation, so the matcher buffers none."""
    q = query("FROM S DEFINE B AS x = 1 PATTERN B RETURN count(B) AS n")
    op = q.operator()
    events = [{"ts": t, "x": int(t % 3 != 0)} for t in range(30)]
    matches = [m for i in range(30) for m in op.process(batch_of(events, i, i + 1))]
    assert len(matches) == 9
    assert op.stats()["buffered_situations"] == 0


@settings(max_examples=scaled(1), suppress_health_check=[HealthCheck.filter_too_much,
                                                          HealthCheck.too_slow])
@given(st.sampled_from(["", " AT LEAST 1s", " AT MOST 2s", " BETWEEN 1s AND 3s"]),
       st.sampled_from(["", " WITHIN 2 seconds"]), st.sampled_from(["", " PARTITION BY k"]),
       identity.event_lists(), st.integers(0, 20), st.integers(0, 60))
def test_index_pruned_replay_equals_full_replay_equals_run(duration, within, partition,
                                                           events, lo, span):
    text = (f"FROM S{partition} DEFINE B AS v >= 3{duration} PATTERN B{within} "
            "RETURN count(B) AS n, max(B.v) AS top")
    identity.check_identity(text, events, lo, span)


def test_replay_cores_are_the_hits_themselves():
    """A match of PATTERN B is one situation, which starts at an event that satisfies B: the
    cores need no window around the hits, whatever the WITHIN."""
    offline = offline_query(query("FROM S DEFINE B AS v >= 3 PATTERN B WITHIN 1 hour "
                                  "RETURN count(B) AS n"), StreamSettings("s"))
    events = [{"ts": t, "type": "A", "k": 0, "v": 5 if t in (3, 4, 9) else 0}
              for t in range(12)]
    table = identity.archive_table(events)
    cores = candidate_intervals(offline, [0], {0: identity.hits(offline, table, 0)})
    assert [(c.lo, c.hi) for c in cores] == [(3, 4), (9, 9)]


def test_the_timeline_draws_each_situation_and_each_match(tmp_path):
    events = tmp_path / "cars.jsonl"
    write_jsonl(events, 2_000, 8)
    results, svg = timeline.run(EXAMPLES / "speeding.tps", events, tmp_path)
    assert results
    assert count_marks(svg, "match") == count_marks(svg, "emitted") == len(results)
    assert count_marks(svg, "situation") == timeline.derived_situations(
        EXAMPLES / "speeding.tps", events)


def test_explain_draws_the_one_situation_without_relations():
    picture = explain_tpstream.diagram(query((EXAMPLES / "speeding.tps").read_text()))
    assert [n.id for n in picture.nodes] == ["B"] and picture.edges == ()
    assert "PATTERN B" in picture.title


@pytest.mark.parametrize("cut", [0.0, 0.3, 0.55, 0.9])
def test_the_backfill_hands_off_at_each_keys_first_quiet_event(cut, tmp_path):
    """The hand-off rule (batch/README.md, "Backfill") needs no window past a key's begin: a
    match of PATTERN B is its situation, which ends at the latest at that quiet event. The
    backfill publishes exactly the matches that begin before it, as soon as the archive holds
    one more quiet event of each key."""
    q = query((EXAMPLES / "speeding.tps").read_text())
    window = check_handoff(q, StreamSpec("cars", key_fields=("car_id",)))
    assert window == 0
    rows = [{**event, SEQ_FIELD: i, ARCHIVE_SEQ: i, ARCHIVE_OFFSET: i}
            for i, event in enumerate(backfill.car_events(3_000, 4, 5))]
    settings = StreamSettings("cars", key_fields=("car_id",))
    events = archived_events(pa.Table.from_pylist(rows), settings)
    start = int(cut * (len(rows) - 1))
    archive = backfill.write_archive(tmp_path, "cars", rows, ("car_id",), partitions=1)
    backfilled = handoff_matches(q, archive, "cars.ordered", 0, start, window, None, settings)
    assert backfilled is not None
    quiet = np.asarray(quiet_mask(q, events), bool)
    begun_at: dict[Any, int] = {}
    for i in range(start, len(rows)):
        if quiet[i]:
            begun_at.setdefault(rows[i]["car_id"], rows[i]["ts"])
    whole = partition_results(q, events, settings)
    expected = [r for r in whole if r.bindings["B"]["ts"] < begun_at.get(r.key, math.inf)]
    assert whole and [r.result_id for r in backfilled] == [r.result_id for r in expected]
