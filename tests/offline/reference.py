"""A brute-force matcher of the thesis' match definitions (Defs 2.15–2.17), for tests.

A pattern (a pattern query, or a pattern expression of :mod:`situflow.offline.rewrite`) becomes
a Thompson automaton whose consuming edges test a symbol's conditions
(:meth:`Symbol.matches`) and whose empty edges may carry a negation (a symbol no event between
the two neighbouring matched events may satisfy). A match is a subsequence of the stream, in
seq order, with ``last.t - first.t <= w`` (inclusive, SEMANTICS.md), accepted by a path of
the automaton, under one strategy:

* ``"any"`` (Def. 2.15): any subsequence; a KS consumes or lets the next symbol take the
  event (the "consume or skip" reading of Def. 2.15(4), research erratum 3);
* ``"next"`` (Def. 2.16): between two matched events no event satisfies a symbol that could
  have taken it there (any consuming edge reachable without consuming: for a KS itself and
  the symbols after it);
* ``"contiguous"`` (Def. 2.17): the matched events are adjacent in the stream.

Negations before the first or after the last matched event are not modelled (their windows
lie outside the match). :func:`matches` enumerates the matches; :func:`spans` computes only
their (first, last) seqs, with a bitset per automaton state over the match starts, fast
enough for streams of 10^4 events. Since every definition looks only at the events between a
match's first and last event, the spans decide the matches of any replay range.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from situflow.offline.pattern import PatternQuery, Symbol
from situflow.offline.rewrite import Alt, Atom, Not, PatternExpr, Repeat, Seq

STRATEGIES = ("contiguous", "next", "any")


def expression(pattern: PatternQuery) -> PatternExpr:
    """A pattern query as a pattern expression (a KS is a starred BS of the same conditions)."""
    return Seq(tuple(Repeat(Atom(Symbol(s.name, conditions=s.conditions)), 0) if s.kleene
                     else Atom(s) for s in pattern.symbols))


@dataclass
class Automaton:
    """Thompson's construction over symbols; state 0 starts, ``accept`` accepts."""

    symbols: list[Symbol] = field(default_factory=list)
    consuming: list[list[tuple[int, int]]] = field(default_factory=list)   # (symbol, target)
    empty: list[list[tuple[int, int | None]]] = field(default_factory=list)  # (target, negation)
    accept: int = 0

    @classmethod
    def of(cls, pattern: PatternExpr | PatternQuery) -> Automaton:
        automaton = cls()
        start, end = automaton._build(expression(pattern) if isinstance(pattern, PatternQuery) else pattern)
        assert start == 0
        automaton.accept = end
        return automaton

    def _state(self) -> int:
        self.consuming.append([])
        self.empty.append([])
        return len(self.consuming) - 1

    def _symbol(self, symbol: Symbol) -> int:
        self.symbols.append(symbol)
        return len(self.symbols) - 1

    def _build(self, pattern: PatternExpr) -> tuple[int, int]:
        if isinstance(pattern, Atom):
            if pattern.symbol.kleene:
                return self._build(Repeat(Atom(Symbol(pattern.symbol.name,
                                                      conditions=pattern.symbol.conditions)), 0))
            start, end = self._state(), self._state()
            self.consuming[start].append((self._symbol(pattern.symbol), end))
            return start, end
        if isinstance(pattern, Seq):
            return self._chain([lambda item=item: self._build(item) for item in pattern.items])
        if isinstance(pattern, Repeat):
            parts = [lambda: self._build(pattern.inner)] * pattern.low
            if pattern.high is None:
                parts.append(lambda: self._star(pattern.inner))
            else:
                parts += [lambda: self._optional(pattern.inner)] * (pattern.high - pattern.low)
            return self._chain(parts)
        if isinstance(pattern, Alt):
            start, end = self._state(), self._state()
            for option in pattern.options:
                first, last = self._build(option)
                self.empty[start].append((first, None))
                self.empty[last].append((end, None))
            return start, end
        assert isinstance(pattern, Not) and isinstance(pattern.inner, Atom), "negate one symbol"
        start, end = self._state(), self._state()
        self.empty[start].append((end, self._symbol(pattern.inner.symbol)))
        return start, end

    def _chain(self, parts: list[Any]) -> tuple[int, int]:
        start = self._state()
        end = start
        for part in parts:
            first, last = part()
            self.empty[end].append((first, None))
            end = last
        return start, end

    def _star(self, inner: PatternExpr) -> tuple[int, int]:
        loop = self._state()
        first, last = self._build(inner)
        self.empty[loop].append((first, None))
        self.empty[last].append((loop, None))
        return loop, loop

    def _optional(self, inner: PatternExpr) -> tuple[int, int]:
        start, end = self._state(), self._state()
        first, last = self._build(inner)
        self.empty[start] += [(first, None), (end, None)]
        self.empty[last].append((end, None))
        return start, end

    @cached_property
    def moves(self) -> list[list[tuple[int, int, frozenset[int]]]]:
        """Per state, the consuming edges reachable through empty edges: (symbol, target,
        negations passed on the way)."""
        moves = []
        for state in range(len(self.consuming)):
            seen: set[tuple[int, frozenset[int]]] = set()
            todo = [(state, frozenset[int]())]
            while todo:
                here, negations = todo.pop()
                if (here, negations) in seen:
                    continue
                seen.add((here, negations))
                todo += [(target, negations | ({guard} if guard is not None else set()))
                         for target, guard in self.empty[here]]
            moves.append(sorted({(symbol, target, negations) for here, negations in seen
                                 for symbol, target in self.consuming[here]}, key=repr))
        return moves

    @cached_property
    def accepting(self) -> list[bool]:
        """Per state, whether the accepting state is reachable without consuming."""
        result = []
        for state in range(len(self.consuming)):
            seen, todo = set(), [state]
            while todo:
                here = todo.pop()
                if here not in seen:
                    seen.add(here)
                    todo += [target for target, _ in self.empty[here]]
            result.append(self.accept in seen)
        return result


