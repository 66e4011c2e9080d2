"""Low-latency temporal pattern matching (thesis §5.5.2-5.5.3, Alg. 5.3/5.4, Table 5.2).

A configuration (one situation per definition) is reported at the earliest event at which it
is *certain* to match: every temporal constraint holds for every possible end of the
situations still running, and the window holds with running situations ending now
(SEMANTICS.md). Certainty is decided pairwise, which is exact because the constraints are a
conjunction of pairwise disjunctions:

- at most one of the two situations runs: its end is later than every known time, so each
  relation has one definite truth value (``BIG`` stands for that end);
- both run: their ends may compare ``<``, ``=`` or ``>``; the constraint is certain only if it
  holds in all three cases. This is exactly the thesis' prefix-group rule: ``B contains;
  finished-by;overlaps C`` is certain at ``C.ts``.

Certainty can only arise at an endpoint of a member, so matching runs when situations start,
end, appear (upper-bounded ones, at their end) or reach their lower duration bound (deferred
start). A configuration is reported there if it is certain now and was not certain before this
event, which makes every result unique without remembering past results: the thesis' two
hazards (duplicates at the second endpoint, false ``finishes``/``equals`` while both run) cannot
occur. Candidates come from binary searches over the buffers (:class:`SituationBuffer`), in the
evaluation order of the :class:`Planner`.

``PATTERN B`` (one situation) has no relation to make certain: each situation of B is a match
at its end, where its aggregates and its time are final, and no situation is buffered.

**The step loop**, the contract of every front end of :class:`PatternMatcher`: a *step* is the
records of one event of one key. A front end files a step's records into the key's
:class:`Partition`, collecting its ``changes`` (each situation that started, ended or appeared,
and whether it is new to the matcher), and then calls :meth:`PatternMatcher._match` once for
the step, if something changed and matching is feasible (every definition has a visible
situation that started within the window). The fused :class:`~situflow.tpstream.fused.Matcher`
reads steps from the kernel's record arrays, the
:class:`~situflow.tpstream.split.matcher.SituationMatcher` from situation records, and the
:class:`~situflow.tpstream.split.deriver.SituationDeriver` emits its records in the same steps.
The three loops stay apart because each is tight over its own carrier.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from situflow.events import plain
from situflow.results import Match
from situflow.tpstream.match.allen import relation
from situflow.tpstream.match.planner import Planner
from situflow.tpstream.match.situations import BIG, Situation, SituationBuffer
from situflow.tpstream.query import TPStreamQuery

Config = list[Situation | None]
#: The aggregates of a running situation at the emitting event (None: its definition has none).
RunningValues = Callable[[Situation], list[Any] | None]


def certain(rels: frozenset[str], x: Situation, y: Situation) -> bool:
    """Whether ``x r y`` holds for some r in ``rels`` whatever the unknown ends turn out to be."""
    if x.te is None and y.te is None:
        return (relation(x.ts, BIG, y.ts, BIG + 1) in rels
                and relation(x.ts, BIG, y.ts, BIG) in rels
                and relation(x.ts, BIG + 1, y.ts, BIG) in rels)
    return relation(x.ts, x.end, y.ts, y.end) in rels


class Partition:
    """Matcher state of one partition: finished situations and the running visible ones."""

    __slots__ = ("active", "buffers")

    def __init__(self, ndef: int):
        self.buffers = [SituationBuffer() for _ in range(ndef)]
        self.active: list[Situation | None] = [None] * ndef

    def to_state(self) -> list[Any]:
        return [[b.to_state() for b in self.buffers],
                [None if s is None else s.to_state() for s in self.active]]

    @classmethod
    def from_state(cls, state: list[Any]) -> Partition:
        buffers, active = state
        part = cls(len(buffers))
        part.buffers = [SituationBuffer.from_state(b) for b in buffers]
        part.active = [None if s is None else Situation.from_state(s) for s in active]
        return part


class PatternMatcher:
    """Alg. 5.3/5.4 over the buffers of one partition at one event: what both the fused
    operator and the matcher of distributed TPStream (thesis §5.6.5) run once situations are
    filed. Subclasses own the partitions and the aggregates of running situations."""

    def __init__(self, query: TPStreamQuery):
        self.query = query
        self.ndef = len(query.definitions)
        self.window = query.window
        self.constraints = query.constraints
        self.planner = Planner(query)
        self._steps: dict[tuple[int, ...], list[list[int]]] = {}
        self.refs_by_def = query.refs_by_def
        self.single = query.single

    def _file(self, buffer: SituationBuffer, s: Situation, bound: float) -> None:
        buffer.purge(bound)
        if not self.single:  # a match of PATTERN B joins no other situation: keep none
            buffer.append(s)

    def _match(self, part: Partition, key: Any, t: int, changes: list[tuple[Situation, bool]],
               running: RunningValues) -> list[Match]:
        """Every configuration that became certain at this event (time ``t``) of ``key``."""
        if self.single:
            return self._ended(key, t, changes, running)
        for b in part.buffers:
            b.purge(t - self.window)
        self.planner.observe([len(b) + (a is not None) for b, a in zip(part.buffers, part.active,
                                                                       strict=True)])
        new = {id(s) for s, is_new in changes if is_new}
        ended = {id(s) for s, is_new in changes if not is_new}
        found: dict[tuple[int, ...], list[Situation]] = {}
        for s, _ in changes:
            order = self.planner.order(s.defn)
            ws: Config = [None] * self.ndef
            ws[s.defn] = s
            self._extend(part, order, self._steps_of(order), 1, ws, t, s.ts,
                         t if s.te is None else s.te, found, new, ended)
        results = []
        for config in sorted(found, key=lambda ws: tuple(s.ts for s in found[ws])):
            results.append(self._result(found[config], key, t, running))
        return results

    def _ended(self, key: Any, t: int, changes: list[tuple[Situation, bool]],
               running: RunningValues) -> list[Match]:
        """``PATTERN B``: each situation of B that ends at this event within the window is a
        match. It is reported at its end, not when it becomes visible: only then are its
        aggregates and its end, the result's time (Def 5.7), final (SEMANTICS.md)."""
        return [self._result([s], key, t, running) for s, _ in changes
                if s.te is not None and s.te - s.ts <= self.window]

    def _steps_of(self, order: tuple[int, ...]) -> list[list[int]]:
        """For each step of ``order``, the earlier definitions it has constraints with."""
        steps = self._steps.get(order)
        if steps is None:
            steps = [[j for j in order[:k] if self.constraints[order[k]][j] is not None]
                     for k in range(len(order))]
            self._steps[order] = steps
        return steps

    def _extend(self, part: Partition, order: tuple[int, ...], steps: list[list[int]], k: int,
                ws: Config, t: int, min_ts: int, max_end: int,
                found: dict[tuple[int, ...], list[Situation]], new: set[int],
                ended: set[int]) -> None:
        """Alg. 5.3 PerformMatch: bind the situation of step ``k`` and recurse."""
        if k == len(order):
            members = cast(list[Situation], ws)
            key = tuple(id(s) for s in members)
            if key not in found and self._newly_certain(members, new, ended):
                found[key] = list(members)
            return
        e, anchors = order[k], steps[k]
        anchor = anchors[0]
        x = ws[anchor]
        assert x is not None
        buffer = part.buffers[e]
        window = self.window
        ranges = [buffer.related(rel, x.ts, x.end)
                  for rel in self.constraints[anchor][e]]  # type: ignore[union-attr]
        if len(buffer):
            self.planner.observe_selectivity(anchor, e, sum(map(len, ranges)), len(buffer))
        for indexes in ranges:
            for idx in indexes:
                y = buffer.items[idx]
                lo, hi = min(min_ts, y.ts), max(max_end, y.end)
                if hi - lo > window or not self._holds(ws, y, e, anchors[1:]):
                    continue
                ws[e] = y
                self._extend(part, order, steps, k + 1, ws, t, lo, hi, found, new, ended)
        running = part.active[e]
        if running is not None:
            lo, hi = min(min_ts, running.ts), max(max_end, t)
            if hi - lo <= window and self._holds(ws, running, e, anchors):
                ws[e] = running
                self._extend(part, order, steps, k + 1, ws, t, lo, hi, found, new, ended)
        ws[e] = None

    def _holds(self, ws: Config, y: Situation, e: int, anchors: list[int]) -> bool:
        constraints = self.constraints
        return all(certain(constraints[j][e], ws[j], y)  # type: ignore[arg-type]
                   for j in anchors)

    def _newly_certain(self, members: list[Situation], new: set[int], ended: set[int]) -> bool:
        """Whether the configuration was not yet certain before this event."""
        if any(id(s) in new for s in members):
            return True  # a member did not exist (for the matcher) before this event
        before = [Situation(s.defn, s.ts) if id(s) in ended else s for s in members]
        n = len(members)
        return not all(
            certain(self.constraints[i][j], before[i], before[j])  # type: ignore[arg-type]
            for i in range(n) for j in range(i + 1, n) if self.constraints[i][j] is not None
        )

    # --- results --------------------------------------------------------------------------

    def _result(self, members: list[Situation], key: Any, t: int,
                running: RunningValues) -> Match:
        q = self.query
        aggregates: list[Any] = [None] * len(q.aggregates)
        for s in members:
            values = s.values if s.te is not None else running(s)
            for k in self.refs_by_def[s.defn]:
                aggregates[k] = values[k]  # type: ignore[index]
        return Match(
            query=q.name,
            key=key,
            ts=max(t if s.te is None else s.te for s in members),
            emitted_at=t,
            values={name: return_value(fn, aggregates) for name, fn in q.outputs},
            bindings={d.name: s.to_binding() for d, s in zip(q.definitions, members, strict=True)},
            order=tuple(s.ts for s in members),
        )


def return_value(fn: Any, aggregates: Sequence[Any]) -> Any:
    """A RETURN value; arithmetic over a missing aggregate gives null, not a crash."""
    try:
        value = fn(aggregates)
    except (TypeError, ZeroDivisionError):
        return None
    return plain(value)
