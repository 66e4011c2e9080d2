"""Complex patterns and other strategies as a pattern query (thesis §3.4.4, Table 3.2).

Algorithm 3.1 knows only sequences of basic symbols (BS, exactly one event each) and Kleene
symbols (KS, any number of events) under the contiguous strategy. A query's pattern is first
written in the small pattern-expression form of this module (:class:`Atom`, :class:`Seq`,
:class:`Repeat`, :class:`Alt`, :class:`Not`) and rewritten top-down until only BSs and
``true*`` remain. Every rule widens the set of event sequences the pattern accepts, so the
replay intervals of the rewritten pattern cover every match of the original:

========================  ====================================================================
original                  rewrite
========================  ====================================================================
``¬P``                    ``true*``: a SASE+ negation consumes no position (research note on
                          Table 3.2; the thesis' ``true`` would fix a seq distance that is not)
``P1 | ... | Pk``         ``true`` when every option is one BS, with the conditions all options
                          share (§3.4.4 step 1: an OR keeps a common attribute's union); else
                          ``true*``
``P+``                    ``(P, true*)``
``P?``, ``P*``            ``true*``
``P{n,m}``                ``(P, ..., P [n times], true*)``; ``(P × n)`` when ``m = n``
========================  ====================================================================

Strategies other than the contiguous one allow events between the symbols: a ``true*`` is
inserted between every two adjacent BSs, so each BS is a basic block of its own. Adjacent
KSs are consolidated into one ``true*``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from situflow.archive.ranges import Condition
from situflow.offline.pattern import PatternQuery, Symbol
from situflow.offline.predicates import disjunction

#: The always-true Kleene symbol every rewrite produces.
TRUE_STAR = Symbol("true", kleene=True)


@dataclass(frozen=True)
class Atom:
    """One symbol of the query: a BS, or a KS when ``symbol.kleene``."""

    symbol: Symbol


@dataclass(frozen=True)
class Seq:
    items: tuple[PatternExpr, ...]


@dataclass(frozen=True)
class Repeat:
    """``inner{low,high}``; ``high`` None is unbounded (``+`` is ``{1,}``, ``*`` is ``{0,}``)."""

    inner: PatternExpr
    low: int
    high: int | None = None


@dataclass(frozen=True)
class Alt:
    options: tuple[PatternExpr, ...]


@dataclass(frozen=True)
class Not:
    """A non-occurrence (SASE+ ``~(B b)``, COGRA ``NOT C``): zero-width."""

    inner: PatternExpr


PatternExpr = Atom | Seq | Repeat | Alt | Not


def rewrite(pattern: PatternExpr, window: int, *, contiguous: bool,
            keys: Sequence[str] = ()) -> PatternQuery:
    """The pattern query of Algorithm 3.1 for ``pattern`` (Table 3.2). ``contiguous`` is True
    for strict contiguity (and for partition contiguity, which is contiguous within a key, with
    ``keys``), False for the strategies that skip events (skip-till-next, skip-till-any).

    >>> a, b, c, d = (Atom(Symbol(name)) for name in "ABCD")
    >>> query = rewrite(Seq((a, Repeat(Seq((b, Repeat(c, 1))), 1), d)), 100, contiguous=True)
    >>> [s.name + ("*" if s.kleene else "") for s in query.symbols]
    ['A', 'B', 'C', 'true*', 'D']
    """
    symbols = _symbols(pattern)
    if not contiguous:
        symbols = _separate(symbols)
    return PatternQuery(_consolidate(symbols), window, tuple(keys))


def _symbols(pattern: PatternExpr) -> list[Symbol]:
    if isinstance(pattern, Atom):
        return [pattern.symbol]
    if isinstance(pattern, Seq):
        return [symbol for item in pattern.items for symbol in _symbols(item)]
    if isinstance(pattern, Repeat):
        if pattern.low == 0:
            return [TRUE_STAR]
        once = _symbols(pattern.inner)
        tail = [] if pattern.high == pattern.low else [TRUE_STAR]
        return once * pattern.low + tail
    if isinstance(pattern, Alt):
        return [_alternative(pattern)]
    return [TRUE_STAR]


def _alternative(pattern: Alt) -> Symbol:
    """One BS for an alternative of single BSs, keeping what all options require; else
    ``true*``."""
    options = [option.symbol for option in pattern.options if isinstance(option, Atom)]
    if len(options) < len(pattern.options) or any(option.kleene for option in options):
        return TRUE_STAR
    shared = {c.attribute: c.ranges for c in options[0].conditions}
    for option in options[1:]:
        shared = disjunction(shared, {c.attribute: c.ranges for c in option.conditions})
    conditions = tuple(Condition(attribute, shared[attribute]) for attribute in sorted(shared))
    return Symbol("|".join(option.name for option in options), conditions=conditions)


def _separate(symbols: list[Symbol]) -> list[Symbol]:
    """A ``true*`` between every two adjacent BSs: the strategy lets other events in."""
    separated: list[Symbol] = []
    for symbol in symbols:
        if separated and not separated[-1].kleene and not symbol.kleene:
            separated.append(TRUE_STAR)
        separated.append(symbol)
    return separated


def _consolidate(symbols: list[Symbol]) -> tuple[Symbol, ...]:
    """Adjacent KSs as one ``true*`` (a lone KS keeps its name: it prunes nothing either way)."""
    consolidated: list[Symbol] = []
    for symbol in symbols:
        if symbol.kleene and consolidated and consolidated[-1].kleene:
            consolidated[-1] = TRUE_STAR
        else:
            consolidated.append(symbol)
    return tuple(consolidated)
