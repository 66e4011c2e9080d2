"""The granularity selector of COGRA (SIGMOD 2019 §3.3, Table 5): how aggregates are kept.

ANY without adjacent predicates is type-grained (§4), ANY with them mixed-grained (§5;
fine-grained when every position is event-grained), NEXT and CONT pattern-grained (§6). For
NEXT the paper's Algorithm 3 keeps only the last matched event; it equals Definition 2.6 only
when no matched event can leave an older partial trend waiting (:func:`algorithm3_is_exact`).
Elsewhere the executor keeps the *pending* partial-trend aggregates of each position until
their next adjacent event consumes them, which is Definition 2.6 exactly and still never
enumerates trends (``SEMANTICS.md``, COGRA).
"""

from __future__ import annotations

from situflow.trends.configuration import Atom, Position
from situflow.trends.kernel import ANY, CONT, NEXT_ALG3


def algorithm3_is_exact(
    positions: tuple[Position, ...] | list[Position],
    start: tuple[bool, ...],
    follow: tuple[tuple[int, ...], ...],
    atoms: list[Atom] | tuple[Atom, ...],
) -> bool:
    """Whether Algorithm 3's single last matched event gives Definition 2.6's trends.

    Algorithm 3 replaces the last matched event ``e_l`` by every matched event ``e``. Under
    Definition 2.6 a partial trend ending at ``e_l`` stays open until the first event adjacent
    to it; it is lost only if ``e`` is matched without being adjacent to ``e_l``. That cannot
    happen when (1) every event takes at most one position (no repeated types), so ``e_l`` is
    one partial-trend end, and (2) every start position follows every position that has a
    successor, with no adjacent predicate on that transition: then a start event ``e`` is
    adjacent to whatever ``e_l`` is, and a non-start event is matched only if adjacent to it.
    """
    types = [p.type_name for p in positions]
    if len(set(types)) != len(types):
        return False
    guarded = {(a.prev, a.next) for a in atoms}
    for p, successors in enumerate(follow):
        if not successors:
            continue
        for q, is_start in enumerate(start):
            if is_start and (q not in successors or (p, q) in guarded):
                return False
    return True


def select_granularity(
    mode: int,
    positions: list[Position],
    start: tuple[bool, ...],
    follow: tuple[tuple[int, ...], ...],
    atoms: list[Atom],
    negated: bool,
) -> tuple[int, str, str]:
    """Table 5: the executor mode, the granularity and a description of the path taken."""
    if mode == ANY:
        if not atoms:
            return mode, "type", "type-grained (Algorithm 1): one aggregate per position"
        grained = sorted({a.prev for a in atoms})
        if len(grained) == len(positions):
            return mode, "mixed", ("mixed-grained with no type-grained position, i.e. the "
                                   "fine-grained fallback (§5): every matched event is kept")
        return mode, "mixed", "mixed-grained (Algorithm 2): matched events kept for " + \
            ", ".join(dict.fromkeys(positions[p].variable for p in grained))
    if mode == CONT:
        return mode, "pattern", ("pattern-grained (Algorithm 3, contiguous): only the last "
                                 "event's aggregates are kept")
    # A negation keeps partial trends open for other successors, as repeated types do.
    if not negated and algorithm3_is_exact(positions, start, follow, atoms):
        return NEXT_ALG3, "pattern", ("pattern-grained, Algorithm 3 (last matched event), exact "
                                      "for this pattern under Definition 2.6")
    return mode, "pattern", ("pattern-grained with pending partial-trend aggregates per "
                             "position (Definition 2.6; Algorithm 3's single last matched "
                             "event would drop partial trends for this pattern)")
