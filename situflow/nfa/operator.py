"""The NFA^b streaming operator: runs over partitions of the stream (§5.2), with negation (§3.1),
window pruning (§5.3) and the ``CONSUME`` non-overlap policy (§2, §5.2.1).

Per batch, everything that depends on one event alone is computed column-wise: event types,
conjuncts on the current event (``a[1].volume > 1000``), the partition key, and whether an
event can matter to any state at all. The event loop then visits only relevant events; an event
no state can select leaves skip-till-next/any-match runs alone and ends every run of its
partition under the contiguity strategies. Per relevant event and partition (§5.2.1):

1. runs drop the members whose window expired (Step 5 puts the window on every edge);
2. each run evaluates its edges and splits into the moves that hold (begin, take, proceed with
   the Step 6 peek, ignore per the selection strategy); begin and take write to the shared
   buffer; a new run begins at the start state if the event satisfies its begin edge;
3. runs reaching ``F`` become matches: negation is checked against the buffered candidates of
   the negated components, a match with a trailing negation waits until event time passes
   ``first.t + w`` (SEMANTICS.md), ``CONSUME`` keeps one match and drops every run of the
   partition;
4. equivalent runs are merged (§5.2.2).

Results do not depend on batch boundaries: everything above happens per event, and pruning at
batch ends removes only what can no longer match.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from situflow.errors import StateError
from situflow.events import EventBatch
from situflow.nfa.automaton import Automaton, ComponentProgram, StateKind
from situflow.nfa.matches import MatchEnv, json_value
from situflow.nfa.runs import Member, Run, merge_equivalent
from situflow.nfa.sharedbuffer import Event, Node, match_history, retrieve
from situflow.nfa.transitions import MISSING, Env, Prepared, moves, prepare
from situflow.nfa.versions import Dewey
from situflow.results import Match

SNAPSHOT_FORMAT = 1


@dataclass(eq=False)
class _Pending:
    """A match waiting for its trailing negation window to close."""

    deadline: float
    node: Node
    key: Any
    alive: bool = True


@dataclass(slots=True)
class _Retrieved:
    """A match read from the buffer: events and ids per component, and its sort key among
    the matches one event emits (its events' sequence numbers)."""

    events: list[list[Event]]
    ids: list[list[Any]]
    order: tuple[tuple[int, ...], ...]


@dataclass(eq=False)
class _Partition:
    """The state of one partition key: its runs, negation candidates and waiting matches."""

    key: Any
    negations: int
    runs: list[Run] = field(default_factory=list)
    initiations: int = 0
    # Stream position of the partition's last event (strict contiguity spans partitions).
    last_position: int = -2
    pending: list[_Pending] = field(default_factory=list)
    negatives: list[deque[Event]] = field(init=False)

    def __post_init__(self) -> None:
        self.negatives = [deque() for _ in range(self.negations)]


class NfaOperator:
    """SASE+ pattern matching over one ordered stream (all partition keys)."""

    def __init__(self, automaton: Automaton, name: str, merge_runs: bool = True):
        self.automaton = automaton
        self.name = name
        self.merge_runs = merge_runs
        self.partitions: dict[Any, _Partition] = {}
        self.position = 0
        self.last_ts: int | None = None
        self._heap: list[tuple[float, tuple[Any, ...], int, _Pending]] = []
        self._counter = 0
        self._env = Env()
        self._masks = tuple(s.mask for s in automaton.states)
        self._initial_v = automaton.values.initial()

    # --- lifecycle ----------------------------------------------------------------------------

    def process(self, batch: EventBatch) -> list[Match]:
        """Consume a batch in stream order; results come in the order of the emitting events."""
        n = len(batch)
        if n == 0:
            return []
        a = self.automaton
        p = prepare(a, batch)
        contiguous = a.selection.contiguous
        out: list[Match] = []
        for j in range(n):
            t = p.ts[j]
            position = self.position
            self.position += 1
            self.last_ts = t
            emitted: list[Match] = []
            if self._heap and self._heap[0][0] < t:
                emitted += self._release(t, t)
            key = p.keys[j]
            if key is MISSING:
                out += emitted
                continue
            part = self.partitions.get(key)
            if not p.relevant[j]:
                if part is not None:
                    if contiguous:
                        part.runs = []
                    part.last_position = position
                out += emitted
                continue
            if part is not None and a.selection.global_contiguity and (
                part.last_position != position - 1
            ):
                part.runs = []
            if (part is None or not part.runs) and not p.opens[j]:
                # No run to advance and no run or negation candidate to start: skip cheaply.
                if part is not None:
                    part.last_position = position
                out += emitted
                continue
            if part is None:
                part = self.partitions[key] = _Partition(key, len(a.negations))
            part.last_position = position
            event = Event(p.seq[j], json_value(p.ids[j]), t, p.row(j))
            for g, mask in enumerate(p.negative):
                if mask[j]:
                    self._negative_arrives(part, g, event)
            emitted += self._step(part, event, j, p)
            emitted.sort(key=lambda m: m.order)
            out += emitted
        self._prune()
        return out

    def advance_to(self, watermark: int) -> list[Match]:
        """Event time reached ``watermark``: events still to come have ``ts >= watermark``."""
        out = self._release(watermark, watermark)
        self._prune(watermark)
        return out

    def finish(self) -> list[Match]:
        """End of a bounded input: matches waiting on a trailing negation are emitted."""
        now = self.last_ts if self.last_ts is not None else 0
        return self._release(math.inf, now)

    # --- one event in one partition -----------------------------------------------------------

    def _step(self, part: _Partition, event: Event, j: int, p: Prepared) -> list[Match]:
        a = self.automaton
        env = self._env
        env.row = event.row
        t = event.ts
        survivors: list[Run] = []
        completed: list[Member] = []
        window = a.window
        for run in part.runs:
            if len(run.members) == 1:  # the common case, without a list per run and event
                if t - run.members[0].start > window:
                    continue
            else:
                members = run.within(t, window)
                if not members:
                    continue
                if len(members) != len(run.members):
                    run = Run(run.state, run.v, members)
            self._advance(run, event, j, p, survivors, completed)
        first = a.components[0]
        if p.begin[0][j] and env.holds(first.begin.scalar, self._initial_v):
            part.initiations += 1
            member = Member(Node(event, 0, None), t, Dewey.start(part.initiations).add_stage())
            self._arrive(first, Run(-1, first.update(self._initial_v, event.row, 1), [member]),
                         survivors, completed)
        if self.merge_runs:
            survivors = merge_equivalent(survivors, self._masks)
        part.runs = survivors
        if not completed:
            return []
        return self._complete(part, completed, t)

    def _advance(self, run: Run, event: Event, j: int, p: Prepared, survivors: list[Run],
                 completed: list[Member]) -> None:
        """Take every move of the run that holds (§5.2.1): a split clones the run."""
        selects, proceeds, ignores = moves(self.automaton, run.state, run.v, j, p, self._env)
        comp = self.automaton.components[self.automaton.states[run.state].component]
        if selects:
            if self.automaton.states[run.state].kind is StateKind.BEGIN:
                self._select(run, comp, 1, event, Dewey.add_stage, survivors, completed)
            else:
                length = run.v[comp.length_slot] + 1
                self._select(run, comp, length, event, Dewey.increase if ignores else _same,
                             survivors, completed)
        if proceeds:
            nxt = self.automaton.components[comp.index + 1]
            self._select(run, nxt, 1, event, Dewey.add_stage, survivors, completed)
        if ignores:
            survivors.append(run)

    def _select(self, run: Run, comp: ComponentProgram, n: int, event: Event,
                version: Callable[[Dewey], Dewey], survivors: list[Run],
                completed: list[Member]) -> None:
        """A begin or take move: write the event to the buffer as element ``n`` of ``comp``."""
        members = [Member(Node(event, comp.index, m.node), m.start, version(m.version))
                   for m in run.members]
        self._arrive(comp, Run(-1, comp.update(run.v, event.row, n), members), survivors,
                     completed)

    def _arrive(self, comp: ComponentProgram, run: Run, survivors: list[Run],
                completed: list[Member]) -> None:
        """Place a run that just selected an event for ``comp`` in its next state."""
        a = self.automaton
        if comp.kleene:
            run.state = comp.iterate_state
            survivors.append(run)
            # A trailing Kleene plus: the proceed edge into F is an ε-move taken at once, so
            # every valid extension is its own match (SEMANTICS.md).
            if comp.last and self._env.holds(comp.proceed, run.v):
                completed.extend(run.members)
        elif comp.last:
            completed.extend(run.members)
        else:
            run.state = a.components[comp.index + 1].begin_state
            survivors.append(run)

    # --- matches ------------------------------------------------------------------------------

    def _complete(self, part: _Partition, completed: list[Member], now: int) -> list[Match]:
        a = self.automaton
        trailing = any(g.before is None for g in a.negations)
        found: list[_Retrieved] = []
        for m in completed:
            match = self._retrieve(m.node)
            if self._negated(part, match.events):
                continue
            if trailing:
                pending = _Pending(match.events[0][0].ts + a.window, m.node, part.key)
                part.pending.append(pending)
                self._counter += 1
                heapq.heappush(self._heap, (pending.deadline, match.order, self._counter,
                                            pending))
                continue
            found.append(match)
        if a.consume and found:
            # Non-overlap format: one match per partition, then every other run is pruned.
            # The latest-starting (shortest) match wins, as in the paper's Expt. 4.
            found = [min(found, key=lambda f: (-f.events[0][0].seq, sum(map(len, f.events)),
                                              f.order))]
            part.runs = []
        return [self._result(match, part.key, now, (1, 0, match.order)) for match in found]

    def _negated(self, part: _Partition, events: list[list[Event]]) -> bool:
        a = self.automaton
        last = events[-1][-1]
        for g, negation in enumerate(a.negations):
            low = events[negation.after][-1].seq if negation.after is not None else None
            if negation.before is None:
                continue  # trailing: checked as candidates arrive (_negative_arrives)
            high = events[negation.before][0].seq
            earliest = last.ts - a.window
            for candidate in part.negatives[g]:
                if candidate.seq >= high:
                    break
                if low is not None and candidate.seq <= low:
                    continue
                if low is None and candidate.ts < earliest:
                    continue
                if all(f(MatchEnv(events, candidate)) for f in negation.conditions):
                    return True
        return False

    def _negative_arrives(self, part: _Partition, g: int, event: Event) -> None:
        negation = self.automaton.negations[g]
        part.negatives[g].append(event)
        if negation.before is not None or not part.pending:
            return
        part.pending = [p for p in part.pending if p.alive and p.deadline >= event.ts]
        for p in part.pending:
            events = retrieve(p.node, len(self.automaton.components))
            after = events[negation.after][-1].seq if negation.after is not None else -1
            if event.seq > after and all(f(MatchEnv(events, event)) for f in negation.conditions):
                p.alive = False

    def _release(self, before: float, now: int) -> list[Match]:
        """Emit the waiting matches whose negation window ends before ``before``."""
        out: list[Match] = []
        while self._heap and self._heap[0][0] < before:
            deadline, order, _, pending = heapq.heappop(self._heap)
            if pending.alive:
                pending.alive = False
                match = self._retrieve(pending.node)
                out.append(self._result(match, pending.key, now, (0, deadline, order)))
        return out

    def _retrieve(self, node: Node) -> _Retrieved:
        """The match ending at ``node`` from the shared buffer (§5.1), per component."""
        (events, _, ids, seqs), spans = match_history(node, len(self.automaton.components))
        per_events = [events[i:j] for i, j in spans]
        per_ids = [ids[i:j] for i, j in spans]
        per_seqs = [seqs[i:j] for i, j in spans]
        last = node.component
        per_events[last].append(node.event)
        per_ids[last].append(node.event.id)
        per_seqs[last].append(node.event.seq)
        return _Retrieved(per_events, per_ids, tuple(map(tuple, per_seqs)))

    def _result(self, match: _Retrieved, key: Any, now: int, order: tuple[Any, ...]) -> Match:
        a = self.automaton
        env = MatchEnv(match.events)
        return Match(
            query=self.name,
            key=list(key) if isinstance(key, tuple) else json_value(key),
            ts=match.events[-1][-1].ts,
            emitted_at=now,
            values={name: json_value(f(env)) for name, f in a.returns},
            bindings={c.var: match.ids[c.index] for c in a.components},
            order=order,
        )

    # --- per batch ----------------------------------------------------------------------------

    def _prune(self, now: int | None = None) -> None:
        """Drop what the window has made useless (§5.3): runs whose members all started more
        than ``w`` ago, negation candidates older than ``w``, partitions left empty."""
        now = self.last_ts if now is None else max(now, self.last_ts or now)
        if now is None:
            return
        a = self.automaton
        horizon = now - a.window
        for key in list(self.partitions):
            part = self.partitions[key]
            runs = []
            for run in part.runs:
                members = run.within(now, a.window)
                if members:
                    runs.append(run if len(members) == len(run.members)
                                else Run(run.state, run.v, members))
            part.runs = runs
            for candidates in part.negatives:
                while candidates and candidates[0].ts < horizon:
                    candidates.popleft()
            part.pending = [p for p in part.pending if p.alive]
            if not part.runs and not part.pending and not any(part.negatives):
                del self.partitions[key]

    # --- state --------------------------------------------------------------------------------

    def live_partial_matches(self) -> int:
        """Run members alive now: the paper's partial matches."""
        return sum(len(r.members) for p in self.partitions.values() for r in p.runs)

    def buffered_events(self) -> list[Event]:
        """Every event the operator still holds (buffer nodes and negation candidates)."""
        seen: dict[int, Event] = {}
        for part in self.partitions.values():
            for run in part.runs:
                for m in run.members:
                    node: Node | None = m.node
                    while node is not None:
                        seen[id(node.event)] = node.event
                        node = node.pred
            for candidates in part.negatives:
                for e in candidates:
                    seen[id(e)] = e
        return list(seen.values())

    def snapshot(self) -> dict[str, Any]:
        """The whole state as JSON-able data (``format`` versioned); see :func:`restore`."""
        events: dict[int, int] = {}
        event_list: list[list[Any]] = []
        nodes: dict[int, int] = {}
        node_list: list[list[int]] = []

        def event_ref(e: Event) -> int:
            found = events.get(id(e))
            if found is None:
                found = events[id(e)] = len(event_list)
                event_list.append([e.seq, _encode(e.id), e.ts, [_encode(x) for x in e.row]])
            return found

        def node_ref(node: Node) -> int:
            chain: list[Node] = []
            current: Node | None = node
            while current is not None and id(current) not in nodes:
                chain.append(current)
                current = current.pred
            for x in reversed(chain):
                pred = nodes[id(x.pred)] if x.pred is not None else -1
                nodes[id(x)] = len(node_list)
                node_list.append([event_ref(x.event), x.component, pred])
            return nodes[id(node)]

        partitions = []
        for part in self.partitions.values():
            partitions.append({
                "key": _encode(part.key),
                "initiations": part.initiations,
                "last_position": part.last_position,
                "runs": [{"state": r.state, "v": [_encode(x) for x in r.v],
                          "members": [[node_ref(m.node), m.start, str(m.version)]
                                      for m in r.members]} for r in part.runs],
                "negatives": [[event_ref(e) for e in c] for c in part.negatives],
            })
        pending = [[p.deadline, node_ref(p.node), _encode(p.key)]
                   for _, _, _, p in sorted(self._heap) if p.alive]
        return {
            "format": SNAPSHOT_FORMAT,
            "position": self.position,
            "last_ts": self.last_ts,
            "events": event_list,
            "nodes": node_list,
            "partitions": partitions,
            "pending": pending,
        }

    @classmethod
    def restore(cls, automaton: Automaton, name: str, snapshot: dict[str, Any],
                merge_runs: bool = True) -> NfaOperator:
        if snapshot.get("format") != SNAPSHOT_FORMAT:
            raise StateError(f"NFA snapshot format {snapshot.get('format')!r} is not "
                             f"{SNAPSHOT_FORMAT}; replay the input from the start instead")
        op = cls(automaton, name, merge_runs)
        op.position = snapshot["position"]
        op.last_ts = snapshot["last_ts"]
        events = [Event(seq, _decode(i), ts, tuple(_decode(x) for x in row))
                  for seq, i, ts, row in snapshot["events"]]
        nodes: list[Node] = []
        for e, comp, pred in snapshot["nodes"]:
            nodes.append(Node(events[e], comp, nodes[pred] if pred >= 0 else None))
        for p in snapshot["partitions"]:
            key = _decode(p["key"])
            part = op.partitions[key] = _Partition(key, len(automaton.negations))
            part.initiations = p["initiations"]
            part.last_position = p["last_position"]
            part.runs = [Run(r["state"], tuple(_decode(x) for x in r["v"]),
                             [Member(nodes[n], start, Dewey.parse(v))
                              for n, start, v in r["members"]]) for r in p["runs"]]
            part.negatives = [deque(events[i] for i in c) for c in p["negatives"]]
        for deadline, node, key in snapshot["pending"]:
            key = _decode(key)
            pending = _Pending(deadline, nodes[node], key)
            part = op.partitions.setdefault(key, _Partition(key, len(automaton.negations)))
            part.pending.append(pending)
            op._counter += 1
            heapq.heappush(op._heap, (deadline, op._retrieve(pending.node).order, op._counter,
                                      pending))
        return op


def _same(version: Dewey) -> Dewey:
    return version




def _encode(x: Any) -> Any:
    """A value as JSON: NaN/inf and tuples (multi-attribute keys) are tagged."""
    if hasattr(x, "item"):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return {"$float": repr(x)}
    if isinstance(x, tuple):
        return {"$tuple": [_encode(v) for v in x]}
    return x


def _decode(x: Any) -> Any:
    if isinstance(x, dict):
        if "$float" in x:
            return float(x["$float"])
        return tuple(_decode(v) for v in x["$tuple"])
    return x

