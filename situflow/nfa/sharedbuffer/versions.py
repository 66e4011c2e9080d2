"""A paper artefact that no runtime path reads: the Dewey version numbers of runs (§5.1).

A run's version has the form ``id1(.idj)*``: ``id1`` counts the initiations from the start state,
every further digit the splits at one state. Moving to the next state appends a digit
(:meth:`Dewey.add_stage`); a second branch that stays at the same state increases the last one
(:meth:`Dewey.increase`). The buffer in :mod:`situflow.nfa.sharedbuffer.buffer` links each selected
event to its predecessor directly, so retrieval needs no compatibility test and runs carry no
version (computing one per selected event cost the hot path for nothing). The class stays, with
its test, as the paper's "shared versioned buffer" definition: :meth:`Dewey.is_compatible_with`
is its rule of which runs descend from which.

>>> Dewey.parse("2.0.0").is_compatible_with(Dewey.parse("1.0"))
False
>>> Dewey.parse("1.0.0").is_compatible_with(Dewey.parse("1.0"))
True
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Dewey:
    digits: tuple[int, ...]

    @classmethod
    def start(cls, initiation: int) -> Dewey:
        return cls((initiation,))

    @classmethod
    def parse(cls, text: str) -> Dewey:
        return cls(tuple(int(d) for d in text.split(".")))

    def add_stage(self) -> Dewey:
        return Dewey((*self.digits, 0))

    def increase(self, by: int = 1) -> Dewey:
        return Dewey((*self.digits[:-1], self.digits[-1] + by))

    def is_compatible_with(self, ancestor: Dewey) -> bool:
        """Whether a run with this version may descend from a run with ``ancestor`` (§5.1):
        ``ancestor`` is a prefix, or both differ only in the last digit and ours is larger."""
        mine, theirs = self.digits, ancestor.digits
        if len(theirs) < len(mine) and mine[: len(theirs)] == theirs:
            return True
        return (
            len(mine) == len(theirs)
            and mine[:-1] == theirs[:-1]
            and mine[-1] > theirs[-1]
        )

    def __str__(self) -> str:
        return ".".join(str(d) for d in self.digits)
