"""The shared expression language: tokens, units, precedence, printing, compilation."""

from __future__ import annotations

import numpy as np
import pytest

from situflow.errors import ParseError, TokenError
from situflow.lang import ast
from situflow.lang.compile import compile_scalar, compile_vector
from situflow.lang.parser import Parser
from situflow.lang.printer import expr_text


def parse(text: str) -> ast.Expr:
    parser = Parser(text)
    expr = parser.parse_expression()
    parser.expect_end()
    return expr


@pytest.mark.parametrize("text, canonical", [
    ("accel > 8m/s2", "accel > 8m/s2"),
    ("CS.speed > 70 mph", "CS.speed > 70mph"),
    ("accel < -9m/s2", "accel < -9m/s2"),
    ("a and b or not c", "a AND b OR NOT c"),
    ("a and (b or c)", "a AND (b OR c)"),
    ("x - (y - z) * 2", "x - (y - z) * 2"),
    ("s <> 'red' AND t != 1", "s != 'red' AND t != 1"),
    ("80%*x", "80% * x"),
    ("count(*) + avg(B.speed) / 2", "count(*) + avg(B.speed) / 2"),
    ("TRUE = flag", "TRUE = flag"),
    ("1.5e3 >= v", "1500 >= v"),
])
def test_canonical_printing_round_trips(text, canonical):
    assert expr_text(parse(text)) == canonical
    assert parse(canonical) == parse(text)


def test_units_are_accepted_and_ignored():
    compiled = compile_scalar(parse("v > 70 mph"), columns({}))
    assert compiled({"v": 71}) and not compiled({"v": 70})
    literal = parse("8m/s2")
    assert isinstance(literal, ast.Literal) and literal.value == 8 and literal.unit == "m/s2"


def test_nodes_carry_their_position():
    expr = parse("a >\n  bogus.x")
    assert isinstance(expr, ast.Binary)
    assert (expr.right.span.line, expr.right.span.col) == (2, 3)


@pytest.mark.parametrize("text, line, col, message", [
    ("a > ", 1, 5, "expected an expression, found the end of the query"),
    ("a < b < c", 1, 7, "comparisons cannot be chained; join them with AND"),
    ("(a > 1", 1, 7, "expected ')' to close the parenthesis"),
    ("a.b.c > 1", 1, 4, "a reference has at most two parts"),
    ("f(a,", 1, 5, "expected an expression"),
])
def test_syntax_errors_are_located(text, line, col, message):
    with pytest.raises(ParseError) as e:
        parse(text)
    assert (e.value.line, e.value.col) == (line, col)
    assert message in e.value.message


def test_token_errors_are_located():
    with pytest.raises(TokenError) as e:
        parse("a > 'open")
    assert (e.value.line, e.value.col, e.value.message) == (1, 5, "unterminated string literal")
    with pytest.raises(TokenError) as e:
        parse("a > 1 $ 2")
    assert (e.value.col, e.value.message) == (7, "unexpected character '$'")


def columns(env):
    return lambda node: (lambda e: e[node.name])


def test_vector_and_scalar_compilation_agree():
    expr = parse("(x + 1) / y > 2 and not s = 'a' or x * 0 != 0")
    env = {"x": np.array([1.0, 5.0, np.nan, 3.0]), "y": np.array([1.0, 0.0, 1.0, 1.0]),
           "s": np.array(["a", "b", None, "b"], dtype=object)}
    vector = compile_vector(expr, columns(env))(env)
    scalar = [compile_scalar(expr, columns(env))({k: v[i] for k, v in env.items()})
              for i in range(4)]
    assert list(vector) == scalar == [False, True, False, True]


def test_percent_literals_scale():
    assert compile_scalar(parse("80% * x"), columns({}))({"x": 10}) == pytest.approx(8.0)


def test_error_render_shows_the_line_and_a_caret():
    with pytest.raises(ParseError) as e:
        parse("speed >\n  > 3")
    rendered = e.value.render("q.tps", "speed >\n  > 3")
    assert rendered.splitlines() == ["q.tps:2:3: expected an expression, found '>'", "    > 3",
                                     "    ^"]


def test_remainder_and_percentages_are_told_apart_by_spacing():
    assert expr_text(parse("price % 500 = 0 and 80%*x > 1")) == "price % 500 = 0 AND 80% * x > 1"
    env = {"price": np.array([1000.0, 1250.0, -7.0]), "x": np.array([1.0, 1.0, 1.0])}
    vector = compile_vector(parse("price % 500"), columns(env))(env)
    scalar = [compile_scalar(parse("price % 500"), columns(env))({"price": p})
              for p in env["price"]]
    assert list(vector) == scalar == [0.0, 250.0, -7.0]


def test_block_comments_and_logic_symbols():
    text = "a > 1 /* a comment\nacross lines */ ∧ ¬ b ∨ c"
    assert expr_text(parse(text)) == "a > 1 AND NOT b OR c"
    with pytest.raises(ParseError) as e:
        parse("/* one\ntwo */ a >")
    assert (e.value.line, e.value.col) == (2, 11)
