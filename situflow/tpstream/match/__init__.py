"""Low-latency matching (thesis §5.5): Allen's relations over intervals
(:mod:`~situflow.tpstream.match.allen`), the situation buffers and their range queries
(:mod:`~situflow.tpstream.match.situations`, Fig. 5.3), evaluation orders
(:mod:`~situflow.tpstream.match.planner`, eqs. 5.2-5.6), and the matching itself with its
step-loop contract (:mod:`~situflow.tpstream.match.pattern`, Alg. 5.3/5.4)."""
