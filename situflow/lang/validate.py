"""Type checking of expressions, shared by the languages' validation passes.

Attribute types are unknown until events arrive (JSON input has no schema), so references are
``ANY`` unless a language knows better; what can be checked is checked: literals against
operators, conditions being true/false, aggregate names and arities.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from situflow.errors import ValidationError
from situflow.lang import ast


class Type(enum.Enum):
    NUMBER = "a number"
    STRING = "a string"
    BOOLEAN = "a condition"
    ANY = "a value"


def error(node: ast.Node, message: str) -> ValidationError:
    """A validation error located at ``node``."""
    s = node.span
    return ValidationError(message, s.line, s.col, s.start, s.end)


def infer(expr: ast.Node, typeof: Callable[[ast.Node], Type]) -> Type:
    """The type of ``expr``; ``typeof`` types references, calls and language nodes."""
    if isinstance(expr, ast.Literal):
        if isinstance(expr.value, bool):
            return Type.BOOLEAN
        return Type.STRING if isinstance(expr.value, str) else Type.NUMBER
    if isinstance(expr, ast.Unary):
        inner = infer(expr.operand, typeof)
        wanted = Type.BOOLEAN if expr.op == "not" else Type.NUMBER
        if inner not in (wanted, Type.ANY):
            what = "NOT needs a condition" if expr.op == "not" else "'-' needs a number"
            raise error(expr.operand, f"{what}, found {inner.value}")
        return wanted
    if isinstance(expr, ast.Binary):
        left, right = infer(expr.left, typeof), infer(expr.right, typeof)
        if expr.op in ast.LOGICAL:
            for side, kind in ((expr.left, left), (expr.right, right)):
                if kind not in (Type.BOOLEAN, Type.ANY):
                    raise error(side, f"{expr.op.upper()} needs conditions on both sides, "
                                      f"found {kind.value}")
            return Type.BOOLEAN
        if expr.op in ast.ARITHMETIC:
            for side, kind in ((expr.left, left), (expr.right, right)):
                if kind not in (Type.NUMBER, Type.ANY):
                    raise error(side, f"'{expr.op}' needs numbers, found {kind.value}")
            return Type.NUMBER
        if Type.ANY not in (left, right) and left is not right:
            raise error(expr, f"cannot compare {left.value} with {right.value}")
        if expr.op not in ("=", "!=") and Type.BOOLEAN in (left, right):
            raise error(expr, f"'{expr.op}' cannot order conditions; use = or !=")
        return Type.BOOLEAN
    return typeof(expr)


def check_condition(expr: ast.Node, typeof: Callable[[ast.Node], Type]) -> None:
    """Raise unless ``expr`` can be true or false."""
    kind = infer(expr, typeof)
    if kind not in (Type.BOOLEAN, Type.ANY):
        raise error(expr, f"a condition must be true or false, found {kind.value}")
