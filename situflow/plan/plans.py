"""Evaluation plans: orders for the lazy NFA, trees for ZStream (Kolchinsky & Schuster §2.4).

"An order-based plan consists of a permutation of the primitive event types declared by the
pattern"; "a tree-based plan ... specifies which subsets of valid matches are to be locally
buffered and how to combine them into larger partial matches." Plans are immutable and carry
the cost the generating cost model gave them.

Negation (§4 "Negation patterns") is not planned: "a check for the appearance of a negated
event will be added at the earliest point possible, when all positive events it depends on
are already received" — a transition to a rejecting state after that step of an order, or an
NSEQ check at the lowest tree node covering those events. A negation depends on the positive
neighbours that bound its interval (for a leading or trailing negation: the first and last
positive component, which fix ``[last.t - W, first)`` and ``(last, first.t + W]``) and on the
variables its conditions mention. A trailing negation can only be decided once event time
passes ``first.t + W`` (SEMANTICS.md), so it is checked when a full match waits to be emitted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from situflow.plan.pattern import Pattern


@dataclass(frozen=True, slots=True)
class Leaf:
    index: int

    @property
    def leaves(self) -> tuple[int, ...]:
        return (self.index,)

    def nodes(self) -> Iterator[Node]:
        yield self

    def describe(self, pattern: Pattern) -> str:
        return pattern.components[self.index].describe()


@dataclass(frozen=True, slots=True)
class Join:
    left: Node
    right: Node

    @property
    def leaves(self) -> tuple[int, ...]:
        return self.left.leaves + self.right.leaves

    def nodes(self) -> Iterator[Node]:
        yield from self.left.nodes()
        yield from self.right.nodes()
        yield self

    def describe(self, pattern: Pattern) -> str:
        return f"({self.left.describe(pattern)} ⋈ {self.right.describe(pattern)})"


Node = Leaf | Join


def left_deep(order: tuple[int, ...]) -> Node:
    """The left-deep tree of an order: ``((o1 ⋈ o2) ⋈ o3) ...`` (Theorem 1's join tree)."""
    node: Node = Leaf(order[0])
    for i in order[1:]:
        node = Join(node, Leaf(i))
    return node


def negation_dependencies(pattern: Pattern, k: int) -> frozenset[int]:
    """Positive components that must be bound before negation ``k`` can be checked (§4)."""
    neg, n = pattern.negations[k], pattern.size
    deps = {neg.position - 1, neg.position} if 0 < neg.position < n else {0, n - 1}
    for pred in pattern.predicates:
        if neg.var in (pred.left, pred.right):
            other = pred.right if pred.left == neg.var else pred.left
            deps.add(pattern.index(other))
    return frozenset(deps)


def is_trailing(pattern: Pattern, k: int) -> bool:
    return pattern.negations[k].position == pattern.size


@dataclass(frozen=True)
class OrderPlan:
    """A lazy-NFA plan: the order in which positive components are bound (§2.2)."""

    pattern: Pattern
    order: tuple[int, ...]
    cost: float
    algorithm: str
    kind: Literal["order"] = "order"

    def negation_steps(self) -> tuple[int, ...]:
        """For each negation, how many components are bound when it is checked."""
        position = {c: k for k, c in enumerate(self.order)}
        return tuple(
            self.pattern.size
            if is_trailing(self.pattern, k)
            else 1 + max(position[d] for d in negation_dependencies(self.pattern, k))
            for k in range(len(self.pattern.negations))
        )

    def as_tree(self) -> Node:
        return left_deep(self.order)

    def describe(self) -> str:
        steps = [self.pattern.components[i].describe() for i in self.order]
        lines = [
            f"plan {self.algorithm} (order-based, lazy NFA), cost {self.cost:.6g}",
            f"  pattern: {self.pattern.describe()}",
            f"  order:   {' → '.join(steps)}",
        ]
        for k, step in enumerate(self.negation_steps()):
            neg = self.pattern.negations[k].describe()
            if is_trailing(self.pattern, k):
                lines.append(f"  {neg}: checked until first.t + W before a match is emitted")
            else:
                lines.append(f"  {neg}: checked after {steps[step - 1]}")
        return "\n".join(lines)


@dataclass(frozen=True)
class TreePlan:
    """A ZStream plan: a binary join tree over the positive components (§2.3)."""

    pattern: Pattern
    root: Node
    cost: float
    algorithm: str
    kind: Literal["tree"] = "tree"

    @property
    def order(self) -> tuple[int, ...]:
        """The leaves from left to right (the order a lazy NFA would use for this plan)."""
        return self.root.leaves

    def negation_nodes(self) -> tuple[Node, ...]:
        """For each negation, the lowest node whose leaves cover its dependencies (NSEQ)."""
        out = []
        for k in range(len(self.pattern.negations)):
            deps = negation_dependencies(self.pattern, k)
            node = self.root
            if not is_trailing(self.pattern, k):
                node = _lowest_cover(self.root, deps)
            out.append(node)
        return tuple(out)

    def as_tree(self) -> Node:
        return self.root

    def describe(self) -> str:
        lines = [
            f"plan {self.algorithm} (tree-based, ZStream), cost {self.cost:.6g}",
            f"  pattern: {self.pattern.describe()}",
            f"  tree:    {self.root.describe(self.pattern)}",
        ]
        for k, node in enumerate(self.negation_nodes()):
            neg = self.pattern.negations[k].describe()
            if is_trailing(self.pattern, k):
                lines.append(f"  {neg}: checked until first.t + W before a match is emitted")
            else:
                lines.append(f"  {neg}: NSEQ at {node.describe(self.pattern)}")
        return "\n".join(lines)


Plan = OrderPlan | TreePlan


def _lowest_cover(node: Node, deps: frozenset[int]) -> Node:
    while isinstance(node, Join):
        if deps <= set(node.left.leaves):
            node = node.left
        elif deps <= set(node.right.leaves):
            node = node.right
        else:
            break
    return node