class Stream:
    """Events in seq order (non-decreasing ``t``), with each symbol's matches computed once."""

    def __init__(self, events: list[dict[str, Any]], *, masks: dict[Symbol, np.ndarray] | None = None):
        self.events = events
        self.times = np.array([e["t"] for e in events], dtype=np.int64)
        self.seqs = np.array([e["seq"] for e in events], dtype=np.int64)
        self._masks = masks if masks is not None else {}

    def mask(self, symbol: Symbol) -> np.ndarray:
        if symbol not in self._masks:
            self._masks[symbol] = np.fromiter((symbol.matches(e) for e in self.events), dtype=bool,
                                              count=len(self.events))
        return self._masks[symbol]

    def between(self, lo: int, hi: int) -> Stream:
        """The events with ``lo <= t <= hi``: what a replay of ``[lo, hi]`` reads."""
        start, stop = np.searchsorted(self.times, [lo, hi + 1])
        return Stream(self.events[start:stop],
                      masks={s: m[start:stop] for s, m in self._masks.items()})


def index_hits(pattern: PatternQuery, positions: Sequence[int],
               stream: Stream) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """What an index on each position's conditions returns: (ts, seq) of the events it matches."""
    return {i: (stream.times[stream.mask(pattern.symbols[i])], stream.seqs[stream.mask(pattern.symbols[i])])
            for i in positions}


def matches(pattern: PatternExpr | PatternQuery, strategy: str, window: int,
            stream: Stream) -> set[tuple[int, ...]]:
    """Every match, as the tuple of its events' seqs (enumerated: for small streams)."""
    automaton = Automaton.of(pattern)
    masks = [stream.mask(symbol) for symbol in automaton.symbols]
    times, found = stream.times, set()

    def visit(state: int, path: tuple[int, ...]) -> None:
        if automaton.accepting[state]:
            found.add(tuple(int(stream.seqs[p]) for p in path))
        last, first = path[-1], path[0]
        for j in range(last + 1, len(times)):
            if times[j] - times[first] > window:
                return
            relevant = False
            for symbol, target, negations in automaton.moves[state]:
                if masks[symbol][j]:
                    relevant = True
                    if not any(masks[n][last + 1:j].any() for n in negations):
                        visit(target, (*path, j))
            if strategy == "contiguous" or (strategy == "next" and relevant):
                return

    for i in range(len(times)):
        for symbol, target, _ in automaton.moves[0]:
            if masks[symbol][i]:
                visit(target, (i,))
    return found


def spans(pattern: PatternExpr | PatternQuery, strategy: str, window: int,
          stream: Stream) -> set[tuple[int, int]]:
    """The (first seq, last seq) of every match, without enumerating the matches: per
    automaton state, the bitset of the match starts whose partial matches wait there."""
    automaton = Automaton.of(pattern)
    if any(negations for moves in automaton.moves for *_, negations in moves):
        raise ValueError("spans() does not model negations; use matches()")
    moves = [sorted({(symbol, target) for symbol, target, _ in state_moves})
             for state_moves in automaton.moves]
    masks = [stream.mask(symbol) for symbol in automaton.symbols]
    times, waiting = stream.times, [0] * len(moves)
    ends: list[tuple[int, int]] = []  # (bitset of starts, end position)
    oldest = 0
    for j in range(len(times)):
        while times[j] - times[oldest] > window:
            oldest += 1
        live = -1 << oldest  # the starts within the window of event j
        taken: dict[int, int] = {}
        for state in range(1, len(moves)):
            starts = waiting[state] & live
            waiting[state] = starts
            if not starts:
                continue
            relevant = False
            for symbol, target in moves[state]:
                if masks[symbol][j]:
                    relevant = True
                    taken[target] = taken.get(target, 0) | starts
            if strategy == "contiguous" or (strategy == "next" and relevant):
                waiting[state] = 0
        for symbol, target in moves[0]:
            if masks[symbol][j]:
                taken[target] = taken.get(target, 0) | (1 << j)
        for target, starts in taken.items():
            waiting[target] |= starts
            if automaton.accepting[target]:
                ends.append((starts, j))
    return {(int(stream.seqs[i]), int(stream.seqs[j])) for starts, j in ends for i in _bits(starts)}


def _bits(bitset: int) -> Iterator[int]:
    while bitset:
        lowest = bitset & -bitset
        yield lowest.bit_length() - 1
        bitset ^= lowest
