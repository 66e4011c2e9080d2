"""The compiled event loop (``situflow.nfa.kernel.loop``) against the Python loop and the definition:
the same results for random queries and streams, any batch size, snapshots taken by one loop
and restored into the other; postfix programs equal to the scalar closures."""

from __future__ import annotations

import math
from typing import Any
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from situflow.lang import ast
from situflow.lang.compile import compile_scalar
from situflow.lang.parser import Parser
from situflow.nfa.compiler.programs import Reference, compile_program, getters
from situflow.nfa.kernel import kernel_state, loop
from situflow.nfa.kernel.kernel_state import KernelState
from situflow.nfa.operator import NfaOperator
from situflow.nfa.prepass import edge_masks, live_events, partition_codes
from situflow.sase import compile
from tests.nfa.harness import (
    QUERY3,
    Harness,
    across_loops,
    batches,
    feed,
    figure3,
    match,
    nfa_operator,
    with_strategy,
)
from tests.nfa.test_properties import _records, queries, streams
from tests.profiles import scaled


def _run(h: Harness, records: list[dict[str, Any]], compiled: bool, batch: int | None = None,
         merge_runs: bool = True) -> list[dict[str, Any]]:
    return [m.to_dict() for m in feed(nfa_operator(h, compiled, merge_runs), records, batch)]


@settings(max_examples=scaled(8), suppress_health_check=[HealthCheck.too_slow])
@given(queries(), streams(), st.integers(1, 8), st.data())
def test_the_compiled_loop_gives_the_results_of_the_python_loop(text, events, size, data):
    h = Harness.for_query(text.replace("skip_till_any_match", "skip_till_next_match"))
    records = _records(events)
    expected = _run(h, records, compiled=False)
    assert _run(h, records, compiled=True) == expected, text
    assert _run(h, records, compiled=True, batch=size) == expected, text
    assert _run(h, records, compiled=True, batch=size, merge_runs=False) == expected, text
    # A snapshot of either loop restores into the other.
    cut = data.draw(st.integers(0, len(records)))
    first_loop = data.draw(st.booleans())
    assert across_loops(h, records, size, cut, first_loop) == expected, text


def _returning(text: str) -> str:
    """``text`` returning an attribute of each positive variable's first event: numbers
    (``x``), booleans (``flag``) and a text that only some batches have (``name``: such batches
    take the Python loop, the others the compiled one)."""
    variables = [v for v in ("v0", "v1", "v2") if f" {v}" in text.split("WHERE")[0]]
    kleene = {v for v in variables if f"{v}[]" in text.split("WHERE")[0]}
    first = [f"{v}[1]" if v in kleene else v for v in variables]
    items = [f"{f}.x AS x{k}" for k, f in enumerate(first)]
    return f"{text} RETURN {', '.join(items)}, {first[0]}.flag AS flag, {first[-1]}.name AS name"


def _unread(op: NfaOperator, records: list[dict[str, Any]], size: int) -> list[dict[str, Any]]:
    """Every batch's results, read only once the whole stream has been processed."""
    found = [op.process(b) for b in batches(records, size)]
    found.append(op.finish())
    return [m.to_dict() for results in found for m in results]


@settings(max_examples=scaled(5), suppress_health_check=[HealthCheck.too_slow])
@given(queries(compiled=True), streams(longest=24), st.integers(1, 8), st.data())
def test_state_in_arrays_across_batches_gives_the_results_of_the_python_loop(text, events, size,
                                                                           data):
    """The compiled loop keeps runs and buffer nodes in arrays from batch to batch, and its
    matches leave compressed: read at once or only at the end, with pruning moving the buffer
    after every batch, with RETURN values, with batches that move the state to the Python loop
    and back, and with a snapshot taken on the way, the results are those of the Python
    loop."""
    h = Harness.for_query(_returning(text))
    records = _records(events)
    for e in records:
        e["flag"] = e["x"] % 2 == 0
        if data.draw(st.integers(0, 9)) == 0:
            e["name"] = f"n{e['x']}"
    expected = _run(h, records, compiled=False)
    with patch.object(kernel_state, "_COLLECT_AT", 0):
        assert _run(h, records, compiled=True, batch=size) == expected, text
        assert _unread(nfa_operator(h, True), records, size) == expected, text
        # A snapshot (a service's checkpoint) leaves the state where it is.
        op = nfa_operator(h, True)
        cut = data.draw(st.integers(0, len(records)))
        first = feed(op, records[:cut], size, finish=False)
        op.snapshot()
        rest = feed(op, records[cut:], size, offset=cut)
        assert [m.to_dict() for m in first + rest] == expected, text


