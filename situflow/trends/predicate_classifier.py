"""The predicate classifier of COGRA (SIGMOD 2019 §3.2, §7): where each predicate applies.

``[attrs]`` partitions the stream; a predicate on one variable is local (it filters the events
that may take that position, before contiguity is judged, §7); ``X.a ⊙ NEXT(Y).b`` restricts
adjacency between an ``X`` and a following ``Y`` event, on every transition from an ``X``
position to a ``Y`` position. :mod:`situflow.lang.validate_cogra` has checked the predicates.
"""

from __future__ import annotations

from dataclasses import dataclass

from situflow.lang import ast
from situflow.lang.cogra import CograQuery, Equivalence, KleeneLength
from situflow.lang.validate import error
from situflow.lang.validate_cogra import adjacent_sides, variables_in
from situflow.trends.configuration import Atom


@dataclass(frozen=True)
class ClassifiedPredicates:
    """The WHERE clause by kind: local predicates per position and per negation, adjacent
    predicates, and the equivalence attributes."""

    local: list[list[ast.Node]]
    negation_local: list[list[ast.Node]]
    atoms: list[Atom]
    equivalence: tuple[str, ...]


def classify_predicates(query: CograQuery, variables: dict[str, list[int]],
                        negated: dict[str, int], follow: list[set[int]]) -> ClassifiedPredicates:
    """Sort the conjuncts of ``query``'s WHERE clause for an automaton whose ``variables``
    take the listed positions and whose transitions are ``follow``."""
    local: list[list[ast.Node]] = [[] for _ in follow]
    negation_local: list[list[ast.Node]] = [[] for _ in negated]
    atoms: list[Atom] = []
    equivalence: list[str] = []
    for conjunct in query.where:
        if isinstance(conjunct, Equivalence):
            equivalence.extend(a for a in conjunct.attrs if a not in equivalence)
            continue
        if any(isinstance(n, KleeneLength) for n in conjunct.walk()):
            continue  # a minimal length, already unrolled into the pattern
        current, following = variables_in(conjunct)
        if not following:
            (name,) = current
            if name in negated:
                negation_local[negated[name]].append(conjunct)
            for p in variables.get(name, []):
                local[p].append(conjunct)
            continue
        atoms.extend(_atoms(conjunct, variables, follow))
    return ClassifiedPredicates(local, negation_local, atoms, tuple(equivalence))


def _atoms(conjunct: ast.Node, variables: dict[str, list[int]],
           follow: list[set[int]]) -> list[Atom]:
    """The adjacent predicate ``conjunct`` on every transition from an ``X`` position to a
    ``Y`` position (a variable has several positions after the Appendix C rewrites)."""
    op, prev_expr, next_expr, x, y = adjacent_sides(conjunct)
    atoms = [Atom(p, q, op, prev_expr, next_expr)
             for p in variables[x] for q in variables[y] if q in follow[p]]
    if not atoms:
        raise error(conjunct, f"NEXT({y}) never follows {x} in the pattern, so this predicate "
                              "could never apply")
    return atoms
