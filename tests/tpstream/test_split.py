"""Distributed TPStream (thesis §5.6.5): a deriver and a matcher that exchange situation records
report exactly what the fused operator reports.

On random streams of several partition keys (irregular, sometimes equal timestamps; missing and
string values), random constraints (or a single situation), duration bounds, windows and RETURN
aggregates of every kind:

- the deriver's records do not depend on how the events are batched, nor on a snapshot and
  restore in between;
- its records, sent through JSON and regrouped into arbitrary runs of whole steps, give a
  matcher (snapshotted and restored on the way) the fused operator's matches: the same
  results, in the same order, with the same values and result ids.
"""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from situflow.errors import InputError
from situflow.lang.allen import RELATIONS
from situflow.tpstream.query import TPStreamQuery
from situflow.tpstream.split.deriver import SituationDeriver
from situflow.tpstream.split.matcher import SituationMatcher
from situflow.tpstream.split.records import FINISHED, RUNNING, STARTED, SituationRecord
from tests.profiles import scaled
from tests.tpstream.harness import batch_of, query, run

NAMES = "ABC"
AGGREGATES = ["count({d})", "first({d}.v)", "last({d}.v)", "sum({d}.v)", "min({d}.v)",
              "max({d}.v)", "avg({d}.v)", "first({d}.s)", "last({d}.s)", "count({d}.v)",
              "count({d}.s)"]


@st.composite
def scenarios(draw):
    n = draw(st.integers(1, 30))
    ts = list(itertools.accumulate(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))))
    ndef = draw(st.integers(1, 3))
    nkeys = draw(st.integers(1, 3))
    events = []
    for t in ts:
        event = {"ts": t, "k": draw(st.integers(0, nkeys - 1)), "j": draw(st.sampled_from("ab")),
                 "v": draw(st.none() | st.floats(-4, 4, allow_nan=False).map(lambda x: x / 3)),
                 "s": draw(st.sampled_from(["x", "y", "z", None]))}
        for d in range(ndef):
            event[f"x{d}"] = int(draw(st.integers(0, 3)) > 0)
        events.append(event)
    pairs = [(0, 1), (1, 2), (0, 2)][: ndef - 1 if ndef < 3 else draw(st.integers(2, 3))]
    pattern = " AND ".join(
        f"{NAMES[i]} {';'.join(sorted(draw(st.sets(st.sampled_from(RELATIONS), min_size=1, max_size=10))))} "
        f"{NAMES[j]}" for i, j in pairs) or "A"  # PATTERN A: one situation
    defs = []
    for d in range(ndef):
        lo, hi = sorted(draw(st.lists(st.integers(1, 6), min_size=2, max_size=2)))
        bound = draw(st.sampled_from(["", f" AT LEAST {lo}s", f" AT MOST {hi}s",
                                      f" BETWEEN {lo}s AND {hi}s"]))
        defs.append(f"{NAMES[d]} AS x{d} = 1{bound}")
    outputs = draw(st.lists(st.tuples(st.sampled_from(AGGREGATES), st.integers(0, ndef - 1)),
                            max_size=5))
    returns = ", ".join(f"{agg.format(d=NAMES[d])} AS r{i}" for i, (agg, d) in enumerate(outputs))
    partition = draw(st.sampled_from(["", " PARTITION BY k", " PARTITION BY k, j"]))
    # A single situation's WITHIN is optional, and not below its lower bound (at most 6).
    within = draw(st.integers(6 if ndef == 1 else 2, 40))
    window = "" if ndef == 1 and within > 30 else f"WITHIN {within} seconds "
    text = (f"FROM S{partition} DEFINE {', '.join(defs)} PATTERN {pattern} "
            f"{window}RETURN {returns or 'count(A) AS n'}")
    return text, events


def batches(events, size):
    return [batch_of(events, i, i + size) for i in range(0, len(events), size)]


def derive(q: TPStreamQuery, events, size: int, restart_at: int | None = None):
    """The deriver's records over ``events`` in batches of ``size``, as JSON objects;
    snapshotted and restored before batch ``restart_at``."""
    deriver = SituationDeriver(q)
    out = []
    for b, batch in enumerate(batches(events, size)):
        if b == restart_at:
            deriver = SituationDeriver.restore(q, json.loads(json.dumps(deriver.snapshot())))
        out += [json.loads(json.dumps(r.to_dict(q.name))) for r in deriver.process(batch)]
    return out


