"""Compilation into NFA^b (SASE+ §3.2, Figure 2): structure, formulas per step, ignore edges."""

from __future__ import annotations

import pytest

from situflow.nfa.compiler.automaton import StateKind
from situflow.sase import compile
from tests.nfa.harness import QUERY3, with_strategy


def edges(query: str) -> dict[tuple[str, str], tuple[str, str, str]]:
    a = compile(query).automaton
    return {(s.name, e.action): (a.states[e.target].name, e.basic.text(), e.formula.text())
            for s in a.states for e in s.edges}


def test_step1_query3_has_states_a1_ai_b_f_with_begin_take_ignore_proceed_edges():
    a = compile(QUERY3).automaton
    assert [(s.name, s.kind) for s in a.states] == [
        ("a[1]", StateKind.BEGIN), ("a[i]", StateKind.ITERATE), ("b", StateKind.BEGIN),
        ("F", StateKind.FINAL)]
    assert {(s.name, e.action, a.states[e.target].name) for s in a.states for e in s.edges} == {
        ("a[1]", "begin", "a[i]"),
        ("a[i]", "take", "a[i]"), ("a[i]", "ignore", "a[i]"), ("a[i]", "proceed", "b"),
        ("b", "begin", "F"), ("b", "ignore", "b"),
    }


def test_s8_query3_formulas_are_those_of_figure_2b_and_2c():
    e = edges(QUERY3)
    window = "a[1].time + 1 hour"
    take = "a[i].symbol = a[1].symbol ∧ a[i].price > avg(a[..i-1].price)"
    b_begin = "b.symbol = a[1].symbol ∧ b.volume < 80% * a[a.LEN].volume"
    # Figure 2(b): basic formulas (the window only on the edge into F, Step 4).
    assert e["a[1]", "begin"][1] == "a[1].volume > 1000"
    assert e["a[i]", "take"][1] == take
    assert e["a[i]", "ignore"][1] == f"¬({take})"
    assert e["a[i]", "proceed"][1] == "True"
    assert e["b", "begin"][1] == f"{b_begin} ∧ b.time <= {window}"
    assert e["b", "ignore"][1] == f"¬({b_begin})"
    # Figure 2(c): the window pushed early (Step 5) and the proceed edge constrained (Step 6).
    assert e["a[i]", "take"][2] == f"{take} ∧ a[i].time <= {window}"
    assert e["a[i]", "ignore"][2] == f"¬({take}) ∧ a[i].time <= {window}"
    assert e["a[i]", "proceed"][2] == "θb_begin ∨ (¬θ*a[i]_take ∧ ¬θ*a[i]_ignore)"
    assert e["a[1]", "begin"][2] == "a[1].volume > 1000"


@pytest.mark.parametrize(("strategy", "at_ai", "at_b"), [
    ("strict_contiguity", "False", "False"),
    ("partition_contiguity", "¬(a[i].symbol = a[1].symbol)", "¬(b.symbol = a[1].symbol)"),
    ("skip_till_next_match", "¬(a[i].symbol = a[1].symbol ∧ a[i].price > avg(a[..i-1].price))",
     "¬(b.symbol = a[1].symbol ∧ b.volume < 80% * a[a.LEN].volume)"),
    ("skip_till_any_match", "True", "True"),
])
def test_s7_ignore_edges_follow_the_strategy_and_the_start_state_has_none(strategy, at_ai, at_b):
    e = edges(with_strategy(QUERY3, strategy))
    assert e["a[i]", "ignore"][1] == at_ai
    assert e["b", "ignore"][1] == at_b
    assert ("a[1]", "ignore") not in e


def test_step2_a_conjunct_goes_to_the_edge_of_its_last_identifier():
    e = edges("PATTERN SEQ(A+ a[], B b, C+ c[]) WHERE skip_till_next_match(a[], b, c[]) {"
              " a[1].x > 1 AND a[i].x > a[i-1].x AND a.LEN >= 2 AND b.y = a[a.LEN].y"
              " AND c[1].z > b.z AND c[2].z > 0 AND sum(c[].z) < 10 } WITHIN 5 minutes")
    assert e["a[1]", "begin"][1] == "a[1].x > 1"
    assert e["a[i]", "take"][1] == "a[i].x > a[i-1].x"
    assert e["a[i]", "proceed"][1] == "a.LEN >= 2"
    assert e["a[i]", "proceed"][2] == "a.LEN >= 2 ∧ (θb_begin ∨ (¬θ*a[i]_take ∧ ¬θ*a[i]_ignore))"
    assert e["b", "begin"][1] == "b.y = a[a.LEN].y"
    assert e["c[1]", "begin"][1] == "c[1].z > b.z"
    assert e["c[i]", "take"][1] == "(c[2].z > 0 when i = 2)"
    # A trailing Kleene plus proceeds into F: the window goes there (Step 4); c[2] is checked
    # again when the iteration ends shorter than two events.
    assert e["c[i]", "proceed"][1] == ("c[2].z > 0 ∧ sum(c[].z) < 10"
                                       " ∧ c[c.LEN].time <= a[1].time + 5 minutes")


def test_the_automaton_is_shared_and_immutable():
    compiled = compile(QUERY3)
    assert compiled.operator().automaton is compiled.operator().automaton
    with pytest.raises(AttributeError):
        compiled.automaton.window = 1  # type: ignore[misc]
