"""``PATTERN`` queries: the entry point of the language registry (``situflow.queries``).

``compile(text, options)`` parses and validates the SASE+ text (:mod:`situflow.lang.sase`),
builds the automaton (:mod:`situflow.nfa.compiler`) and returns an immutable
:class:`SaseCompiledQuery` that makes operators for any number of partitions and restores them
from snapshots.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from situflow.errors import StateError
from situflow.lang import sase
from situflow.nfa.automaton import Automaton
from situflow.nfa.compiler import compile_automaton
from situflow.nfa.operator import NfaOperator
from situflow.operator import QueryOptions


@dataclass(frozen=True)
class SaseCompiledQuery:
    language: str
    name: str
    query_id: str
    ast: sase.SaseQuery
    automaton: Automaton

    def canonical(self) -> str:
        return sase.canonical(self.ast)

    def describe(self) -> str:
        return f"{self.canonical()}\n{self.automaton.describe()}"

    def operator(self, merge_runs: bool = True) -> NfaOperator:
        return NfaOperator(self.automaton, self.name, merge_runs)

    def restore(self, snapshot: dict[str, Any]) -> NfaOperator:
        if snapshot.get("query_id", self.query_id) != self.query_id:
            raise StateError("the snapshot belongs to another query; start this one afresh")
        return NfaOperator.restore(self.automaton, self.name, snapshot)


def compile(text: str, options: QueryOptions | None = None) -> SaseCompiledQuery:
    """Parse, validate and compile a SASE+ query; errors are located ``QueryError``s."""
    options = options or QueryOptions()
    query = sase.parse_and_validate(text, options.type_field)
    canonical = sase.canonical(query)
    query_id = hashlib.blake2b(canonical.encode(), digest_size=8).hexdigest()
    return SaseCompiledQuery("sase", options.name, query_id, query,
                             compile_automaton(query, options.time_unit))
