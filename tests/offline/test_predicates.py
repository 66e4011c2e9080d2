"""Necessary range conditions of a symbol's predicate (thesis §3.4.4 step 1, research AT-14)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from situflow.archive.ranges import Condition, Range
from situflow.lang import ast
from situflow.lang.compile import compile_scalar
from situflow.lang.parser import Parser
from situflow.lang.sase import parse as parse_sase
from situflow.offline.predicates import necessary_conditions


def parse(text: str) -> ast.Node:
    parser = Parser(text)
    expr = parser.parse_expression()
    parser.expect_end()
    return expr


def own_attribute(node: ast.Node) -> str | None:
    """Plain ``price`` and ``B.price`` read the symbol's current event; nothing else does."""
    if isinstance(node, ast.Ref) and node.qualifier in (None, "B"):
        return node.name
    return None


def conditions(text: str, **present: Any) -> tuple[Condition, ...]:
    return necessary_conditions(parse(text), own_attribute, **present)


def test_at14_prev_conjunct_is_dropped_the_range_kept() -> None:
    """B AS price > 10 AND price > PREV(price) -> ``price > 10`` (indexable)."""
    assert conditions("price > 10 AND price > PREV(price)") == (
        Condition("price", (Range("price", low=10, low_closed=False),)),)


def test_at14_or_with_a_udf_is_true() -> None:
    """C AS x BETWEEN 1 AND 2 OR udf(y) -> ``true`` (the grammar spells BETWEEN out)."""
    assert conditions("x >= 1 AND x <= 2 OR udf(y)") == ()


def test_at14_negation_is_pushed_down_before_dropping_atoms() -> None:
    """D AS NOT(price > 10 AND udf(z)): NNF gives ``price <= 10 OR NOT udf(z)`` -> ``true``,
    never ``NOT(price > 10)`` (which would drop the events where udf(z) is false)."""
    assert conditions("NOT (price > 10 AND udf(z))") == ()
    assert conditions("NOT (price > 10 AND udf(z))", present={"price"}) == ()


def test_negated_range_is_its_complement_only_where_the_attribute_is_never_missing() -> None:
    # NOT(price > 10) holds for an event without price: no range on price describes that.
    assert conditions("NOT price > 10") == ()
    assert conditions("NOT price > 10", present={"price"}) == (
        Condition("price", (Range("price", high=10),)),)
    assert conditions("NOT (price < 1 OR price > 2)", present={"price"}) == (
        Condition("price", (Range("price", 1, 2),)),)


def test_not_equal_is_the_union_of_two_ranges() -> None:
    assert conditions("kind != 'x'") == (Condition("kind", (
        Range("kind", high="x", high_closed=False), Range("kind", low="x", low_closed=False))),)


def test_and_intersects_one_attribute_and_keeps_the_others() -> None:
    assert conditions("5 < x AND x <= 7 AND B.y = 'a' AND x > y") == (
        Condition("x", (Range("x", 5, 7, low_closed=False),)),
        Condition("y", (Range("y", "a", "a"),)),
    )
    assert conditions("x > 5 AND x < 3") == (Condition("x", ()),)


def test_or_keeps_the_union_of_the_attributes_both_sides_constrain() -> None:
    assert conditions("x < 3 OR x >= 8") == (
        Condition("x", (Range("x", high=3, high_closed=False), Range("x", low=8))),)
    assert conditions("x < 3 OR y > 1") == ()
    assert conditions("(x < 3 AND y = 1) OR (x > 8 AND z = 2)") == (
        Condition("x", (Range("x", high=3, high_closed=False), Range("x", low=8, low_closed=False))),)
    assert conditions("x <= 3 OR x >= 3") == (Condition("x", (Range("x"),)),)


def test_other_variables_arithmetic_and_calls_are_true() -> None:
    assert conditions("price > A.price + 5") == ()
    assert conditions("price * 2 > 10") == ()
    assert conditions("avg(price) > 10") == ()
    assert conditions("flag = true") == ()


def test_units_convert_as_the_compiler_converts_them() -> None:
    assert conditions("accel > 8m/s2") == (Condition("accel", (Range("accel", low=8, low_closed=False),)),)
    assert conditions("share >= 80%") == (Condition("share", (Range("share", low=0.8),)),)
    assert conditions("speed < -70 mph") == (
        Condition("speed", (Range("speed", high=-70, high_closed=False),)),)


