"""Test reference, reached by no language: the plan spaces of Kolchinsky & Schuster §2.2-2.3, enumerated.

Order-based: the ``n!`` permutations. Tree-based: "at least ``n!·C_{n-1} = (2n-2)!/(n-1)!``"
binary trees with ordered children over ``n`` labelled leaves (§1, K-1). ZStream's space:
the ``C_{n-1}`` bracketings of a fixed leaf sequence.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence

from situflow.plan.plans import Join, Leaf, Node


def all_orders(n: int) -> Iterator[tuple[int, ...]]:
    return itertools.permutations(range(n))


def topologies(leaves: Sequence[int]) -> Iterator[Node]:
    """Every binary tree whose leaves read ``leaves`` from left to right."""
    if len(leaves) == 1:
        yield Leaf(leaves[0])
        return
    for k in range(1, len(leaves)):
        for left in topologies(leaves[:k]):
            for right in topologies(leaves[k:]):
                yield Join(left, right)


def all_trees(leaves: Sequence[int]) -> Iterator[Node]:
    """Every binary tree over ``leaves`` (any leaf order, ordered children)."""
    if len(leaves) == 1:
        yield Leaf(leaves[0])
        return
    first, rest = leaves[0], leaves[1:]
    # Choose which of the other leaves join ``first``'s side, then which side is left.
    for size in range(len(rest)):
        for others in itertools.combinations(rest, size):
            side = (first, *others)
            other = tuple(x for x in rest if x not in others)
            for a in all_trees(side):
                for b in all_trees(other):
                    yield Join(a, b)
                    yield Join(b, a)


def tree_plan_count(n: int) -> int:
    """``n!·C_{n-1} = (2n-2)!/(n-1)!``."""
    return math.factorial(2 * n - 2) // math.factorial(n - 1)
