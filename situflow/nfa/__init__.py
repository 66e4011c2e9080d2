"""SASE+ sequential pattern matching with the NFA^b model (Agrawal et al., SIGMOD 2008, §3–5).

Laid out by concern, as Flink CEP's ``nfa/``:

- ``compiler/``: a validated query to an immutable
  :class:`~situflow.nfa.compiler.automaton.Automaton` (§3.2, Steps 1–6), with its selection
  strategies, value slots and the predicate programs of the compiled loop;
- ``sharedbuffer/``: the shared match buffer (§5.1) and the paper's Dewey versions;
- ``kernel/``: the per-event loop compiled with numba, its state kept in arrays across batches,
  and the compressed output mode of §4.2;
- at the top, the runtime: ``operator`` (runs, §5.2; run merging, §5.2.2; window pruning,
  §5.3; negation, §3.1; ``CONSUME``, §2, §5.2.1), ``prepass`` (the columnar pre-pass over a
  batch), ``transitions`` (one run's moves), ``runs``, ``matches`` and ``backtrack`` (the
  paper's baseline, §5.2.3).

The SASE+ front end that chooses between NFA^b and cost-based plans is :mod:`situflow.sase`.
"""
