"""The queries one evaluating service runs, by name, and the rules a query must pass to run.

A service evaluates the queries of its languages that its stream allows (the stream's rule,
e.g. "a query must partition by the stream's key attributes", is given by the caller). The
set has a ``version`` that changes with every change, so each partition's operators
(:class:`~situflow.runtime.partition.PartitionOperators`) follow it cheaply.
"""

from __future__ import annotations

from collections.abc import Callable

from situflow.devices.vector import shared_device
from situflow.errors import SituflowError
from situflow.lang.attributes import AttributeTypes
from situflow.operator import CompiledQuery, QueryOptions


def _as_is(query: CompiledQuery) -> CompiledQuery:
    return query


def _any_query(query: CompiledQuery) -> None:
    return None


class QuerySet:
    """The queries a service evaluates, by name; ``version`` changes with every change.

    ``prepare`` turns a compiled query into what the service evaluates (the deriver and the
    matcher evaluate one half of a TPStream query each). ``stream_check`` raises
    ``SituflowError`` unless the stream allows the query. ``registered_at`` holds, per name,
    the registry offset of its registration (-1: from a file); a re-submit of the same text
    keeps the first. ``handoffs`` names the queries submitted with a backfill, which the
    deriver begins per key at quiet events (:mod:`situflow.runtime.begins`).
    """

    def __init__(self, service: str, languages: frozenset[str], *, time_field: str,
                 time_unit: float = 1.0,
                 stream_check: Callable[[CompiledQuery], None] = _any_query,
                 prepare: Callable[[CompiledQuery], CompiledQuery] = _as_is,
                 device: str = "cpu") -> None:
        # Opened once, at once: a service asked for OpenCL without it stops here, with the
        # reason, rather than at its first query (DeviceUnavailable).
        shared_device(device)
        self.device = device
        self.service = service
        self.languages = languages
        self.time_field = time_field
        self.time_unit = time_unit
        self.stream_check = stream_check
        self.prepare = prepare
        self.compiled: dict[str, CompiledQuery] = {}
        # Per query what it requires of its events' attributes (the typing rule).
        self.types: dict[str, AttributeTypes] = {}
        self.registered_at: dict[str, int] = {}
        self.handoffs: set[str] = set()
        self.version = 0

    def options(self, name: str) -> QueryOptions:
        """How the query ``name`` reads this service's stream (its time unit for durations)
        and where its predicates are evaluated (the ``device`` setting)."""
        return QueryOptions(name=name, time_unit=self.time_unit, device=self.device)

    def check(self, query: CompiledQuery) -> None:
        """Raise ``SituflowError`` unless this service can evaluate ``query``."""
        if query.language not in self.languages:
            raise SituflowError(f"the {self.service} service evaluates "
                                f"{'/'.join(sorted(self.languages))} queries, not {query.language}")
        self.stream_check(query)

    def add(self, query: CompiledQuery, registered_at: int = -1, handoff: bool = False) -> None:
        self.check(query)
        current = self.compiled.get(query.name)
        if current is not None and current.query_id == query.query_id:
            return  # the same text again: it goes on from its first registration
        self.compiled[query.name] = self.prepare(query)
        self.types[query.name] = query.attribute_types.without({self.time_field, "type", "id"})
        self.registered_at[query.name] = registered_at
        if handoff:
            self.handoffs.add(query.name)
        else:
            self.handoffs.discard(query.name)
        self.version += 1

    def remove(self, name: str) -> None:
        self.registered_at.pop(name, None)
        self.handoffs.discard(name)
        self.types.pop(name, None)
        if self.compiled.pop(name, None) is not None:
            self.version += 1
