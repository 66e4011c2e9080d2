"""Test reference, reached by no language: the §4 rewrite of Kolchinsky & Schuster, SEQ → AND.

"A sequence pattern is merely a conjunctive pattern with additional temporal constraints":
``SEQ(T1 e1, ..., Tn en)`` becomes ``AND(T1 e1, ..., Tn en)`` with ``e_i.ts < e_{i+1}.ts``
for ``i = 1..n-1`` "without any semantic change" (K-7). situflow orders events by sequence
number (SEMANTICS.md "Event order": duplicate timestamps are allowed, a match is strictly
increasing in sequence), so the added conditions compare ``seq``; on a Kleene component they
hold for every selected event, which puts all of them between their neighbours.

The other §4 rewrites do not change the pattern: the Kleene rate ``r'_i`` is
:func:`situflow.plan.cost.kleene_rate`, negation placement is
:func:`situflow.plan.plans.negation_dependencies`, nested patterns go through
:func:`tests.plan.nested.to_dnf`.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from situflow.plan.cost import ORDER_SELECTIVITY
from situflow.plan.errors import PatternError
from situflow.plan.pattern import Event, Pattern, Predicate


def _precedes(a: Event, b: Event) -> bool:
    return a.seq < b.seq


def seq_to_and(pattern: Pattern) -> Pattern:
    """The AND pattern with the ``n - 1`` order conditions of a positive SEQ pattern."""
    if not pattern.sequence:
        return pattern
    if pattern.negations:
        raise PatternError("SEQ with negation keeps its positions (§4 does not rewrite NOT)")
    comps = pattern.components
    order = tuple(
        Predicate(a.var, b.var, _precedes, ORDER_SELECTIVITY, f"{a.var}.ts<{b.var}.ts")
        for a, b in itertools.pairwise(comps)
    )
    return replace(pattern, sequence=False, predicates=pattern.predicates + order)
