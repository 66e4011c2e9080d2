"""Property tests: derivation and low-latency matching equal brute force from the definitions.

On random small streams (irregular, strictly increasing timestamps), random constraints,
duration bounds, windows and batch sizes, the operator reports exactly the configurations of the
earliest-certain reference, each once, at the same event; and every match of Def 5.6/5.7 over
finished situations is among them.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from situflow.lang.allen import RELATIONS
from tests.profiles import scaled
from tests.tpstream import reference
from tests.tpstream.harness import batch_of, query, run

NAMES = "ABC"


@st.composite
def scenarios(draw):
    n = draw(st.integers(1, 18))
    gaps = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    ts = list(itertools.accumulate(gaps))
    ndef = draw(st.integers(2, 3))
    conds = [draw(st.lists(st.booleans(), min_size=n, max_size=n)) for _ in range(ndef)]
    pairs = [(0, 1), (1, 2), (0, 2)][: 1 if ndef == 2 else draw(st.integers(2, 3))]
    constraints = {p: draw(st.sets(st.sampled_from(RELATIONS), min_size=1, max_size=6))
                   for p in pairs}
    bounds = []
    for _ in range(ndef):
        kind = draw(st.sampled_from(["none", "least", "most", "between"]))
        lo, hi = sorted(draw(st.lists(st.integers(1, 6), min_size=2, max_size=2)))
        bounds.append({"none": (None, None), "least": (lo, None), "most": (None, hi),
                       "between": (lo, hi)}[kind])
    window = draw(st.integers(2, 40))
    batch = draw(st.integers(1, n))
    return ts, conds, constraints, bounds, window, batch


def text_of(ndef, constraints, bounds, window):
    defs = []
    for d, (lo, hi) in enumerate(bounds[:ndef]):
        extra = ("" if lo is None and hi is None else f" AT LEAST {lo}s" if hi is None else
                 f" AT MOST {hi}s" if lo is None else f" BETWEEN {lo}s AND {hi}s")
        defs.append(f"{NAMES[d]} AS x{d} = 1{extra}")
    pattern = " AND ".join(f"{NAMES[i]} {';'.join(sorted(rels))} {NAMES[j]}"
                           for (i, j), rels in constraints.items())
    return (f"FROM S DEFINE {', '.join(defs)} PATTERN {pattern} WITHIN {window} seconds "
            f"RETURN count(A) AS n")


@settings(max_examples=scaled(3), suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_matching_equals_the_earliest_certain_reference(scenario):
    ts, conds, constraints, bounds, window, batch = scenario
    ndef = len(conds)
    q = query(text_of(ndef, constraints, bounds, window))
    events = [{"ts": t, **{f"x{d}": int(conds[d][k]) for d in range(ndef)}}
              for k, t in enumerate(ts)]
    got = [(tuple((m.bindings[NAMES[d]]["ts"], m.bindings[NAMES[d]]["te"]) for d in range(ndef)),
            m.emitted_at) for m in run(q, events, batch)]
    assert len(got) == len(set(got)), "a configuration was reported twice"
    expected = reference.earliest_matches(ts, conds, bounds, q.constraints, window)
    assert set(got) == expected
    final = reference.final_matches(ts, conds, bounds, q.constraints, window)
    reported = {tuple(ts_ for ts_, _ in config) for config, _ in got}
    assert {tuple(ts_ for ts_, _ in config) for config in final} <= reported


@settings(max_examples=scaled(1.5), suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_a_zero_window_matches_the_reference_too(scenario):
    """WITHIN 0 is evaluated (``max(te) - min(ts) <= 0``): only situations that start at one
    event, matched there while all of them run, and only where the relations are certain."""
    ts, conds, constraints, bounds, _, batch = scenario
    ndef = len(conds)
    q = query(text_of(ndef, constraints, bounds, 0))
    events = [{"ts": t, **{f"x{d}": int(conds[d][k]) for d in range(ndef)}}
              for k, t in enumerate(ts)]
    got = {(tuple((m.bindings[NAMES[d]]["ts"], m.bindings[NAMES[d]]["te"]) for d in range(ndef)),
            m.emitted_at) for m in run(q, events, batch)}
    assert got == reference.earliest_matches(ts, conds, bounds, q.constraints, 0)
    assert all(emitted == config[0][0] for config, emitted in got)


@given(scenarios(), st.integers(1, 5))
def test_results_do_not_depend_on_batch_size(scenario, other):
    ts, conds, constraints, bounds, window, batch = scenario
    ndef = len(conds)
    q = query(text_of(ndef, constraints, bounds, window))
    events = [{"ts": t, **{f"x{d}": int(conds[d][k]) for d in range(ndef)}}
              for k, t in enumerate(ts)]
    assert [m.to_dict() for m in run(q, events, batch)] == \
        [m.to_dict() for m in run(q, events, other)]


@settings(max_examples=scaled(2))
@given(st.data())
def test_derivation_equals_definition_5_2_with_its_aggregates(data):
    n = data.draw(st.integers(1, 30))
    ts = list(itertools.accumulate(data.draw(st.lists(st.integers(0, 2), min_size=n,
                                                      max_size=n))))
    values = data.draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n))
    tags = data.draw(st.lists(st.none() | st.sampled_from("xy"), min_size=n, max_size=n))
    lo = data.draw(st.none() | st.integers(1, 4))
    hi = data.draw(st.none() | st.integers(4, 8))
    batch = data.draw(st.integers(1, n))
    extra = ("" if lo is None and hi is None else f" AT LEAST {lo}s" if hi is None else
             f" AT MOST {hi}s" if lo is None else f" BETWEEN {lo}s AND {hi}s")
    q = query(f"FROM S DEFINE X AS v > 0{extra}, Y AS v < -100 PATTERN X before Y "
              "WITHIN 1 hours RETURN first(X.v) AS f, last(X.v) AS l, count(X) AS n, "
              "sum(X.v) AS s, min(X.v) AS lo, max(X.v) AS hi, count(X.tag) AS tagged")
    op = q.operator()
    events = [{"ts": t, "v": v, "tag": tag} for t, v, tag in zip(ts, values, tags, strict=True)]
    for i in range(0, n, batch):
        op.process(batch_of(events, i, i + batch))
    parts = [p for p in op.matcher.partitions if p is not None]
    got = [(s.ts, s.te, [fn([s.values[k] for k in range(len(q.aggregates))])
                         for _, fn in q.outputs]) for p in parts for s in p.buffers[0]]
    expected = []
    for s in reference.derive(ts, [v > 0 for v in values], lo, hi):
        if s.te is None:
            continue
        run_values = values[s.start:s.end]
        tagged = sum(tag is not None for tag in tags[s.start:s.end])
        expected.append((s.ts, s.te, [run_values[0], run_values[-1], len(run_values),
                                      sum(run_values), min(run_values), max(run_values), tagged]))
    assert got == expected
