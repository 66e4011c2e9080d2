"""One run's transitions in NFA^b (SASE+ §3.1, §3.2 Step 6, §5.2).

:func:`moves` evaluates the edges of one run's state on one event, with the Step 6 proceed and
the selection strategy's ignore rule, reading what :mod:`situflow.nfa.prepass` computed for the
batch: it is the single definition of a transition in Python (the compiled loop of
:mod:`situflow.nfa.kernel.loop` mirrors it and is tested against it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from situflow.nfa.compiler.automaton import Automaton, StateKind
from situflow.nfa.prepass import Prepared


class Env:
    """What compiled conjuncts read: ``v`` (a run's V) and ``row`` (the current event)."""

    __slots__ = ("row", "v")

    def __init__(self) -> None:
        self.v: tuple[Any, ...] = ()
        self.row: tuple[Any, ...] = ()

    def holds(self, tests: tuple[Callable[[Any], Any], ...], v: tuple[Any, ...]) -> bool:
        if not tests:
            return True
        self.v = v
        for f in tests:  # noqa: SIM110 - a plain loop: this is the innermost call of the runtime
            if not f(self):
                return False
        return True




@dataclass(frozen=True, slots=True)
class StateStep:
    """What :func:`moves` evaluates at one state, looked up once per automaton."""

    begins: bool  # a singleton or ``p[1]`` state (begin edge), else ``p[i]`` (take, proceed)
    component: int
    # The begin conjuncts on V at a begin state, the take conjuncts at ``p[i]``.
    select: tuple[Callable[[Any], Any], ...]
    guarded: tuple[tuple[int, Callable[[Any], Any]], ...]
    length_slot: int
    # ``p[i]`` of a component that has a next one: its proceed conjuncts and the next begin's.
    proceeds_to: int
    proceed: tuple[Callable[[Any], Any], ...]
    ignore_selectable: bool
    ignore_other: bool


def state_steps(a: Automaton) -> tuple[StateStep | None, ...]:
    """A :class:`StateStep` per state (None for ``F``)."""
    out: list[StateStep | None] = []
    sel = a.selection
    for st in a.states:
        if st.kind is StateKind.FINAL:
            out.append(None)
            continue
        comp = a.components[st.component]
        if st.kind is StateKind.BEGIN:
            out.append(StateStep(True, comp.index, comp.begin.scalar, (), -1, -1, (),
                                 sel.ignores(True), sel.ignores(False)))
            continue
        assert comp.take is not None
        nxt = -1 if comp.last else comp.index + 1
        proceed = () if comp.last else (*comp.proceed, *a.components[nxt].begin.scalar)
        out.append(StateStep(False, comp.index, comp.take.scalar, comp.take.guarded,
                             comp.length_slot, nxt, proceed, sel.ignores(True),
                             sel.ignores(False)))
    return tuple(out)


def moves(s: StateStep, v: tuple[Any, ...], j: int, p: Prepared,
          env: Env) -> tuple[bool, bool, bool]:
    """(select, proceed, ignore) for a run at the state of ``s`` with values ``v`` reading
    event ``j`` (``env.row`` is that event). ``select`` is the begin edge at a singleton or
    ``p[1]`` state and the take edge at ``p[i]``; ``proceed`` means proceed and begin the next
    component."""
    if s.begins:
        began = p.begin[s.component][j] and env.holds(s.select, v)
        return began, False, s.ignore_selectable if began else s.ignore_other
    take_mask = p.take[s.component]
    assert take_mask is not None
    takes = take_mask[j] and env.holds(s.select, v)
    if takes and s.guarded:
        env.v = v
        length = v[s.length_slot] + 1
        takes = all(f(env) for k, f in s.guarded if k == length)
    # Step 6: proceed only if the event begins the next component. The paper's opportunistic
    # move (take and ignore both false) always ends in a dead run, so it is not made.
    proceeds = s.proceeds_to >= 0 and p.begin[s.proceeds_to][j] and env.holds(s.proceed, v)
    return takes, proceeds, s.ignore_selectable if takes else s.ignore_other
