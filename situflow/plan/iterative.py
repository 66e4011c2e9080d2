"""Iterative improvement, II-RANDOM and II-GREEDY (Kolchinsky & Schuster §6.1, Swami [48]).

A local search over orders: from a start order, apply the best improving move among all
*swap* moves ("the positions of two event types in a plan are swapped") and *cycle* moves
("the positions of three event types are shifted", both directions) until no move lowers
the cost — a local minimum (K-12). II-RANDOM starts from a random order (seeded from the
pattern size, so planning is deterministic); II-GREEDY starts from the GREEDY order, hence
never returns a costlier plan than GREEDY. Each pass costs ``O(n³)`` plan evaluations.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

from situflow.plan.cost import CostInputs, CostModel, Terms
from situflow.plan.generator import order_plan
from situflow.plan.greedy import greedy_order
from situflow.plan.pattern import Pattern
from situflow.plan.plans import OrderPlan
from situflow.plan.stats import Statistics

RANDOM_NAME = "II-RANDOM"
GREEDY_NAME = "II-GREEDY"


def moves(order: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    """Every order one swap or one cycle away from ``order``."""
    n = len(order)
    for i in range(n):
        for j in range(i + 1, n):
            swapped = list(order)
            swapped[i], swapped[j] = swapped[j], swapped[i]
            yield tuple(swapped)
    for i in range(n):
        for j in range(i + 1, n):
            for k in range(j + 1, n):
                forward, backward = list(order), list(order)
                forward[i], forward[j], forward[k] = order[k], order[i], order[j]
                backward[i], backward[j], backward[k] = order[j], order[k], order[i]
                yield tuple(forward)
                yield tuple(backward)


def improve(start: tuple[int, ...], cost: Callable[[tuple[int, ...]], float]) -> tuple[int, ...]:
    """Best-improvement descent with swap and cycle moves, to a local minimum."""
    current, current_cost = start, cost(start)
    while True:
        best, best_cost = current, current_cost
        for candidate in moves(current):
            value = cost(candidate)
            if value < best_cost:
                best, best_cost = candidate, value
        if best == current:
            return current
        current, current_cost = best, best_cost


def generate_random(pattern: Pattern, stats: Statistics, cost_model: CostModel) -> OrderPlan:
    inputs = CostInputs.build(pattern, stats)
    start = list(range(pattern.size))
    random.Random(pattern.size).shuffle(start)
    order = improve(tuple(start), lambda o: cost_model.order(o, inputs))
    return order_plan(pattern, inputs, cost_model, order, RANDOM_NAME)


def generate_greedy(pattern: Pattern, stats: Statistics, cost_model: CostModel) -> OrderPlan:
    inputs = CostInputs.build(pattern, stats)
    start = greedy_order(Terms(inputs, cost_model))
    order = improve(start, lambda o: cost_model.order(o, inputs))
    return order_plan(pattern, inputs, cost_model, order, GREEDY_NAME)
