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

:func:`parse` builds a :class:`SaseQuery`, :func:`validate` applies the rules of SEMANTICS.md
(variables bound once, Kleene references only on Kleene variables, a window for leading and
trailing negation, the type field invisible) and :func:`canonical` prints the canonical text.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

from situflow.lang import ast
from situflow.lang.attributes import AttributeTypes, Uses
from situflow.lang.parser import Parser
from situflow.lang.printer import expr_text, name_text
from situflow.lang.tokens import T
from situflow.lang.validate import Type, check_condition, error, infer


class Strategy(Enum):
    """Event selection strategies (§2); values are the function names of the language."""

    STRICT = "strict_contiguity"
    PARTITION = "partition_contiguity"
    NEXT = "skip_till_next_match"
    ANY = "skip_till_any_match"


DEFAULT_STRATEGY = Strategy.ANY
AGGREGATES = frozenset({"avg", "max", "min", "sum", "count"})
# The clauses that may follow WHERE.
_CLAUSES = frozenset({"WITHIN", "PARTITION", "CONSUME", "RETURN"})


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
class Equivalence(ast.Node):
    """``[attr]``: every event of the match has the same ``attr`` (§2)."""

    attr: str

    def to_text(self) -> str:
        return f"[{name_text(self.attr)}]"


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
class Length(ast.Node):
    """``v.LEN``: the number of events selected by the Kleene variable ``v``."""

    var: str

    def to_text(self) -> str:
        return f"{name_text(self.var)}.LEN"


@dataclass(frozen=True)
class ReturnItem(ast.Node):
    expr: ast.Node
    alias: str | None = None

    @property
    def name(self) -> str:
        return self.alias if self.alias is not None else expr_text(self.expr)


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
        return tuple(split_conjuncts(self.where)) if self.where is not None else ()

    def partition_attrs(self) -> tuple[str, ...]:
        """Attributes that partition the stream: ``[attr]`` tests, then ``PARTITION BY``."""
        attrs = [c.attr for c in self.conjuncts() if isinstance(c, Equivalence)]
        attrs += list(self.partition_by)
        return tuple(dict.fromkeys(attrs))


def split_conjuncts(expr: ast.Node) -> Iterator[ast.Node]:
    if isinstance(expr, ast.Binary) and expr.op == "and":
        yield from split_conjuncts(expr.left)
        yield from split_conjuncts(expr.right)
    else:
        yield expr


# --- parser ------------------------------------------------------------------------------------

class SaseParser(Parser):
    """``PATTERN`` statement parser: one method per clause."""

    def __init__(self, text: str):
        super().__init__(text)
        # Kleene variables seen in the PATTERN clause: ``v.LEN`` means the length only for them.
        self.kleene_vars: set[str] = set()

    def parse_query(self) -> SaseQuery:
        first = self.curr
        self.expect_kw("PATTERN")
        components = self._parse_pattern()
        strategy: Strategy | None = None
        strategy_vars: tuple[StrategyVar, ...] = ()
        where: ast.Node | None = None
        if self.match_kw("WHERE"):
            strategy, strategy_vars, where = self._parse_where()
        within: ast.Duration | None = None
        partition_by: tuple[str, ...] = ()
        consume = False
        returns: tuple[ReturnItem, ...] = ()
        seen: set[str] = set()
        while not self.at(T.EOF) and not self.at(T.SEMI):
            word = self.curr
            clause = word.upper if word.type is T.IDENT else ""
            if clause in seen:
                self.raise_error(f"{clause} is given twice")
            if clause == "WITHIN":
                self.advance()
                within = self.parse_duration()
            elif clause == "PARTITION":
                self.advance()
                self.expect_kw("BY")
                partition_by = self._parse_partition_by()
            elif clause == "CONSUME":
                self.advance()
                consume = True
            elif clause == "RETURN":
                self.advance()
                returns = self._parse_return()
            else:
                self.raise_error(
                    f"expected WITHIN, PARTITION BY, CONSUME or RETURN, found {word.describe()}"
                )
            seen.add(clause)
        self.expect_end()
        return self.node(
            SaseQuery, first, tuple(components), strategy, strategy_vars, where, within,
            partition_by, consume, returns,
        )

    def _parse_pattern(self) -> list[Component]:
        self.expect_kw("SEQ")
        self.expect(T.LPAREN, "'(' after SEQ")
        components = [self._parse_component()]
        while self.match(T.COMMA):
            components.append(self._parse_component())
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
            variables = [self._parse_strategy_var()]
            while self.match(T.COMMA):
                variables.append(self._parse_strategy_var())
            self.expect(T.RPAREN, "',' or ')' after the strategy's variables")
            if self._at_clause_end():
                return strategy, tuple(variables), None  # no predicates, no '{ }' (§2)
            self.expect(T.LBRACE, "'{' to open the predicates of the strategy")
            where = None if self.at(T.RBRACE) else self.parse_expression()
            self.expect(T.RBRACE, "'}' to close the predicates, or AND before the next one")
            return strategy, tuple(variables), where
        return None, (), self.parse_expression()

    def _at_clause_end(self) -> bool:
        """Whether the WHERE clause ends here: the next clause or the end of the query."""
        return self.at(T.EOF) or self.at(T.SEMI) or (
            self.curr.type is T.IDENT and self.curr.upper in _CLAUSES)

    def _parse_strategy_var(self) -> StrategyVar:
        first = self.expect_ident("a pattern variable")
        brackets = False
        if self.match(T.LBRACKET):
            self.expect(T.RBRACKET, "']'")
            brackets = True
        return self.node(StrategyVar, first, first.text, brackets)

    def _parse_partition_by(self) -> tuple[str, ...]:
        attrs = [self.expect_ident("an attribute to partition by").text]
        while self.match(T.COMMA):
            attrs.append(self.expect_ident("an attribute to partition by").text)
        return tuple(attrs)

    def _parse_return(self) -> tuple[ReturnItem, ...]:
        items = [self._parse_return_item()]
        while self.match(T.COMMA):
            items.append(self._parse_return_item())
        return tuple(items)

    def _parse_return_item(self) -> ReturnItem:
        first = self.curr
        expr = self.parse_expression()
        alias = self.expect_ident("a name after AS").text if self.match_kw("AS") else None
        return self.node(ReturnItem, first, expr, alias)

    # --- SASE+ references ---------------------------------------------------------------------

    def _parse_primary(self) -> ast.Expr:
        first = self.curr
        if self.match(T.LBRACKET):
            attr = self.expect_ident("an attribute in the equivalence test, as in [symbol]")
            self.expect(T.RBRACKET, "']' to close the equivalence test")
            return self.node(Equivalence, first, attr.text)
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
                return self.node(Length, first, var)
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
    return SaseParser(text).parse_query()


