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
        return ".".join(name_text(n) for n in (node.qualifier, node.name) if n is not None)
    if isinstance(node, ast.Call):
        inner = "*" if node.star else ", ".join(expr_text(a) for a in node.args)
        return f"{node.name}({inner})"
    if isinstance(node, ast.Unary):
        operand = _wrapped(node.operand, 7 if node.op == "-" else _PRECEDENCE["not"], False)
        if node.op == "not":
            return f"NOT {operand}"
        # `--` would start a comment: a negated negative operand keeps its parentheses.
        return f"-({operand})" if operand.startswith("-") else f"-{operand}"
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
    # Rounded: `9 ms` is 0.009 s, which times 1000 is 9.000000000000002.
    return f"{_number(round(seconds * 1000, 9))} ms"


def literal_text(node: ast.Literal) -> str:
    value = node.value
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        # A string has no escapes: one written in double quotes may hold single ones.
        quote = '"' if "'" in value else "'"
        return quote + value + quote
    # Units stay attached (``8m/s2``, ``70mph``), which the tokenizer reads back as units.
    return f"{_number(value)}{node.unit or ''}"


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    # Whole floats print as integers, up to where floats stop being exact integers.
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def name_text(name: str) -> str:
    """An identifier as the tokenizer reads it back: backquoted unless it is a plain word."""
    plain = name[:1].isalpha() or name[:1] == "_"
    if plain and all(c.isalnum() or c == "_" for c in name):
        return name
    return f"`{name}`"


def _wrapped(node: ast.Node, parent: int, right: bool) -> str:
    text = expr_text(node)
    if isinstance(node, ast.Binary) or (isinstance(node, ast.Unary) and node.op == "not"):
        mine = _PRECEDENCE[node.op]
        # Left-associative operators need parentheses on the right at equal strength, and
        # comparisons do not chain at all (`(a < b) = c`).
        if mine < parent or (mine == parent and (right or node.op in ast.COMPARISONS)):
            return f"({text})"
    return text
