"""The reference baseline: the backtrack algorithm of §5.2.3, kept for tests and benchmarks.

Per partition one *singleton run* is processed at a time, depth first: when an event allows
several moves, the run continues with the first and the others are postponed on a stack with
their state and the position of the next event; when the run fails or ends, the most recent
postponed run resumes by re-reading the buffered events from its position. All results are
produced (the "all results" output format). Transitions are those of the NFA^b
(:func:`situflow.nfa.transitions.moves`), so both engines define the same matches; the
difference is the work: the NFA^b reads each event once per partition, the backtracker re-reads
events for every postponed run (``reads``).

As the paper's baseline is the NFA^b implementation adapted (§5.2.3), a run's selected events
share their prefix with the run it split from, as in the shared buffer (§5.1): a selection is
linked to the one before it, and :meth:`BacktrackMatcher.matches` returns each match as its
last link, the compressed output of §4.2. :meth:`BacktrackMatcher.run` reads them out.

Negation and ``CONSUME`` are out of its scope: it is a baseline for the positive pattern.
"""

from __future__ import annotations

from typing import Any

from situflow.errors import SituflowError
from situflow.events import EventBatch
from situflow.nfa.compiler.automaton import Automaton, StateKind
from situflow.nfa.prepass import MISSING, prepare
from situflow.nfa.transitions import Env, moves, state_steps

# The events a run selected: the last (component, event index, the selection before it).
Selected = tuple[int, int, Any]
# A match: the index of its last event and its selection.
RawMatch = tuple[int, Selected]
# A postponed run: state, V, selected events, next position, start time.
_Run = tuple[int, tuple[Any, ...], Selected, int, int]


class BacktrackMatcher:
    def __init__(self, automaton: Automaton):
        if automaton.negations or automaton.consume:
            raise SituflowError("the backtrack baseline evaluates positive patterns only")
        self.automaton = automaton
        self.reads = 0
        self._env = Env()
        self._steps = state_steps(automaton)

    def run(self, batch: EventBatch) -> list[dict[str, list[Any]]]:
        """Every match in ``batch`` (one bounded stream), as ``{variable: [event ids]}``."""
        return self.bindings(batch, self.matches(batch))

    def bindings(self, batch: EventBatch, matches: list[RawMatch]) -> list[dict[str, list[Any]]]:
        """``matches`` as ``{variable: [event ids]}``, ordered by their events."""
        ids = batch.ids.tolist()
        out = []
        for _, last in matches:
            selected: list[tuple[int, int]] = []
            link: Selected | None = last
            while link is not None:
                selected.append(link[:2])
                link = link[2]
            selected.reverse()
            out.append((selected[-1][1], selected))
        out.sort()
        return [{c.var: [ids[j] for k, j in selected if k == c.index] for c in
                 self.automaton.components} for _, selected in out]

    def matches(self, batch: EventBatch) -> list[RawMatch]:
        """Every match in ``batch`` (one bounded stream), compressed (see the module)."""
        a = self.automaton
        p = prepare(a, batch)
        partitions: dict[Any, list[int]] = {}
        for j, key in enumerate(p.keys):
            if key is not MISSING:
                partitions.setdefault(key, []).append(j)
        env = Env()
        out: list[RawMatch] = []
        first = a.components[0]
        initial = a.values.initial()
        for events in partitions.values():
            for start, j in enumerate(events):
                if not p.begin[0][j]:
                    continue
                env.row = p.row(j)
                stack: list[_Run] = []
                self._arrive(0, first.update(initial, env.row, 1), (0, j, None), start + 1,
                             p.ts[j], stack, out)
                while stack:
                    self._resume(stack.pop(), events, p, env, stack, out)
        return out

    def _resume(self, run: _Run, events: list[int], p: Any, env: Env, stack: list[_Run],
                out: list[RawMatch]) -> None:
        """Continue one singleton run until it fails or the partition ends."""
        a = self.automaton
        state, v, selected, position, start = run
        while position < len(events):
            j = events[position]
            self.reads += 1
            if p.ts[j] - start > a.window:
                return
            # Strict contiguity: an event of another partition in between ends the run.
            if a.selection.global_contiguity and j != events[position - 1] + 1:
                return
            env.row = p.row(j)
            step = self._steps[state]
            assert step is not None
            selects, proceeds, ignores = moves(step, v, j, p, env)
            st = a.states[state]
            comp = a.components[st.component]
            branches: list[_Run] = []
            if selects:
                n = 1 if st.kind is StateKind.BEGIN else v[comp.length_slot] + 1
                self._arrive(comp.index, comp.update(v, env.row, n), (comp.index, j, selected),
                             position + 1, start, branches, out)
            if proceeds:
                nxt = a.components[comp.index + 1]
                self._arrive(nxt.index, nxt.update(v, env.row, 1), (nxt.index, j, selected),
                             position + 1, start, branches, out)
            if ignores:
                branches.append((state, v, selected, position + 1, start))
            if not branches:
                return
            # Depth first: continue with the first move, postpone the others.
            stack.extend(reversed(branches[1:]))
            state, v, selected, position, start = branches[0]

    def _arrive(self, k: int, v: tuple[Any, ...], selected: Selected, position: int,
                start: int, branches: list[_Run], out: list[RawMatch]) -> None:
        a = self.automaton
        comp = a.components[k]
        if comp.kleene:
            branches.append((comp.iterate_state, v, selected, position, start))
            if comp.last and self._env.holds(comp.proceed, v):
                out.append((selected[1], selected))
        elif comp.last:
            out.append((selected[1], selected))
        else:
            branches.append((a.components[k + 1].begin_state, v, selected, position, start))
