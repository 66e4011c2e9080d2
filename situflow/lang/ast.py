"""AST nodes shared by the three languages: expressions, durations and the node machinery.

Every node is a frozen dataclass that carries a :class:`Span` (excluded from equality, so two
parses of the same query compare equal whatever their whitespace), declares its children as
fields, and prints back to canonical text through :mod:`situflow.lang.printer`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, fields

from situflow.lang.tokens import Token


@dataclass(frozen=True, slots=True)
class Span:
    line: int
    col: int
    start: int
    end: int

    @classmethod
    def of(cls, first: Token, last: Token | None = None) -> Span:
        last = last or first
        return cls(first.line, first.col, first.start, max(last.end, first.end))


NOWHERE = Span(1, 1, 0, 0)


@dataclass(frozen=True)
class Node:
    span: Span = field(default=NOWHERE, compare=False, repr=False, kw_only=True)

    def children(self) -> Iterator[Node]:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Node):
                yield value
            elif isinstance(value, tuple):
                yield from (v for v in value if isinstance(v, Node))

    def walk(self) -> Iterator[Node]:
        """This node and all its descendants, depth first, parents before children."""
        yield self
        for child in self.children():
            yield from child.walk()


# --- expressions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Literal(Node):
    """A constant; ``unit`` keeps a physical unit such as ``m/s2`` or ``mph`` (it is ignored)."""

    value: float | int | str | bool
    unit: str | None = None


@dataclass(frozen=True)
class Ref(Node):
    """An attribute reference: ``speed``, ``CS.speed`` (stream alias) or ``B.speed`` (variable)."""

    qualifier: str | None
    name: str

    @property
    def dotted(self) -> str:
        return f"{self.qualifier}.{self.name}" if self.qualifier else self.name


@dataclass(frozen=True)
class Unary(Node):
    op: str  # "-" or "not"
    operand: Expr


@dataclass(frozen=True)
class Binary(Node):
    op: str  # + - * / and or < > <= >= = !=
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Call(Node):
    """A function call, in practice an aggregate: ``avg(B.speed)``, ``count(*)``."""

    name: str  # lower case
    args: tuple[Expr, ...] = ()
    star: bool = False


Expr = Literal | Ref | Unary | Binary | Call | Node

def conjuncts(expr: Node) -> tuple[Node, ...]:
    """``a AND b AND c`` as its conjuncts ``(a, b, c)``: the expression grammar nests them."""
    if isinstance(expr, Binary) and expr.op == "and":
        return conjuncts(expr.left) + conjuncts(expr.right)
    return (expr,)


# The aggregate functions all three languages know, in the order messages list them.
AGGREGATES = ("min", "max", "sum", "count", "avg")

ARITHMETIC = frozenset({"+", "-", "*", "/", "%"})
COMPARISONS = frozenset({"<", ">", "<=", ">=", "=", "!="})
LOGICAL = frozenset({"and", "or"})


@dataclass(frozen=True)
class Duration(Node):
    """A length of time as written (``5s``, ``5 minutes``); ``seconds`` is its value in seconds."""

    value: float
    unit: str

    @property
    def seconds(self) -> float:
        return self.value * TIME_UNITS[self.unit.lower()]


TIME_UNITS: dict[str, float] = {
    "ms": 0.001, "millisecond": 0.001, "milliseconds": 0.001,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
}
