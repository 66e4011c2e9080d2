"""The cooperative pattern matcher (thesis §4.3.5): Table 4.1 cell by cell, the compaction of
Fig. 4.7, and every implementation (single- and multi-threaded numba, OpenCL dispatch and
zero-copy) against the NFA^b operator and the brute-force definition on random streams."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from situflow.devices import DeviceUnavailable, open_device
from situflow.devices.counters import COUNTERS
from situflow.events import EventBatch
from situflow.lang.sase import Strategy
from situflow.nfa.cooperative import passes_cpu as cpu
from situflow.nfa.cooperative.matcher import (
    ADD,
    CLONE,
    DROP,
    FORWARD,
    MOVE,
    NONE,
    SELF,
    TABLE_4_1,
    WINDOW_EXCEEDED,
    CooperativeOperator,
    CpuMatcher,
    PatternTables,
    propagate,
)
from situflow.nfa.cooperative.operators import device_operator, device_restore, matcher_for
from situflow.operator import QueryOptions
from situflow.sase import compile
from tests.nfa.harness import feed
from tests.nfa.reference import Reference
from tests.nfa.test_properties import _earlier
from tests.profiles import scaled

IMPLEMENTATIONS = ["cpu-st", "cpu-mt", "opencl-dispatch", "opencl-zero-copy"]


@pytest.fixture(scope="module")
def device() -> Any:
    try:
        return open_device("opencl")
    except DeviceUnavailable as e:
        pytest.skip(str(e))


def matcher(name: str, device_getter: Any) -> Any:
    if name == "cpu-st":
        return CpuMatcher(1)
    if name == "cpu-mt":
        return CpuMatcher(2)
    return matcher_for(device_getter(), name.removeprefix("opencl-"))


@pytest.fixture(params=IMPLEMENTATIONS)
def implementation(request: Any) -> Any:
    """A factory of operators for a query text on one of the four implementations."""
    name = request.param

    def make(text: str, micro_batch: int = 4) -> CooperativeOperator:
        compiled = compile(text)
        pattern = PatternTables.build(compiled.automaton)
        assert pattern is not None, text
        m = matcher(name, lambda: request.getfixturevalue("device"))
        return CooperativeOperator(compiled.automaton, compiled.name, compiled.query_id,
                                   pattern, m, micro_batch)

    return make


def bindings(results: Any) -> list[dict[str, list[Any]]]:
    return [m.bindings for m in results]


def stream(*events: tuple[str, int, float]) -> list[dict[str, Any]]:
    """Events ``(type, ts, x)`` with ids 0, 1, …"""
    return [{"id": i, "type": t, "ts": ts, "x": x} for i, (t, ts, x) in enumerate(events)]


# --- Table 4.1 ---------------------------------------------------------------------------------

STRATEGY_FLAGS = {Strategy.PARTITION: (False, False), Strategy.NEXT: (False, True),
                  Strategy.ANY: (True, True)}


@pytest.mark.parametrize("strategy", list(STRATEGY_FLAGS))
@pytest.mark.parametrize("check", [WINDOW_EXCEEDED, NONE, SELF, FORWARD])
def test_each_cell_of_table_4_1_is_the_action_the_passes_take(check, strategy):
    clones, keeps_on_none = STRATEGY_FLAGS[strategy]
    assert propagate(check, clones, keeps_on_none) == TABLE_4_1[check][strategy]


def test_table_4_1_reads_as_in_the_thesis():
    assert TABLE_4_1[NONE] == {Strategy.PARTITION: (DROP,), Strategy.NEXT: (),
                               Strategy.ANY: ()}
    assert TABLE_4_1[FORWARD][Strategy.ANY] == (CLONE, MOVE, ADD)
    assert TABLE_4_1[SELF][Strategy.NEXT] == (ADD,)


def query(strategy: str, window: int = 10) -> str:
    return (f"PATTERN SEQ(A a, B b) WHERE {strategy}(a, b) {{ b.x > a.x }} "
            f"WITHIN {window} seconds")


@pytest.mark.parametrize("strategy", ["partition_contiguity", "skip_till_next_match",
                                      "skip_till_any_match"])
def test_window_exceeded_drops_the_partial_match_under_every_strategy(implementation,
                                                                       strategy):
    op = implementation(query(strategy, window=2))
    assert bindings(feed(op, stream(("A", 0, 1), ("B", 3, 5)), finish=False)) == []
    assert op.stats() == {"partial_matches": 0}


@pytest.mark.parametrize(("strategy", "expected", "left"), [
    ("partition_contiguity", [], 0),
    ("skip_till_next_match", [{"a": [0], "b": [2]}], 0),
    ("skip_till_any_match", [{"a": [0], "b": [2]}], 1),
])
def test_an_event_no_transition_takes_drops_only_under_contiguity(implementation, strategy,
                                                                  expected, left):
    op = implementation(query(strategy))
    events = stream(("A", 0, 5), ("B", 1, 1), ("B", 2, 9))
    assert bindings(feed(op, events, finish=False)) == expected
    assert op.stats() == {"partial_matches": left}


@pytest.mark.parametrize(("strategy", "expected"), [
    ("partition_contiguity", [{"a": [0], "b": [1]}]),
    ("skip_till_next_match", [{"a": [0], "b": [1]}]),
    ("skip_till_any_match", [{"a": [0], "b": [1]}, {"a": [0], "b": [2]}]),
])
def test_a_forward_transition_moves_the_partial_match_and_skip_till_any_clones_it_first(
        implementation, strategy, expected):
    op = implementation(query(strategy))
    assert bindings(feed(op, stream(("A", 0, 1), ("B", 1, 5), ("B", 2, 6)))) == expected


@pytest.mark.parametrize(("strategy", "expected"), [
    ("skip_till_next_match", [{"a": [0], "b": [1], "c": [3]}]),
    ("skip_till_any_match", [{"a": [0], "b": [1], "c": [3]}, {"a": [0], "b": [2], "c": [3]}]),
])
def test_a_moved_partial_match_waits_in_the_next_state(implementation, strategy, expected):
    text = (f"PATTERN SEQ(A a, B b, C c) WHERE {strategy}(a, b, c) {{ c.x > b.x }} "
            "WITHIN 10 seconds")
    events = stream(("A", 0, 0), ("B", 1, 1), ("B", 2, 2), ("C", 3, 3))
    assert bindings(feed(implementation(text), events)) == expected


KLEENE = "PATTERN SEQ(A+ a[], B b) WHERE {}(a[], b) {{ a[i].x > a[i-1].x }} WITHIN 10 seconds"


@pytest.mark.parametrize(("strategy", "expected", "left"), [
    # The run of A0 adds A1 (in place): [0, 1]; A1 also begins a run of its own: [1].
    ("partition_contiguity", [{"a": [0, 1], "b": [2]}, {"a": [1], "b": [2]}], 0),
    ("skip_till_next_match", [{"a": [0, 1], "b": [2]}, {"a": [1], "b": [2]}], 2),
    # Skip till any match clones first, so [0] waits beside [0, 1].
    ("skip_till_any_match",
     [{"a": [0], "b": [2]}, {"a": [0, 1], "b": [2]}, {"a": [1], "b": [2]}], 3),
])
def test_a_self_transition_adds_the_event_and_skip_till_any_clones_the_partial_match_first(
        implementation, strategy, expected, left):
    op = implementation(KLEENE.format(strategy))
    events = stream(("A", 0, 1), ("A", 1, 2), ("B", 2, 0))
    assert bindings(feed(op, events, finish=False)) == expected
    assert op.stats() == {"partial_matches": left}


@pytest.mark.parametrize("text", [
    "PATTERN SEQ(A a, ~(C c), B b) WHERE skip_till_any_match(a, c, b) { b.x > a.x } "
    "WITHIN 5 seconds",
    "PATTERN SEQ(A a, B b) WHERE strict_contiguity(a, b) { b.x > a.x }",
    "PATTERN SEQ(A a, B b) WHERE skip_till_next_match(a, b) { b.x > a.x } CONSUME",
])
def test_negation_strict_contiguity_and_consume_stay_on_the_nfa(text):
    compiled = compile(text, plan=None)
    assert PatternTables.build(compiled.automaton) is None
    assert not isinstance(device_operator(compiled, None), CooperativeOperator)


# --- Fig. 4.7 -----------------------------------------------------------------------------------


def test_compaction_fills_the_holes_from_the_end_as_in_figure_4_7():
    pms = np.arange(1, 6, dtype=np.int64).reshape(5, 1).repeat(cpu.PM_FIELDS, axis=1)
    vals = np.arange(1, 6, dtype=np.float64).reshape(5, 1)
    count = cpu.compact(pms, vals, 5, np.array([3, 0], dtype=np.int64))  # PM4, PM1
    assert count == 3
    assert pms[:3, 0].tolist() == [5, 2, 3]
    assert vals[:3, 0].tolist() == [5.0, 2.0, 3.0]


@given(st.integers(0, 40).flatmap(
    lambda n: st.tuples(st.just(n), st.sets(st.integers(0, max(n - 1, 0)), max_size=n))))
def test_compaction_keeps_exactly_the_partial_matches_not_dropped(case):
    n, dropped = case
    dropped = {d for d in dropped if d < n}
    pms = np.arange(n, dtype=np.int64).reshape(n, 1).repeat(cpu.PM_FIELDS, axis=1)
    vals = np.arange(n, dtype=np.float64).reshape(n, 1)
    order = np.array(sorted(dropped, reverse=True), dtype=np.int64)
    count = cpu.compact(pms, vals, n, order)
    assert sorted(pms[:count, 0].tolist()) == sorted(set(range(n)) - dropped)
    assert (vals[:count, 0] == pms[:count, 0]).all()


# --- identical results --------------------------------------------------------------------------


@st.composite
def queries(draw: Any) -> str:
    """A random query the matcher covers: 1–3 components, single or Kleene plus, conjuncts on
    the event alone, on earlier components and on the iteration, every covered strategy, with
    and without partitions (the shapes of tests/nfa/test_properties.py)."""
    n = draw(st.integers(1, 3))
    comps = [(draw(st.sampled_from("AB")), f"v{k}", draw(st.booleans())) for k in range(n)]
    preds: list[str] = []
    c = st.integers(0, 2)
    for k, (_, v, kleene) in enumerate(comps):
        if kleene:
            options = [f"{v}[1].x > {draw(c)}", f"{v}[i].x > {v}[i-1].x",
                       f"{v}[i].x >= avg({v}[..i-1].x)", f"{v}[i].x <= max({v}[..i-1].x)",
                       f"{v}.LEN <= 2", f"{v}.LEN >= 2", f"{v}[2].x > {draw(c)}",
                       f"{v}[{v}.LEN].x < {draw(c)}", f"sum({v}[].x) > {draw(c)}",
                       f"{v}[i].x != {v}[1].x", f"{v}[i].x - min({v}[..i-1].x) <= 1"]
            if k:
                options.append(f"{v}[i].x >= {_earlier(draw, comps[k - 1])}")
        else:
            options = [f"{v}.x > {draw(c)}", f"{v}.x <= {draw(c)}"]
            if k:
                w = _earlier(draw, comps[draw(st.integers(0, k - 1))])
                options += [f"{v}.x >= {w}", f"{v}.x != {w}", f"{v}.x - {w} <= 1",
                            f"{v}.x / {w} > 1", f"{v}.x % 2 = {w} % 2"]
        preds += draw(st.lists(st.sampled_from(options), max_size=2, unique=True))
    equivalence = draw(st.sampled_from(["", "[k]", "PARTITION BY k"]))
    if equivalence == "[k]":
        preds.insert(0, "[k]")
    strategy = draw(st.sampled_from(["partition_contiguity", "skip_till_next_match",
                                     "skip_till_any_match"]))
    parts = [f"{t}+ {v}[]" if kleene else f"{t} {v}" for t, v, kleene in comps]
    variables = ", ".join(p.split()[-1] for p in parts)
    text = f"PATTERN SEQ({', '.join(parts)}) WHERE {strategy}({variables}) "
    text += f"{{ {' AND '.join(preds) or '[k]'} }}"
    window = draw(st.none() | st.integers(1, 6))
    if window is not None:
        text += f" WITHIN {window} seconds"
    if equivalence.startswith("PARTITION"):
        text += " " + equivalence
    return text


@st.composite
def streams(draw: Any, longest: int = 14) -> list[dict[str, Any]]:
    """Events with NaN and missing values and keys."""
    events, ts = [], 0
    for i in range(draw(st.integers(0, longest))):
        ts += draw(st.integers(0, 2))
        event: dict[str, Any] = {"id": i, "ts": ts, "type": draw(st.sampled_from("AABBC")),
                                 "x": draw(st.sampled_from([0.0, 1.0, 2.0, 3.0, math.nan]))}
        key = draw(st.sampled_from(["p", "q", "q", None]))
        if key is not None:
            event["k"] = key
        events.append(event)
    return events


def _covered(text: str) -> Any:
    try:
        compiled = compile(text, plan=None)
    except Exception:  # a generated conjunct the validator refuses: not this test's concern
        return None
    return compiled if PatternTables.build(compiled.automaton) is not None else None


PROPERTY = settings(max_examples=scaled(0.5), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


@PROPERTY
@given(queries(), streams(), st.integers(1, 6), st.integers(1, 5))
def test_every_implementation_finds_what_the_nfa_and_the_definition_find(
        implementation, text, events, batch, micro_batch):
    compiled = _covered(text)
    if compiled is None:
        return
    expected = [m.to_dict() for m in feed(compiled.operator(compiled=False), events, batch)]
    got = [m.to_dict() for m in feed(implementation(text, micro_batch), events, batch)]
    assert got == expected, text
    query = compiled.ast
    window = query.within.seconds if query.within is not None else float("inf")
    definition = sorted(Reference(query, window).matches(
        [{k: v for k, v in e.items()} for e in events]))
    found = sorted(tuple((c.var, tuple(m["bindings"][c.var])) for c in query.positives)
                   for m in got)
    assert found == definition, text


@settings(max_examples=scaled(0.2), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(queries(), streams(), st.integers(1, 6), st.data())
def test_a_snapshot_taken_on_the_device_path_resumes_with_the_same_results(text, events,
                                                                          batch, data):
    compiled = _covered(text)
    if compiled is None:
        return
    whole = [m.to_dict() for m in feed(device_operator(compiled, None), events, batch)]
    cut = data.draw(st.integers(0, len(events)))
    op = device_operator(compiled, None, micro_batch=3)
    first = feed(op, events[:cut], batch, finish=False)
    restored = device_restore(compiled, json.loads(json.dumps(op.snapshot())), None)
    assert isinstance(restored, CooperativeOperator)
    rest = feed(restored, events[cut:], batch, offset=cut)
    assert [m.to_dict() for m in first + rest] == whole


def test_a_batch_that_orders_texts_takes_the_python_loop_and_the_next_comes_back(
        implementation):
    text = "PATTERN SEQ(A a, B b) WHERE skip_till_any_match(a, b) { b.x > a.x } WITHIN 1 seconds"
    events = stream(("A", 0, 1), ("A", 1, 2), ("B", 2, 3), ("A", 4, 0), ("B", 5, 4))
    worded = [{"id": 9, "type": "A", "ts": 2, "x": "text"}]
    op = implementation(text)
    out = feed(op, events[:2], finish=False)
    out += op.process(EventBatch.from_records(worded, type_field="type", time_field="ts"))
    assert op._pm is None  # the Python loop holds the runs now
    out += feed(op, events[2:], 1, offset=3)
    assert op._pm is not None  # back once the run holding a text has left the window
    python = compile(text, plan=None).operator(compiled=False)
    expected = feed(python, events[:2], finish=False)
    expected += python.process(EventBatch.from_records(worded, type_field="type",
                                                       time_field="ts"))
    expected += feed(python, events[2:], offset=3)
    assert [m.to_dict() for m in out] == [m.to_dict() for m in expected]


def test_texts_compared_for_equality_run_on_the_matcher(implementation):
    text = ("PATTERN SEQ(A a, B+ b[], C c) WHERE skip_till_any_match(a, b[], c) "
            "{ [sym] AND a.tag != 'wait' AND b[i].tag != a.tag AND c.tag = b[b.LEN].tag } "
            "WITHIN 6 seconds")
    rng = np.random.default_rng(5)
    events = [{"id": i, "ts": i // 2, "type": str(rng.choice(list("ABC"))),
               "sym": str(rng.choice(["IBM", "SUN"])),
               "tag": None if rng.random() < 0.1 else str(rng.choice(["go", "stop", "wait"]))}
              for i in range(80)]
    op = implementation(text, micro_batch=5)
    got = [m.to_dict() for m in feed(op, events, 7)]
    assert op._pm is not None
    expected = feed(compile(text, plan=None).operator(compiled=False), events, 7)
    assert got == [m.to_dict() for m in expected]
    assert got


def numeric_stream(n: int, seed: int = 7) -> list[EventBatch]:
    rng = np.random.default_rng(seed)
    ids = np.arange(n, dtype=np.int64)
    x = rng.integers(0, 4, n).astype(np.float64)
    x[rng.random(n) < 0.05] = np.nan
    types = rng.choice(np.array(["A", "B", "C"], dtype=object), n)
    return [EventBatch({"x": x, "k": rng.integers(0, 3, n)}, ids.copy(), ids.copy(), ids,
                       types)]


def split(batches: list[EventBatch], size: int) -> list[EventBatch]:
    (whole,) = batches
    return [whole.slice(i, i + size) for i in range(0, len(whole), size)]


@pytest.mark.parametrize("strategy", ["skip_till_next_match", "skip_till_any_match"])
def test_batches_of_zero_one_and_a_work_group_multiple_give_the_nfa_results(
        implementation, device, strategy):
    text = (f"PATTERN SEQ(A a, B b, C c) WHERE {strategy}(a, b, c) {{ [k] AND b.x > a.x "
            "AND c.x >= b.x } WITHIN 6 seconds")
    compiled = compile(text, plan=None)
    lanes = device.lanes
    (events,) = numeric_stream(3 * lanes * 64 + 2)
    sizes = [1, lanes * 64 - 1, 0, lanes * 64 + 1, lanes * 64]
    expected = [m.to_dict() for m in compiled.operator(compiled=False).process(events)]
    op = implementation(text, micro_batch=lanes * 8)
    got, at = [], 0
    for size in sizes:
        got += op.process(events.slice(at, at + size)) if size else op.process(
            events.slice(0, 0))
        at += size
    got += op.process(events.slice(at, len(events)))
    assert [m.to_dict() for m in got] == expected


def test_a_million_events_give_the_numba_nfa_results_on_the_cpu_and_the_device(device):
    text = ("PATTERN SEQ(A a, B b) WHERE skip_till_next_match(a, b) { [k] AND b.x - a.x > 2 } "
            "WITHIN 4 seconds")
    compiled = compile(text, plan=None)
    (events,) = numeric_stream(1 << 20, seed=3)
    expected = [m.to_dict() for m in compiled.operator().process(events)]
    pattern = PatternTables.build(compiled.automaton)
    assert pattern is not None
    for m in (CpuMatcher(1), matcher_for(device, "zero-copy")):
        op = CooperativeOperator(compiled.automaton, compiled.name, compiled.query_id,
                                 pattern, m, 4096)
        assert [r.to_dict() for r in op.process(events)] == expected


@pytest.mark.parametrize("micro_batch", [7, 64])
def test_more_partial_matches_than_the_arrays_first_hold_grow_them(implementation,
                                                                   micro_batch):
    text = ("PATTERN SEQ(A a, B+ b[], C c) WHERE skip_till_any_match(a, b[], c) "
            "{ c.x > b[b.LEN].x } WITHIN 1000 seconds")
    n = 40
    events = [{"id": i, "type": "A", "ts": i, "x": 0.0} for i in range(n)]
    events += [{"id": n + i, "type": "B", "ts": n + i, "x": float(i)} for i in range(3)]
    events += [{"id": n + 3, "type": "C", "ts": n + 3, "x": 5.0}]
    op = implementation(text, micro_batch=micro_batch)
    got = bindings(feed(op, events))
    assert len(got) == 7 * n  # per A: every non-empty subsequence of the three Bs
    assert got == bindings(feed(compile(text, plan=None).operator(compiled=False), events))


def test_queryoptions_device_gives_covered_queries_the_cooperative_matcher_on_the_device(
        device):
    covered = "PATTERN SEQ(A a, B b) WHERE skip_till_any_match(a, b) { b.x > a.x }"
    negated = ("PATTERN SEQ(A a, ~(C c), B b) WHERE skip_till_any_match(a, c, b) { b.x > a.x } "
               "WITHIN 5 seconds")
    op = compile(covered, QueryOptions(device="opencl")).operator()
    assert isinstance(op, CooperativeOperator)
    assert op.matcher.name == "opencl-zero-copy"
    assert not isinstance(compile(negated, QueryOptions(device="opencl")).operator(),
                          CooperativeOperator)
    assert not isinstance(compile(covered).operator(), CooperativeOperator)
    events = stream(("A", 0, 1), ("B", 1, 5))
    first = feed(op, events[:1], finish=False)
    restored = compile(covered, QueryOptions(device="opencl")).restore(
        json.loads(json.dumps(op.snapshot())))
    assert isinstance(restored, CooperativeOperator)
    assert bindings(first + feed(restored, events[1:], offset=1)) == [{"a": [0], "b": [1]}]


def test_the_device_passes_count_their_kernels_micro_batches_and_copies(device):
    text = "PATTERN SEQ(A a, B b) WHERE skip_till_any_match(a, b) { b.x > a.x }"
    events = stream(("A", 0, 1), ("B", 1, 5), ("B", 2, 6))
    for kind, copies in (("dispatch", True), ("zero-copy", False)):
        before = COUNTERS.snapshot()
        feed(device_operator(compile(text, plan=None), device, kind=kind, micro_batch=2),
             events)
        after = COUNTERS.snapshot()
        assert after["kernels"] > before["kernels"]
        assert after["batch_events"] - before["batch_events"] == len(events)
        assert (after["bytes_from_device"] > before["bytes_from_device"]) == copies


@pytest.mark.parametrize(("b_x", "pairs"), [(9.0, 10 * 10), (-9.0, 0)])
def test_conditions_that_always_or_never_hold_give_all_pairs_or_none(implementation, b_x,
                                                                     pairs):
    text = "PATTERN SEQ(A a, B b) WHERE skip_till_any_match(a, b) { b.x > a.x }"
    events = [{"id": i, "type": "A", "ts": i, "x": 0.0} for i in range(10)]
    events += [{"id": 10 + i, "type": "B", "ts": 10 + i, "x": b_x} for i in range(10)]
    got = bindings(feed(implementation(text, micro_batch=3), events, 4))
    assert len(got) == pairs
    assert got == bindings(feed(compile(text, plan=None).operator(compiled=False), events))
