"""The SASE+ language (SIGMOD 2008 §2, Figure 1): verbatim parsing, canonical text, located
errors, validation rules of SEMANTICS.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from situflow.errors import QueryError
from situflow.lang import sase
from situflow.sase import compile

FIXTURES = Path(__file__).parents[1] / "fixtures" / "sase"


def identity_cases() -> list:
    """``identity.sase``: ``# title:``, a query, then ``=> canonical text``."""
    cases = []
    for block in (FIXTURES / "identity.sase").read_text().split("\n\n"):
        lines = block.strip().splitlines()
        title = lines[0].removeprefix("# title: ")
        cases.append(pytest.param("\n".join(lines[1:-1]), lines[-1].removeprefix("=> "),
                                  id=title))
    return cases


@pytest.mark.parametrize(("text", "canonical"), identity_cases())
def test_queries_print_canonically_and_the_canonical_text_round_trips(text, canonical):
    query = sase.parse(text)
    assert query.to_text() == canonical
    again = sase.parse(canonical)
    assert again.to_text() == canonical
    assert again.components == query.components and again.where == query.where


def error_cases() -> list:
    cases = []
    for block in (FIXTURES / "errors.txt").read_text().split("\n\n"):
        lines = block.strip().splitlines()
        line, col, message = lines[-1].removeprefix("-- error: ").split(":", 2)
        cases.append(pytest.param("\n".join(lines[:-1]), int(line), int(col), message.strip(),
                                  id=message.strip()[:40]))
    return cases


@pytest.mark.parametrize(("text", "line", "col", "message"), error_cases())
def test_malformed_queries_give_located_understandable_errors(text, line, col, message):
    with pytest.raises(QueryError) as e:
        compile(text)
    assert (e.value.line, e.value.col, e.value.message) == (line, col, message)


def test_the_ast_holds_the_papers_constructs():
    q = sase.parse((FIXTURES / "identity.sase").read_text().split("\n\n")[2].split("=>")[0]
                   .split("\n", 1)[1])
    a, b = q.components
    assert (a.type_name, a.var, a.kleene, b.kleene) == ("Stock", "a", True, False)
    assert q.strategy is sase.Strategy.NEXT and q.within is not None
    assert q.within.seconds == 3600
    kinds = [type(c).__name__ for c in q.conjuncts()]
    assert kinds == ["Equivalence", "Binary", "Binary", "Binary"]
    refs = {r.to_text() for r in sase.references(q.where) if isinstance(r, sase.KleeneRef)}
    assert refs == {"a[1].volume", "a[i].price", "a[..i-1].price", "a[a.LEN].volume"}
    assert q.partition_attrs() == ("symbol",)


def test_the_query_id_ignores_layout_and_keyword_case():
    one = compile("PATTERN SEQ(A a, B b) WHERE skip_till_next_match(a, b) { a.x < b.x }")
    two = compile("pattern  seq(A a,B b)\nwhere skip_till_next_match(a,b){a.x<b.x}")
    assert one.query_id == two.query_id


def test_a_type_field_option_makes_the_type_attribute_visible():
    text = "PATTERN SEQ(A a) WHERE skip_till_next_match(a) { a.type = 'x' }"
    with pytest.raises(QueryError):
        compile(text)
    from situflow.operator import QueryOptions

    assert compile(text, QueryOptions(type_field="kind")).language == "sase"


def test_query1_with_or_without_its_negated_variable_in_the_strategy_is_one_query():
    """The strategy's list may leave out negated components: Figure 1's Query 1 with
    ``skip_till_next_match(a, c)`` is Query 1 (same canonical text, same id, same matches)."""
    from tests.nfa.harness import QUERY1, Harness

    lenient = QUERY1.replace("skip_till_next_match(a, b, c)", "skip_till_next_match(a, c)")
    assert compile(lenient).query_id == compile(QUERY1).query_id
    events = [{"id": f"{kind}@{ts}", "type": kind, "tag_id": tag, "ts": ts} for kind, ts, tag in
              [("Shelf", 1, 7), ("Register", 2, 7), ("Exit", 3, 7), ("Shelf", 4, 8),
               ("Register", 5, 7), ("Exit", 6, 8)]]
    assert Harness.for_query(lenient).matches(events) == Harness.for_query(QUERY1).matches(
        events) == [{"a": ["Shelf@4"], "c": ["Exit@6"]}]


def test_without_predicates_the_block_may_be_left_out():
    """``WHERE skip_till_any_match(a, b[ ])`` alone means ``{ }`` (no predicates)."""
    bare = "PATTERN SEQ(Alert a, Shipment+ b[ ])\nWHERE    skip_till_any_match(a, b[ ])\n" \
           "WITHIN    3 hours"
    braces = bare.replace("match(a, b[ ])", "match(a, b[ ]) { }")
    assert compile(bare).query_id == compile(braces).query_id
    for clause in ("", ";", " PARTITION BY site", " CONSUME", " RETURN a.site AS site"):
        text = f"PATTERN SEQ(Alert a, Shipment b) WHERE skip_till_any_match(a, b){clause}"
        assert sase.parse(text).where is None