def test_event_ids_keep_their_type_from_batch_to_batch():
    """Integer ids in one batch, text ids in the next: each match lists each id as it came."""
    h = Harness.for_query(QUERY3)
    events = [{**e, "symbol": 1} for e in figure3()]
    op = nfa_operator(h, True)
    first = [{**e, "id": i + 1} for i, e in enumerate(events[:4])]
    found = feed(op, first, finish=False) + feed(op, events[4:], offset=4)
    assert [m.bindings for m in found] == [{"a": [1, 2, 3, 4, "e5"], "b": ["e6"]},
                                           {"a": [3, 4], "b": ["e6"]},
                                           {"a": [1, 2, 3, 4, "e5", "e6", "e7"], "b": ["e8"]}]


def test_query3_runs_compiled_and_gives_figure3():
    h = Harness.for_query(QUERY3)
    assert loop.Tables.build(h.compiled.automaton) is not None
    # Figure 3 with a numeric symbol, so that every attribute the query reads is a number.
    events = [{**e, "symbol": 1} for e in figure3()]
    found = [m["bindings"] for m in _run(h, events, compiled=True, batch=3)]
    assert found == [match([1, 2, 3, 4, 5], 6), match([3, 4], 6), match([1, 2, 3, 4, 5, 6, 7], 8)]


@pytest.mark.parametrize("text", [
    with_strategy(QUERY3, "skip_till_any_match"),
    with_strategy(QUERY3, "strict_contiguity"),
    "PATTERN SEQ(Shelf a, ~(Register b), Exit c) WHERE skip_till_next_match(a, b, c) "
    "{ [tag] } WITHIN 1 hour",
])
def test_queries_the_kernel_does_not_cover_stay_on_the_python_loop(text):
    assert loop.Tables.build(Harness.for_query(text).compiled.automaton) is None


def test_text_partition_keys_give_figure3():
    h = Harness.for_query(QUERY3)
    found = [m["bindings"] for m in _run(h, figure3(), compiled=True)]
    assert found == [match([1, 2, 3, 4, 5], 6), match([3, 4], 6), match([1, 2, 3, 4, 5, 6, 7], 8)]


def test_arrays_grow_when_runs_and_matches_outnumber_the_events(monkeypatch):
    """Most a-runs proceed at most events: buffer nodes and matches per batch exceed the first
    allocation of the kernel's arrays, which grow in the middle of the batch."""
    text = ("PATTERN SEQ(Stock+ a[], Stock b, Stock c) WHERE skip_till_next_match(a[], b, c) "
            "{ [symbol] AND a[1].x < 3 AND a[i].x >= min(a[..i-1].x) - 2 AND c.x > b.x - 3 } "
            "WITHIN 12 seconds")
    h = Harness.for_query(text)
    assert loop.Tables.build(h.compiled.automaton) is not None
    rng = np.random.default_rng(7)
    events = [{"id": i, "type": "Stock", "symbol": int(rng.integers(1, 3)),
               "x": int(rng.integers(0, 6)), "ts": i} for i in range(150)]
    expected = _run(h, events, compiled=False)
    grown = []
    reserve = KernelState.reserve
    monkeypatch.setattr(KernelState, "reserve",
                        lambda self, *room: grown.append(reserve(self, *room)))
    assert _run(h, events, compiled=True) == expected
    assert _run(h, events, compiled=True, batch=37) == expected
    assert len(grown) > 2


