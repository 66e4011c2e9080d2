"""The SASE+ pattern language (Agrawal et al., SIGMOD 2008, §2 and Figure 1).

Accepted verbatim, as printed in Figure 1::

    PATTERN SEQ(Stock+ a[ ], Stock b)
    WHERE skip_till_next_match(a[ ], b) {
        [symbol]
        and a[1].volume > 1000
        and a[i].price > avg(a[..i-1].price)
        and b.volume < 80%*a[a.LEN].volume }
    WITHIN 1 hour

Components are ``Type v``, ``Type+ v[ ]`` (Kleene plus) and ``~(Type v)`` / ``∼(Type v)``
(negation). Kleene references are ``v[1]``, ``v[k]`` (k-th selected event), ``v[i]`` (the event
being selected), ``v[i-1]`` (the previous one), ``v[..i-1]`` (all previous ones, inside
``avg/max/min/sum/count``), ``v[v.LEN]`` (the last one), ``v[ ]`` (all, inside an aggregate) and
``v.LEN`` (the length). ``[attr]`` is the equivalence test. The selection strategy is one of
``strict_contiguity``, ``partition_contiguity``, ``skip_till_next_match`` and
``skip_till_any_match``; without one, ``skip_till_any_match`` applies (every subsequence that
satisfies the predicates matches, the plain definition). The strategy's variable list may leave
out negated components (they select no event), and its predicate block ``{ ... }`` may be left
out when there are no predicates. ``/* ... */`` comments are allowed, as in Query 1.

Extensions (SEMANTICS.md): ``PARTITION BY attr, ...`` (the same as ``[attr]`` for each
attribute, and the partitioning of the stream), ``CONSUME`` (the paper's non-overlap output
format: after a match in a partition, every other run of that partition is dropped) and
``RETURN expr [AS name], ...`` for the result ``values``.

:func:`parse` builds a :class:`SaseQuery`, :meth:`SaseQuery.to_text` prints the canonical text
and :func:`situflow.lang.validate_sase.validate` applies the rules of SEMANTICS.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Any, ClassVar

from situflow.lang import ast
from situflow.lang.attributes import AttributeTypes, Uses
from situflow.lang.clauses import Equivalence, KleeneLength, ReturnItem
from situflow.lang.parser import Parser
from situflow.lang.printer import expr_text, name_text
from situflow.lang.tokens import T


class Strategy(Enum):
    """Event selection strategies (§2); values are the function names of the language."""

    STRICT = "strict_contiguity"
    PARTITION = "partition_contiguity"
    NEXT = "skip_till_next_match"
    ANY = "skip_till_any_match"


DEFAULT_STRATEGY = Strategy.ANY
AGGREGATES = frozenset(ast.AGGREGATES)


class Index(Enum):
    """How a Kleene reference picks events of ``v[ ]``."""

    CONST = "k"  # v[k]: the k-th selected event (k >= 1)
    CURRENT = "i"  # v[i]: the event being selected (i > 1)
    PREVIOUS = "i-1"  # v[i-1]: the event selected before it
    PREFIX = "..i-1"  # v[..i-1]: every event selected before it (aggregates only)
    LAST = "v.LEN"  # v[v.LEN]: the last selected event
    ALL = ""  # v[ ]: every selected event (aggregates only)


# --- AST nodes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Component(ast.Node):
    """One element of ``SEQ(...)``: ``Type v``, ``Type+ v[ ]`` or ``~(Type v)``."""

    type_name: str
    var: str
    kleene: bool = False
    negated: bool = False

    def to_text(self) -> str:
        type_name, var = name_text(self.type_name), name_text(self.var)
        inner = f"{type_name}+ {var}[]" if self.kleene else f"{type_name} {var}"
        return f"~({inner})" if self.negated else inner


@dataclass(frozen=True)
class StrategyVar(ast.Node):
    """A variable listed in the strategy function, ``a`` or ``a[ ]``."""

    var: str
    brackets: bool = False


@dataclass(frozen=True)
class KleeneRef(ast.Node):
    """``v[index].attr``; ``attr`` is None only for ``count(v[ ])``-style whole references."""

    var: str
    index: Index
    attr: str | None
    k: int = 0  # the constant of Index.CONST

    def to_text(self) -> str:
        var = name_text(self.var)
        inner = {
            Index.CONST: str(self.k),
            Index.CURRENT: "i",
            Index.PREVIOUS: "i-1",
            Index.PREFIX: "..i-1",
            Index.LAST: f"{var}.LEN",
            Index.ALL: "",
        }[self.index]
        return f"{var}[{inner}]" + (f".{name_text(self.attr)}" if self.attr is not None else "")


@dataclass(frozen=True)
class SaseQuery(ast.Node):
    components: tuple[Component, ...]
    strategy: Strategy | None = None
    strategy_vars: tuple[StrategyVar, ...] = ()
    where: ast.Node | None = None
    within: ast.Duration | None = None
    partition_by: tuple[str, ...] = ()
    consume: bool = False
    returns: tuple[ReturnItem, ...] = ()

    @property
    def effective_strategy(self) -> Strategy:
        return self.strategy or DEFAULT_STRATEGY

    @property
    def positives(self) -> tuple[Component, ...]:
        return tuple(c for c in self.components if not c.negated)

    def component(self, var: str) -> Component | None:
        return next((c for c in self.components if c.var == var), None)

    def conjuncts(self) -> tuple[ast.Node, ...]:
        """The top-level conjuncts of the WHERE body (the CNF clauses of §3.2, Step 2)."""
        return ast.conjuncts(self.where) if self.where is not None else ()

    def partition_attrs(self) -> tuple[str, ...]:
        """Attributes that partition the stream: ``[attr]`` tests, then ``PARTITION BY``."""
        attrs = [a for c in self.conjuncts() if isinstance(c, Equivalence) for a in c.attrs]
        attrs += list(self.partition_by)
        return tuple(dict.fromkeys(attrs))

    def to_text(self) -> str:
        """The canonical text: one line, keywords upper case, the strategy always spelled out."""
        parts = ["PATTERN SEQ(" + ", ".join(c.to_text() for c in self.components) + ")"]
        listed = ", ".join(name_text(c.var) + ("[]" if c.kleene else "") for c in self.components)
        body = " AND ".join(expr_text(c) for c in self.conjuncts())
        parts.append(f"WHERE {self.effective_strategy.value}({listed}) {{ {body} }}".replace(
            "{  }", "{ }"))
        if self.within is not None:
            parts.append(f"WITHIN {expr_text(self.within)}")
        if self.partition_by:
            parts.append("PARTITION BY " + ", ".join(map(name_text, self.partition_by)))
        if self.consume:
            parts.append("CONSUME")
        if self.returns:
            parts.append("RETURN " + ", ".join(r.to_text() for r in self.returns))
        return " ".join(parts)


# --- parser ------------------------------------------------------------------------------------

class SaseParser(Parser):
    """``PATTERN`` statement parser: one method per clause."""

    # The clauses that may follow WHERE, in any order and each at most once, by their first
    # word; each parser starts after that word.
    CLAUSE_PARSERS: ClassVar[Mapping[str, Callable[[SaseParser], Any]]] = MappingProxyType({
        "WITHIN": lambda self: self.parse_duration(),
        "PARTITION": lambda self: self._parse_partition_by(
            lambda: self.expect_ident("an attribute to partition by").text),
        "CONSUME": lambda self: True,
        "RETURN": lambda self: self._parse_return_items(),
    })
    # Clause words end an expression instead of naming an attribute.
    RESERVED = Parser.RESERVED | frozenset(CLAUSE_PARSERS)

    def __init__(self, text: str):
        super().__init__(text)
        # Kleene variables seen in the PATTERN clause: ``v.LEN`` means the length only for them.
        self.kleene_vars: set[str] = set()

    def parse(self) -> SaseQuery:
        first = self.curr
        self.expect_kw("PATTERN")
        components = self._parse_pattern()
        strategy: Strategy | None = None
        strategy_vars: tuple[StrategyVar, ...] = ()
        where: ast.Node | None = None
        if self.match_kw("WHERE"):
            strategy, strategy_vars, where = self._parse_where()
        clauses: dict[str, Any] = {}
        while not self.at(T.EOF) and not self.at(T.SEMI):
            word = self.curr
            clause = word.upper if word.type is T.IDENT else ""
            if clause in clauses:
                self.raise_error(f"{clause} is given twice")
            if clause not in self.CLAUSE_PARSERS:
                self.raise_error(
                    f"expected WITHIN, PARTITION BY, CONSUME or RETURN, found {word.describe()}"
                )
            self.advance()
            clauses[clause] = self.CLAUSE_PARSERS[clause](self)
        self.expect_end()
        return self.node(
            SaseQuery, first, components, strategy, strategy_vars, where,
            clauses.get("WITHIN"), clauses.get("PARTITION", ()), clauses.get("CONSUME", False),
            clauses.get("RETURN", ()),
        )

    def _parse_pattern(self) -> tuple[Component, ...]:
        self.expect_kw("SEQ")
        self.expect(T.LPAREN, "'(' after SEQ")
        components = self._parse_csv(self._parse_component)
        self.expect(T.RPAREN, "',' or ')' in SEQ(...)")
        return components

    def _parse_component(self) -> Component:
        first = self.curr
        if self.match(T.TILDE):
            self.expect(T.LPAREN, "'(' after '~'")
            inner = self._parse_positive_component()
            self.expect(T.RPAREN, "')' to close the negation")
            return self.node(Component, first, inner.type_name, inner.var, inner.kleene, True)
        return self._parse_positive_component()

    def _parse_positive_component(self) -> Component:
        first = self.curr
        type_name = self.expect_ident("an event type, as in 'Stock a'").text
        kleene = self.match(T.PLUS) is not None
        var = self.expect_ident(f"a variable name after '{type_name}'").text
        if kleene:
            self.expect(T.LBRACKET, f"'[ ]' after the Kleene variable '{var}'")
            self.expect(T.RBRACKET, f"']' after '{var}['")
            self.kleene_vars.add(var)
        elif self.at(T.LBRACKET):
            self.raise_error(f"'{var}[ ]' declares a Kleene variable: write '{type_name}+ {var}[ ]'")
        return self.node(Component, first, type_name, var, kleene, False)

    def _parse_where(self) -> tuple[Strategy | None, tuple[StrategyVar, ...], ast.Node | None]:
        names = {s.value: s for s in Strategy}
        # A call that is no aggregate opens the strategy function.
        if self.curr.type is T.IDENT and self.peek().type is T.LPAREN and (
            self.curr.text.lower() not in AGGREGATES
        ):
            word = self.advance()
            strategy = names.get(word.text.lower())
            if strategy is None:
                self.raise_error(
                    f"unknown selection strategy '{word.text}'; use one of "
                    + ", ".join(names), word,
                )
            self.expect(T.LPAREN)
            variables = self._parse_csv(self._parse_strategy_var)
            self.expect(T.RPAREN, "',' or ')' after the strategy's variables")
            if self._at_clause_end():
                return strategy, variables, None  # no predicates, no '{ }' (§2)
            self.expect(T.LBRACE, "'{' to open the predicates of the strategy")
            where = None if self.at(T.RBRACE) else self.parse_expression()
            self.expect(T.RBRACE, "'}' to close the predicates, or AND before the next one")
            return strategy, variables, where
        return None, (), self.parse_expression()

    def _at_clause_end(self) -> bool:
        """Whether the WHERE clause ends here: the next clause or the end of the query."""
        return self.at(T.EOF) or self.at(T.SEMI) or (
            self.curr.type is T.IDENT and self.curr.upper in self.CLAUSE_PARSERS)

    def _parse_strategy_var(self) -> StrategyVar:
        first = self.expect_ident("a pattern variable")
        brackets = False
        if self.match(T.LBRACKET):
            self.expect(T.RBRACKET, "']'")
            brackets = True
        return self.node(StrategyVar, first, first.text, brackets)

    # --- SASE+ references ---------------------------------------------------------------------

    def _parse_primary(self) -> ast.Expr:
        if self.at(T.LBRACKET):
            return self._parse_equivalence("an attribute in the equivalence test, as in [symbol]",
                                           "']' to close the equivalence test")
        return super()._parse_primary()

    def _parse_reference(self) -> ast.Expr:
        first = self.expect_ident("a reference such as a.price")
        var = first.text
        if self.match(T.LBRACKET):
            index, k = self._parse_index(var)
            attr: str | None = None
            if self.match(T.DOT):
                attr = self.expect_ident(f"an attribute name after '{var}[...].'").text
            return self.node(KleeneRef, first, var, index, attr, k)
        if self.match(T.DOT):
            attr_token = self.expect_ident(f"an attribute name after '{var}.'")
            if self.at(T.DOT):
                self.raise_error("a reference has at most two parts, as in 'b.price'")
            if attr_token.upper == "LEN" and var in self.kleene_vars:
                return self.node(KleeneLength, first, var, dotted=True)
            return self.node(ast.Ref, first, var, attr_token.text)
        return self.node(ast.Ref, first, None, var)

    def _parse_index(self, var: str) -> tuple[Index, int]:
        hint = f"an index of {var}[ ]: 1, i, i-1, ..i-1 or {var}.LEN"
        if self.match(T.RBRACKET):
            return Index.ALL, 0
        if self.match(T.DOTDOT):
            self._expect_i(hint)
            self._expect_minus_one(hint)
            self.expect(T.RBRACKET, "']'")
            return Index.PREFIX, 0
        token = self.curr
        if token.type is T.NUMBER:
            self.advance()
            k = self._number_value(token)
            if not token.text.isdigit() or k < 1:
                self.raise_error("a constant index counts from 1, as in a[1]", token)
            self.expect(T.RBRACKET, "']'")
            return Index.CONST, int(k)
        if token.type is T.IDENT and token.text == var and self.peek().type is T.DOT:
            self.advance()
            self.advance()
            length = self.expect_ident(hint)
            if length.upper != "LEN":
                self.raise_error(f"expected {var}.LEN, found {length.describe()}", length)
            self.expect(T.RBRACKET, "']'")
            return Index.LAST, 0
        self._expect_i(hint)
        if self.at(T.MINUS):
            self._expect_minus_one(hint)
            self.expect(T.RBRACKET, "']'")
            return Index.PREVIOUS, 0
        self.expect(T.RBRACKET, "']' after the index")
        return Index.CURRENT, 0

    def _expect_i(self, hint: str) -> None:
        if not (self.curr.type is T.IDENT and self.curr.text.lower() == "i"):
            self.raise_error(f"expected {hint}, found {self.curr.describe()}")
        self.advance()

    def _expect_minus_one(self, hint: str) -> None:
        self.expect(T.MINUS, hint)
        one = self.expect(T.NUMBER, hint)
        if one.text != "1":
            self.raise_error("only i-1 may be written: older events are reached with ..i-1", one)


def parse(text: str) -> SaseQuery:
    """Parse one SASE+ query; raises ``ParseError``/``TokenError`` located at line:col."""
    return SaseParser(text).parse()


# --- identifier stages -----------------------------------------------------------------------

# Where an identifier is instantiated (§3.2, Step 2), within its component: at the begin edge
# (``v``, ``v[1]``), at the take edge of ``v[i]`` (``v[i]``, ``v[i-1]``, ``v[..i-1]``, ``v[k]``
# for k > 1) or when the iteration ends, on the proceed edge (``v.LEN``, ``v[v.LEN]``, ``v[ ]``).
BEGIN, TAKE, PROCEED = 0, 1, 2

ITERATION_INDEXES = frozenset({Index.CURRENT, Index.PREVIOUS, Index.PREFIX})


def identifier_stage(node: ast.Node) -> tuple[str, int] | None:
    """(variable, stage) of a reference node, or None for other nodes."""
    if isinstance(node, ast.Ref) and node.qualifier is not None:
        return node.qualifier, BEGIN
    if isinstance(node, KleeneLength):
        return node.var, PROCEED
    if isinstance(node, KleeneRef):
        if node.index is Index.CONST:
            return node.var, BEGIN if node.k == 1 else TAKE
        if node.index in ITERATION_INDEXES:
            return node.var, TAKE
        return node.var, PROCEED
    return None


def references(expr: ast.Node) -> Iterator[ast.Node]:
    """Reference nodes of an expression (Ref, KleeneRef, KleeneLength)."""
    for node in expr.walk():
        if isinstance(node, ast.Ref | KleeneRef | KleeneLength):
            yield node


def attribute_types(query: SaseQuery) -> AttributeTypes:
    """What ``query`` requires of its events' attributes (:mod:`situflow.lang.attributes`)."""
    uses = Uses(lambda node: node.name if isinstance(node, ast.Ref)
                else node.attr if isinstance(node, KleeneRef) else None)
    for conjunct in query.conjuncts():
        uses.visit(conjunct)
    for item in query.returns:
        uses.visit(item.expr)
    return uses.types(query.partition_attrs())
