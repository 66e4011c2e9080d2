"""The COGRA event trend aggregation language (Poppe et al., SIGMOD 2019, §2.3 Definition 2.9).

A query has the six clauses of the paper's q1–q4::

    RETURN sector, COUNT(*)
    PATTERN Stock S+
    SEMANTICS skip-till-any-match
    WHERE [company, sector] AND S.price > NEXT(S).price
    GROUP-BY sector
    WITHIN 10 minutes SLIDE 10 seconds

Patterns follow Definition 2.1 (``E``, ``P+``, ``SEQ(P1, P2, ...)``, nested as in
``(SEQ(A+, B))+``), with type aliases (``Load L+``) and repeated types
(``SEQ(Activity S, Activity A+, Activity F)``). Appendix C adds the Kleene star ``P*``, the
disjunction ``P1 OR P2``, the conjunction ``P1 AND P2`` (binding tighter than ``OR``, as in
logic), negation inside a sequence (``SEQ(A+, NOT C, B)``) and minimal lengths,
``LENGTH(A) >= 3`` (:mod:`situflow.lang.cogra_sugar` reads the star as the paper's sugar
``SEQ(P1*, P2) = SEQ(P1+, P2) OR P2``, and :mod:`situflow.trends.conjunction` gives ``AND``
its meaning). ``[a, b]`` is the equivalence predicate of footnote 1;
``NEXT(X).attr`` refers to the event that follows an ``X`` event in a trend (adjacent-event
predicates, §3.2). Attributes are always qualified, so a bare word where a value is expected is
a symbolic constant, a string (``A.type = passive`` in q4 means ``A.type = 'passive'``).
``SLIDE`` defaults to the ``WITHIN`` length (tumbling windows); a bare number is a length in
the stream's time unit.

>>> print(parse("return count(*) pattern (seq(A+,B))+ semantics contiguous within 10").to_text())
RETURN COUNT(*) PATTERN (SEQ(A+, B))+ SEMANTICS contiguous WITHIN 10
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from situflow.lang import ast
from situflow.lang.attributes import AttributeTypes, Uses
from situflow.lang.clauses import Equivalence, KleeneLength
from situflow.lang.parser import Parser
from situflow.lang.printer import expr_text, name_text
from situflow.lang.tokens import T, Token

#: The matching semantics of §2.2, by their keyword.
SEMANTICS = ("skip-till-any-match", "skip-till-next-match", "contiguous")

# Upper case, as Definition 2.9 writes them.
AGGREGATES = tuple(name.upper() for name in ast.AGGREGATES)



# --- AST ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TypePattern(ast.Node):
    """An event type with its variable: ``Load L`` (``alias`` is ``None`` when not written)."""

    type_name: str
    alias: str | None = None

    @property
    def variable(self) -> str:
        return self.alias or self.type_name

    def to_text(self) -> str:
        type_name = name_text(self.type_name)
        return type_name if self.alias is None else f"{type_name} {name_text(self.alias)}"


@dataclass(frozen=True)
class SeqPattern(ast.Node):
    """``SEQ(P1, ..., Pn)``, the n-ary form of the binary sequence operator."""

    items: tuple[ast.Node, ...]

    def to_text(self) -> str:
        return "SEQ(" + ", ".join(pattern_text(p) for p in self.items) + ")"


_POSTFIX = (T.PLUS, T.STAR, T.QUESTION)


@dataclass(frozen=True)
class KleenePattern(ast.Node):
    """``P+`` (Kleene plus), or the Appendix C sugar ``P*`` (Kleene star) and ``P?`` (optional)."""

    inner: ast.Node
    op: str  # "+", "*" or "?"

    def to_text(self) -> str:
        inner = pattern_text(self.inner)
        # `Load L+` binds the operator to the variable; `(SEQ(A+, B))+` needs the parentheses.
        if not isinstance(self.inner, TypePattern):
            inner = f"({inner})"
        return f"{inner}{self.op}"


@dataclass(frozen=True)
class NegatedPattern(ast.Node):
    """``NOT Cancel C`` inside ``SEQ``: no such event between its neighbours (Appendix C)."""

    inner: TypePattern

    def to_text(self) -> str:
        return f"NOT {self.inner.to_text()}"


@dataclass(frozen=True)
class OrPattern(ast.Node):
    """``P1 OR P2``: the trends of either sub-pattern (Appendix C, disjunction)."""

    items: tuple[ast.Node, ...]

    def to_text(self) -> str:
        return " OR ".join(pattern_text(p) for p in self.items)


@dataclass(frozen=True)
class AndPattern(ast.Node):
    """``P1 AND P2``: a pair of trends, one of each sub-pattern (Appendix C, conjunction)."""

    items: tuple[ast.Node, ...]

    def to_text(self) -> str:
        # AND binds tighter than OR, so an OR operand keeps its parentheses.
        return " AND ".join(f"({pattern_text(p)})" if isinstance(p, OrPattern)
                            else pattern_text(p) for p in self.items)


@dataclass(frozen=True)
class NextRef(ast.Node):
    """``NEXT(X).attr``: the attribute of the event after an ``X`` event in a trend."""

    variable: str
    name: str

    def to_text(self) -> str:
        return f"NEXT({name_text(self.variable)}).{name_text(self.name)}"


@dataclass(frozen=True)
class Aggregate(ast.Node):
    """``COUNT(*)``, ``COUNT(E)``, ``MIN|MAX|SUM|AVG(E.attr)`` (§2.3)."""

    func: str  # upper case
    variable: str | None = None  # None for COUNT(*)
    attr: str | None = None

    def to_text(self) -> str:
        if self.variable is None:
            return f"{self.func}(*)"
        if self.attr is None:
            return f"{self.func}({name_text(self.variable)})"
        return f"{self.func}({name_text(self.variable)}.{name_text(self.attr)})"


@dataclass(frozen=True)
class WindowLength(ast.Node):
    """A window length: a duration (``30 seconds``) or a number of time-unit ticks (``6``)."""

    value: ast.Node  # ast.Duration or ast.Literal

    def to_text(self) -> str:
        return expr_text(self.value)


@dataclass(frozen=True)
class CograQuery(ast.Node):
    returns: tuple[ast.Node, ...]  # Aggregate or ast.Ref (a grouping attribute)
    pattern: ast.Node
    semantics: str  # one of SEMANTICS
    where: tuple[ast.Node, ...]  # conjuncts: Equivalence or expressions
    group_by: tuple[str, ...]
    within: WindowLength
    slide: WindowLength | None = None

    def to_text(self) -> str:
        parts = [
            "RETURN " + ", ".join(expr_text(r) for r in self.returns),
            "PATTERN " + pattern_text(self.pattern),
            "SEMANTICS " + self.semantics,
        ]
        if self.where:
            parts.append("WHERE " + " AND ".join(_conjunct_text(c) for c in self.where))
        if self.group_by:
            parts.append("GROUP-BY " + ", ".join(map(name_text, self.group_by)))
        parts.append("WITHIN " + self.within.to_text())
        if self.slide is not None:
            parts.append("SLIDE " + self.slide.to_text())
        return " ".join(parts)


def pattern_text(node: ast.Node) -> str:
    text = getattr(node, "to_text", None)
    if text is None:
        raise TypeError(f"no printer for {type(node).__name__}")
    return str(text())


def _conjunct_text(node: ast.Node) -> str:
    text = expr_text(node)
    # A top-level OR binds looser than the AND that joins the conjuncts.
    if isinstance(node, ast.Binary) and node.op == "or":
        return f"({text})"
    return text


# --- parser ------------------------------------------------------------------------------------


class CograParser(Parser):
    """One ``_parse_<clause>`` method per clause of Definition 2.9."""

    # The clause words, in the fixed order the clauses take (``GROUP-BY`` starts with GROUP).
    CLAUSES = ("RETURN", "PATTERN", "SEMANTICS", "WHERE", "GROUP", "WITHIN", "SLIDE")
    # The words that end the WHERE clause: they cannot start a predicate conjunct or be a
    # symbolic constant. RESERVED stays the base set, because a bare word in a COGRA predicate
    # is a constant (q4's ``A.type = passive``), refused with its own message when it ends WHERE.
    WHERE_ENDS = frozenset(CLAUSES[CLAUSES.index("WHERE") + 1:])

    def parse(self) -> CograQuery:
        first = self.curr
        self.expect_kw("RETURN")
        returns = self._parse_returns()
        self.expect_kw("PATTERN")
        pattern = self._parse_pattern()
        self.expect_kw("SEMANTICS")
        semantics = self._parse_semantics()
        where: tuple[ast.Node, ...] = ()
        if self.match_kw("WHERE"):
            where = self._parse_where()
        group_by: tuple[str, ...] = ()
        if self._match_dashed("GROUP", "BY"):
            group_by = self._parse_names("a grouping attribute")
        if not self.at_kw("WITHIN"):
            expected = "WITHIN" if group_by else "WHERE, GROUP-BY or WITHIN"
            if not where and not group_by and self.at(T.LBRACKET):
                expected = "WHERE before '['"
            self.raise_error(f"expected {expected}, found {self.curr.describe()}")
        self.advance()
        within = self._parse_length()
        slide = self._parse_length() if self.match_kw("SLIDE") else None
        self.expect_end()
        return self.node(
            CograQuery, first, returns, pattern, semantics, where, group_by, within, slide
        )

    # RETURN ---------------------------------------------------------------------------------

    def _parse_returns(self) -> tuple[ast.Node, ...]:
        return self._parse_csv(self._parse_return_value)

    def _parse_return_value(self) -> ast.Node:
        first = self.curr
        if first.type is T.IDENT and self.peek().type is T.LPAREN:
            return self._parse_aggregate()
        name = self.expect_ident("an aggregate such as COUNT(*) or a grouping attribute")
        if self.at(T.DOT):
            self.raise_error("RETURN lists grouping attributes by name and aggregates such as "
                             f"SUM({name.text}.attr)")
        return self.node(ast.Ref, first, None, name.text)

    def _parse_aggregate(self) -> Aggregate:
        name = self.advance()
        func = name.upper
        if func not in AGGREGATES:
            self.raise_error(f"unknown aggregate {name.text}; use one of {', '.join(AGGREGATES)}",
                             name)
        self.expect(T.LPAREN)
        if func == "COUNT" and self.match(T.STAR):
            self.expect(T.RPAREN, "')' after '*'")
            return self.node(Aggregate, name, func)
        variable = self.expect_ident("a pattern variable")
        attr: Token | None = None
        if self.match(T.DOT):
            attr = self.expect_ident(f"an attribute name after '{variable.text}.'")
        if func == "COUNT" and attr is not None:
            self.raise_error(f"COUNT takes * or a pattern variable, as in COUNT({variable.text})",
                             attr)
        if func != "COUNT" and attr is None:
            self.raise_error(f"{func} needs an attribute, as in {func}({variable.text}.attr)")
        self.expect(T.RPAREN, f"')' to close {func}(")
        return self.node(Aggregate, name, func, variable.text, attr.text if attr else None)

    # PATTERN --------------------------------------------------------------------------------

    def _parse_pattern(self) -> ast.Node:
        return self._parse_junction("OR", OrPattern, self._parse_conjunction)

    def _parse_conjunction(self) -> ast.Node:
        return self._parse_junction("AND", AndPattern, self._parse_pattern_term)

    def _parse_junction(self, keyword: str, kind: type[OrPattern] | type[AndPattern],
                        operand: Callable[[], ast.Node]) -> ast.Node:
        """``operand (keyword operand)*``; both operators are associative, so
        ``(A OR B) OR C`` is the same three alternatives as ``A OR B OR C``."""
        first = self.curr
        items = [operand()]
        while self.match_kw(keyword):
            items.append(operand())
        if len(items) == 1:
            return items[0]
        flat = [i for item in items for i in (item.items if isinstance(item, kind)
                                              else (item,))]
        return self.node(kind, first, tuple(flat))

    def _parse_pattern_term(self) -> ast.Node:
        first = self.curr
        if self.match_kw("NOT"):
            type_name = self.expect_ident("an event type after NOT")
            alias = self.advance() if self.at(T.IDENT) and not self._at_clause() else None
            negated = self.node(TypePattern, type_name, type_name.text,
                                alias.text if alias else None)
            return self.node(NegatedPattern, first, negated)
        if self.at_kw("SEQ") and self.peek().type is T.LPAREN:
            self.advance()
            self.advance()
            items = self._parse_csv(self._parse_pattern)
            self.expect(T.RPAREN, "',' or ')' in SEQ(...)")
            if len(items) < 2:
                self.raise_error("SEQ needs at least two sub-patterns", first)
            inner: ast.Node = self.node(SeqPattern, first, items)
        elif self.match(T.LPAREN):
            inner = self._parse_pattern()
            self.expect(T.RPAREN, "')' to close the sub-pattern")
        elif self.at(T.IDENT):
            type_name = self.advance()
            alias = self.advance() if self.at(T.IDENT) and not self._at_clause() else None
            inner = self.node(TypePattern, first, type_name.text, alias.text if alias else None)
        else:
            self.raise_error(f"expected an event type, SEQ(...) or '(', found "
                             f"{self.curr.describe()}")
        return self._parse_kleene(first, inner)

    def _parse_kleene(self, first: Token, inner: ast.Node) -> ast.Node:
        if self.curr.type not in _POSTFIX:
            return inner
        op = self.advance().text
        if self.curr.type in _POSTFIX:
            self.raise_error(f"'{self.curr.text}' after '{op}' repeats a Kleene operator; "
                             "use parentheses to nest, as in (A+)+")
        return self.node(KleenePattern, first, inner, op)

    def _at_clause(self) -> bool:
        return self.at_kw("SEMANTICS") or self.at_kw("OR") or self.at_kw("AND")

    # SEMANTICS ------------------------------------------------------------------------------

    def _parse_semantics(self) -> str:
        first = self.curr
        words = [self.expect_ident("skip-till-any-match, skip-till-next-match or contiguous")]
        while self.at(T.MINUS) and self.peek().type is T.IDENT:
            self.advance()
            words.append(self.advance())
        name = "-".join(w.text.lower() for w in words)
        if name not in SEMANTICS:
            self.raise_error(f"unknown semantics '{name}'; use skip-till-any-match, "
                             "skip-till-next-match or contiguous", first)
        return name

    # WHERE ----------------------------------------------------------------------------------

    def _parse_where(self) -> tuple[ast.Node, ...]:
        conjuncts = ast.conjuncts(self._parse_conjunct())
        while self.match_kw("AND"):
            conjuncts += ast.conjuncts(self._parse_conjunct())
        return conjuncts

    def _parse_conjunct(self) -> ast.Node:
        if self.at(T.LBRACKET):
            return self._parse_equivalence("an attribute", "',' or ']' after the attributes")
        if self.curr.type is T.IDENT and self.curr.upper in self.WHERE_ENDS:
            self.raise_error(f"expected a predicate after AND, found {self.curr.describe()}")
        return self.parse_expression()

    def _parse_reference(self) -> ast.Expr:
        """``X.attr``, or a symbolic constant: attributes are always qualified in COGRA, so a
        bare word where a value is expected is a string (q4's ``A.type = passive``, App. A)."""
        if self.peek().type is T.DOT:
            return super()._parse_reference()
        word = self.curr
        if word.type is not T.IDENT or word.upper in self.WHERE_ENDS:
            self.raise_error(f"expected a value, found {word.describe()}")
        self.advance()
        return self.node(ast.Literal, word, word.text)

    def _at_conjunction(self) -> bool:
        # `AND [attr]` starts a new conjunct: the expression must stop before it.
        return self.at_kw("AND") and self.peek().type is not T.LBRACKET

    def _parse_call(self) -> ast.Expr:
        """``NEXT(X).attr`` and ``LENGTH(X)``; any other call in WHERE is an error (aggregates
        go in RETURN)."""
        name = self.curr
        if name.upper == "LENGTH":
            self.advance()
            self.expect(T.LPAREN)
            variable = self.expect_ident("a Kleene plus variable in LENGTH(...)")
            self.expect(T.RPAREN, "')' after the variable in LENGTH(...)")
            return self.node(KleeneLength, name, variable.text)
        if name.upper != "NEXT":
            self.raise_error(f"{name.text}(...) is not allowed in WHERE; predicates compare "
                             "attributes such as S.price and NEXT(S).price")
        self.advance()
        self.expect(T.LPAREN)
        variable = self.expect_ident("a pattern variable in NEXT(...)")
        self.expect(T.RPAREN, "')' after the variable in NEXT(...)")
        self.expect(T.DOT, f"'.' and an attribute after NEXT({variable.text})")
        attr = self.expect_ident(f"an attribute name after NEXT({variable.text}).")
        # Call is the declared return type of the hook; NextRef is an expression node too.
        return self.node(NextRef, name, variable.text, attr.text)

    # GROUP-BY and windows ------------------------------------------------------------------

    def _match_dashed(self, *words: str) -> bool:
        """``GROUP-BY`` tokenizes as GROUP MINUS BY; ``GROUP BY`` is accepted too."""
        dashed = self.peek().type is T.MINUS and self.peek(2).type is T.IDENT
        if self.at_kw(words[0]) and dashed and self.peek(2).upper == words[1]:
            self.i += 3
            return True
        return self.match_kw(*words)

    def _parse_length(self) -> WindowLength:
        first = self.curr
        if first.type is T.NUMBER and not (
            self.peek().type is T.IDENT and self.peek().text.lower() in ast.TIME_UNITS
        ):
            literal = self._parse_number()
            if literal.unit is not None:
                self.raise_error(f"unknown time unit '{literal.unit}'", first)
            return self.node(WindowLength, first, literal)
        return self.node(WindowLength, first, self.parse_duration())


def parse(text: str) -> CograQuery:
    """Parse a COGRA query; raises :class:`situflow.errors.ParseError` with its position."""
    return CograParser(text).parse()


def attribute_types(query: CograQuery) -> AttributeTypes:
    """What ``query`` requires of its events' attributes (:mod:`situflow.lang.attributes`):
    ``MIN MAX SUM AVG`` take numbers; equivalence and ``GROUP-BY`` attributes are keys."""
    uses = Uses(lambda node: node.name if isinstance(node, ast.Ref | NextRef)
                else node.attr if isinstance(node, Aggregate) else None)
    keys: list[str] = []
    for conjunct in query.where:
        if isinstance(conjunct, Equivalence):
            keys += conjunct.attrs
        else:
            uses.visit(conjunct)
    for item in query.returns:
        uses.visit(item)
        if isinstance(item, Aggregate) and item.func != "COUNT":
            uses.number(item)
    return uses.types([*keys, *query.group_by])
