"""Index selection (thesis §3.4.3, Algorithm 3.2 SelectIndexes): which of the indexable
conditions of a pattern to answer with secondary indexes.

Neither greedy (by selectivity) nor dynamic programming is optimal across basic blocks (BBs),
but greedy is within one BB, and for a fixed number of indexes the optimum lies on the Pareto
frontier over (C_PIO, C_SIO); frontiers of disjoint halves combine as
``(L+R)_k = Pareto(∪_i L_i × R_{k−i})`` [RG83]. The thesis leaves open how a combined
configuration gets its C_PIO (research notes §3.4): here the estimator is asked again for the
union, so the frontiers hold real estimates of whole configurations.

A candidate is one condition (symbol position, attribute): a symbol with conditions on two
indexed attributes offers two indexes (the thesis' Crime query offers 6 for 3 symbols), and a
symbol is selected when one of its conditions is.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from situflow.offline.pattern import PatternQuery


@dataclass(frozen=True, order=True)
class IndexCandidate:
    """An index that can answer the condition on ``attribute`` of the symbol at ``position``,
    which a fraction ``selectivity`` (φ) of the events satisfies."""

    position: int
    attribute: str
    selectivity: float = field(compare=False)


Config = frozenset[IndexCandidate]


@dataclass(frozen=True)
class Costs:
    """C_PIO and C_SIO of one configuration, in the estimator's units."""

    pio: float
    sio: float


Estimator = Callable[[Config], Costs]
Objective = Callable[[Costs], float]


@dataclass
class Selection:
    """The cheapest configuration, its cost, the frontiers ``res[k]`` of Algorithm 3.2 (empty
    for the other strategies) and how many configurations were estimated."""

    chosen: Config
    cost: float
    frontiers: list[list[tuple[Config, Costs]]]
    examined: int


class _Counted:
    """The estimator, memoised, counting the distinct configurations it was asked about."""

    def __init__(self, estimator: Estimator) -> None:
        self._estimator = estimator
        self._seen: dict[Config, Costs] = {}

    def __call__(self, config: Config) -> Costs:
        if config not in self._seen:
            self._seen[config] = self._estimator(config)
        return self._seen[config]

    @property
    def examined(self) -> int:
        return len(self._seen)


def pareto(entries: Sequence[tuple[Config, Costs]]) -> list[tuple[Config, Costs]]:
    """The entries no other entry dominates (ties keep the first), by one sweep in C_PIO order."""
    frontier: list[tuple[Config, Costs]] = []
    best_sio = float("inf")
    for config, costs in sorted(entries, key=lambda entry: (entry[1].pio, entry[1].sio)):
        if costs.sio < best_sio:
            frontier.append((config, costs))
            best_sio = costs.sio
    return frontier


def _by_block(pattern: PatternQuery, candidates: Sequence[IndexCandidate]) -> list[list[IndexCandidate]]:
    """BBS(S_idx): the candidates grouped by the BB of their symbol, BBs in pattern order."""
    groups = []
    for block in pattern.basic_blocks():
        members = [c for c in candidates if c.position in block]
        if members:
            groups.append(members)
    return groups


def select_indexes(pattern: PatternQuery, candidates: Sequence[IndexCandidate], estimator: Estimator,
                   objective: Objective) -> Selection:
    """Algorithm 3.2: the Pareto frontiers ``res[0..m]`` by recursive halving of the BBs, then
    the configuration of least ``objective`` on them."""
    counted = _Counted(estimator)
    m = len(candidates)

    def frontiers(blocks: list[list[IndexCandidate]]) -> list[list[tuple[Config, Costs]]]:
        if len(blocks) == 1:
            # greedySelect: within a BB the k least selective conditions minimise both costs;
            # res[k] stays empty when the BB has fewer than k candidates.
            ranked = sorted(blocks[0], key=lambda c: c.selectivity)
            res: list[list[tuple[Config, Costs]]] = [[] for _ in range(m + 1)]
            for k in range(len(ranked) + 1):
                config = frozenset(ranked[:k])
                res[k] = [(config, counted(config))]
            return res
        half = len(blocks) // 2
        left, right = frontiers(blocks[:half]), frontiers(blocks[half:])
        res = []
        for k in range(m + 1):
            merged = [(config, counted(config))
                      for i in range(k + 1)
                      for config in (lc | rc for lc, _ in left[i] for rc, _ in right[k - i])]
            res.append(pareto(merged))
        return res

    blocks = _by_block(pattern, candidates)
    res = frontiers(blocks) if blocks else [[(frozenset(), counted(frozenset()))]]
    chosen, costs = min((entry for frontier in res for entry in frontier),
                        key=lambda entry: objective(entry[1]))
    return Selection(chosen=chosen, cost=objective(costs), frontiers=res, examined=counted.examined)


def greedy(candidates: Sequence[IndexCandidate], estimator: Estimator, objective: Objective) -> Selection:
    """The thesis' Greedy (§3.5.3): for k = 0..m the k least selective conditions; the cheapest."""
    counted = _Counted(estimator)
    ranked = sorted(candidates, key=lambda c: c.selectivity)
    configs = [frozenset(ranked[:k]) for k in range(len(ranked) + 1)]
    chosen = min(configs, key=lambda config: objective(counted(config)))
    return Selection(chosen=chosen, cost=objective(counted(chosen)), frontiers=[],
                     examined=counted.examined)


def brute_force(candidates: Sequence[IndexCandidate], estimator: Estimator,
                objective: Objective) -> Selection:
    """Every one of the 2^m configurations: the reference of AT-12."""
    counted = _Counted(estimator)
    configs = [frozenset(subset) for k in range(len(candidates) + 1)
               for subset in itertools.combinations(candidates, k)]
    chosen = min(configs, key=lambda config: objective(counted(config)))
    return Selection(chosen=chosen, cost=objective(counted(chosen)), frontiers=[],
                     examined=counted.examined)
