"""NFA^b construction (SASE+ §3.2): :func:`~situflow.nfa.compiler.builder.compile_automaton`
builds the immutable :class:`~situflow.nfa.compiler.automaton.Automaton` that every partition
shares; ``selection``, ``values`` and ``programs`` are the parts it is made of."""
