"""Edge conjuncts as postfix programs over numbers, for the compiled event loop (§5.2.1).

The compiled loop (:mod:`situflow.nfa.kernel.loop`) cannot call the Python closures that
:func:`situflow.lang.compile.compile_scalar` makes of a conjunct, so the compiler also writes
each conjunct that reads V and the current event as a short postfix program: instructions that
push a constant, an attribute of the current event or a V column, and apply an operator. The
programs are data, interpreted by one generic loop; no code is generated from query text.

A program follows the scalar closures exactly on numbers: missing values are NaN, every
comparison with NaN is false (``!=`` too), ``/`` and ``%`` by zero follow
:mod:`situflow.lang.compile`. A text constant is a ``TEXT`` instruction; the kernel's tables
turn it into the constant's code in :class:`~situflow.nfa.kernel.texts.Texts`, so that texts
compare as codes (``=`` and ``!=`` only: :meth:`situflow.nfa.kernel.loop.Tables.accepts`). A
conjunct with a boolean constant has no program, and the query runs on the Python loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from situflow.lang import ast
from situflow.lang.compile import Getter, literal_value

# (operation, first operand, second operand, constant: a number, or the text of ``TEXT``)
Instruction = tuple[int, int, int, float | str]
Program = tuple[Instruction, ...]
# What a reference reads: ("row", attribute), ("v", column), or ("sum" | "avg", sum column,
# count column) for the aggregates that are missing on an empty prefix.
Reference = tuple[str, int, int]

CONST, ROW, V, SUM, AVG, TEXT = 0, 1, 2, 3, 4, 5
ADD, SUB, MUL, DIV, MOD, NEG, NOT, AND, OR = 10, 11, 12, 13, 14, 15, 16, 17, 18
LT, GT, LE, GE, EQ, NE = 20, 21, 22, 23, 24, 25

_BINARY = {"+": ADD, "-": SUB, "*": MUL, "/": DIV, "%": MOD, "and": AND, "or": OR,
           "<": LT, ">": GT, "<=": LE, ">=": GE, "=": EQ, "!=": NE}
_REFERENCES = {"row": ROW, "v": V, "sum": SUM, "avg": AVG}


def getters(reference: Callable[[ast.Node], Reference]) -> Callable[[ast.Node], Getter]:
    """The scalar closures' view of the same references: getters over ``env`` (``env.v``: V,
    ``env.row``: the current event), for :func:`situflow.lang.compile.compile_scalar`."""

    def resolve(node: ast.Node) -> Getter:
        kind, i, count = reference(node)
        if kind == "row":
            return lambda env: env.row[i]
        if kind == "v":
            return lambda env: env.v[i]
        if kind == "sum":
            return lambda env: env.v[i] if env.v[count] else math.nan
        return lambda env: env.v[i] / env.v[count] if env.v[count] else math.nan

    return resolve


class NotNumeric(Exception):
    """A conjunct the postfix programs cannot express."""


def compile_program(expr: ast.Node, reference: Callable[[ast.Node], Reference]) -> Program:
    """``expr`` as a postfix program; raises :class:`NotNumeric` if it needs more."""
    out: list[Instruction] = []

    def emit(node: ast.Node) -> None:
        if isinstance(node, ast.Literal):
            value = literal_value(node)
            if isinstance(value, str):
                out.append((TEXT, 0, 0, value))
            elif isinstance(value, bool) or not isinstance(value, int | float):
                raise NotNumeric(str(value))
            else:
                out.append((CONST, 0, 0, float(value)))
        elif isinstance(node, ast.Unary):
            emit(node.operand)
            out.append((NOT if node.op == "not" else NEG, 0, 0, 0.0))
        elif isinstance(node, ast.Binary):
            emit(node.left)
            emit(node.right)
            out.append((_BINARY[node.op], 0, 0, 0.0))
        else:
            kind, first, second = reference(node)
            out.append((_REFERENCES[kind], first, second, 0.0))

    emit(expr)
    return tuple(out)
