"""The Cogra configuration (SIGMOD 2019 Fig. 3): what the static query analyzer hands the
runtime executor. :class:`TrendPlan` holds the automaton of the pattern analyzer (§3.1), the
predicates of the predicate classifier (§3.2), the granularity of the granularity selector
(§3.3, Table 5), the windows and the aggregate slots (§2.3, Table 9).
"""

from __future__ import annotations

from dataclasses import dataclass

from situflow.lang import ast
from situflow.trends.kernel import ANY, CONT, EQ, GE, GT, LE, LT, NE, NEXT

MODES = {"skip-till-any-match": ANY, "skip-till-next-match": NEXT, "contiguous": CONT}
OPS = {"<": LT, "<=": LE, ">": GT, ">=": GE, "=": EQ, "!=": NE}


@dataclass(frozen=True)
class Position:
    """One automaton state: a pattern variable, its event type and its local predicates."""

    variable: str
    type_name: str
    local: tuple[ast.Node, ...] = ()


@dataclass(frozen=True)
class Atom:
    """One adjacent predicate ``prev_expr op next_expr`` between positions ``prev`` → ``next``."""

    prev: int
    next: int
    op: str
    prev_expr: ast.Node  # over the earlier event (references `X.attr`)
    next_expr: ast.Node  # over the later event (references `NEXT(Y).attr`)


@dataclass(frozen=True)
class Slot:
    """One aggregate value kept per partial trend (Table 9): role, target positions, attribute."""

    role: int
    targets: tuple[int, ...] = ()
    attr: str | None = None


@dataclass(frozen=True)
class Output:
    """One RETURN item: a grouping attribute or an aggregate computed from value slots."""

    label: str
    group_attr: str | None = None
    func: str | None = None
    slots: tuple[int, ...] = ()


@dataclass(frozen=True)
class TrendPlan:
    """The Cogra configuration (Fig. 3): automaton, predicates, granularity, windows, outputs."""

    positions: tuple[Position, ...]
    start: tuple[bool, ...]
    end: tuple[bool, ...]
    follow: tuple[tuple[int, ...], ...]
    atoms: tuple[Atom, ...]
    semantics: str
    mode: int
    granularity: str  # "type", "mixed" or "pattern" (Table 5)
    path: str  # how the executor evaluates it, for describe()
    equivalence: tuple[str, ...]
    group_by: tuple[str, ...]
    size: int  # window length in time-unit ticks
    slide: int
    slots: tuple[Slot, ...]
    outputs: tuple[Output, ...]
    # Appendix C negations (variable, type, local predicates) and the transitions they guard.
    negations: tuple[Position, ...] = ()
    guarded: tuple[tuple[tuple[int, int], int], ...] = ()
    # A conjunction ``P1 AND P2 ...``: one plan per side, and no automaton of its own.
    factors: tuple[TrendPlan, ...] = ()

    @property
    def event_grained(self) -> tuple[bool, ...]:
        """Positions whose events are kept one by one: an adjacent predicate reads them later."""
        return tuple(any(a.prev == p for a in self.atoms) for p in range(len(self.positions)))

    @property
    def partition_attrs(self) -> tuple[str, ...]:
        """Equivalence and grouping attributes: together they split the stream (§7)."""
        return tuple(dict.fromkeys(self.equivalence + self.group_by))

    def pred_types(self, p: int) -> tuple[int, ...]:
        """``P.predTypes`` of position ``p`` (§3.1), as positions."""
        return tuple(q for q in range(len(self.positions)) if p in self.follow[q])
