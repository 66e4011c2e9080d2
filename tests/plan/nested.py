"""Test reference, reached by no language: nested patterns (Kolchinsky & Schuster §4), DNF,
one plan per conjunct, union of matches.

"After transforming SEQ to AND ..., we are left with only two such operator types, AND and
OR. Given a nested pattern, we convert the pattern formula to DNF form ... a separate
evaluation plan is created for each conjunctive subpattern, and their detection proceeds
independently. The returned result is the union of all subpattern matches." Example (K-9):
``AND(A, B, OR(C, D))`` → ``AND(A, B, C) ∨ AND(A, B, D)``.

A ``SEQ`` operand inside the formula becomes precedence pairs of its conjunct (every event of
one operand before every event of the next), i.e. exactly the SEQ → AND rewrite restricted to
the operands present. Conditions and filters are kept for the variables a conjunct binds.
Negation inside nested formulas is not supported (the paper only defines it for SEQ).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from situflow.plan.cost import CostModel
from situflow.plan.errors import PatternError
from situflow.plan.evaluator import Evaluator, PlanMatch
from situflow.plan.pattern import Component, Event, Filter, Pattern, Predicate
from situflow.plan.plans import Plan
from situflow.plan.registry import DEFAULT, choose_plan
from situflow.plan.stats import Statistics


@dataclass(frozen=True)
class Seq:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class And:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Or:
    items: tuple[Expr, ...]


Expr = Component | Seq | And | Or

_Conjunct = tuple[tuple[Component, ...], frozenset[tuple[str, str]]]


def _dnf(expr: Expr) -> list[_Conjunct]:
    if isinstance(expr, Component):
        return [((expr,), frozenset())]
    if isinstance(expr, Or):
        return [c for item in expr.items for c in _dnf(item)]
    out: list[_Conjunct] = []
    for combo in itertools.product(*(_dnf(item) for item in expr.items)):
        comps = tuple(c for part in combo for c in part[0])
        pairs = set().union(*(part[1] for part in combo))
        if isinstance(expr, Seq):
            for (earlier, _), (later, _) in itertools.pairwise(combo):
                pairs |= {(a.var, b.var) for a in earlier for b in later}
        out.append((comps, frozenset(pairs)))
    return out


def to_dnf(
    expr: Expr,
    window: float,
    predicates: Sequence[Predicate] = (),
    filters: Sequence[Filter] = (),
) -> tuple[Pattern, ...]:
    """The conjunctive patterns whose union is ``expr``."""
    out = []
    for comps, pairs in _dnf(expr):
        names = [c.var for c in comps]
        if len(set(names)) != len(names):
            raise PatternError("a variable occurs twice in one conjunct of the DNF")
        index = {v: i for i, v in enumerate(names)}
        out.append(
            Pattern(
                comps,
                window,
                tuple(p for p in predicates if p.left in index and p.right in index),
                tuple(f for f in filters if f.var in index),
                sequence=False,
                before=tuple(sorted((index[a], index[b]) for a, b in pairs)),
            )
        )
    return tuple(out)


def plan_disjuncts(
    patterns: Sequence[Pattern],
    stats: Statistics,
    algorithm: str = DEFAULT,
    cost_model: CostModel | None = None,
) -> tuple[Plan, ...]:
    """One plan per conjunct (§4)."""
    return tuple(choose_plan(p, stats, algorithm, cost_model) for p in patterns)


class UnionEvaluator:
    """Runs one evaluator per conjunct and returns the union of their matches.

    A match is emitted by the event that completes it, so two conjuncts that find the same
    match (e.g. ``OR(SEQ(A a, B b), AND(A a, B b))``) do so in the same call; duplicates are
    removed there, which keeps the union exact without remembering past matches.
    """

    def __init__(self, evaluators: Sequence[Evaluator]) -> None:
        self._evaluators = tuple(evaluators)

    def push(self, event: Event) -> list[PlanMatch]:
        return _unique(m for ev in self._evaluators for m in ev.push(event))

    def flush(self) -> list[PlanMatch]:
        return _unique(m for ev in self._evaluators for m in ev.flush())


def _unique(matches: Iterable[PlanMatch]) -> list[PlanMatch]:
    seen = set()
    out = []
    for m in matches:
        key = frozenset(m.key())
        if key not in seen:
            seen.add(key)
            out.append(m)
    return out
