"""The event selection strategies (§2) as ignore-edge rules (§3.2, Step 3).

=====================  ==========================  ===========================================
strategy               θ_ignore (paper)             here, within one partition of the stream
=====================  ==========================  ===========================================
strict contiguity      False                        no ignore; a run also dies if an event of
                                                    another partition came between (it would
                                                    have had to ignore it)
partition contiguity   ¬(partition condition)       no ignore: events of other partitions never
                                                    reach the run, which is what ignoring them
                                                    means
skip till next match   ¬(take or begin condition)   ignore exactly the events the run cannot
                                                    select
skip till any match    True                         always ignore as well
=====================  ==========================  ===========================================

The start state has no ignore edge under any strategy: a run starts with a selected event.
"""

from __future__ import annotations

from dataclasses import dataclass

from situflow.lang.sase import Strategy


@dataclass(frozen=True, slots=True)
class Selection:
    strategy: Strategy
    # Whether a run may ignore an event it could select (skip till any match).
    ignores_relevant: bool
    # Whether a run may ignore an event it cannot select (both skip strategies).
    ignores_irrelevant: bool
    # Whether events of other partitions between two selected events kill a run
    # (strict contiguity treats the input as a single partition, §2).
    global_contiguity: bool

    def ignores(self, selectable: bool) -> bool:
        """Whether the ignore edge holds for an event, given whether it can be selected."""
        return self.ignores_relevant if selectable else self.ignores_irrelevant

    @property
    def contiguous(self) -> bool:
        return not self.ignores_irrelevant


SELECTIONS: dict[Strategy, Selection] = {
    Strategy.STRICT: Selection(Strategy.STRICT, False, False, True),
    Strategy.PARTITION: Selection(Strategy.PARTITION, False, False, False),
    Strategy.NEXT: Selection(Strategy.NEXT, False, True, False),
    Strategy.ANY: Selection(Strategy.ANY, True, True, False),
}
