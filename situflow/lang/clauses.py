"""Nodes the three languages share beyond expressions: RETURN items, equivalence tests and the
length of a Kleene variable. Their grammar is written once too, in
:class:`situflow.lang.parser.Parser`, except the two spellings of a Kleene length."""

from __future__ import annotations

from dataclasses import dataclass, field

from situflow.lang import ast
from situflow.lang.printer import expr_text, name_text


@dataclass(frozen=True)
class ReturnItem(ast.Node):
    """One RETURN value, ``expr [AS alias]`` (TPStream, SASE+)."""

    expr: ast.Expr
    alias: str | None = None

    @property
    def name(self) -> str:
        """The key of the value in a result: its alias, else its canonical text."""
        return self.alias if self.alias is not None else expr_text(self.expr)

    def to_text(self) -> str:
        alias = f" AS {name_text(self.alias)}" if self.alias is not None else ""
        return expr_text(self.expr) + alias


@dataclass(frozen=True)
class Equivalence(ast.Node):
    """``[a, b]``: every event of a match or trend has the same values of these attributes
    (SASE+ §2, COGRA footnote 1)."""

    attrs: tuple[str, ...]

    def to_text(self) -> str:
        return "[" + ", ".join(map(name_text, self.attrs)) + "]"


@dataclass(frozen=True)
class KleeneLength(ast.Node):
    """How many events the Kleene variable ``var`` binds: SASE+'s ``v.LEN`` (§2) and COGRA's
    ``LENGTH(A)`` (Appendix C, minimal trend length)."""

    var: str
    # Printed SASE+'s way, ``v.LEN``, rather than ``LENGTH(v)``; the spelling is not the value.
    dotted: bool = field(default=False, compare=False)

    def to_text(self) -> str:
        name = name_text(self.var)
        return f"{name}.LEN" if self.dotted else f"LENGTH({name})"
