"""The pattern model of index-pruned replay (thesis §2.3.5 Def. 2.14, §3.4.1).

A query is reduced, for pruning only, to a sequence of *symbols* with a time window: a basic
symbol (BS) occurs exactly once in every match, a Kleene symbol (KS) any number of times,
including zero (so it never prunes). Each symbol carries the single-attribute range conditions
(``situflow/archive/ranges.py``, the indexes' vocabulary) every event it matches must satisfy
(its *necessary conditions*): an index on one of their
attributes answers the symbol with a superset of its occurrences, which is all pruning needs.
Symbols between which the strategy allows other events are separated by a KS (§3.4.4), so
only the adjacent BSs of a contiguous pattern form a basic block (BB) with fixed seq
distances (C3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from situflow.archive.ranges import Condition


@dataclass(frozen=True)
class Symbol:
    """One position of the pattern: ``name`` is the query's variable (a SASE+ component, a
    TPStream definition, a COGRA type); ``conditions`` are all necessary (AND), each usable by
    an index on its attribute. A KS never prunes; a BS with no condition matches any event."""

    name: str
    kleene: bool = False
    conditions: tuple[Condition, ...] = ()

    @property
    def indexable(self) -> bool:
        return not self.kleene and bool(self.conditions)

    def matches(self, event: dict[str, Any]) -> bool:
        """Whether ``event`` satisfies every necessary condition (a superset of the symbol)."""
        return all(c.contains(event.get(c.attribute)) for c in self.conditions)


@dataclass(frozen=True)
class PatternQuery:
    """PQ = ((S1, ..., Sn), w) of Def. 2.14 with an inclusive window (``last.t - first.t <=
    window``, SEMANTICS.md), after the rewrites of §3.4.4: only the contiguous strategy keeps
    adjacent BSs in one BB; ``keys`` are the PARTITION BY attributes (seq distances and
    intervals are then per key, research §4.4)."""

    symbols: tuple[Symbol, ...]
    window: int
    keys: tuple[str, ...] = ()

    def basic_blocks(self) -> list[list[int]]:
        """The positions of the BSs grouped into maximal runs without a KS between them (§3.4.1).

        >>> a, b, c_star, d = Symbol("A"), Symbol("B"), Symbol("C", kleene=True), Symbol("D")
        >>> PatternQuery((a, b, c_star, d), 100).basic_blocks()
        [[0, 1], [3]]
        """
        blocks: list[list[int]] = []
        run: list[int] = []
        for i, symbol in enumerate(self.symbols):
            if symbol.kleene:
                if run:
                    blocks.append(run)
                run = []
            else:
                run.append(i)
        if run:
            blocks.append(run)
        return blocks
