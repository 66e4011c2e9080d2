"""Allen's 13 interval relations (Allen 1983): the names TPStream's PATTERN clause uses.

situflow uses the **standard** meanings. The TPStream papers' Table 1 / thesis Table 5.1 define
``A finishes B`` as ``A.ts < B.ts < A.te = B.te``, which is standard ``A finished-by B``; port
a seed query by swapping ``finishes`` and ``finished-by`` (SEMANTICS.md). The relations'
semantics over intervals live with the engine, in :mod:`situflow.tpstream.match.allen`.
"""

from __future__ import annotations

# In the order the printer writes alternatives and error messages list them.
RELATIONS = (
    "before", "after", "meets", "met-by", "overlaps", "overlapped-by", "starts", "started-by",
    "during", "contains", "finishes", "finished-by", "equals",
)

# "X r Y" holds exactly when "Y INVERSE[r] X" holds.
INVERSE = {
    "before": "after", "after": "before", "meets": "met-by", "met-by": "meets",
    "overlaps": "overlapped-by", "overlapped-by": "overlaps", "starts": "started-by",
    "started-by": "starts", "during": "contains", "contains": "during",
    "finishes": "finished-by", "finished-by": "finishes", "equals": "equals",
}
