"""The TPStream language (thesis §5.3.1): both surface forms, canonical text, located errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from situflow.errors import QueryError
from situflow.lang import tpstream
from situflow.tpstream import compile

EXAMPLES = Path(__file__).parents[2] / "situflow" / "examples"
FIXTURES = Path(__file__).parents[1] / "fixtures" / "tpstream"


def test_both_versions_of_the_aggressive_drivers_query_parse_to_the_same_constraints():
    thesis = compile((EXAMPLES / "aggressive_drivers.tps").read_text())
    edbt = compile((EXAMPLES / "aggressive_drivers_edbt.tps").read_text())
    assert thesis.constraints == edbt.constraints
    assert [d.dmin for d in thesis.definitions] == [5, 4, 3]
    assert [(d.dmin, d.dmax) for d in edbt.definitions] == [(5, None), (4, 30), (3, None)]
    assert thesis.window == edbt.window == 300
    assert edbt.partition_by == ("car_id",)


def test_keywords_are_case_insensitive_and_the_query_id_ignores_layout():
    a = compile("FROM S DEFINE A AS x > 1, B AS y > 1 PATTERN A before B WITHIN 5 minutes "
                "RETURN count(A) AS n")
    b = compile("from S\n  define A as x>1 , B as y>1\n pattern A BEFORE B within 300 SECONDS\n"
                "return COUNT(A) as n;")
    assert a.canonical() == b.canonical()
    assert a.query_id == b.query_id


def test_canonical_text_parses_back_to_itself():
    for path in sorted(EXAMPLES.glob("*.tps")):
        canonical = tpstream.parse(path.read_text()).to_text()
        assert tpstream.parse(canonical).to_text() == canonical


def test_all_thirteen_relations_and_two_word_forms():
    text = ("FROM S DEFINE A AS a = 1, B AS b = 1 PATTERN A before;after;meets;met by;overlaps;"
            "overlapped-by;starts;started_by;during;contains;finishes;finished-by;equals B "
            "WITHIN 1 hour RETURN count(A) AS n")
    assert len(compile(text).constraints[0][1] or ()) == 13


def test_multiple_partition_attributes_and_durations():
    q = compile("FROM S PARTITION BY region, car DEFINE A AS a = 1 AT MOST 500 ms, "
                "B AS b = 1 PATTERN A meets B WITHIN 2 hours RETURN last(B.v) AS v")
    assert q.partition_by == ("region", "car")
    assert q.definitions[0].dmax == 0.5
    assert q.window == 7200


def test_a_pattern_of_one_situation_needs_no_within_and_prints_back_to_itself():
    text = ("from S partition by car define B as speed > 70 between 4s and 30s pattern B "
            "return count(B) as n;")
    tree = tpstream.parse(text)
    assert tree.single is not None and tree.single.name == "B"
    assert (tree.constraints, tree.within) == ((), None)
    canonical = tree.to_text()
    assert canonical == ("FROM S PARTITION BY car\n"
                         "DEFINE B AS speed > 70 BETWEEN 4 seconds AND 30 seconds\n"
                         "PATTERN B\n"
                         "RETURN count(B) AS n")
    assert tpstream.parse(canonical).to_text() == canonical
    q = compile(text)
    assert q.single and q.window == float("inf") and q.constraints == ((None,),)


def test_a_pattern_of_one_situation_may_have_a_within():
    q = compile("FROM S DEFINE B AS x > 1 PATTERN B WITHIN 10 seconds RETURN count(B) AS n")
    assert q.window == 10
    assert q.canonical().splitlines()[2:4] == ["PATTERN B", "WITHIN 10 seconds"]
    without = compile("FROM S DEFINE B AS x > 1 PATTERN B RETURN count(B) AS n")
    assert without.query_id != q.query_id


def malformed_cases():
    """`tests/fixtures/tpstream/errors.txt`: a query, then `-- error: line:col: message`."""
    cases = []
    for block in (FIXTURES / "errors.txt").read_text().split("\n\n"):
        lines = block.strip().splitlines()
        head = lines[-1].removeprefix("-- error: ")
        line, col, message = head.split(":", 2)
        cases.append(pytest.param("\n".join(lines[:-1]), int(line), int(col), message.strip(),
                                  id=message.strip()[:40]))
    return cases


@pytest.mark.parametrize("text, line, col, message", malformed_cases())
def test_malformed_queries_give_located_understandable_errors(text, line, col, message):
    with pytest.raises(QueryError) as e:
        compile(text)
    assert (e.value.line, e.value.col, e.value.message) == (line, col, message)
