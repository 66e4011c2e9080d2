"""Allen's 13 interval relations (Allen 1983) on half-open situations ``[ts, te)``.

The names and their standard meanings are the language's: :mod:`situflow.lang.allen`.

Every relation ``X r Y`` is a conjunction of one condition on ``Y.ts`` and one on ``Y.te``,
each relative to X's endpoints; :data:`RANGES` states them, and the matcher turns them into
binary searches over situation buffers sorted by start (and, as situations of one definition
are disjoint, by end too): thesis §5.5.2, Fig. 5.3.
"""

from __future__ import annotations

# The vocabulary belongs to the language; the engine adds the relations' meaning over intervals.
from situflow.lang.allen import INVERSE, RELATIONS

__all__ = ["INVERSE", "RANGES", "RELATIONS", "SELECTIVITY", "relation"]

# Initial selectivities, thesis Table 5.3 (mirror relations are equivalent).
SELECTIVITY = {
    "before": 0.445, "after": 0.445, "during": 0.03, "contains": 0.03, "overlaps": 0.01,
    "overlapped-by": 0.01, "starts": 0.0049, "started-by": 0.0049, "finishes": 0.0049,
    "finished-by": 0.0049, "meets": 0.0049, "met-by": 0.0049, "equals": 0.0006,
}


def relation(xs: float, xe: float, ys: float, ye: float) -> str:
    """The one relation that holds between intervals X=[xs, xe) and Y=[ys, ye).

    >>> relation(1, 3, 5, 8), relation(1, 5, 3, 8), relation(3, 8, 1, 8)
    ('before', 'overlaps', 'finishes')
    """
    if xe < ys:
        return "before"
    if ye < xs:
        return "after"
    if xe == ys:
        return "meets"
    if ye == xs:
        return "met-by"
    if xs == ys:
        return "equals" if xe == ye else ("starts" if xe < ye else "started-by")
    if xe == ye:
        return "finishes" if xs > ys else "finished-by"
    if xs < ys:
        return "contains" if ye < xe else "overlaps"
    return "during" if xe < ye else "overlapped-by"


# Bound kinds for a condition on one endpoint of Y: (low, low_inclusive, high, high_inclusive),
# where low/high name an endpoint of X ("s" or "e") or None for unbounded.
Bound = tuple[str | None, bool, str | None, bool]
_ANY: Bound = (None, False, None, False)
_LT_S: Bound = (None, False, "s", False)  # y < X.ts
_LT_E: Bound = (None, False, "e", False)
_GT_S: Bound = ("s", False, None, False)
_GT_E: Bound = ("e", False, None, False)
_EQ_S: Bound = ("s", True, "s", True)
_EQ_E: Bound = ("e", True, "e", True)
_IN_SE: Bound = ("s", False, "e", False)  # X.ts < y < X.te

# relation -> (condition on Y.ts, condition on Y.te) for "X relation Y".
RANGES: dict[str, tuple[Bound, Bound]] = {
    "before": (_GT_E, _ANY),
    "after": (_ANY, _LT_S),
    "meets": (_EQ_E, _ANY),
    "met-by": (_ANY, _EQ_S),
    "overlaps": (_IN_SE, _GT_E),
    "overlapped-by": (_LT_S, _IN_SE),
    "starts": (_EQ_S, _GT_E),
    "started-by": (_EQ_S, _LT_E),
    "during": (_LT_S, _GT_E),
    "contains": (_GT_S, _LT_E),
    "finishes": (_LT_S, _EQ_E),
    "finished-by": (_GT_S, _EQ_E),
    "equals": (_EQ_S, _EQ_E),
}
