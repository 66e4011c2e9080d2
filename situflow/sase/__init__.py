"""``PATTERN`` queries: the entry point of the language registry (``situflow.languages``).

``compile(text, options)`` parses and validates the SASE+ text (:mod:`situflow.lang.sase`),
builds the automaton (:mod:`situflow.nfa.compiler.builder`) and returns an immutable
:class:`SaseCompiledQuery` that makes operators for any number of partitions and restores them
from snapshots. A query the Kolchinsky-Schuster pattern model can express (skip-till-any-match,
unary and pairwise conditions, negation, Kleene plus without iteration predicates; see
:mod:`situflow.sase.planned`) runs on a cost-based plan; every other one on NFA^b. Both give the
same results; ``describe()`` names the engine and, for a plan, the plan and its cost.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from situflow.lang import sase
from situflow.lang.attributes import AttributeTypes
from situflow.lang.identity import query_id
from situflow.lang.validate_sase import validate
from situflow.nfa.compiler.automaton import Automaton
from situflow.nfa.compiler.builder import compile_automaton
from situflow.nfa.operator import NfaOperator
from situflow.operator import QueryOptions
from situflow.sase.planned import DEFAULT_ALGORITHM, PlannedOperator, PlannedQuery, translate


@dataclass(frozen=True)
class SaseCompiledQuery:
    language: str
    name: str
    query_id: str
    ast: sase.SaseQuery
    automaton: Automaton
    # The cost-based plan setup, or None when NFA^b evaluates the query.
    planned: PlannedQuery | None = None
    # Why NFA^b evaluates the query (empty when it is planned).
    unplanned_reason: str = ""
    # QueryOptions.device: off the CPU, the cooperative matcher of situflow.nfa.cooperative.matcher
    # takes the queries it covers (planned or not: the results are the same).
    device: str = "cpu"

    def canonical(self) -> str:
        return self.ast.to_text()

    @property
    def partition_attributes(self) -> tuple[str, ...]:
        """The ``[attr]`` tests and ``PARTITION BY``."""
        return self.ast.partition_attrs()

    @functools.cached_property
    def attribute_types(self) -> AttributeTypes:
        return sase.attribute_types(self.ast)

    def describe(self) -> str:
        if self.planned is not None:
            return f"{self.canonical()}\n{self.planned.initial_plan_text()}"
        reason = f" ({self.unplanned_reason})" if self.unplanned_reason else ""
        return f"{self.canonical()}\nevaluation: NFA^b{reason}\n{self.automaton.describe()}"

    def operator(self, merge_runs: bool = True,
                 compiled: bool = True) -> NfaOperator | PlannedOperator:
        """``compiled=False`` keeps NFA^b on its Python loop (:class:`NfaOperator`)."""
        if self.device != "cpu" and compiled:
            # Imported here: the CPU path loads neither the device layer nor numba at start.
            from situflow.nfa.cooperative.operators import cooperative_operator

            found = cooperative_operator(self, self.device)
            if found is not None:
                return found
        if self.planned is not None:
            return PlannedOperator(self.automaton, self.planned, self.name, self.query_id)
        return NfaOperator(self.automaton, self.name, self.query_id, merge_runs, compiled)

    def restore(self, snapshot: dict[str, Any]) -> NfaOperator | PlannedOperator:
        """The operator ``snapshot`` was taken of; ``StateError`` if another query (or the
        other engine) made it."""
        if self.device != "cpu":
            from situflow.nfa.cooperative.operators import cooperative_operator

            found = cooperative_operator(self, self.device, snapshot)
            if found is not None:
                return found
        if self.planned is not None:
            return PlannedOperator.restore(self.automaton, self.planned, self.name,
                                           self.query_id, snapshot)
        return NfaOperator.restore(self.automaton, self.name, self.query_id, snapshot)


def compile(text: str, options: QueryOptions | None = None, *,
            plan: str | None = DEFAULT_ALGORITHM, check_every: int = 1000) -> SaseCompiledQuery:
    """Parse, validate and compile a SASE+ query; errors are located ``QueryError``s.

    ``plan`` names the plan generator (:data:`situflow.plan.GENERATORS`) for queries the
    pattern model expresses, or ``AUTO`` (the default: NFA^b unless a measured plan beats it,
    :class:`~situflow.sase.planned.PlannedOperator`); ``None`` forces NFA^b; ``check_every``
    is how many events pass between drift tests of the adaptive evaluator.
    """
    options = options or QueryOptions()
    query = sase.parse(text)
    validate(query, options.type_field)
    identity = query_id(query.to_text())
    automaton = compile_automaton(query, options.time_unit, options.device)
    if plan is None:
        return SaseCompiledQuery("sase", options.name, identity, query, automaton,
                                 unplanned_reason="plans switched off", device=options.device)
    planned = translate(query, automaton, plan, check_every)
    if isinstance(planned, str):
        return SaseCompiledQuery("sase", options.name, identity, query, automaton,
                                 unplanned_reason=planned, device=options.device)
    return SaseCompiledQuery("sase", options.name, identity, query, automaton, planned,
                             device=options.device)
