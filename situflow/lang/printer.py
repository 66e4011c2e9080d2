"""Canonical text of expressions: the same tree always prints the same way.

Queries print through their language module; the canonical text is what a query id hashes, so
whitespace and keyword case never change the id.
"""

from __future__ import annotations

from situflow.lang import ast

# Binding strength: parentheses are printed only where the tree needs them.
_PRECEDENCE = {"or": 1, "and": 2, "not": 3, "<": 4, ">": 4, "<=": 4, ">=": 4, "=": 4, "!=": 4,
               "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}


def expr_text(node: ast.Node) -> str:
    """Print an expression node canonically (keywords upper case, single spaces)."""
    if isinstance(node, ast.Literal):
        return literal_text(node)
    if isinstance(node, ast.Ref):
        return node.dotted
    if isinstance(node, ast.Call):
        inner = "*" if node.star else ", ".join(expr_text(a) for a in node.args)
        return f"{node.name}({inner})"
    if isinstance(node, ast.Unary):
        operand = _wrapped(node.operand, 7 if node.op == "-" else _PRECEDENCE["not"], False)
        return f"NOT {operand}" if node.op == "not" else f"-{operand}"
    if isinstance(node, ast.Binary):
        prec = _PRECEDENCE[node.op]
        op = node.op.upper() if node.op in ("and", "or") else node.op
        return f"{_wrapped(node.left, prec, False)} {op} {_wrapped(node.right, prec, True)}"
    if isinstance(node, ast.Duration):
        return duration_text(node.seconds)
    printer = getattr(node, "to_text", None)
    if printer is None:
        raise TypeError(f"no printer for {type(node).__name__}")
    return str(printer())


def duration_text(seconds: float) -> str:
    """A duration in the largest unit that keeps it whole: ``300 s`` prints as ``5 minutes``."""
    for unit, size in (("hours", 3600), ("minutes", 60), ("seconds", 1)):
        if seconds >= size and float(seconds / size).is_integer():
            count = int(seconds // size)
            return f"{count} {unit if count != 1 else unit[:-1]}"
    return f"{_number(seconds * 1000)} ms"


def literal_text(node: ast.Literal) -> str:
    value = node.value
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value + "'"
    # Units stay attached (``8m/s2``, ``70mph``), which the tokenizer reads back as units.
    return f"{_number(value)}{node.unit or ''}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _wrapped(node: ast.Node, parent: int, right: bool) -> str:
    text = expr_text(node)
    if isinstance(node, ast.Binary):
        mine = _PRECEDENCE[node.op]
        # Left-associative operators need parentheses on the right at equal strength.
        if mine < parent or (right and mine == parent):
            return f"({text})"
    return text
