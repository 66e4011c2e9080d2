"""Compile expression ASTs to closures: vectorized over numpy columns, or over one binding.

User text never becomes source code: each node turns into a small Python closure (or a numpy
ufunc call), so nothing reaches ``eval``/``exec``. Language nodes the shared compiler does not
know (references, aggregates, SASE+ ``a[i].price``, COGRA ``NEXT(S).x``) are handed to the
``resolve`` callback of the language, which returns a getter for them.

Missing values are NaN (numbers) or None (strings); every comparison with them is false, in
both modes, so a predicate never raises on sparse input.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from situflow.lang import ast

Getter = Callable[[Any], Any]
Resolver = Callable[[ast.Node], Getter]

_CMP = {"<": operator.lt, ">": operator.gt, "<=": operator.le, ">=": operator.ge,
        "=": operator.eq, "!=": operator.ne}


_INT64 = np.iinfo(np.int64)


def literal_value(node: ast.Literal) -> Any:
    """The value of a literal; ``80%`` is 0.8, other units are ignored.

    An integer beyond 64 bits is a float, as such a number in an event is (SEMANTICS.md,
    "Event time and types"): numpy columns cannot hold it. (The parser refuses numbers beyond
    the float range.)
    """
    value = node.value
    if isinstance(value, int) and not isinstance(value, bool) and not (
        _INT64.min <= value <= _INT64.max
    ):
        value = float(value)
    if node.unit == "%" and isinstance(value, int | float):
        return value / 100
    return value


def compile_vector(expr: ast.Node, resolve: Resolver) -> Callable[[Any], Any]:
    """``expr`` as a function of an environment (typically a mapping of numpy columns).

    The result is an array, or a scalar where the expression uses no column.
    """
    if isinstance(expr, ast.Literal):
        value = literal_value(expr)
        return lambda env: value
    if isinstance(expr, ast.Unary):
        inner = compile_vector(expr.operand, resolve)
        if expr.op == "not":
            return lambda env: np.logical_not(inner(env))
        return lambda env: np.negative(inner(env))
    if isinstance(expr, ast.Binary):
        left, right = compile_vector(expr.left, resolve), compile_vector(expr.right, resolve)
        if expr.op == "and":
            return lambda env: np.logical_and(left(env), right(env))
        if expr.op == "or":
            return lambda env: np.logical_or(left(env), right(env))
        if expr.op in _CMP:
            return _vector_comparison(_CMP[expr.op], left, right)
        ufunc = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide,
                 "%": np.fmod}[expr.op]

        def arithmetic(env: Any) -> Any:
            with np.errstate(divide="ignore", invalid="ignore"):
                return ufunc(left(env), right(env))

        return arithmetic
    return resolve(expr)


def _vector_comparison(op: Callable[[Any, Any], Any], left: Getter, right: Getter) -> Getter:
    def compare(env: Any) -> Any:
        a, b = left(env), right(env)
        try:
            with np.errstate(invalid="ignore"):
                result = op(a, b)
            if op is operator.ne:  # NaN is missing: != with it is false too
                result = result & _present(a) & _present(b)
            return result
        except TypeError:
            # Object columns with missing strings: compare element by element, None is false.
            a_arr, b_arr = np.broadcast_arrays(np.asarray(a, dtype=object), np.asarray(b, dtype=object))
            return np.fromiter((_compare(op, x, y) for x, y in zip(a_arr, b_arr, strict=True)),
                               dtype=bool, count=a_arr.size)

    return compare


def compile_scalar(expr: ast.Node, resolve: Resolver) -> Callable[[Any], Any]:
    """``expr`` as a function of one binding (one event, one partial match)."""
    if isinstance(expr, ast.Literal):
        value = literal_value(expr)
        return lambda env: value
    if isinstance(expr, ast.Unary):
        inner = compile_scalar(expr.operand, resolve)
        if expr.op == "not":
            return lambda env: not inner(env)
        return lambda env: -inner(env)
    if isinstance(expr, ast.Binary):
        left, right = compile_scalar(expr.left, resolve), compile_scalar(expr.right, resolve)
        if expr.op == "and":
            return lambda env: bool(left(env)) and bool(right(env))
        if expr.op == "or":
            return lambda env: bool(left(env)) or bool(right(env))
        if expr.op in _CMP:
            op = _CMP[expr.op]

            return lambda env: _compare(op, left(env), right(env))
        if expr.op == "/":
            return lambda env: _divide(left(env), right(env))
        if expr.op == "%":
            return lambda env: _remainder(left(env), right(env))
        arith = {"+": operator.add, "-": operator.sub, "*": operator.mul}[expr.op]
        return lambda env: arith(left(env), right(env))
    return resolve(expr)


def _present(x: Any) -> Any:
    """False where ``x`` is missing: NaN, or None in an object column (missing texts)."""
    x = np.asarray(x)
    if x.dtype.kind == "f":
        return ~np.isnan(x)
    if x.dtype.kind == "O":
        return (x != None) & (x == x)  # noqa: E711 - elementwise; NaN != NaN
    return True


def _compare(op: Callable[[Any, Any], Any], a: Any, b: Any) -> bool:
    """A comparison that is false for missing values and for values of unlike types."""
    if a is None or b is None or a != a or b != b:
        return False
    try:
        return bool(op(a, b))
    except TypeError:
        return False


def _remainder(a: float, b: float) -> float:
    """C's fmod, as numpy's vector path computes it (the sign follows the dividend)."""
    return math.nan if b == 0 else math.fmod(a, b)


def _divide(a: float, b: float) -> float:
    """IEEE division as numpy does it, so scalar and vector predicates agree."""
    if b == 0:
        return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a)
    return a / b
