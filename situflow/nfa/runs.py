"""Runs of the NFA^b and their computation state (§5.2.1, Figure 5), and run merging (§5.2.2).

A :class:`Run` is the paper's computation state minus what is per history: the current state
``q`` and the value vector ``V``. Its :class:`Member` entries hold the per-history fields: the
pointer ``pE`` to the most recent event in the shared buffer and the start time ``t`` (the
paper's version ``v`` is left out: nothing reads it, see :mod:`situflow.nfa.sharedbuffer.versions`).
A fresh run has one member; merging equivalent runs (same state, same V columns
under the state's mask ``M_q ∨ M_q+1 ∨ ...``) concatenates their members, so the transition is
evaluated once for all of them. Members leave the run one by one as their own window expires,
which is the paper's "match construction only for the contained runs that have not expired".
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

from situflow.nfa.sharedbuffer.buffer import BufferNode


@dataclass(slots=True)
class Member:
    node: BufferNode
    start: int


@dataclass(slots=True)
class Run:
    state: int
    v: tuple[Any, ...]
    # Oldest start first, so that the members out of the window are a prefix.
    members: list[Member]

    def within(self, now: int, window: float) -> list[Member]:
        """The members whose match can still satisfy ``last.t - first.t <= window``."""
        members = self.members
        if now - members[0].start <= window:
            return members
        return members[bisect_left(members, now - window, key=_start):]


def merge_equivalent(runs: list[Run], masks: tuple[tuple[int, ...], ...]) -> list[Run]:
    """Merge runs with the same state and the same V columns under that state's mask.

    Two such runs "will select the same set of events until completion" (§5.2.2). The first run
    of each class keeps its place, so the order of runs stays deterministic.
    """
    classes: dict[tuple[Any, ...], Run] = {}
    out: list[Run] = []
    for run in runs:
        key = (run.state, *(run.v[i] for i in masks[run.state]))
        found = classes.get(key)
        if found is None:
            classes[key] = run
            out.append(run)
        elif found.members[-1].start <= run.members[0].start:
            found.members = found.members + run.members
        else:
            found.members = sorted(found.members + run.members, key=_start)
    return out


def _start(member: Member) -> int:
    return member.start
