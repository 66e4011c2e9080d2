"""The shared match buffer (§5.1): selected events linked to their predecessors.

Every begin or take move adds one :class:`Node` (the event, the component it was selected for,
and the node selected before it in the same run). Runs that share a history share its nodes, so
a prefix such as ``e1..e5`` of R1 and R3 (Figure 3) is stored once; a match is retrieved by
following the predecessor links from its last node (:func:`retrieve`).

The paper labels the predecessor pointers of per-state stacks with Dewey versions because it
merges the stacks of different runs event by event, and a traversal must then skip pointers of
other runs (its "wrong result" ``e1 e2 e3 e4 e6``). Here a node is created per (event, history),
so its identity *is* the versioned view: a traversal can only follow the run's own pointers.
The nodes of a run that dies or leaves the window are freed with it; nothing else refers to
them, which is the pruning of §5.3.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Event:
    """An event as the buffer keeps it: the attributes the query reads, in layout order."""

    seq: int
    id: Any
    ts: int
    row: tuple[Any, ...]


class Node:
    """One selected event in one run's history."""

    __slots__ = ("component", "event", "pred")

    def __init__(self, event: Event, component: int, pred: Node | None):
        self.event = event
        self.component = component
        self.pred = pred


def retrieve(node: Node, components: int) -> list[list[Event]]:
    """The events of the match ending at ``node``, per positive component, in order.

    Output is the cost that cannot be shared (§4: linear in the match length), so the walk does
    the least Python work per event: collect the chain, then cut it where the component changes
    (components are in pattern order along any chain).
    """
    chain: list[Node] = []
    append = chain.append
    current: Node | None = node
    while current is not None:
        append(current)
        current = current.pred
    chain.reverse()
    events = [n.event for n in chain]
    kinds = [n.component for n in chain]
    cuts = [0, *(bisect_right(kinds, k) for k in range(components))]
    return [events[cuts[k]:cuts[k + 1]] for k in range(components)]