NUMBERS = st.one_of(st.integers(-3, 3), st.floats(-4, 4, allow_nan=False), st.just(math.nan))
EXPRESSIONS = [
    "r0 > v0", "r0 <= v0 * 0.8", "r0 != v1", "r0 = v0", "not (r0 < v0)", "-r0 >= v1",
    "r0 / v0 > v1", "r0 % v0 = v1", "(r0 > v0) and (r0 < v1)", "(r0 > v0) or (v1 >= r0)",
    "r0 + v0 - v1 * 2 > 1", "avg_v0 < r0", "sum_v0 >= r0 - 1", "r0 / v0", "r0 % v0",
]


@settings(max_examples=scaled(4))
@given(st.sampled_from(EXPRESSIONS), NUMBERS, NUMBERS, NUMBERS, st.integers(0, 2))
def test_programs_agree_with_the_scalar_closures(text, r0, v0, v1, count):
    expr = Parser(text).parse_expression()
    row = (r0,)
    v = (v0, v1, count)

    def reference(node: ast.Node) -> Reference:
        assert isinstance(node, ast.Ref)
        name = node.name
        if name.startswith("r"):
            return ("row", 0, 0)
        if name.startswith("avg_") or name.startswith("sum_"):
            return (name[:3], 0, 2)
        return ("v", int(name[1:]), 0)

    class Env:
        def __init__(self) -> None:
            self.row, self.v = row, v

    expected = compile_scalar(expr, getters(reference))(Env())
    program = compile_program(expr, reference)
    code = np.array([x[:3] for x in program], dtype=np.int64)
    constants = np.array([x[3] for x in program], dtype=np.float64)
    got = loop._evaluate(0, len(program), code, constants, np.array([v], dtype=np.float64), 0,
                           np.array([row], dtype=np.float64).T, 0, np.zeros(len(program) + 1))
    if isinstance(expected, bool):
        assert bool(got) == expected
    elif math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == pytest.approx(expected)


def test_the_template_queries_of_section_6_run_compiled():
    for strategy in ("partition_contiguity", "skip_till_next_match"):
        for iteration in ("", " AND a[i].price > a[i-1].price",
                          " AND a[i].price > min(a[..i-1].price)"):
            text = (f"PATTERN SEQ(Stock+ a[], Stock b) WHERE {strategy}(a[], b) {{ [symbol] AND "
                    f"a[1].mark = 0{iteration} AND b.volume < 150 }} WITHIN 1000 seconds")
            assert loop.Tables.build(compile(text).automaton) is not None, text


def test_the_loop_visits_only_events_a_run_can_see():
    """§5.3: a run lives at most ``w`` after its first event, so with one opening event at
    t = 2 and ``WITHIN 3 seconds`` only the events at t = 2..5 of its partition matter."""
    h = Harness.for_query(QUERY3.replace("1 hour", "3 seconds"))
    a = h.compiled.automaton
    events = [{"id": i, "type": "Stock", "symbol": i % 2, "price": 10 + i,
               "volume": 1005 if i == 2 else 10, "ts": i // 2 * 2 + i % 2} for i in range(12)]
    [batch] = batches(events, None)
    codes, _, carried = partition_codes(a, batch, {})
    begin, take, _ = edge_masks(a, batch)
    relevant = begin[0] | begin[1] | take[0]
    assert live_events(a, batch, begin[0], relevant, codes, carried).tolist() == [2, 4]
    # A run carried over from an earlier batch keeps its partition's events visible.
    codes, _, carried = partition_codes(a, batch, {1: 1})
    seen = live_events(a, batch, begin[0], relevant, codes, carried).tolist()
    assert seen == [1, 2, 3, 4]
