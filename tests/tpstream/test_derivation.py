"""Situation derivation (thesis Def 5.1-5.3, Alg. 5.1): AT-01..AT-04."""

from __future__ import annotations

import pytest

from tests.tpstream.harness import batch_of, query

# Y never holds: the pattern only exists to make X a valid query; we read X's buffer.
ONE = ("FROM S DEFINE X AS v > {threshold} {constraint}, Y AS v < -1000 PATTERN X before Y "
       "WITHIN 1 hours RETURN first(X.v) AS f, last(X.v) AS l, count(X) AS n, sum(X.v) AS s, "
       "avg(X.v) AS a")


def situations(events, constraint="", threshold=70, batch_size=1000):
    q = query(ONE.format(constraint=constraint, threshold=threshold))
    op = q.operator()
    for i in range(0, len(events), batch_size):
        op.process(batch_of(events, i, i + batch_size))
    part = op.matcher.partitions[0] if op.matcher.partitions else None
    if part is None:
        return []
    names = ["f", "l", "n", "s", "a"]
    return [((s.ts, s.te), {n: q.outputs[k][1]([s.values[j] for j in range(5)])
                             for k, n in enumerate(names)}) for s in part.buffers[0]]


def speeds(values, start=1):
    return [{"ts": start + i, "v": v} for i, v in enumerate(values)]


@pytest.mark.parametrize("batch_size", [1, 3, 1000])
def test_at01_one_maximal_situation_not_its_sub_intervals(batch_size):
    events = speeds([60] + [75] * 8 + [60])
    found = situations(events, "BETWEEN 4s AND 30s", batch_size=batch_size)
    assert [span for span, _ in found] == [(2, 10)]


@pytest.mark.parametrize("constraint, runs, kept", [
    ("BETWEEN 4s AND 30s", [3, 4, 30, 31], [4, 30]),
    ("AT LEAST 5s", [4, 5], [5]),
])
def test_at02_duration_bounds_are_inclusive(constraint, runs, kept):
    values = []
    for length in runs:
        values += [75] * length + [60]
    found = situations(speeds(values, 0), constraint)
    assert [te - ts for (ts, te), _ in found] == kept


@pytest.mark.parametrize("batch_size", [1, 2, 10])
def test_at03_end_is_the_first_failing_event_and_it_is_not_aggregated(batch_size):
    events = [{"ts": 0, "v": 1}, {"ts": 3, "v": 10}, {"ts": 4, "v": 20}, {"ts": 9, "v": 0}]
    found = situations(events, threshold=5, batch_size=batch_size)
    assert found == [((3, 9), {"f": 10, "l": 20, "n": 2, "s": 30.0, "a": 15.0})]


def test_at04_open_situations_are_not_emitted_and_runs_are_disjoint():
    events = speeds([75, 75, 75, 60, 75, 75], 1)
    assert [span for span, _ in situations(events)] == [(1, 4)]


def test_a_run_within_one_timestamp_is_no_situation():
    events = [{"ts": 5, "v": 75}, {"ts": 5, "v": 60}, {"ts": 6, "v": 75}, {"ts": 8, "v": 60}]
    assert [span for span, _ in situations(events)] == [(6, 8)]
