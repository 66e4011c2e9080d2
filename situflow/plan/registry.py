"""The plan generators of Kolchinsky & Schuster §6.1, by name (STYLE.md §11).

Every entry has the signature ``generate(pattern, stats, cost_model) -> Plan``. Order-based
generators return an :class:`~situflow.plan.plans.OrderPlan` for the lazy NFA, tree-based
ones a :class:`~situflow.plan.plans.TreePlan` for ZStream. The DP generators plan
exhaustively up to a size (:data:`situflow.plan.dp_left_deep.MAX_SIZE`,
:data:`situflow.plan.dp_bushy.MAX_SIZE`) and fall back to II-GREEDY and ZSTREAM-ORD above it;
the plan's ``algorithm`` then names both.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from situflow.plan import (
    dp_bushy,
    dp_left_deep,
    efreq,
    greedy,
    iterative,
    trivial,
    zstream,
)
from situflow.plan.cost import CostModel
from situflow.plan.errors import PatternError
from situflow.plan.generator import Generator
from situflow.plan.pattern import Pattern
from situflow.plan.plans import Plan
from situflow.plan.stats import Statistics

ORDER_GENERATORS: Mapping[str, Generator] = MappingProxyType(
    {
        trivial.NAME: trivial.generate,
        efreq.NAME: efreq.generate,
        greedy.NAME: greedy.generate,
        iterative.RANDOM_NAME: iterative.generate_random,
        iterative.GREEDY_NAME: iterative.generate_greedy,
        dp_left_deep.NAME: dp_left_deep.generate,
    }
)
TREE_GENERATORS: Mapping[str, Generator] = MappingProxyType(
    {
        zstream.NAME: zstream.generate,
        zstream.ORD_NAME: zstream.generate_ordered,
        dp_bushy.NAME: dp_bushy.generate,
    }
)
GENERATORS: Mapping[str, Generator] = MappingProxyType({**ORDER_GENERATORS, **TREE_GENERATORS})

DEFAULT = dp_bushy.NAME
"""The default generator: tree-based plans beat order-based ones in the paper (§6.3)."""


def choose_plan(
    pattern: Pattern,
    stats: Statistics,
    algorithm: str = DEFAULT,
    cost_model: CostModel | None = None,
) -> Plan:
    """The plan ``algorithm`` generates for ``pattern`` under ``stats``."""
    generator = GENERATORS.get(algorithm.upper())
    if generator is None:
        known = ", ".join(GENERATORS)
        raise PatternError(f"unknown plan algorithm '{algorithm}'; choose one of {known}")
    return generator(pattern, stats, cost_model or CostModel())
