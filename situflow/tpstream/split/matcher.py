"""The matcher of distributed TPStream: situation records in, matches out (thesis §5.6.5; the
design: :mod:`situflow.tpstream.split`).

Consumes the records of :class:`situflow.tpstream.split.deriver.SituationDeriver`
(:mod:`situflow.tpstream.split.records`) and runs the low-latency matching of the fused operator
(:class:`situflow.tpstream.match.pattern.PatternMatcher`, Alg. 5.3/5.4 with the certainty rule of
§5.5.3) on them, one *step* (the records of one event of one key) at a time:

- ``started`` makes the situation its definition's running one; ``finished`` ends the running
  one (filed if it is an interval) or, if none runs, files a situation that appears finished;
  ``running`` supplies a running situation's aggregates so far at this event;
- matching runs at a step where a situation changed and every definition has had a visible
  situation starting within the window (what the kernel's *feasible* flag says in the fused
  operator; the matcher keeps the start of each definition's last visible situation per key).

So it reports exactly the matches of :class:`situflow.tpstream.fused.TPStreamOperator` on
the same events, in the same order, with the same values and result ids
(``tests/tpstream/test_split.py``). Each :meth:`process` call takes whole steps, as the
deriver emits them for each batch; any grouping of whole steps gives the same results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from situflow.errors import InputError
from situflow.events import NEVER, hashable_key
from situflow.results import Match
from situflow.snapshot import unwrap, wrap
from situflow.tpstream.lifecycle import STATE_VERSION, EventDriven
from situflow.tpstream.match.pattern import Partition, PatternMatcher, RunningValues
from situflow.tpstream.match.situations import Situation
from situflow.tpstream.query import TPStreamQuery
from situflow.tpstream.split.records import FINISHED, STARTED, SituationRecord, aggregate_name

KIND = "tpstream-situation-matcher"


def _lookup(running: dict[int, list[Any] | None]) -> RunningValues:
    """The aggregates of a running situation from the step's records."""
    return lambda s: running.get(id(s))


class KeyState(Partition):
    """A key's buffers and running situations, and when its definitions were last visible."""

    __slots__ = ("last_visible",)

    def __init__(self, ndef: int):
        super().__init__(ndef)
        self.last_visible = [NEVER] * ndef


class SituationMatcher(PatternMatcher, EventDriven):
    """TPStream matching of one query over situation records of every key."""

    def __init__(self, query: TPStreamQuery):
        super().__init__(query)
        self.definitions = {d.name: i for i, d in enumerate(query.definitions)}
        # Per definition: (position in query.aggregates, name in the records).
        self.named = [[(k, aggregate_name(query, query.aggregates[k])) for k in refs]
                      for refs in self.refs_by_def]
        self.keys: dict[Any, tuple[Any, KeyState]] = {}  # hashable key -> (key, state)

    def process(self, records: Sequence[SituationRecord]) -> list[Match]:
        """File the records step by step and report what became certain at each step (the step
        loop of :mod:`situflow.tpstream.match.pattern`)."""
        results: list[Match] = []
        m, i = len(records), 0
        while i < m:
            first = records[i]
            key, seq, t = first.key, first.seq, first.at
            part = self._state(key)
            changes: list[tuple[Situation, bool]] = []
            running: dict[int, list[Any] | None] = {}
            j = i
            while j < m and records[j].seq == seq and records[j].key == key:
                self._apply(part, records[j], t, changes, running)
                j += 1
            if changes and self._feasible(part, t):
                results += self._match(part, key, t, changes, _lookup(running))
            i = j
        return results

    def _apply(self, part: KeyState, r: SituationRecord, t: int,
               changes: list[tuple[Situation, bool]], running: dict[int, list[Any] | None]) -> None:
        d = self.definitions.get(r.situation)
        if d is None:
            raise InputError(f"situation {r.situation!r} is not defined by query "
                             f"{self.query.name!r}")
        if r.kind == STARTED:
            s = Situation(d, r.ts)
            part.active[d] = s
            part.last_visible[d] = r.ts
            running[id(s)] = self._values(d, r.values)
            changes.append((s, True))
        elif r.kind == FINISHED:
            assert r.te is not None
            s_or_none = part.active[d]
            if s_or_none is not None:  # the started situation ends
                part.active[d] = None
                if r.te > s_or_none.ts:  # else no interval: withdrawn
                    s_or_none.te = r.te
                    s_or_none.values = self._values(d, r.values)
                    self._file(part.buffers[d], s_or_none, t - self.window)
                    changes.append((s_or_none, False))
            else:  # it appears finished
                s = Situation(d, r.ts, r.te, self._values(d, r.values))
                part.last_visible[d] = r.ts
                self._file(part.buffers[d], s, t - self.window)
                changes.append((s, True))
        else:
            active = part.active[d]
            if active is None:
                raise InputError(f"a running record of {r.situation!r} that has not started")
            running[id(active)] = self._values(d, r.values)

    def _feasible(self, part: KeyState, t: int) -> bool:
        bound = t - self.window
        return all(last >= bound for last in part.last_visible)

    def _values(self, d: int, named: dict[str, Any]) -> list[Any] | None:
        """A record's aggregates indexed like query.aggregates (only definition ``d``'s)."""
        refs = self.named[d]
        if not refs:
            return None
        values: list[Any] = [None] * len(self.query.aggregates)
        for k, name in refs:
            values[k] = named.get(name)
        return values

    def _state(self, key: Any) -> KeyState:
        hashable = hashable_key(key)
        found = self.keys.get(hashable)
        if found is None:
            found = self.keys[hashable] = (key, KeyState(self.ndef))
        return found[1]

    # --- the operator API -----------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        parts = [part for _, part in self.keys.values()]
        return {"open_situations": sum(s is not None for part in parts for s in part.active),
                "buffered_situations": sum(len(b) for part in parts for b in part.buffers)}

    def snapshot(self) -> dict[str, Any]:
        keys = [[key, part.to_state(), part.last_visible] for key, part in self.keys.values()]
        return wrap(KIND, STATE_VERSION, self.query.query_id,
                    {"keys": keys, "planner": self.planner.to_state()})

    @classmethod
    def restore(cls, query: TPStreamQuery, snapshot: dict[str, Any]) -> SituationMatcher:
        state = unwrap(KIND, STATE_VERSION, query.query_id, snapshot)
        op = cls(query)
        for key, part_state, last_visible in state["keys"]:
            part = KeyState(op.ndef)
            restored = Partition.from_state(part_state)
            part.buffers, part.active = restored.buffers, restored.active
            part.last_visible = list(last_visible)
            op.keys[hashable_key(key)] = (key, part)
        op.planner.load_state(state["planner"])
        return op