# --- canonical text ----------------------------------------------------------------------------


def canonical(query: SaseQuery) -> str:
    """The canonical text: one line, keywords upper case, the strategy always spelled out."""
    parts = ["PATTERN SEQ(" + ", ".join(c.to_text() for c in query.components) + ")"]
    listed = ", ".join(name_text(c.var) + ("[]" if c.kleene else "") for c in query.components)
    body = " AND ".join(expr_text(c) for c in query.conjuncts())
    parts.append(f"WHERE {query.effective_strategy.value}({listed}) {{ {body} }}".replace(
        "{  }", "{ }"))
    if query.within is not None:
        parts.append(f"WITHIN {expr_text(query.within)}")
    if query.partition_by:
        parts.append("PARTITION BY " + ", ".join(map(name_text, query.partition_by)))
    if query.consume:
        parts.append("CONSUME")
    if query.returns:
        parts.append("RETURN " + ", ".join(
            expr_text(r.expr) + (f" AS {name_text(r.alias)}" if r.alias is not None else "")
            for r in query.returns
        ))
    return " ".join(parts)


# --- validation --------------------------------------------------------------------------------

# Where an identifier is instantiated (§3.2, Step 2), within its component: at the begin edge
# (``v``, ``v[1]``), at the take edge of ``v[i]`` (``v[i]``, ``v[i-1]``, ``v[..i-1]``, ``v[k]``
# for k > 1) or when the iteration ends, on the proceed edge (``v.LEN``, ``v[v.LEN]``, ``v[ ]``).
BEGIN, TAKE, PROCEED = 0, 1, 2

_ITERATION = frozenset({Index.CURRENT, Index.PREVIOUS, Index.PREFIX})


def identifier_stage(node: ast.Node) -> tuple[str, int] | None:
    """(variable, stage) of a reference node, or None for other nodes."""
    if isinstance(node, ast.Ref) and node.qualifier is not None:
        return node.qualifier, BEGIN
    if isinstance(node, Length):
        return node.var, PROCEED
    if isinstance(node, KleeneRef):
        if node.index is Index.CONST:
            return node.var, BEGIN if node.k == 1 else TAKE
        if node.index in _ITERATION:
            return node.var, TAKE
        return node.var, PROCEED
    return None


def references(expr: ast.Node) -> Iterator[ast.Node]:
    """Reference nodes of an expression (Ref, KleeneRef, Length)."""
    for node in expr.walk():
        if isinstance(node, ast.Ref | KleeneRef | Length):
            yield node


