"""Brute-force enumeration of skip-till-any-match matches, straight from the definition.

Deliberately shares no code with :mod:`situflow.plan`: every combination of events — one per
component, every non-empty subsequence per Kleene component — is tried against the types,
filters, pairwise conditions (on every selected event of a Kleene component), the SEQ/AND
precedence, the inclusive window ``max(ts) - min(ts) <= W`` and the negation intervals of
SEMANTICS.md. Exponential; for streams of a dozen events.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from situflow.plan.pattern import Event, Pattern

Key = tuple[tuple[str, tuple[int, ...]], ...]


def _passes(pattern: Pattern, var: str, event: Event) -> bool:
    return all(f.fn(event) for f in pattern.filters if f.var == var)


def _ordered_pairs(pattern: Pattern) -> set[tuple[int, int]]:
    n = pattern.size
    if pattern.sequence:
        return {(i, j) for i in range(n) for j in range(i + 1, n)}
    pairs = set(pattern.before)
    for _ in range(n):
        pairs |= {(a, d) for a, b in pairs for c, d in pairs if b == c}
    return pairs


def matches(pattern: Pattern, events: Sequence[Event]) -> list[Key]:
    comps = pattern.components
    index = {c.var: i for i, c in enumerate(comps)}
    options = []
    for comp in comps:
        candidates = [e for e in events if e.type == comp.type and _passes(pattern, comp.var, e)]
        if comp.kleene:
            options.append(
                [
                    subset
                    for size in range(1, len(candidates) + 1)
                    for subset in itertools.combinations(candidates, size)
                ]
            )
        else:
            options.append([(e,) for e in candidates])
    ordered = _ordered_pairs(pattern)
    found = []
    for combo in itertools.product(*options):
        chosen = [e for part in combo for e in part]
        if len({e.seq for e in chosen}) != len(chosen):
            continue
        if max(e.ts for e in chosen) - min(e.ts for e in chosen) > pattern.window:
            continue
        if any(max(x.seq for x in combo[i]) >= min(y.seq for y in combo[j]) for i, j in ordered):
            continue
        if not all(
            pred.fn(x, y)
            for pred in pattern.predicates
            if pred.left in index and pred.right in index
            for x in combo[index[pred.left]]
            for y in combo[index[pred.right]]
        ):
            continue
        if any(_negated(pattern, k, combo, events) for k in range(len(pattern.negations))):
            continue
        found.append(tuple((c.var, tuple(e.seq for e in part)) for c, part in zip(comps, combo, strict=True)))
    return found


def _negated(pattern: Pattern, k: int, combo: tuple, events: Sequence[Event]) -> bool:
    """Whether some event of negation ``k``'s type sits in its interval and relates."""
    neg = pattern.negations[k]
    n, w = pattern.size, pattern.window
    index = {c.var: i for i, c in enumerate(pattern.components)}
    first, last = combo[0][0], combo[n - 1][-1]
    for x in events:
        if x.type != neg.type or not _passes(pattern, neg.var, x):
            continue
        if neg.position == 0:
            inside = x.seq < first.seq and x.ts >= last.ts - w
        elif neg.position == n:
            inside = x.seq > last.seq and x.ts <= first.ts + w
        else:
            inside = combo[neg.position - 1][-1].seq < x.seq < combo[neg.position][0].seq
        if not inside:
            continue
        related = True
        for pred in pattern.predicates:
            if pred.left == neg.var:
                related &= all(pred.fn(x, y) for y in combo[index[pred.right]])
            elif pred.right == neg.var:
                related &= all(pred.fn(y, x) for y in combo[index[pred.left]])
        if related:
            return True
    return False