def steps(records):
    """The records cut into steps: the records of one event of one key."""
    return [list(group) for _, group in itertools.groupby(records, lambda r: (r["key"], r["seq"]))]


def match(q: TPStreamQuery, records, cuts: set[int], restart_at: int | None):
    """The matcher's results over ``records`` delivered in runs of whole steps ending at
    ``cuts``; snapshotted and restored before run ``restart_at``."""
    runs, current = [], []
    for s, step in enumerate(steps(records)):
        current += step
        if s in cuts:
            runs.append(current)
            current = []
    runs.append(current)
    matcher = SituationMatcher(q)
    out = []
    for r, records_ in enumerate(runs):
        if r == restart_at:
            matcher = SituationMatcher.restore(q, json.loads(json.dumps(matcher.snapshot())))
        out += matcher.process([SituationRecord.from_dict(x) for x in records_])
    return out + matcher.finish()


def results(matches):
    return [(m.to_dict(), m.result_id) for m in matches]


@settings(max_examples=scaled(3), suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.data())
def test_split_deriver_and_matcher_report_the_fused_operators_matches(scenario, data):
    text, events = scenario
    q = query(text)
    n = len(events)
    size = data.draw(st.integers(1, n))
    records = derive(q, events, size, data.draw(st.none() | st.integers(0, n)))
    nsteps = len(steps(records))
    cuts = data.draw(st.sets(st.integers(0, max(nsteps - 1, 0))))
    got = match(q, records, cuts, data.draw(st.none() | st.integers(0, len(cuts) + 1)))
    expected = run(q, events, data.draw(st.integers(1, n)))
    assert results(got) == results(expected)


@settings(max_examples=scaled(1.5), suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.data())
def test_situation_records_do_not_depend_on_batches_or_restarts(scenario, data):
    text, events = scenario
    q = query(text)
    n = len(events)
    one = derive(q, events, data.draw(st.integers(1, n)))
    other = derive(q, events, data.draw(st.integers(1, n)), data.draw(st.integers(0, n)))
    assert one == other


def test_records_of_the_aggressive_drivers_shape():
    """A started situation, its running aggregates at another change, and its end."""
    q = query("FROM S PARTITION BY car DEFINE A AS a = 1, B AS b = 1 PATTERN A overlaps B "
              "WITHIN 1 hours RETURN avg(A.v) AS speed, count(B) AS n")
    events = [{"ts": 1, "car": 7, "a": 1, "b": 0, "v": 10}, {"ts": 2, "car": 7, "a": 1, "b": 1, "v": 20},
              {"ts": 3, "car": 7, "a": 0, "b": 1, "v": 30}, {"ts": 4, "car": 7, "a": 0, "b": 0, "v": 0}]
    got = [(r["kind"], r["situation"], r["ts"], r["te"], r["at"], r["values"])
           for r in derive(q, events, 4)]
    assert got == [
        (STARTED, "A", 1, None, 1, {"avg(A.v)": 10.0}),
        (STARTED, "B", 2, None, 2, {"count(B)": 1}),
        (RUNNING, "A", 1, None, 2, {"avg(A.v)": 15.0}),
        (FINISHED, "A", 1, 3, 3, {"avg(A.v)": 15.0}),
        (RUNNING, "B", 2, None, 3, {"count(B)": 2}),
        (FINISHED, "B", 2, 4, 4, {"count(B)": 2}),
    ]
    [m] = match(q, derive(q, events, 1), set(), None)
    assert (m.emitted_at, m.values) == (3, {"speed": 15.0, "n": 2})


@pytest.mark.parametrize("value, reason", [
    ([], "must be a JSON object"),
    ({"kind": "started", "situation": "A", "ts": 1, "te": None, "at": 1, "key": 1}, "lacks 'seq'"),
    ({"kind": "begun", "situation": "A", "ts": 1, "te": None, "at": 1, "seq": 0, "key": 1},
     "unknown situation record kind"),
    ({"kind": "started", "situation": "A", "ts": "1", "te": None, "at": 1, "seq": 0, "key": 1},
     "must be integers"),
])
def test_a_malformed_record_is_an_input_error(value, reason):
    with pytest.raises(InputError, match=reason):
        SituationRecord.from_dict(value)
