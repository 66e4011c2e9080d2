"""The TPStream query language (thesis §5.3.1, EDBT'18 §3).

    FROM <stream> [<alias>] [PARTITION BY <attr>, ...]
    DEFINE <name> AS <condition> [AT LEAST <d> | AT MOST <d> | BETWEEN <d> AND <d>], ...
    PATTERN <name> <rel>;<rel>... <name> AND ...  |  PATTERN <name>
    WITHIN <duration>
    RETURN <aggregate expression> AS <name>, ...

``PATTERN B`` names a single situation (situflow's addition to the grammar): every situation of
B is a match, so the most common question needs no twin definition; ``WITHIN`` is optional
there, as B's duration constraint already bounds it (SEMANTICS.md, "Single-situation patterns").

Both surface forms of alternatives parse: the thesis' ``A meets;overlaps B`` (Listing 5.1) and
the paper's ``A meets B; A overlaps B`` (Listing 1), where an alternative may name the pair in
either order (``C during B; B overlaps C``). Relation names follow Allen (1983), not the
papers' Table 1: see :mod:`situflow.lang.allen` and SEMANTICS.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from situflow.lang import ast
from situflow.lang.allen import INVERSE, RELATIONS
from situflow.lang.attributes import AttributeTypes, Uses
from situflow.lang.clauses import ReturnItem
from situflow.lang.parser import Parser
from situflow.lang.printer import expr_text, name_text
from situflow.lang.tokens import T, Token

_TWO_WORD = {"MET": "met-by", "OVERLAPPED": "overlapped-by", "STARTED": "started-by",
             "FINISHED": "finished-by"}
# The aggregates a RETURN expression may apply to a situation's events: a situation's events
# are ordered, so its first and last values are aggregates too.
AGGREGATES = ("first", "last", *ast.AGGREGATES)


@dataclass(frozen=True)
class DurationConstraint(ast.Node):
    """``AT LEAST low``, ``AT MOST high`` or ``BETWEEN low AND high`` (bounds inclusive)."""

    low: ast.Duration | None
    high: ast.Duration | None

    def to_text(self) -> str:
        if self.low is not None and self.high is not None:
            return f"BETWEEN {expr_text(self.low)} AND {expr_text(self.high)}"
        if self.low is not None:
            return f"AT LEAST {expr_text(self.low)}"
        assert self.high is not None
        return f"AT MOST {expr_text(self.high)}"


@dataclass(frozen=True)
class Definition(ast.Node):
    name: str
    condition: ast.Expr
    duration: DurationConstraint | None = None

    def to_text(self) -> str:
        extra = f" {self.duration.to_text()}" if self.duration else ""
        return f"{name_text(self.name)} AS {expr_text(self.condition)}{extra}"


@dataclass(frozen=True)
class Relation(ast.Node):
    """One alternative ``left <relation> right`` of a temporal constraint."""

    left: str
    relation: str
    right: str


@dataclass(frozen=True)
class Constraint(ast.Node):
    """A temporal constraint: the disjunction of its alternatives, all on one pair."""

    alternatives: tuple[Relation, ...]

    @property
    def pair(self) -> tuple[str, str]:
        first = self.alternatives[0]
        return first.left, first.right

    def relations(self) -> frozenset[str]:
        """The relations, oriented as ``pair``; ``B overlaps C`` under pair (C, B) is
        ``C overlapped-by B``."""
        left, _ = self.pair
        return frozenset(
            r.relation if r.left == left else INVERSE[r.relation] for r in self.alternatives
        )

    def to_text(self) -> str:
        left, right = self.pair
        ordered = [r for r in RELATIONS if r in self.relations()]
        return f"{name_text(left)} {';'.join(ordered)} {name_text(right)}"


@dataclass(frozen=True)
class Single(ast.Node):
    """``PATTERN B``: a pattern of one situation, each situation of B a match."""

    name: str


@dataclass(frozen=True)
class Query(ast.Node):
    """A TPStream query; its pattern is either ``constraints`` or, for ``PATTERN B``, ``single``
    (then ``constraints`` is empty and ``within`` may be None)."""

    stream: str
    alias: str | None
    partition_by: tuple[ast.Ref, ...]
    definitions: tuple[Definition, ...]
    constraints: tuple[Constraint, ...]
    within: ast.Duration | None
    outputs: tuple[ReturnItem, ...]
    single: Single | None = None

    def to_text(self) -> str:
        """Canonical text: one clause per line, keywords upper case."""
        head = f"FROM {name_text(self.stream)}" + (f" {name_text(self.alias)}" if self.alias
                                                   else "")
        if self.partition_by:
            head += " PARTITION BY " + ", ".join(expr_text(r) for r in self.partition_by)
        pattern = (name_text(self.single.name) if self.single is not None
                   else "\n    AND ".join(c.to_text() for c in self.constraints))
        return "\n".join([
            head,
            "DEFINE " + ",\n       ".join(d.to_text() for d in self.definitions),
            "PATTERN " + pattern,
            *([f"WITHIN {expr_text(self.within)}"] if self.within is not None else []),
            "RETURN " + ",\n       ".join(o.to_text() for o in self.outputs),
        ])


class TPStreamParser(Parser):
    """One method per clause of the thesis grammar (§5.3.1)."""

    # The clause words, in the fixed order the clauses take.
    CLAUSES = ("FROM", "PARTITION", "DEFINE", "PATTERN", "WITHIN", "RETURN")
    # Clause words end an expression instead of naming an attribute.
    RESERVED = Parser.RESERVED | frozenset(CLAUSES)
    RETURN_NEEDS_NAMES = True

    def parse(self) -> Query:
        first = self.curr
        self.expect_kw("FROM")
        stream = self.expect_ident("the name of the input stream").text
        alias = None
        if self.at(T.IDENT) and self.curr.upper not in self.CLAUSES:
            alias = self.advance().text
        partition_by: tuple[ast.Ref, ...] = ()
        if self.match_kw("PARTITION"):
            partition_by = self._parse_partition_by(self._parse_attribute)
        definitions = self._parse_define()
        pattern = self._parse_pattern()
        single = pattern if isinstance(pattern, Single) else None
        constraints = () if isinstance(pattern, Single) else pattern
        within = self._parse_within(optional=single is not None)
        outputs = self._parse_return()
        self.expect_end()
        return self.node(Query, first, stream, alias, partition_by, definitions, constraints,
                         within, outputs, single)

    def _parse_attribute(self) -> ast.Ref:
        ref = self._parse_reference()
        assert isinstance(ref, ast.Ref)
        return ref

    def _parse_define(self) -> tuple[Definition, ...]:
        self.expect_kw("DEFINE")
        return self._parse_csv(self._parse_definition)

    def _parse_definition(self) -> Definition:
        name = self.expect_ident("a situation name")
        self.expect_kw("AS")
        condition = self.parse_expression()
        duration = self._parse_duration_constraint()
        return self.node(Definition, name, name.text, condition, duration)

    def _parse_duration_constraint(self) -> DurationConstraint | None:
        first = self.curr
        if self.match_kw("AT", "LEAST"):
            return self.node(DurationConstraint, first, self.parse_duration(), None)
        if self.match_kw("AT", "MOST"):
            return self.node(DurationConstraint, first, None, self.parse_duration())
        if self.match_kw("BETWEEN"):
            low = self.parse_duration()
            self.expect_kw("AND")
            return self.node(DurationConstraint, first, low, self.parse_duration())
        if self.at_kw("AT"):
            self.raise_error("expected AT LEAST or AT MOST", self.peek())
        return None

    def _parse_pattern(self) -> tuple[Constraint, ...] | Single:
        self.expect_kw("PATTERN")
        if self._at_single():
            first = self.advance()
            if self.at_kw("AND"):
                self.raise_error(f"PATTERN {first.text} is one situation and takes no AND; a "
                                 "pattern of several situations is a list of constraints, "
                                 f"as in {first.text} before X AND X meets Y")
            return self.node(Single, first, first.text)
        constraints = [self._parse_constraint()]
        while self.match_kw("AND"):
            constraints.append(self._parse_constraint())
        return tuple(constraints)

    def _at_single(self) -> bool:
        """Whether the pattern is one situation name: no relation follows it."""
        after = self.peek()
        return self.at(T.IDENT) and (after.type is T.EOF or (
            after.type is T.IDENT and after.upper in ("WITHIN", "RETURN", "AND")))

    def _parse_constraint(self) -> Constraint:
        first = self.curr
        alternatives = self._parse_alternatives()
        while self.match(T.SEMI):
            alternatives += self._parse_alternatives()
        return self.node(Constraint, first, tuple(alternatives))

    def _parse_alternatives(self) -> list[Relation]:
        """``X r1;r2;... Y``: each relation of the list is one alternative."""
        first = self.curr
        left = self.expect_ident("a situation name").text
        relations = [self._parse_allen_relation()]
        while self.at(T.SEMI) and self._relation_name(self.peek()) is not None:
            self.advance()
            relations.append(self._parse_allen_relation())
        right = self.expect_ident(f"a situation name after '{relations[-1]}'").text
        return [self.node(Relation, first, left, r, right) for r in relations]

    def _relation_name(self, token: Token) -> str | None:
        word = token.upper.replace("_", "-") if token.type is T.IDENT else ""
        if word.lower() in RELATIONS:
            return word.lower()
        return _TWO_WORD.get(word)

    def _parse_allen_relation(self) -> str:
        token = self.curr
        name = self._relation_name(token)
        if name is None:
            self.raise_error(
                f"expected a temporal relation ({', '.join(RELATIONS)}), found {token.describe()}"
            )
        self.advance()
        if token.upper in _TWO_WORD:
            self.match(T.MINUS)
            self.expect_kw("BY")
        return name

    def _parse_within(self, optional: bool) -> ast.Duration | None:
        """``WITHIN d``; ``optional`` for a single situation, which its duration constraint
        bounds."""
        if self.match_kw("WITHIN"):
            return self.parse_duration()
        if not optional:
            self.raise_error(f"expected WITHIN, found {self.curr.describe()}: a PATTERN that "
                             "relates situations needs a window (only PATTERN B, a single "
                             "situation, may leave it out)")
        return None

    def _parse_return(self) -> tuple[ReturnItem, ...]:
        self.expect_kw("RETURN")
        return self._parse_return_items()


def parse(text: str) -> Query:
    """Parse TPStream query text; raises ``ParseError``/``TokenError`` with a position."""
    return TPStreamParser(text).parse()


def attribute_types(query: Query) -> AttributeTypes:
    """What ``query`` requires of its events' attributes (:mod:`situflow.lang.attributes`):
    condition references read attributes; in RETURN, ``count(B)`` names a situation."""
    situations = {d.name for d in query.definitions}
    conditions = Uses(lambda node: node.name if isinstance(node, ast.Ref) else None)
    for d in query.definitions:
        conditions.visit(d.condition)
    outputs = Uses(lambda node: node.name if isinstance(node, ast.Ref) and not (
        node.qualifier is None and node.name in situations) else None)
    for o in query.outputs:
        outputs.visit(o.expr)
    conditions.numeric |= outputs.numeric
    conditions.used |= outputs.used
    return conditions.types(r.name for r in query.partition_by)