def test_listing_3_1_variant_1_propagates_the_beat_through_the_equality() -> None:
    """``B AS B.PRIMARY = 'BATTERY' AND B.BEAT = A.BEAT`` with ``A.BEAT = 2232``: B gets an
    indexable condition on BEAT too (the 6 indexes of Crime Variant 1, research §3.3)."""
    a = conditions("B.PRIMARY = 'ROBBERY' AND B.BEAT = 2232")  # A's DEFINE, read as B's
    beat = {c.attribute: c.ranges for c in a}["BEAT"]

    def known(node: ast.Node) -> tuple[Range, ...] | None:
        return beat if node == ast.Ref("A", "BEAT") else None

    expr = parse("B.PRIMARY = 'BATTERY' AND B.BEAT = A.BEAT")
    assert necessary_conditions(expr, own_attribute, known=known) == (
        Condition("BEAT", (Range("BEAT", 2232, 2232),)),
        Condition("PRIMARY", (Range("PRIMARY", "BATTERY", "BATTERY"),)),
    )
    assert necessary_conditions(expr, own_attribute) == (
        Condition("PRIMARY", (Range("PRIMARY", "BATTERY", "BATTERY"),)),)
    negated = parse("NOT (B.BEAT != A.BEAT)")  # equal too, but only a positive `=` inherits
    assert necessary_conditions(negated, own_attribute, known=known) == ()


def test_sase_where_clause_through_the_language_parser() -> None:
    query = parse_sase("PATTERN SEQ(Stock a, Stock b) WHERE skip_till_any_match(a, b) "
                       "{ a.price > 10 and b.price < a.price and b.volume >= 100 } WITHIN 1 hour")
    for var, expected in (("a", (Condition("price", (Range("price", low=10, low_closed=False),)),)),
                          ("b", (Condition("volume", (Range("volume", low=100),)),))):
        def of_var(node: ast.Node, var: str = var) -> str | None:
            return node.name if isinstance(node, ast.Ref) and node.qualifier == var else None

        found = tuple(c for conjunct in query.conjuncts() for c in necessary_conditions(conjunct, of_var))
        assert found == expected


# --- property: the conditions hold for every event the predicate accepts ---------------------

ATTRIBUTES = ("x", "y")
values = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, -1.5]))


def atoms() -> st.SearchStrategy[ast.Node]:
    ref = st.sampled_from(ATTRIBUTES).map(lambda name: ast.Ref(None, name))
    literal = values.map(ast.Literal)
    comparison = st.tuples(st.sampled_from(sorted(ast.COMPARISONS)), ref, literal, st.booleans()).map(
        lambda t: ast.Binary(t[0], t[1], t[2]) if t[3] else ast.Binary(t[0], t[2], t[1]))
    two_attributes = st.sampled_from(sorted(ast.COMPARISONS)).map(
        lambda op: ast.Binary(op, ast.Ref(None, "x"), ast.Ref(None, "y")))
    udf = ref.map(lambda r: ast.Call("odd", (r,)))
    # A.z: another variable's attribute, whose ranges the test knows (OTHER_RANGES).
    other_variable = st.tuples(st.sampled_from(sorted(ast.COMPARISONS)), ref).map(
        lambda t: ast.Binary(t[0], t[1], ast.Ref("A", "z")))
    return st.one_of(comparison, comparison, two_attributes, udf, other_variable)


expressions = st.recursive(
    atoms(),
    lambda inner: st.one_of(
        inner.map(lambda e: ast.Unary("not", e)),
        st.tuples(st.sampled_from(["and", "or"]), inner, inner).map(lambda t: ast.Binary(*t)),
    ),
    max_leaves=8,
)


def evaluate(expr: ast.Node, event: dict[str, Any]) -> bool:
    def resolve(node: ast.Node) -> Any:
        if isinstance(node, ast.Ref):
            return lambda env: env.get(node.dotted)
        assert isinstance(node, ast.Call)
        return lambda env: env.get(node.args[0].name) is not None and env[node.args[0].name] % 2 == 1

    return bool(compile_scalar(expr, resolve)(event))


events = st.fixed_dictionaries({"A.z": values}, optional={name: values for name in ATTRIBUTES})
OTHER_RANGES = (Range("z", -1, 0.5), Range("z", low=2, low_closed=False))


def known(node: ast.Node) -> tuple[Range, ...] | None:
    return OTHER_RANGES if node == ast.Ref("A", "z") else None


@given(expressions, st.lists(events, min_size=1, max_size=30), st.booleans())
def test_every_accepted_event_satisfies_every_condition(expr: ast.Node, stream: list[dict[str, Any]],
                                                         complete: bool) -> None:
    """The superset property of §3.4.4: pruning by the conditions never loses an event (of a
    match: where A.z lies in its known ranges)."""
    if complete:  # every event has every attribute: negated atoms may become ranges
        stream = [{**event, **{name: event.get(name, 0) for name in ATTRIBUTES}} for event in stream]
    found = necessary_conditions(expr, own_attribute, present=set(ATTRIBUTES) if complete else (),
                                 known=known)
    for event in stream:
        if any(r.contains(event["A.z"]) for r in OTHER_RANGES) and evaluate(expr, event):
            assert all(c.contains(event.get(c.attribute)) for c in found), (event, found)
