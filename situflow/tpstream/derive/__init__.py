"""Situation derivation (thesis §5.4, Alg. 5.1): the compiled per-event loop
(:mod:`~situflow.tpstream.derive.kernel`), the per-key state it runs on
(:mod:`~situflow.tpstream.derive.state`), and the aggregates of finished and running situations
(:mod:`~situflow.tpstream.derive.aggregates`). Every path derives with this code."""
