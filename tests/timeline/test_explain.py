"""``situflow explain``: a query's structure as a picture (issue 18, part 2).

The SVG a query's picture draws holds one ``node`` item per node and one ``edge`` item per edge
of the structure the engine evaluates (``plan_node``/``plan_edge`` for a SASE+ plan), counted
against the compiled query itself; the layout data says what the drawing shows.
"""

from __future__ import annotations

import math
from pathlib import Path
from xml.etree import ElementTree

import pytest

from situflow import sase
from situflow.cli import main
from situflow.languages import compile_query
from situflow.operator import CompiledQuery, QueryOptions
from situflow.plan import CostModel, Plan, choose_plan
from situflow.sase import SaseCompiledQuery
from situflow.timeline import explain_cogra, explain_sase, explain_tpstream
from situflow.timeline.explain import diagrams, write_explanation
from situflow.timeline.page import count_marks
from situflow.tpstream.query import TPStreamQuery
from situflow.trends.query import CompiledTrendQuery

EXAMPLES = Path(__file__).parents[2] / "situflow" / "examples"

# One query per language beyond the bundled examples: what they leave out.
SITUATIONS_WITH_A_FREE_PAIR = """
FROM Rooms PARTITION BY room
DEFINE H AS temp > 30 AT MOST 10 minutes,
       W AS window_open = true,
       S AS smoke > 0.2 AT LEAST 5 seconds
PATTERN H overlaps;during W AND H during W AND S after W
WITHIN 1 hour
RETURN first(H.room) AS room
"""
SHOPLIFTING = """
PATTERN SEQ(Shelf a, ~(Register b), Exit c)
WHERE skip_till_any_match(a, b, c) { [tag_id] AND a.zone = 'A' }
WITHIN 12 hours
"""
KLEENE_ON_A_PLAN = """
PATTERN SEQ(Stock a, Stock+ b[ ], Stock c)
WHERE skip_till_any_match(a, b[ ], c) { [symbol] AND a.price > 10 AND c.price > a.price }
WITHIN 10 minutes
"""
RISING_BEFORE_NEWS = """
PATTERN SEQ(Stock+ a[ ], ~(News n), Stock b)
WHERE skip_till_next_match(a[ ], n, b) { [symbol] AND a[i].price > a[i-1].price
                                         AND b.price < a[a.LEN].price }
WITHIN 1 hour
"""
THERAPY_WITHOUT_ALARM = """
RETURN patient, COUNT(*), AVG(A.rate)
PATTERN SEQ(Activity S, Activity A+, NOT Alarm N, Activity F)
SEMANTICS skip-till-next-match
WHERE [patient] AND A.rate < NEXT(A).rate AND S.kind = 'start' AND F.kind = 'finish'
GROUP-BY patient
WITHIN 30 minutes SLIDE 5 minutes
"""
TWO_TRENDS = """
RETURN COUNT(*) PATTERN A+ AND SEQ(B, C+) SEMANTICS skip-till-any-match WITHIN 1 minute
"""
QUERIES = {
    **{path.name: path.read_text() for path in sorted(EXAMPLES.iterdir())},
    "situations_with_a_free_pair.tps": SITUATIONS_WITH_A_FREE_PAIR,
    "shoplifting.sase": SHOPLIFTING,
    "kleene_on_a_plan.sase": KLEENE_ON_A_PLAN,
    "rising_before_news.sase": RISING_BEFORE_NEWS,
    "therapy_without_alarm.cogra": THERAPY_WITHOUT_ALARM,
    "two_trends.cogra": TWO_TRENDS,
}


def compiled(name: str) -> CompiledQuery:
    return compile_query(QUERIES[name], QueryOptions(name=Path(name).stem))


