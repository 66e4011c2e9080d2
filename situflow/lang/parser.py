"""The shared recursive-descent parser: cursor primitives and the expression grammar.

Each language subclasses :class:`Parser`, adds one ``_parse_<construct>`` method per statement
clause and may override :meth:`Parser._parse_reference` for its own reference syntax (SASE+
``a[i].price``, COGRA ``NEXT(S).price``). Expression grammar, loosest binding first::

    or  ->  and  ->  not  ->  comparison  ->  + -  ->  * / %  ->  unary -  ->  primary

``%`` right after a number is a percentage (``80%*x`` is 0.8 times x); elsewhere it is the
remainder (``a[1].price % 500 = 0``, SASE+ §6).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NoReturn, TypeVar

from situflow.errors import ParseError
from situflow.lang import ast
from situflow.lang.clauses import Equivalence, ReturnItem
from situflow.lang.tokens import T, Token, tokenize

N = TypeVar("N", bound=ast.Node)
Item = TypeVar("Item")

_COMPARISON_OPS = {T.LT: "<", T.GT: ">", T.LE: "<=", T.GE: ">=", T.EQ: "=", T.NE: "!="}

# Unit words that may follow a number after a space (``70 mph``); any word written right after
# the number (``8m/s2``, ``5s``) is taken as its unit too.
SPACED_UNITS = frozenset({"MPH", "KMH", "KPH", "KM", "KNOTS", "MPS", "PERCENT", "G"})


class Parser:
    """Cursor over a token list, plus the expression grammar shared by all languages."""

    # Words that end an expression instead of naming an attribute; languages add clause words.
    RESERVED: frozenset[str] = frozenset({"AND", "OR", "NOT"})
    # Whether every RETURN value needs its ``AS name``.
    RETURN_NEEDS_NAMES = False

    def __init__(self, text: str):
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0

    # --- cursor primitives ----------------------------------------------------------------

    @property
    def curr(self) -> Token:
        return self.tokens[self.i]

    def peek(self, k: int = 1) -> Token:
        return self.tokens[min(self.i + k, len(self.tokens) - 1)]

    @property
    def prev(self) -> Token:
        return self.tokens[max(self.i - 1, 0)]

    def advance(self) -> Token:
        token = self.curr
        if token.type is not T.EOF:
            self.i += 1
        return token

    def at(self, kind: T) -> bool:
        return self.curr.type is kind

    def at_kw(self, *words: str) -> bool:
        """Whether the next tokens are these keywords (case-insensitive)."""
        return all(
            self.peek(k).type is T.IDENT and self.peek(k).upper == w for k, w in enumerate(words)
        )

    def match(self, kind: T) -> Token | None:
        return self.advance() if self.curr.type is kind else None

    def match_kw(self, *words: str) -> bool:
        if self.at_kw(*words):
            self.i += len(words)
            return True
        return False

    def expect(self, kind: T, what: str | None = None) -> Token:
        if self.curr.type is not kind:
            self.raise_error(f"expected {what or kind.value}, found {self.curr.describe()}")
        return self.advance()

    def expect_kw(self, *words: str) -> Token:
        first = self.curr
        if not self.match_kw(*words):
            self.raise_error(f"expected {' '.join(words)}, found {first.describe()}")
        return first

    def expect_ident(self, what: str = "a name") -> Token:
        return self.expect(T.IDENT, what)

    def raise_error(self, message: str, token: Token | None = None) -> NoReturn:
        token = token or self.curr
        raise ParseError(message, token.line, token.col, token.start, token.end)

    def node(self, cls: type[N], first: Token, *args: object, **kwargs: object) -> N:
        """Build a node whose span runs from ``first`` to the last consumed token.

        The only place nodes are made, so no node lacks a position.
        """
        last = self.prev if self.i > 0 and self.prev.end >= first.end else first
        return cls(*args, span=ast.Span.of(first, last), **kwargs)

    def _parse_csv(self, item: Callable[[], Item]) -> tuple[Item, ...]:
        """``item (, item)*``: every comma list of the three languages."""
        items = [item()]
        while self.match(T.COMMA):
            items.append(item())
        return tuple(items)

    def _parse_names(self, what: str) -> tuple[str, ...]:
        """``name (, name)*``, where ``what`` says what a name is for an error message."""
        return self._parse_csv(lambda: self.expect_ident(what).text)

    def _parse_partition_by(self, attribute: Callable[[], Item]) -> tuple[Item, ...]:
        """``BY attr, ...``, after the PARTITION keyword."""
        self.expect_kw("BY")
        return self._parse_csv(attribute)

    def _parse_return_items(self) -> tuple[ReturnItem, ...]:
        """``RETURN expr [AS name], ...``, after the RETURN keyword."""
        return self._parse_csv(self._parse_return_item)

    def _parse_return_item(self) -> ReturnItem:
        first = self.curr
        expr = self.parse_expression()
        if self.RETURN_NEEDS_NAMES:
            self.expect_kw("AS")
            alias: str | None = self.expect_ident("a name for the returned value").text
        else:
            alias = self.expect_ident("a name after AS").text if self.match_kw("AS") else None
        return self.node(ReturnItem, first, expr, alias)

    def _parse_equivalence(self, what: str, closing: str) -> Equivalence:
        """``[attr, ...]``, from its '['; ``what`` and ``closing`` word the errors."""
        first = self.expect(T.LBRACKET)
        attrs = self._parse_names(what)
        self.expect(T.RBRACKET, closing)
        return self.node(Equivalence, first, attrs)

    def expect_end(self) -> None:
        self.match(T.SEMI)
        if not self.at(T.EOF):
            self.raise_error(f"unexpected {self.curr.describe()} after the end of the query")

    # --- expressions ----------------------------------------------------------------------

    def parse_expression(self) -> ast.Expr:
        return self._parse_or()

    def _parse_or(self) -> ast.Expr:
        first = self.curr
        left = self._parse_and()
        while self.match_kw("OR"):
            left = self.node(ast.Binary, first, "or", left, self._parse_and())
        return left

    def _parse_and(self) -> ast.Expr:
        first = self.curr
        left = self._parse_not()
        while self._at_conjunction():
            self.advance()
            left = self.node(ast.Binary, first, "and", left, self._parse_not())
        return left

    def _at_conjunction(self) -> bool:
        """Whether ``AND`` here continues the expression; languages where ``AND`` also joins
        clauses (SASE+ ``WHERE``) override this."""
        return self.at_kw("AND")

    def _parse_not(self) -> ast.Expr:
        first = self.curr
        if self.match_kw("NOT"):
            return self.node(ast.Unary, first, "not", self._parse_not())
        return self._parse_comparison()

    def _parse_comparison(self) -> ast.Expr:
        first = self.curr
        left = self._parse_additive()
        op = _COMPARISON_OPS.get(self.curr.type)
        if op is None:
            return left
        self.advance()
        right = self._parse_additive()
        if self.curr.type in _COMPARISON_OPS:
            self.raise_error("comparisons cannot be chained; join them with AND")
        return self.node(ast.Binary, first, op, left, right)

    def _parse_additive(self) -> ast.Expr:
        first = self.curr
        left = self._parse_term()
        while self.curr.type in (T.PLUS, T.MINUS):
            op = self.advance().text
            left = self.node(ast.Binary, first, op, left, self._parse_term())
        return left

    def _parse_term(self) -> ast.Expr:
        first = self.curr
        left = self._parse_unary()
        while self.curr.type in (T.STAR, T.SLASH, T.PERCENT):
            op = self.advance().text
            left = self.node(ast.Binary, first, op, left, self._parse_unary())
        return left

    def _parse_unary(self) -> ast.Expr:
        first = self.curr
        if self.match(T.MINUS):
            operand = self._parse_unary()
            if isinstance(operand, ast.Literal) and isinstance(operand.value, int | float) \
                    and not isinstance(operand.value, bool):
                return self.node(ast.Literal, first, -operand.value, operand.unit)
            return self.node(ast.Unary, first, "-", operand)
        if self.match(T.PLUS):
            return self._parse_unary()
        return self._parse_primary()

    def _parse_primary(self) -> ast.Expr:
        first = self.curr
        if first.type is T.NUMBER:
            return self._parse_number()
        if first.type is T.STRING:
            self.advance()
            return self.node(ast.Literal, first, first.text[1:-1])
        if self.match(T.LPAREN):
            inner = self.parse_expression()
            self.expect(T.RPAREN, "')' to close the parenthesis")
            return inner
        if first.type is T.IDENT and first.upper in self.RESERVED and first.upper != "NOT":
            self.raise_error(f"expected an expression, found '{first.text}'")
        if first.type is T.IDENT:
            if first.upper in ("TRUE", "FALSE"):
                self.advance()
                return self.node(ast.Literal, first, first.upper == "TRUE")
            if self.peek().type is T.LPAREN:
                return self._parse_call()
            return self._parse_reference()
        if first.type is T.EOF:
            self.raise_error("expected an expression, found the end of the query")
        self.raise_error(f"expected an expression, found {first.describe()}")

    def _parse_number(self) -> ast.Literal:
        first = self.advance()
        value = self._number_value(first)
        if self.at(T.PERCENT) and not self.curr.spaced:
            self.advance()
            return self.node(ast.Literal, first, value, "%")
        return self.node(ast.Literal, first, value, self._parse_unit())

    def _number_value(self, token: Token) -> int | float:
        """The value of a number token; one beyond the float range is refused (it would print
        as ``inf``, which no query can say)."""
        try:
            value: int | float = float(token.text) if any(c in token.text for c in ".eE") \
                else int(token.text)
        except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
            self.raise_error(f"the number {token.text[:20]}... has too many digits", token)
        try:
            finite = math.isfinite(float(value))
        except OverflowError:  # an integer beyond the float range
            finite = False
        if not finite:
            self.raise_error(f"the number {token.text[:20]} is too large", token)
        return value

    def _parse_unit(self) -> str | None:
        """A physical unit after a number (``8m/s2``, ``70 mph``, ``9.81 m/s^2``); ignored."""
        word = self.curr
        if not self._plain_word(word) or (word.spaced and word.upper not in SPACED_UNITS):
            return None
        if self.peek().type is T.LPAREN:
            return None
        parts = [self.advance().text]
        while True:
            op, nxt = self.curr, self.peek()
            if op.type in (T.SLASH, T.CARET) and not op.spaced and not nxt.spaced and (
                self._plain_word(nxt) or nxt.type is T.NUMBER
            ):
                parts += [self.advance().text, self.advance().text]
            else:
                return "".join(parts)

    def _plain_word(self, token: Token) -> bool:
        """An identifier written as itself: not backquoted (`` `a-b` ``), not a symbol (``∧``).
        Only such words can be units, which print unquoted after their number."""
        return token.type is T.IDENT and self.text[token.start:token.end] == token.text

    def _parse_call(self) -> ast.Expr:
        name = self.advance()
        self.expect(T.LPAREN)
        if self.match(T.STAR):
            self.expect(T.RPAREN, "')' after '*'")
            return self.node(ast.Call, name, name.text.lower(), (), True)
        args: tuple[ast.Expr, ...] = ()
        if not self.at(T.RPAREN):
            args = self._parse_csv(self.parse_expression)
        self.expect(T.RPAREN, f"',' or ')' in the arguments of {name.text}")
        return self.node(ast.Call, name, name.text.lower(), args)

    def _parse_reference(self) -> ast.Expr:
        first = self.expect_ident("an attribute")
        if self.match(T.DOT):
            attr = self.expect_ident(f"an attribute name after '{first.text}.'")
            if self.at(T.DOT):
                self.raise_error("a reference has at most two parts, as in 'B.speed'")
            return self.node(ast.Ref, first, first.text, attr.text)
        return self.node(ast.Ref, first, None, first.text)

    # --- durations ------------------------------------------------------------------------

    def parse_duration(self) -> ast.Duration:
        """``5s``, ``5 minutes``, ``5 MINUTES``, ``1 hour``, ``500 ms``."""
        first = self.curr
        number = self.expect(T.NUMBER, "a duration such as 5s or 5 minutes")
        unit = self.curr
        if unit.type is not T.IDENT or unit.text.lower() not in ast.TIME_UNITS:
            self.raise_error(
                f"expected a time unit after {number.text} (s, seconds, minutes, hours), "
                f"found {unit.describe()}"
            )
        self.advance()
        duration = self.node(ast.Duration, first, float(self._number_value(number)),
                             unit.text.lower())
        if math.isinf(duration.seconds):
            self.raise_error(f"the duration {number.text[:20]} {unit.text} is too long", number)
        return duration
