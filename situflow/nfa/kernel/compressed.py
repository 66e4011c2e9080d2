"""Compressed output (§4.2): the matches of a batch as their last nodes in the shared buffer.

The paper offers two output modes: a verbose one that enumerates every match, and a compressed
one that hands over the matches in the data structure of the shared match buffer, with a way to
read them out when, and if, they are needed. The compiled loop returns the latter: a
:class:`MatchBatch` holds, per match, its last buffer node, the event that completed it and its
partition, and refers to the node and event arrays of
:class:`~situflow.nfa.kernel.kernel_state.KernelState` (which leaves them as they are while the
batch is unread). It is a sequence of :class:`~situflow.results.Match` records, equal to the
Python loop's list: the first access decompresses all of them at once (one compiled walk over
the nodes, then the ids, bindings and ``RETURN`` values). Counting matches reads nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np

from situflow.nfa.compiler.automaton import Automaton
from situflow.nfa.kernel import loop
from situflow.nfa.kernel.kernel_state import KernelState, id_values, row_values
from situflow.nfa.matches import MatchEnv, json_value
from situflow.nfa.sharedbuffer.buffer import BufferedEvent
from situflow.results import Match


class MatchBatch(Sequence[Match]):
    """The matches one batch completed, in emission order (see the module docstring)."""

    def __init__(self, name: str, automaton: Automaton, state: KernelState, done: np.ndarray,
                 ts: np.ndarray, codes: np.ndarray, keys: list[Any]):
        """``done``: the kernel's match records, ordered; ``ts`` and ``codes``: per event of
        the batch its time and partition code, ``keys[code]`` its key."""
        self._name = name
        self._automaton = automaton
        self._nodes = state.nodes
        self._events = state.events
        self._rows = state.event_rows
        self._kinds = state.event_kinds
        self._ids = state.ids
        self._texts = state.texts
        self._done = done
        completed = done[:, loop.D_EVENT]
        self._ts = ts[completed]
        self._codes = codes[completed]
        self._keys = keys
        self._matches: list[Match] | None = None
        self._state: KernelState | None = state
        state.readers[id(self)] = self

    def __len__(self) -> int:
        return len(self._done)

    @overload
    def __getitem__(self, i: int) -> Match: ...

    @overload
    def __getitem__(self, i: slice) -> list[Match]: ...

    def __getitem__(self, i: int | slice) -> Match | list[Match]:
        return self.matches()[i]

    def __iter__(self) -> Iterator[Match]:
        return iter(self.matches())

    def __add__(self, other: Sequence[Match]) -> list[Match]:
        return [*self.matches(), *other]

    def __radd__(self, other: Sequence[Match]) -> list[Match]:
        return [*other, *self.matches()]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MatchBatch | list):
            return self.matches() == list(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"MatchBatch({len(self)} matches of {self._name!r})"

    def matches(self) -> list[Match]:
        """The Match records, decompressed on the first call."""
        if self._matches is None:
            self._matches = self._decompress()
            # The arrays are not read again: pruning may reuse them.
            assert self._state is not None
            self._state.readers.pop(id(self), None)
            self._state = None
            del self._nodes, self._events, self._rows, self._kinds, self._ids
        return self._matches

    def _decompress(self) -> list[Match]:
        a = self._automaton
        done = self._done
        n = len(done)
        stored, bounds = loop.decompress(done[:, loop.D_NODE], self._nodes,
                                           len(a.components))
        # One Python object per stored event, shared by every match that holds the event.
        low = int(stored.min())
        distinct = id_values(self._ids[low:int(stored.max()) + 1])
        ids = np.fromiter(distinct, dtype=object, count=len(distinct))
        at = stored - low
        events = np.empty(0, dtype=object)
        if a.returns:
            events = np.empty(len(distinct), dtype=object)
            for x in np.unique(stored).tolist():
                seq, ts, _ = self._events[x].tolist()
                events[x - low] = BufferedEvent(seq, distinct[x - low], ts,
                                        row_values(self._rows[x], self._kinds[x], self._texts))
        # The k-th match an event completes has the order (1, 0, k), as in the Python loop.
        completed = done[:, loop.D_EVENT]
        index = np.arange(n)
        group = np.maximum.accumulate(np.where(np.r_[True, completed[1:] != completed[:-1]],
                                               index, 0))
        ranks = (index - group).tolist()
        keys = [list(k) if isinstance(k, tuple) else json_value(k) for k in self._keys]
        variables = [(c.var, c.index) for c in a.components]
        out = []
        for b, t, code, rank in zip(bounds.tolist(), self._ts.tolist(), self._codes.tolist(),
                                    ranks, strict=True):
            spans = [(var, at[b[k]:b[k + 1]]) for var, k in variables]
            values = {}
            if a.returns:
                env = MatchEnv([events[span].tolist() for _, span in spans])
                values = {name: json_value(f(env)) for name, f in a.returns}
            out.append(Match(query=self._name, key=keys[code], ts=t, emitted_at=t,
                             values=values,
                             bindings={var: ids[span].tolist() for var, span in spans},
                             order=(1, 0, rank)))
        return out