def structure(query: CompiledQuery) -> dict[str, int]:
    """The counts of nodes and edges, read from the compiled query, not from the picture."""
    if isinstance(query, TPStreamQuery):
        n = len(query.definitions)
        return {"node": n, "edge": n * (n - 1) // 2}
    if isinstance(query, SaseCompiledQuery):
        automaton = query.automaton
        counts = {"node": len(automaton.states) + len(automaton.negations),
                  "edge": sum(len(state.edges) for state in automaton.states),
                  "plan_node": 0, "plan_edge": 0}
        if query.planned is not None:
            plan_nodes = len(list(_initial_plan(query).as_tree().nodes()))
            counts |= {"plan_node": plan_nodes, "plan_edge": plan_nodes - 1}
        return counts
    assert isinstance(query, CompiledTrendQuery)
    sides = query.plan.factors or (query.plan,)
    return {"node": sum(len(side.positions) for side in sides),
            "edge": sum(len(follow) for side in sides for follow in side.follow)}


def _initial_plan(query: SaseCompiledQuery) -> Plan:
    planned = query.planned
    assert planned is not None
    return choose_plan(planned.pattern, planned.prior(), planned.algorithm, CostModel())


@pytest.mark.parametrize("name", QUERIES)
def test_the_svg_holds_one_node_per_node_and_one_edge_per_edge_of_the_structure(name, tmp_path):
    query = compiled(name)
    path = tmp_path / "picture.svg"
    write_explanation(query, path)
    svg = path.read_text()
    ElementTree.fromstring(svg)  # well-formed XML
    expected = structure(query)
    assert {mark: count_marks(svg, mark) for mark in expected} == expected
    # Every edge has its arrowhead.
    assert count_marks(svg, "arrow") == expected["edge"]


def test_explain_writes_the_query_name_with_html_into_the_working_directory(
        tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["explain", str(EXAMPLES / "aggressive_drivers.tps")]) == 0
    page = (tmp_path / "aggressive_drivers.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert "aggressive_drivers.html" in capsys.readouterr().err


def test_explain_writes_svg_where_output_says(tmp_path):
    out = tmp_path / "plan.svg"
    assert main(["explain", str(EXAMPLES / "rising_stocks.sase"), "--output", str(out)]) == 0
    assert count_marks(out.read_text(), "node") == 4


def test_a_bad_query_is_reported_at_its_position_with_exit_code_2_and_no_picture(
        tmp_path, capsys):
    query = tmp_path / "bad.sase"
    query.write_text("PATTERN SEQ(A a, B b)\nWHERE skip_till_any_match(a, b) { a.x > c.y }\n")
    out = tmp_path / "bad.html"
    assert main(["explain", str(query), "--output", str(out)]) == 2
    assert capsys.readouterr().err.startswith(f"{query}:2:41: 'c' is not a variable")
    assert not out.exists()


def test_a_picture_name_without_html_or_svg_is_refused_with_exit_code_2(tmp_path, capsys):
    out = tmp_path / "plan.png"
    assert main(["explain", str(EXAMPLES / "rising_stocks.sase"), "--output", str(out)]) == 2
    assert "--output FILE must end .html or .svg" in capsys.readouterr().err
    assert not out.exists()


def test_without_the_plotting_libraries_explain_says_which_extra_to_install(
        tmp_path, monkeypatch, capsys):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *rest: None if name == "altair" else find_spec(name, *rest))
    out = tmp_path / "plan.html"
    assert main(["explain", str(EXAMPLES / "rising_stocks.sase"), "--output", str(out)]) == 1
    assert "pip install 'situflow[timeline]'" in capsys.readouterr().err
    assert not out.exists()


# --- TPStream ---------------------------------------------------------------------------------


def test_tpstream_edges_carry_the_allowed_relations_as_the_pattern_orients_the_pair():
    query = compiled("aggressive_drivers_edbt.tps")
    assert isinstance(query, TPStreamQuery)
    edges = {(e.source, e.target): e for e in explain_tpstream.diagram(query).edges}
    # "C during B; C finishes B; B overlaps C; B meets C" is oriented as its first alternative.
    assert edges[("C", "B")].label.split("\n") == ["met-by", "overlapped-by", "during",
                                                   "finishes"]
    assert edges[("A", "C")].label == "before"
    assert not any(e.dashed for e in edges.values())


def test_tpstream_intersects_two_constraints_on_a_pair_and_draws_free_pairs_dashed():
    query = compiled("situations_with_a_free_pair.tps")
    assert isinstance(query, TPStreamQuery)
    edges = {(e.source, e.target): e for e in explain_tpstream.diagram(query).edges}
    assert edges[("H", "W")].label == "during"
    assert edges[("S", "W")].label == "after"
    assert [pair for pair, e in edges.items() if e.dashed] == [("H", "S")]
    assert edges[("H", "S")].label == "any"


def test_tpstream_nodes_show_the_duration_and_the_legend_each_condition_and_the_order():
    query = compiled("aggressive_drivers.tps")
    assert isinstance(query, TPStreamQuery)
    picture = explain_tpstream.diagram(query)
    assert [n.caption for n in picture.nodes] == [
        "at least 5 seconds", "between 4 seconds and 30 seconds", "at least 3 seconds"]
    assert picture.legend[1] == "B: speed > 70mph, between 4 seconds and 30 seconds"
    assert picture.legend[4:] == tuple(query.engine.plan(query))
    assert [line.split(":")[0] for line in picture.legend[4:]] == ["  on A", "  on B", "  on C"]


# --- SASE+ ------------------------------------------------------------------------------------


def test_sase_states_stand_left_to_right_with_take_above_and_ignore_below():
    query = compiled("rising_stocks.sase")
    assert isinstance(query, SaseCompiledQuery)
    (picture,) = diagrams(query)
    assert [n.label for n in sorted(picture.nodes, key=lambda n: n.x)] == ["a[1]", "a[i]", "b",
                                                                           "F"]
    state_y = picture.nodes[0].y
    loops = {e.kind: e for e in picture.edges if e.source == e.target == "s1"}
    assert max(y for _, y in loops["take"].path) < state_y
    assert min(y for _, y in loops["ignore"].path) > state_y
    assert picture.legend[3] == ("a[i] --proceed--> b [Stock]: "
                                 "θb_begin ∨ (¬θ*a[i]_take ∧ ¬θ*a[i]_ignore)")


def test_sase_a_negation_is_a_node_under_the_states_it_separates():
    query = compiled("rising_before_news.sase")
    assert isinstance(query, SaseCompiledQuery)
    (picture,) = diagrams(query)
    nodes = {n.label: n for n in picture.nodes}
    assert nodes["~n"].kind == "negation"
    assert nodes["a[i]"].x < nodes["~n"].x < nodes["b"].x
    assert nodes["~n"].y > nodes["b"].y


def test_sase_a_planned_query_shows_its_automaton_and_its_plan_whose_costs_add_up():
    query = compiled("kleene_on_a_plan.sase")
    assert isinstance(query, SaseCompiledQuery)
    automaton, plan = diagrams(query)
    assert automaton.prefix == "" and plan.prefix == "plan_"
    assert "plan DP-B" in plan.title
    costs = [float(n.caption.split("PM ")[1].split("\n")[0]) for n in plan.nodes]
    assert math.isclose(sum(costs), _initial_plan(query).cost, rel_tol=1e-2)
    # A join sits above its inputs.
    joins = [n for n in plan.nodes if n.kind == "join"]
    inputs = [n for n in plan.nodes if n.kind == "input"]
    assert max(n.y for n in joins) < min(n.y for n in inputs)


def test_sase_an_order_plan_is_a_chain_of_its_steps_with_each_steps_cost():
    query = sase.compile(KLEENE_ON_A_PLAN, QueryOptions(name="ordered"), plan="DP-LD")
    assert query.planned is not None
    picture = explain_sase.plan_diagram("ordered", query.planned)
    order = _initial_plan(query)
    assert [n.label for n in picture.nodes] == [
        query.planned.pattern.components[i].var for i in order.order]
    assert len(picture.edges) == len(picture.nodes) - 1
    costs = [float(n.caption.removeprefix("cost ").split("\n")[0]) for n in picture.nodes]
    assert math.isclose(sum(costs), order.cost, rel_tol=1e-2)


def test_sase_a_plan_notes_where_it_checks_a_negation():
    query = compiled("shoplifting.sase")
    assert isinstance(query, SaseCompiledQuery)
    _, plan = diagrams(query)
    (root,) = [n for n in plan.nodes if n.kind == "join"]
    assert "checks ~(Register b)" in root.caption


# --- COGRA ------------------------------------------------------------------------------------


def test_cogra_names_the_chosen_aggregator_and_labels_edges_with_adjacent_predicates():
    query = compiled("rising_trends.cogra")
    assert isinstance(query, CompiledTrendQuery)
    picture = explain_cogra.diagram(query)
    assert "pattern-grained aggregator" in picture.title
    assert picture.legend == ("RETURN, per window and group: symbol, COUNT(*), MAX(S.price)",)
    (loop,) = picture.edges
    assert (loop.source, loop.target, loop.label) == ("S", "S", "S.price < NEXT(S).price")


def test_cogra_an_edge_guarded_by_a_negation_says_so():
    query = compiled("therapy_without_alarm.cogra")
    assert isinstance(query, CompiledTrendQuery)
    edges = {(e.source, e.target): e for e in explain_cogra.diagram(query).edges}
    assert set(edges) == {("S", "A"), ("A", "A"), ("A", "F")}
    assert edges[("A", "F")].label == "no Alarm N"
    kinds = {n.id: n.kind for n in explain_cogra.diagram(query).nodes}
    assert kinds == {"S": "start", "A": "inner", "F": "end"}


def test_cogra_a_conjunction_draws_one_graph_per_side():
    query = compiled("two_trends.cogra")
    assert isinstance(query, CompiledTrendQuery)
    picture = explain_cogra.diagram(query)
    rows = {n.y: [] for n in picture.nodes}
    for n in picture.nodes:
        rows[n.y].append(n.id)
    assert sorted(rows.values()) == [["1:A"], ["2:B", "2:C"]]
    assert "side 1 type-grained" in picture.title
