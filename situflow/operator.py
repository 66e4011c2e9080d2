"""The streaming operator API every engine implements (TPStream, SASE+, COGRA).

Lifecycle, in call order (as bytewax's ``StatefulLogic``, Flink's ``process``/``advanceTime``):

- ``process(batch)``: consume a columnar batch of events in stream order; return the results
  that became certain while processing it, ordered by the event that emitted them;
- ``advance_to(watermark)``: event time has reached ``watermark`` without events (idle
  partitions, trailing negation timeouts); return what that releases;
- ``finish()``: the bounded input has ended; return what the end releases;
- ``snapshot()``: the whole state as JSON-able plain data in the envelope of
  :mod:`situflow.snapshot`; ``CompiledQuery.restore(snapshot)`` rebuilds an operator that
  continues exactly where this one stopped;
- ``stats()``: gauges of the operator's state for monitoring (``open_situations``,
  ``partial_matches``, ...), each a count; services export them without knowing the engine.

A ``CompiledQuery`` is immutable and shared by every partition key and every operator instance
(in the CLI, the services and the Spark jobs); per-key state lives in the operator.
Feeding the same events in any batch sizes gives identical results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from situflow.events import EventBatch
from situflow.lang.attributes import AttributeTypes
from situflow.results import Match, TrendResult

Result = Match | TrendResult


@dataclass(frozen=True, slots=True)
class QueryOptions:
    """How a query reads its stream."""

    # Name put into every result's "query" field.
    name: str = "query"
    # Seconds per event-time tick: durations such as `5 minutes` are converted with it.
    time_unit: float = 1.0
    # Field that names an event's type (SASE+/COGRA patterns); hidden from predicates.
    type_field: str = "type"
    # Where event-local predicates are evaluated: "cpu", "opencl" or "auto" (SITUFLOW_DEVICE;
    # situflow.devices.vector). Results are identical on every device.
    device: str = "cpu"


class Operator(Protocol):
    def process(self, batch: EventBatch) -> Sequence[Result]: ...

    def advance_to(self, watermark: int) -> Sequence[Result]: ...

    def finish(self) -> Sequence[Result]: ...

    def snapshot(self) -> dict[str, Any]: ...

    def stats(self) -> dict[str, int]: ...


class CompiledQuery(Protocol):
    language: str
    name: str
    # Hash of the canonical text: the same query in other whitespace or case has the same id.
    query_id: str

    def canonical(self) -> str: ...

    # The attributes that split the stream into independent parts: events that differ in one of
    # them never meet in a result.
    @property
    def partition_attributes(self) -> tuple[str, ...]: ...

    def describe(self) -> str: ...

    # What the query requires of its events' attributes (SEMANTICS.md, typing rule).
    @property
    def attribute_types(self) -> AttributeTypes: ...

    def operator(self) -> Operator: ...

    def restore(self, snapshot: dict[str, Any]) -> Operator: ...
