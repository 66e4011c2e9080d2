"""What a query requires of its events' attributes: the query half of the typing rule
(SEMANTICS.md, "Event time and types"; the event half is :mod:`situflow.event_types`).

An attribute is *numeric* when the query uses it with numbers: an operand of arithmetic or of a
unary minus, the argument of ``sum avg min max``, a side of a comparison whose other side is a
number (a number literal, arithmetic, a numeric aggregate), or a side of an ordering comparison
(``< <= > >=``) whose other side is not text. An attribute compared with ``=``/``!=`` to text or
to another attribute takes any value. *Keys* are the attributes that split the stream; every
attribute the query reads is *used*.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from situflow.lang import ast

NUMERIC_AGGREGATES = frozenset({"sum", "avg", "min", "max"})
_ORDERING = frozenset({"<", "<=", ">", ">="})
#: Names the attribute a reference node reads, or None for nodes that read none.
AttributeOf = Callable[[ast.Node], "str | None"]


@dataclass(frozen=True)
class AttributeTypes:
    """What a query requires of its events' attributes (module doc)."""

    numeric: frozenset[str] = frozenset()
    keys: tuple[str, ...] = ()
    used: frozenset[str] = frozenset()

    def without(self, hidden: Iterable[str]) -> AttributeTypes:
        """These requirements minus fields that are no attributes (event time, type, id)."""
        hidden = set(hidden)
        return AttributeTypes(self.numeric - hidden,
                              tuple(k for k in self.keys if k not in hidden), self.used - hidden)


class Uses:
    """Collects the attribute uses of expressions, for one language's references."""

    def __init__(self, attribute: AttributeOf):
        self.attribute = attribute
        self.numeric: set[str] = set()
        self.used: set[str] = set()

    def visit(self, expr: ast.Node) -> None:
        for node in expr.walk():
            name = self.attribute(node)
            if name is not None:
                self.used.add(name)
            if isinstance(node, ast.Unary) and node.op == "-":
                self.number(node.operand)
            elif isinstance(node, ast.Binary) and node.op in ast.ARITHMETIC:
                self.number(node.left)
                self.number(node.right)
            elif isinstance(node, ast.Binary) and node.op in ast.COMPARISONS:
                self._comparison(node)
            elif isinstance(node, ast.Call) and node.name in NUMERIC_AGGREGATES:
                for arg in node.args:
                    self.number(arg)

    def number(self, node: ast.Node) -> None:
        """``node`` is used as a number: if it reads an attribute, that attribute is numeric."""
        name = self.attribute(node)
        if name is not None:
            self.numeric.add(name)

    def types(self, keys: Iterable[str] = ()) -> AttributeTypes:
        keys = tuple(dict.fromkeys(keys))
        return AttributeTypes(frozenset(self.numeric), keys, frozenset(self.used | set(keys)))

    def _comparison(self, node: ast.Binary) -> None:
        left, right = _kind(node.left), _kind(node.right)
        if node.op in _ORDERING:
            if right != "text":
                self.number(node.left)
            if left != "text":
                self.number(node.right)
        else:
            if right == "number":
                self.number(node.left)
            if left == "number":
                self.number(node.right)


def _kind(node: ast.Node) -> str:
    """'number', 'text', 'boolean' where the expression's type is plain, else 'any'."""
    if isinstance(node, ast.Literal):
        if isinstance(node.value, bool):
            return "boolean"
        return "text" if isinstance(node.value, str) else "number"
    if isinstance(node, ast.Unary):
        return "boolean" if node.op == "not" else "number"
    if isinstance(node, ast.Binary):
        return "number" if node.op in ast.ARITHMETIC else "boolean"
    if isinstance(node, ast.Call) and (node.name in NUMERIC_AGGREGATES or node.name == "count"):
        return "number"
    return "any"
