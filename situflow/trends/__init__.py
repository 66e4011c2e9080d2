"""COGRA: online event trend aggregation under every matching semantics (Poppe et al., SIGMOD 2019).

- :mod:`situflow.trends.analyze`: the static query analyzer of §3, Fig. 3
  (:mod:`~.pattern_analyzer`, :mod:`~.predicate_classifier`, :mod:`~.granularity_selector`),
  producing the immutable :class:`~.configuration.TrendPlan`;
- :mod:`situflow.trends.kernel`: the runtime executor of §4–7 as one numba kernel (type-,
  mixed- and pattern-grained aggregation, the Table 9 update rules, windows and groups);
- :mod:`situflow.trends.operator`: the streaming operator (batches, windows, results, state);
- :mod:`situflow.trends.conjunction`: ``P1 AND P2``, one executor per side, combined per window;
- :mod:`situflow.trends.query`: ``compile(text, options)`` for the language registry.

Semantic decisions (``SEMANTICS.md``, COGRA section; tested against a brute-force enumerator
of the definitions in ``tests/trends/reference.py``):

- the trends are those of Definitions 2.4 (skip-till-any-match), 2.6 (skip-till-next-match)
  and 2.8 (contiguous); where the paper's Algorithm 3 disagrees with Definition 2.6 (an event
  with several possible predecessors), the definition wins, and Algorithm 3 runs only where it
  is provably equal (:func:`situflow.trends.granularity_selector.algorithm3_is_exact`);
- "earlier" in Definitions 2.4–3.2 is stream order, (time, sequence number): events with
  equal time stamps may follow each other in a trend in arrival order, as for every operator;
- a trend is a sequence of (event, pattern variable) bindings, so ``COUNT(A)`` and
  ``SUM(A.x)`` count an event by the variable it takes; every aggregate counts an event once
  per trend it is in (§2.3);
- local predicates drop events before contiguity is judged (§7): an event that can take no
  position of its type is not part of the stream; events of types outside the pattern stay
  and are irrelevant events (they break contiguous trends, Example 2.7);
- ``[attrs]`` and GROUP-BY split the stream into sub-streams (§7); events of other
  sub-streams are invisible to a trend, also for contiguity;
- a trend is in window ``k`` when all its events have ``k·SLIDE <= time < k·SLIDE + WITHIN``;
  windows start at 0;
- Appendix C: ``P*`` is sugar for a disjunction (``SEQ(P1*, P2) = SEQ(P1+, P2) OR P2``), each
  alternative judged by the semantics on its own; ``OR`` is the set union of its sides'
  trends, whose aggregates add when no trend matches both sides, which is GRETA's (Poppe et
  al., VLDB 2017) ``COUNT(P1) + COUNT(P2) - COUNT(P12)`` with ``P12`` empty; a pattern that
  could match one trend in two ways is refused; ``P1 AND P2`` matches a pair of trends, one of
  each side (GRETA's conjunction), each side judged on its own, in one window and partition,
  and is aggregated over both trends' bindings
  (:mod:`situflow.trends.conjunction`: ``COUNT(*) = C1·C2``, ``SUM = S1·C2 + C1·S2``);
  ``LENGTH(A) >= m`` unrolls ``A+``; ``SEQ(P1, NOT N, P2)`` matches ``s1 : s2`` when no ``N``
  event lies between ``s1``'s last and ``s2``'s first event, and such a pair is then not
  adjacent for skip-till-next-match either (a partial trend stays open for its other
  successors);
- adjacent predicates compare numbers; ``=`` and ``!=`` also compare strings; a missing or
  non-numeric operand makes the predicate false. ``SUM``/``MIN``/``MAX`` skip missing values.
"""
