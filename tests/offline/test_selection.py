"""Algorithm 3.2 SelectIndexes (thesis §3.4.3), AT-12: on random BB structures and selectivities
with an estimator that composes over BBs, its choice costs exactly the brute-force minimum over
the 2^m configurations while examining far fewer; res[k] is empty where a BB lacks k indexes."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from situflow.offline.pattern import PatternQuery, Symbol
from situflow.offline.selection import (
    Config,
    Costs,
    IndexCandidate,
    brute_force,
    greedy,
    pareto,
    select_indexes,
)
from tests.profiles import scaled


@st.composite
def instances(draw, min_m: int = 1, max_m: int = 10):
    """A pattern of m indexable BSs split into BBs by KSs, one candidate per BS, a reach factor per
    BB (how many events a window holds for it) and the weight of secondary reads."""
    m = draw(st.integers(min_m, max_m))
    symbols: list[Symbol] = []
    for i in range(m):
        if i and draw(st.booleans()):
            symbols.append(Symbol(f"T{i}", kleene=True))
        symbols.append(Symbol(f"S{i}"))
    pattern = PatternQuery(tuple(symbols), 100)
    candidates = [IndexCandidate(position, "v", draw(st.floats(0.001, 0.5)))
                  for position, symbol in enumerate(symbols) if not symbol.kleene]
    reach = {tuple(block): draw(st.floats(1, 200)) for block in pattern.basic_blocks()}
    return pattern, candidates, reach, draw(st.floats(0.01, 100))


def composing_estimator(pattern: PatternQuery, reach: dict[tuple[int, ...], float]):
    """C_PIO = Π over BBs of P(the BB's selected symbols occur within its reach), C_SIO = Σ φ:
    monotone in the parts, as the Pareto composition assumes, and not greedy-friendly."""
    def estimate(config: Config) -> Costs:
        pio = 1.0
        for block, events in reach.items():
            chosen = [c.selectivity for c in config if c.position in block]
            if chosen:
                pio *= 1 - (1 - math.prod(chosen)) ** events
        return Costs(pio=pio, sio=sum(c.selectivity for c in config))
    return estimate


@settings(max_examples=scaled(3))
@given(instances())
def test_at12_select_indexes_is_optimal(instance) -> None:
    pattern, candidates, reach, sio_weight = instance
    estimator = composing_estimator(pattern, reach)

    def objective(costs: Costs) -> float:
        return costs.pio + sio_weight * costs.sio

    chosen = select_indexes(pattern, candidates, estimator, objective)
    reference = brute_force(candidates, estimator, objective)
    assert math.isclose(chosen.cost, reference.cost, rel_tol=1e-12, abs_tol=1e-15)
    assert reference.examined == 2 ** len(candidates)
    assert chosen.cost <= greedy(candidates, estimator, objective).cost + 1e-15


@given(instances(min_m=14, max_m=18))
def test_at12_examines_far_fewer_than_all_configurations(instance) -> None:
    pattern, candidates, reach, sio_weight = instance
    selection = select_indexes(pattern, candidates, composing_estimator(pattern, reach),
                               lambda costs: costs.pio + sio_weight * costs.sio)
    assert selection.examined < 2 ** len(candidates) / 16


@given(instances())
def test_at12_frontier_k_is_empty_when_a_single_block_lacks_k_indexes(instance) -> None:
    pattern, candidates, _, _ = instance
    single = PatternQuery(tuple(s for s in pattern.symbols if not s.kleene), pattern.window)
    half = candidates[: max(1, len(candidates) // 2)]
    kept = [IndexCandidate(i, "v", c.selectivity) for i, c in enumerate(half)]
    estimator = composing_estimator(single, {tuple(range(len(single.symbols))): 50})
    selection = select_indexes(single, kept, estimator, lambda costs: costs.pio + costs.sio)
    for k, frontier in enumerate(selection.frontiers):
        assert (frontier == []) == (k > len(kept))
        for config, _ in frontier:   # greedySelect: the k least selective
            assert sorted(c.selectivity for c in config) == sorted(c.selectivity for c in kept)[:k]


def test_the_empty_pattern_of_indexes_selects_nothing() -> None:
    pattern = PatternQuery((Symbol("A", kleene=True),), 10)
    selection = select_indexes(pattern, [], lambda config: Costs(1.0, 0.0), lambda costs: costs.pio)
    assert selection.chosen == frozenset() and selection.examined == 1


def test_pareto_keeps_the_non_dominated() -> None:
    a, b, c, d = (frozenset({IndexCandidate(i, "v", 0.1)}) for i in range(4))
    entries = [(a, Costs(1, 5)), (b, Costs(2, 2)), (c, Costs(3, 3)), (d, Costs(1, 5))]
    assert [config for config, _ in pareto(entries)] == [a, b]
