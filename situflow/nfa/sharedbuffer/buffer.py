"""The shared match buffer (§5.1): selected events linked to their predecessors.

Every begin or take move adds one :class:`BufferNode` (the event, the component it was selected for,
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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class BufferedEvent:
    """An event as the buffer keeps it: the attributes the query reads, in layout order."""

    seq: int
    id: Any
    ts: int
    row: tuple[Any, ...]


class BufferNode:
    """One selected event in one run's history.

    ``history`` optionally caches the node's history as :class:`History` (see
    :func:`history`); it is derived data, never part of a snapshot.
    """

    __slots__ = ("component", "event", "history", "pred")

    def __init__(self, event: BufferedEvent, component: int, pred: BufferNode | None):
        self.event = event
        self.component = component
        self.pred = pred
        self.history: History | None = None


# A chain of selected events, oldest first: the events, their components, ids and sequence
# numbers as parallel lists.
History = tuple[list[BufferedEvent], list[int], list[Any], list[int]]


def history(node: BufferNode) -> History:
    """The chain of events ending at ``node``, oldest first, cached on ``node``.

    Output is the cost that cannot be shared (§4: linear in the match length), so the walk does
    the least Python work per event: it stops at the nearest ancestor whose history is cached,
    takes that cache over (the ancestor loses it) and extends it in place with the nodes
    walked. A run that keeps extending one Kleene component (Query 3's ``a[]`` under
    skip-till-next-match emits a match at most events) thus walks only the nodes added since
    its previous match, and at most one cache per branch is alive. Callers copy what they keep.
    """
    walked: list[BufferNode] = []
    append = walked.append
    current: BufferNode | None = node
    while current is not None and current.history is None:
        append(current)
        current = current.pred
    if not walked:
        assert node.history is not None
        return node.history
    walked.reverse()
    new = [n.event for n in walked]
    if current is None:
        found: History = (new, [n.component for n in walked], [e.id for e in new],
                          [e.seq for e in new])
    else:
        assert current.history is not None
        found, current.history = current.history, None
        events, kinds, ids, seqs = found
        events += new
        kinds += [n.component for n in walked]
        ids += [e.id for e in new]
        seqs += [e.seq for e in new]
    node.history = found
    return found


def match_history(node: BufferNode, components: int) -> tuple[History, list[tuple[int, int]]]:
    """The history of the match ending at ``node`` without ``node`` itself, and per component
    its ``(start, stop)`` in it; ``node``'s event follows ``stop`` of its component. The cache
    goes to ``node.pred``, which the run's later matches share."""
    if node.pred is None:
        found: History = ([], [], [], [])
    else:
        found = history(node.pred)
    kinds = found[1]
    c = [0, *(bisect_right(kinds, k) for k in range(components))]
    return found, [(c[k], c[k + 1]) for k in range(components)]


def unnumbered(node: BufferNode, numbers: Mapping[int, Any]) -> list[BufferNode]:
    """The nodes of ``node``'s history that ``numbers`` (keyed by ``id``) lacks, oldest first:
    what a numbering of shared nodes (snapshots, the compiled loop's arrays) still has to
    number, each after its predecessor."""
    chain: list[BufferNode] = []
    current: BufferNode | None = node
    while current is not None and id(current) not in numbers:
        chain.append(current)
        current = current.pred
    chain.reverse()
    return chain


def retrieve(node: BufferNode, components: int) -> list[list[BufferedEvent]]:
    """The events of the match ending at ``node``, per positive component, in order."""
    (events, _, _, _), spans = match_history(node, components)
    out = [events[i:j] for i, j in spans]
    out[node.component].append(node.event)
    return out
