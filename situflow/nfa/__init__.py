"""SASE+ sequential pattern matching with the NFA^b model (Agrawal et al., SIGMOD 2008, §3–5).

``compiler`` turns a validated query into an immutable :class:`~situflow.nfa.automaton.Automaton`
(§3.2, Steps 1–6); ``operator`` runs it over event batches with runs (§5.2), the shared match
buffer (``sharedbuffer``, §5.1), Dewey versions (``versions``), run merging (§5.2.2), window
pruning (§5.3), negation (§3.1) and the ``CONSUME`` non-overlap policy (§2, §5.2.1). Queries the
compiled loop covers run in numba (``kernel``) on state kept in arrays (``arrays``), and their
matches leave in the compressed output mode of §4.2 (``compressed``); ``backtrack`` is the
paper's baseline (§5.2.3).
``query.compile`` is the entry point the language registry calls for ``PATTERN`` queries.
"""
