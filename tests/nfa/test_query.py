"""SASE+ through the language registry and the CLI contract (ARCHITECTURE.md)."""

from __future__ import annotations

import json

import pytest

from situflow.cli import main
from situflow.errors import StateError
from situflow.languages import compile_query
from situflow.sase import compile
from tests.nfa.harness import QUERY3, batches, figure3


def test_pattern_queries_are_registered_under_the_first_keyword():
    compiled = compile_query(QUERY3)
    assert compiled.language == "sase"
    assert "a[i] --proceed--> b" in compiled.describe()


def test_situflow_run_prints_bindings_as_event_ids_per_variable(tmp_path, capsys):
    query = tmp_path / "q3.sase"
    query.write_text(QUERY3 + " RETURN a.LEN AS n")
    events = tmp_path / "stock.jsonl"
    events.write_text("".join(json.dumps(e) + "\n" for e in figure3()))
    assert main(["run", str(query), "--input", str(events)]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[0] == {"query": "q3", "key": "GOOG", "ts": 6, "emitted_at": 6,
                        "values": {"n": 5},
                        "bindings": {"a": ["e1", "e2", "e3", "e4", "e5"], "b": ["e6"]}}
    assert [x["bindings"]["b"] for x in lines] == [["e6"], ["e6"], ["e8"]]


def test_a_query_error_is_reported_with_its_position(tmp_path, capsys):
    query = tmp_path / "bad.sase"
    query.write_text("PATTERN SEQ(Stock+ a[], Stock b)\nWHERE skip_till_next_match(a[], b) "
                     "{ a.price > 1 }")
    events = tmp_path / "e.jsonl"
    events.write_text("")
    assert main(["run", str(query), "--input", str(events)]) == 2
    assert f"{query}:2:38: 'a' is a Kleene variable" in capsys.readouterr().err


def test_a_snapshot_is_json_and_an_unknown_format_is_refused():
    compiled = compile_query(QUERY3)
    op = compiled.operator()
    op.process(batches(figure3()[:4], None)[0])
    snapshot = json.loads(json.dumps(op.snapshot()))
    assert len(snapshot["state"]["partitions"][0]["runs"]) == 2
    restored = compiled.restore(snapshot)
    assert [m.bindings["b"] for m in restored.process(batches(figure3()[4:], None, offset=4)[0])
            ] == [["e6"], ["e6"], ["e8"]]
    with pytest.raises(StateError, match="another query or format"):
        compiled.restore({**snapshot, "version": 0})


PAIRS = """PATTERN SEQ(Stock a, Stock b)
WHERE    skip_till_any_match(a, b) { [symbol] and b.price > a.price }
WITHIN   1 hour"""


@pytest.mark.parametrize("plan", [None, "DP-B"], ids=["nfa", "planned"])
def test_the_snapshot_of_another_query_is_refused(plan):
    compiled = compile(PAIRS, plan=plan)
    assert (compiled.planned is not None) == (plan is not None)
    op = compiled.operator()
    op.process(batches(figure3()[:4], None)[0])
    snapshot = json.loads(json.dumps(op.snapshot()))
    assert compiled.restore(snapshot).snapshot() == snapshot
    with pytest.raises(StateError, match="another query or format"):
        compile(PAIRS.replace("1 hour", "2 hours"), plan=plan).restore(snapshot)


def test_a_planned_snapshot_does_not_restore_into_nfa():
    snapshot = compile(PAIRS, plan="DP-B").operator().snapshot()
    with pytest.raises(StateError, match="another query or format"):
        compile(PAIRS, plan=None).restore(snapshot)