def validate(query: SaseQuery, type_field: str = "type") -> SaseQuery:
    """Check ``query`` against the rules of SEMANTICS.md; raise a located ValidationError."""
    _Validator(query, type_field).run()
    return query


class _Validator:
    def __init__(self, query: SaseQuery, type_field: str):
        self.query = query
        self.type_field = type_field
        self.position = {c.var: k for k, c in enumerate(query.components)}

    def run(self) -> None:
        q = self.query
        self._check_components()
        self._check_strategy_vars()
        for conjunct in q.conjuncts():
            self._check_conjunct(conjunct)
        self._check_negation_window()
        for attr in q.partition_by:
            self._check_attribute(q, attr)
        names: set[str] = set()
        for item in q.returns:
            self._check_expression(item.expr, in_where=False)
            if item.name in names:
                raise error(item, f"two RETURN values are named '{item.name}'; rename one with AS")
            names.add(item.name)

    def _check_components(self) -> None:
        seen: set[str] = set()
        for c in self.query.components:
            if c.var in seen:
                raise error(c, f"variable '{c.var}' is bound twice; each component needs its own "
                               "variable")
            seen.add(c.var)
            if c.negated and c.kleene:
                raise error(c, "a negated component cannot be a Kleene plus; negate one event, "
                               f"as in ~({c.type_name} {c.var})")
        if not self.query.positives:
            raise error(self.query, "a pattern needs at least one component that is not negated")

    def _check_strategy_vars(self) -> None:
        q = self.query
        if q.strategy is None:
            return
        listed: set[str] = set()
        for sv in q.strategy_vars:
            c = q.component(sv.var)
            if c is None:
                raise error(sv, f"'{sv.var}' is not a variable of the pattern")
            if sv.var in listed:
                raise error(sv, f"'{sv.var}' is listed twice")
            if sv.brackets and not c.kleene:
                raise error(sv, f"'{sv.var}' is not a Kleene variable; write it without '[ ]'")
            listed.add(sv.var)
        # Negated components may be left out (the paper lists them in Query 1, but they
        # select no event).
        missing = [c.var for c in q.positives if c.var not in listed]
        if missing:
            raise error(q.strategy_vars[-1], f"{q.effective_strategy.value}(...) must list every "
                                             "pattern variable that is not negated; missing "
                                             f"{', '.join(missing)}")

    def _check_attribute(self, node: ast.Node, attr: str) -> None:
        if attr == self.type_field:
            raise error(node, f"attribute '{attr}' is the event type field and is not visible to "
                              "predicates; rename the attribute or read types from another field "
                              "(--type-field)")

    def _check_conjunct(self, conjunct: ast.Node) -> None:
        q = self.query
        for node in conjunct.walk():
            if isinstance(node, Equivalence) and node is not conjunct:
                raise error(node, f"the equivalence test [{node.attr}] must stand on its own, "
                                  "joined to the other predicates with AND")
        if isinstance(conjunct, Equivalence):
            self._check_attribute(conjunct, conjunct.attr)
            return
        self._check_expression(conjunct, in_where=True)
        refs = list(references(conjunct))
        negated = {r_var for r in refs if (r_var := _var_of(r)) is not None
                   and (c := q.component(r_var)) is not None and c.negated}
        if len(negated) > 1:
            raise error(conjunct, "a predicate may refer to one negated variable only")
        iteration_vars = {r.var for r in refs
                          if isinstance(r, KleeneRef) and r.index in _ITERATION}
        if len(iteration_vars) > 1:
            raise error(conjunct, "a predicate may iterate over one Kleene variable only")
        if iteration_vars:
            (var,) = iteration_vars
            if negated:
                raise error(conjunct, "a predicate on a negated variable cannot use "
                                      f"{var}[i], {var}[i-1] or {var}[..i-1]")
            if not any(isinstance(r, KleeneRef) and r.var == var and r.index is Index.CURRENT
                       for r in refs):
                raise error(conjunct, f"{var}[i-1] and {var}[..i-1] compare earlier events with "
                                      f"{var}[i]; this predicate has no {var}[i]")
            for r in refs:
                r_var = _var_of(r)
                assert r_var is not None
                if self.position[r_var] > self.position[var]:
                    raise error(r, f"a predicate on {var}[i] is checked as each event is "
                                   f"selected, before '{r_var}' is known")
                if r_var == var and isinstance(r, KleeneRef | Length) and not (
                    isinstance(r, KleeneRef) and (r.index in _ITERATION or (
                        r.index is Index.CONST and r.k == 1))
                ):
                    raise error(r, f"a predicate on {var}[i] can use {var}[1], {var}[i-1] and "
                                   f"{var}[..i-1] but not {r.to_text()}")
        typeof = self._typeof
        check_condition(conjunct, typeof)

    def _check_expression(self, expr: ast.Node, in_where: bool) -> None:
        aggregated = {id(a) for n in expr.walk() if isinstance(n, ast.Call) for a in n.args}
        for node in expr.walk():
            if isinstance(node, ast.Call):
                self._check_aggregate(node, in_where)
            elif isinstance(node, ast.Ref | KleeneRef | Length):
                self._check_reference(node, in_where)
                if isinstance(node, KleeneRef) and node.index in (Index.PREFIX, Index.ALL) and (
                    id(node) not in aggregated
                ):
                    raise error(node, f"{node.to_text()} needs an aggregate around it, as in "
                                      f"avg({node.to_text()})")
        infer(expr, self._typeof)

    def _check_aggregate(self, call: ast.Call, in_where: bool) -> None:
        if call.name not in AGGREGATES:
            raise error(call, f"unknown function '{call.name}'; aggregates are "
                              + ", ".join(sorted(AGGREGATES)))
        arg = call.args[0] if len(call.args) == 1 and not call.star else None
        if not (isinstance(arg, KleeneRef) and arg.index in (Index.PREFIX, Index.ALL)
                and arg.attr is not None):
            raise error(call, f"{call.name}(...) takes one attribute of a Kleene variable, as in "
                              f"{call.name}(a[..i-1].price) or {call.name}(a[ ].price)")
        if arg.index is Index.PREFIX and not in_where:
            raise error(arg, "..i-1 refers to the events before a[i]; RETURN can use a[ ]")

    def _check_reference(self, ref: ast.Node, in_where: bool) -> None:
        q = self.query
        var = _var_of(ref)
        if var is None:
            assert isinstance(ref, ast.Ref)
            raise error(ref, f"qualify '{ref.name}' with a pattern variable, as in a.{ref.name}")
        c = q.component(var)
        if c is None:
            raise error(ref, f"'{var}' is not a variable of the pattern")
        if c.negated and not in_where:
            raise error(ref, f"'{var}' is negated: a match has no '{var}' event to return")
        if isinstance(ref, ast.Ref):
            if c.kleene:
                raise error(ref, f"'{var}' is a Kleene variable: say which event, as in "
                                 f"{var}[1].{ref.name}, {var}[i].{ref.name} or "
                                 f"{var}[{var}.LEN].{ref.name}")
            self._check_attribute(ref, ref.name)
            return
        if isinstance(ref, KleeneRef):
            if not c.kleene:
                raise error(ref, f"'{var}' is not a Kleene variable and cannot be indexed; "
                                 f"declare it as {c.type_name}+ {var}[ ] or write {var}.attr")
            if ref.attr is None:
                raise error(ref, f"say which attribute of {ref.to_text()} is meant, as in "
                                 f"{ref.to_text()}.price")
            self._check_attribute(ref, ref.attr)
            if ref.index in _ITERATION and not in_where:
                raise error(ref, f"{var}[i] exists only while events are selected; RETURN can "
                                 f"use {var}[1], {var}[{var}.LEN], {var}[k] or aggregates")

    def _typeof(self, node: ast.Node) -> Type:
        if isinstance(node, Length):
            return Type.NUMBER
        if isinstance(node, ast.Call):
            return Type.NUMBER
        return Type.ANY

    def _check_negation_window(self) -> None:
        q = self.query
        comps = q.components
        for k, c in enumerate(comps):
            if not c.negated:
                continue
            leading = not any(not p.negated for p in comps[:k])
            trailing = not any(not p.negated for p in comps[k + 1:])
            if (leading or trailing) and q.within is None:
                where = "leading" if leading else "trailing"
                raise error(c, f"a {where} negation needs a window: add WITHIN, so that it is "
                               "known how long to look for the negated event")
            if trailing and q.consume:
                raise error(c, "CONSUME cannot be combined with a trailing negation: a match "
                               "waiting for its window would let overlapping matches through")


def _var_of(ref: ast.Node) -> str | None:
    if isinstance(ref, ast.Ref):
        return ref.qualifier
    if isinstance(ref, KleeneRef | Length):
        return ref.var
    return None


def parse_and_validate(text: str, type_field: str = "type") -> SaseQuery:
    """Parse and validate; every error is a located ``QueryError``."""
    return validate(parse(text), type_field)


def attribute_types(query: SaseQuery) -> AttributeTypes:
    """What ``query`` requires of its events' attributes (:mod:`situflow.lang.attributes`)."""
    uses = Uses(lambda node: node.name if isinstance(node, ast.Ref)
                else node.attr if isinstance(node, KleeneRef) else None)
    for conjunct in query.conjuncts():
        uses.visit(conjunct)
    for item in query.returns:
        uses.visit(item.expr)
    return uses.types(query.partition_attrs())
