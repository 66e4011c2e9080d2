"""Situation records: what the deriver sends the matcher in distributed TPStream (thesis §5.6.5;
the design: :mod:`situflow.tpstream.split`).

A record is about one situation of one definition (``situation``, the variable name) of one
partition ``key``, at the event whose processing produced it: its event time ``at`` and its
input position ``seq``.

=============  ===================================================================================
``kind``       meaning
=============  ===================================================================================
``started``    the situation becomes visible to matching while still running: at its first event,
               or, for ``AT LEAST d``, at its first event ``d`` after its start (§5.5.3, deferred
               start). ``te`` is null; ``values`` are its aggregates over its events so far (up
               to and including this event).
``running``    a started situation still runs at an event where another situation of its key
               changed and matching is possible (every definition has a visible situation
               within the window); ``values`` are its aggregates so far. A low-latency match
               that includes a running situation reports these (§5.5.3).
``finished``   the situation ended at this event (Def 5.1: ``te`` is the time of the first event
               that fails the condition, ``te = at``); ``values`` are its final aggregates. If
               it had started, it stops running; otherwise it appears finished (an upper-bounded
               situation is known to satisfy its duration only at its end). ``te == ts``: a
               started situation whose events all share one time is no interval and is
               withdrawn (Def 5.1 needs ``ts < te``).
=============  ===================================================================================

Records come in stream order, and all records of one event together (a *step*: the same
``key`` and ``seq``; started and finished ones first, then running ones). ``values`` maps an
aggregate of the RETURN clause over this situation's definition, named like ``sum(B.speed)``
or ``count(B)``, to its value; definitions the RETURN clause does not aggregate carry none,
and no ``running`` records. Events at which no situation changes produce no record: the
matcher decides only at situation changes (a situation ends at an event, never by time alone),
so it needs neither watermarks nor heartbeats.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from situflow.errors import InputError
from situflow.results import result_id
from situflow.tpstream.query import AggregateRef, TPStreamQuery

STARTED, RUNNING, FINISHED = "started", "running", "finished"
KINDS = (STARTED, RUNNING, FINISHED)


@dataclass(frozen=True, slots=True)
class SituationRecord:
    """One situation update (see the module doc for the kinds)."""

    kind: str
    key: Any
    situation: str
    ts: int
    te: int | None
    at: int
    seq: int
    values: dict[str, Any]

    def to_dict(self, query: str) -> dict[str, Any]:
        """The record as a self-describing JSON object, with its id (for tests and reading;
        the ``situations`` topic carries the positional :meth:`to_row`)."""
        return {"query": query, "key": self.key, "situation": self.situation, "kind": self.kind,
                "ts": self.ts, "te": self.te, "at": self.at, "seq": self.seq,
                "values": self.values, "id": self.record_id(query)}

    @classmethod
    def from_dict(cls, value: Any) -> SituationRecord:
        """A record from its JSON object; ``InputError`` names what is wrong."""
        if not isinstance(value, dict):
            raise InputError("a situation record must be a JSON object")
        try:
            kind, situation = value["kind"], value["situation"]
            ts, te, at, seq = value["ts"], value["te"], value["at"], value["seq"]
            key, values = value["key"], value.get("values") or {}
        except KeyError as exc:
            raise InputError(f"a situation record lacks {exc}") from None
        return cls.checked(kind, key, situation, ts, te, at, seq, values)

    def to_row(self) -> list[Any]:
        """The record as a JSON array (without query and id: inside a situation batch)."""
        return [self.kind, self.key, self.situation, self.ts, self.te, self.at, self.seq,
                self.values]

    @classmethod
    def from_row(cls, row: Any) -> SituationRecord:
        """A record from :meth:`to_row`; ``InputError`` names what is wrong."""
        if not isinstance(row, list) or len(row) != 8:
            raise InputError("a situation record row must be a JSON array of 8 fields")
        return cls.checked(*row)

    @classmethod
    def checked(cls, kind: Any, key: Any, situation: Any, ts: Any, te: Any, at: Any, seq: Any,
                values: Any) -> SituationRecord:
        """A record from its fields, once they have the right kinds and types."""
        if kind not in KINDS:
            raise InputError(f"unknown situation record kind {kind!r}")
        if not (isinstance(ts, int) and isinstance(at, int) and isinstance(seq, int)
                and (te is None or isinstance(te, int)) and isinstance(values, dict)):
            raise InputError("a situation record's ts, at, seq (and te) must be integers")
        return cls(kind, key, situation, ts, te, at, seq, values)

    def record_id(self, query: str) -> str:
        """Deterministic: the same update derived again (after a redelivery) has the same id."""
        return result_id(query, self.key, [self.situation, self.kind, self.ts, self.seq])


def aggregate_name(query: TPStreamQuery, ref: AggregateRef) -> str:
    """How a record names an aggregate: ``count(B)``, ``avg(B.speed)``."""
    situation = query.definitions[ref.defn].name
    return f"{ref.func}({situation})" if ref.attr is None else f"{ref.func}({situation}.{ref.attr})"
