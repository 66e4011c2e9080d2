"""Text values in the compiled loop (``situflow.nfa.kernel.texts``): texts as codes of a
dictionary per operator, equality of texts in the postfix programs, text partition keys, and
the batches that still take the Python loop (ordering and arithmetic on texts, texts compared
with numbers, columns of mixed kinds)."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from situflow.nfa.kernel import loop
from situflow.nfa.kernel.texts import Texts, factorize_objects
from tests.nfa.harness import QUERY3, Harness, across_loops, batches, feed, figure3, match, nfa_operator
from tests.nfa.reference import Reference
from tests.nfa.test_properties import _nfa_keys
from tests.profiles import scaled


def test_a_text_keeps_its_code_for_the_life_of_the_dictionary():
    texts = Texts(("x",))
    first = texts.encode(np.array(["a", None, "x", math.nan], dtype=object))
    second = texts.encode(np.array(["b", "a"], dtype=object))
    assert first is not None and second is not None
    assert first[[0, 2]].tolist() == [1.0, 0.0] and np.isnan(first[[1, 3]]).all()
    assert second.tolist() == [2.0, 1.0]
    assert [texts.text(c) for c in (0.0, 1.0, 2.0, math.nan)] == ["x", "a", "b", None]


@pytest.mark.parametrize("values", [["a", 1], ["a", True], [["a"]], [1.5]])
def test_a_column_with_anything_but_texts_and_missing_values_has_no_codes(values):
    column = np.empty(len(values), dtype=object)
    column[:] = values
    assert Texts().encode(column) is None


@settings(max_examples=scaled(3))
@given(st.lists(st.integers(0, 5), max_size=60), st.lists(st.integers(0, 5), max_size=60))
def test_objects_are_factorized_by_identity_in_first_seen_order(shared, copies):
    """Equal texts that are distinct objects are distinct here (``Texts.encode`` groups them by
    value afterwards); each row points at its own object."""
    pool = [f"t{i}" for i in range(6)]
    values = [pool[i] for i in shared] + ["".join(["t", str(i)]) for i in copies]
    column = np.empty(len(values), dtype=object)
    column[:] = values
    objects, inverse = factorize_objects(column)
    assert all(objects[j] is x for j, x in zip(inverse.tolist(), values, strict=True))
    firsts = [min(i for i, x in enumerate(values) if x is o) for o in objects]
    assert firsts == sorted(firsts) and len({id(o) for o in objects}) == len(objects)


@pytest.mark.parametrize(("condition", "with_texts", "with_numbers"), [
    ("b.s = a[a.LEN].s", True, True),
    ("b.s != a[1].s AND b.x > a[1].x", True, True),
    ("a[i].s = a[i-1].s", True, True),
    ("a[a.LEN].s = 'up'", True, False),
    ("b.s != 'up' AND a[1].s = 'down'", True, True),  # on the current event: numpy's
    ("count(a[].s) >= 2", True, True),
    ("b.s < a[a.LEN].s", False, True),
    ("b.s = a[1].x", False, True),
    ("b.x = a[a.LEN].s", False, True),
    ("b.s = 3", True, True),
    ("b.x = a[a.LEN].x AND a[a.LEN].x != 'up'", False, False),
    ("max(a[].s) = b.s", False, True),
    ("((b.s = a[1].s) or a[1].s)", False, True),
    ("not (b.s = a[1].s)", True, True),
])
def test_programs_run_compiled_when_they_only_compare_texts_for_equality(condition, with_texts,
                                                                       with_numbers):
    """``with_texts``: whether the compiled loop takes a batch with texts in ``s``;
    ``with_numbers``: one with numbers there (a text constant then meets a number)."""
    text = (f"PATTERN SEQ(T+ a[], T b) WHERE skip_till_next_match(a[], b) {{ [k] AND {condition}"
            "} WITHIN 5 seconds")
    a = Harness.for_query(text).compiled.automaton
    tables = loop.Tables.build(a)
    assert tables is not None
    texts = np.array([name == "s" for name in a.attributes], dtype=bool)
    assert tables.accepts(texts) is with_texts
    assert tables.accepts(np.zeros(len(a.attributes), dtype=bool)) is with_numbers


def test_query3_with_text_symbols_runs_compiled_and_gives_figure3():
    h = Harness.for_query(QUERY3 + " RETURN a[1].symbol AS symbol")
    op = nfa_operator(h, True)
    found = feed(op, figure3(), 3, finish=False)
    assert op._state is not None
    assert [m.bindings for m in found] == [match([1, 2, 3, 4, 5], 6), match([3, 4], 6),
                                           match([1, 2, 3, 4, 5, 6, 7], 8)]
    assert {m.values["symbol"] for m in found} == {"GOOG"}


TEXTS = st.sampled_from(["u", "v", "w", None])


def _text_conditions(draw: Any, n: int, kleene: list[bool]) -> list[str]:
    """Conjuncts on the text attribute ``s``: equality with earlier events and constants, and
    (rarely) an ordering, which sends every batch with texts to the Python loop."""
    options = []
    for k in range(n):
        v = f"v{k}"
        here = f"{v}[i].s" if kleene[k] else f"{v}.s"
        options += [f"{here} != 'u'", f"{here} = 'v'"]
        if kleene[k]:
            options += [f"{v}[i].s = {v}[i-1].s", f"{v}[i].s != {v}[1].s"]
        if k:
            before = f"v{k - 1}[1].s" if kleene[k - 1] else f"v{k - 1}.s"
            options += [f"{here} = {before}", f"{here} != {before}"]
    found = draw(st.lists(st.sampled_from(options), min_size=1, max_size=2, unique=True))
    if draw(st.integers(0, 7)) == 0:
        found.append("v0.s < 'w'" if not kleene[0] else "v0[1].s < 'w'")
    return found


@st.composite
def text_queries(draw: Any) -> str:
    """A query the compiled loop runs, with conjuncts on texts, ``RETURN`` of a text, and
    ``CONSUME`` at times."""
    n = draw(st.integers(1, 3))
    kleene = [draw(st.booleans()) for _ in range(n)]
    parts = [f"{draw(st.sampled_from('AB'))}{'+' if k else ''} v{i}{'[]' if k else ''}"
             for i, k in enumerate(kleene)]
    preds = _text_conditions(draw, n, kleene)
    if draw(st.booleans()):
        preds.append(f"v{n - 1}{'[1]' if kleene[-1] else ''}.x >= "
                     f"{draw(st.integers(0, 2))}")
    equivalence = draw(st.sampled_from(["", "[k]", "PARTITION BY k"]))
    if equivalence == "[k]":
        preds.insert(0, "[k]")
    strategy = draw(st.sampled_from(["partition_contiguity", "skip_till_next_match"]))
    variables = ", ".join(f"v{i}{'[]' if k else ''}" for i, k in enumerate(kleene))
    text = f"PATTERN SEQ({', '.join(parts)}) WHERE {strategy}({variables}) "
    text += f"{{ {' AND '.join(preds)} }} WITHIN {draw(st.integers(1, 6))} seconds"
    if equivalence.startswith("PARTITION"):
        text += " " + equivalence
    if draw(st.booleans()):
        text += " CONSUME"
    first = "v0[1]" if kleene[0] else "v0"
    return text + f" RETURN {first}.s AS s, {first}.x AS x"


@st.composite
def text_streams(draw: Any, longest: int = 12) -> list[dict[str, Any]]:
    """Events with a text ``s`` (missing at times) and a text key ``k``; now and then a number
    in ``s``, so that its batch has a column of mixed kinds or a number where texts were."""
    events, ts = [], 0
    for i in range(draw(st.integers(0, longest))):
        ts += draw(st.integers(0, 2))
        event: dict[str, Any] = {"id": i, "ts": ts, "type": draw(st.sampled_from("AABBC")),
                                 "x": draw(st.integers(0, 3)), "s": draw(TEXTS)}
        if draw(st.integers(0, 11)) == 0:
            event["s"] = draw(st.integers(0, 2))
        key = draw(st.sampled_from(["p", "q", "q", None]))
        if key is not None:
            event["k"] = key
        events.append(event)
    return events


@settings(max_examples=scaled(12),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text_queries(), text_streams(), st.integers(1, 6), st.data())
def test_texts_in_the_compiled_loop_give_the_python_loop_and_the_definition(text, events, size,
                                                                          data):
    """Across batches (each may take either loop), with pruning moving the buffer after every
    batch, and with a snapshot of one loop restored into the other."""
    h = Harness.for_query(text)
    python = [m.to_dict() for m in feed(nfa_operator(h, False), events)]
    with_texts = [m.to_dict() for m in feed(nfa_operator(h, True), events, size)]
    assert with_texts == python, text
    query = h.compiled.ast
    expected = Counter(Reference(query, query.within.seconds).matches(
        [{**e, "seq": i} for i, e in enumerate(events)]))
    assert _nfa_keys(feed(nfa_operator(h, True), events, size), query) == expected, text
    cut = data.draw(st.integers(0, len(events)))
    first_loop = data.draw(st.booleans())
    assert across_loops(h, events, size, cut, first_loop) == python, text


def test_a_batch_with_a_number_where_the_state_holds_texts_moves_the_state():
    """V holds the code of ``a.s``: a later batch with a number in ``s`` must not compare it
    with a code, so the state goes to the Python loop for that batch and comes back."""
    h = Harness.for_query("PATTERN SEQ(T a, T b) WHERE skip_till_next_match(a, b) "
                          "{ b.s = a.s } WITHIN 10 seconds RETURN a.s AS s")
    events = [{"id": 0, "type": "T", "s": "u", "ts": 0}, {"id": 1, "type": "U", "s": 0, "ts": 1},
              {"id": 2, "type": "T", "s": "u", "ts": 2}]
    op = nfa_operator(h, True)
    [first, second, third] = batches(events, 1)
    assert list(op.process(first)) == [] and op._state is not None
    assert list(op.process(second)) == [] and op._state is None
    [found] = op.process(third)
    assert op._state is not None
    assert (found.bindings, found.values) == ({"a": [0], "b": [2]}, {"s": "u"})
