"""The NFA^b streaming operator: runs over partitions of the stream (§5.2), with negation (§3.1),
window pruning (§5.3) and the ``CONSUME`` non-overlap policy (§2, §5.2.1).

Per batch, everything that depends on one event alone is computed column-wise: event types,
conjuncts on the current event (``a[1].volume > 1000``), the partition key, whether an event
can matter to any state at all, and whether a run of its partition can be alive at its time
(:func:`~situflow.nfa.prepass.live_events`). The event loop then visits only the events
that can change a run; an event no state can select leaves skip-till-next/any-match runs alone
and ends every run of its partition under the contiguity strategies. Per visited event and
partition (§5.2.1):

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

Queries the compiled loop covers (:mod:`situflow.nfa.kernel.loop`: partition contiguity or skip
till next match, no negation, conjuncts on numbers or equality of texts) run steps 1-3, with
``CONSUME``, in numba, one run per member (step 4 is left out: it saves Python work, not kernel
work), on state that stays in arrays from batch to batch
(:class:`~situflow.nfa.kernel.kernel_state.KernelState`); their matches leave in the compressed
form of §4.2 (:class:`~situflow.nfa.kernel.compressed.MatchBatch`). The Python loop below is the reference
the compiled one is tested against, and takes every other query and batch; the state moves
between the two when a batch changes loop, and a snapshot converts it without moving it.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from situflow.events import EventBatch
from situflow.nfa.compiler.automaton import Automaton, ComponentProgram
from situflow.nfa.compiler.values import SlotKind
from situflow.nfa.kernel import kernel_state, loop
from situflow.nfa.kernel.compressed import MatchBatch
from situflow.nfa.kernel.kernel_state import KernelState
from situflow.nfa.kernel.texts import Texts
from situflow.nfa.matches import MatchEnv, json_value
from situflow.nfa.prepass import MISSING, Prepared, live_events, masks, partition_codes, prepare
from situflow.nfa.runs import Member, Run, merge_equivalent
from situflow.nfa.sharedbuffer.buffer import BufferedEvent, BufferNode, match_history, retrieve, unnumbered
from situflow.nfa.transitions import Env, moves, state_steps
from situflow.results import Match
from situflow.snapshot import unwrap, wrap

SNAPSHOT_KIND = "sase-nfa"
SNAPSHOT_FORMAT = 1


@dataclass(eq=False)
class _Pending:
    """A match waiting for its trailing negation window to close."""

    deadline: float
    node: BufferNode
    key: Any
    alive: bool = True


class _Retrieved:
    """A match read from the buffer (§5.1): its last node and the history before it, split
    per component into ``spans``. Events, ids and the sort key among the matches one event
    emits (the events' sequence numbers) are read off on demand, as output is the cost that
    cannot be shared (§4)."""

    __slots__ = ("history", "node", "spans")

    def __init__(self, node: BufferNode, components: int):
        self.node = node
        self.history, self.spans = match_history(node, components)

    def _split(self, column: list[Any], last: Any) -> list[list[Any]]:
        out = [column[i:j] for i, j in self.spans]
        out[self.node.component].append(last)
        return out

    @property
    def events(self) -> list[list[BufferedEvent]]:
        return self._split(self.history[0], self.node.event)

    @property
    def ids(self) -> list[list[Any]]:
        return self._split(self.history[2], self.node.event.id)

    @property
    def order(self) -> tuple[tuple[int, ...], ...]:
        return tuple(map(tuple, self._split(self.history[3], self.node.event.seq)))


@dataclass(eq=False)
class PartitionState:
    """The state of one partition key: its runs, negation candidates and waiting matches."""

    key: Any
    negations: int
    runs: list[Run] = field(default_factory=list)
    # Stream position of the partition's last event (strict contiguity spans partitions).
    last_position: int = -2
    pending: list[_Pending] = field(default_factory=list)
    negatives: list[deque[BufferedEvent]] = field(init=False)

    def __post_init__(self) -> None:
        self.negatives = [deque() for _ in range(self.negations)]


class NfaOperator:
    """SASE+ pattern matching over one ordered stream (all partition keys)."""

    def __init__(self, automaton: Automaton, name: str, query_id: str, merge_runs: bool = True,
                 compiled: bool = True):
        self.automaton = automaton
        self.name = name
        self.query_id = query_id
        self.merge_runs = merge_runs
        # The Python loop's state; while the compiled loop runs, it lives in ``_state``.
        self._partitions: dict[Any, PartitionState] = {}
        self._state: KernelState | None = None
        self.position = 0
        self.last_ts: int | None = None
        self._heap: list[tuple[float, tuple[Any, ...], int, _Pending]] = []
        self._counter = 0
        self._env = Env()
        self._masks = tuple(s.mask for s in automaton.states)
        self._initial_v = automaton.values.initial()
        self._steps = state_steps(automaton)
        # The compiled loop where the query allows it (``compiled=False``: the Python loop).
        self._tables = loop.Tables.build(automaton) if compiled else None
        # Codes of the texts the compiled loop has seen, stable for the operator's life.
        self._texts = Texts(self._tables.texts if self._tables is not None else ())
        self._int_slots = [i for i, slot in enumerate(automaton.values.slots)
                           if slot.kind in (SlotKind.LEN, SlotKind.COUNT)]

    @property
    def partitions(self) -> dict[Any, PartitionState]:
        """The state per partition key, as the Python loop holds it (the compiled loop's
        arrays are converted first)."""
        self._leave_kernel()
        return self._partitions

    # --- lifecycle ----------------------------------------------------------------------------

    def process(self, batch: EventBatch) -> Sequence[Match]:
        """Consume a batch in stream order; results come in the order of the emitting events."""
        n = len(batch)
        if n == 0:
            return []
        out = self._fast(batch)
        if out is None:
            self._leave_kernel()
            out = self._loop(self._prepare(batch))
        self.position += n
        self.last_ts = int(batch.ts[-1])
        self._prune()
        return out

    def _fast(self, batch: EventBatch) -> MatchBatch | list[Match] | None:
        """``batch`` through a compiled path, or None: the Python loop takes it."""
        return self._compiled(self._tables, batch) if self._tables is not None else None

    def _prepare(self, batch: EventBatch) -> Prepared:
        """The per-event facts of the events of ``batch`` the Python loop must visit."""
        a = self.automaton
        if any(g.before is None for g in a.negations):
            return prepare(a, batch)

        # Without trailing negations nothing is released between events, so the loop
        # needs to see only the events that can change a run.
        carried = {key: max(r.members[-1].start for r in part.runs)
                   for key, part in self._partitions.items() if part.runs}

        def select(opens: np.ndarray, relevant: np.ndarray) -> np.ndarray:
            found, _, carried_start = partition_codes(a, batch, carried)
            return live_events(a, batch, opens, relevant, found, carried_start)

        return prepare(a, batch, select)

    def _loop(self, p: Prepared) -> list[Match]:
        """The events of ``p`` one by one (§5.2.1)."""
        a = self.automaton
        contiguous = a.selection.contiguous
        base = self.position
        out: list[Match] = []
        for j, offset in enumerate(p.positions):
            t = p.ts[j]
            position = base + offset
            emitted: list[Match] = []
            if self._heap and self._heap[0][0] < t:
                emitted += self._release(t, t)
            key = p.keys[j]
            if key is MISSING:
                out += emitted
                continue
            part = self._partitions.get(key)
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
                part = self._partitions[key] = PartitionState(key, len(a.negations))
            part.last_position = position
            event = BufferedEvent(p.seq[j], json_value(p.ids[j]), t, p.row(j))
            for g, mask in enumerate(p.negative):
                if mask[j]:
                    self._negative_arrives(part, g, event)
            emitted += self._step(part, event, j, p)
            emitted.sort(key=lambda m: m.order)
            out += emitted
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

    # --- the compiled loop ---------------------------------------------------------------------

    def _compiled(self, tables: loop.Tables, batch: EventBatch) -> MatchBatch | list[Match] | None:
        """``batch`` through :func:`situflow.nfa.kernel.loop.advance_runs`; None if an attribute
        or a V value is neither a number nor a text the programs only compare for equality (the
        Python loop takes the batch then)."""
        a = self.automaton
        found = self._kernel_columns(batch, tables, self._state)
        if found is None:
            return None
        rows, kinds, state = found
        self._state = state
        begin, take, _, opens, relevant = masks(a, batch)
        contiguous = a.selection.contiguous
        # Under the skip strategies an event no state can select changes no run.
        visit = np.arange(len(batch)) if contiguous else np.flatnonzero(relevant)
        codes, keys, _ = partition_codes(a, batch, {})
        opening = np.zeros(len(keys) + 1, dtype=bool)
        opening[codes[opens]] = True
        slot = state.slots(keys, opening)[codes]
        begin_mask = np.stack(begin)
        take_mask = np.stack([np.zeros(len(batch), dtype=bool) if m is None else m
                              for m in take])
        state.batch(len(batch))
        counters = state.counters
        first_event = int(counters[loop.K_EVENTS])
        i = 0
        while True:
            i = loop.advance_runs(
                i, visit, slot, batch.ts, batch.seq, rows, kinds, begin_mask, take_mask,
                relevant, opens, a.window, contiguous, tables.consume, tables.states, tables.components,
                tables.tests, tables.guards, tables.code, tables.constants, tables.slots,
                tables.initial, state.head, state.count, state.runs, state.starts, state.values,
                state.free, state.nodes,
                state.events, state.event_rows, state.event_kinds, state.stored, state.done,
                counters, state.stack)
            if i == len(visit):
                break
            # The next event may produce more than the arrays hold: make room, go on.
            need = 2 * int(state.count[slot[visit[i]]]) + 2
            state.reserve(need, need, 1)
            state.reserve_matches(need)
        state.store_ids(first_event, batch.ids)
        matches = int(counters[loop.K_DONE])
        if not matches:
            return []
        done = state.done[:matches].copy()
        loop.order_matches(done, state.nodes, state.events, len(a.components))
        return MatchBatch(self.name, a, state, done, batch.ts, codes, keys)

    def _kernel_columns(self, batch: EventBatch, tables: loop.Tables, held: KernelState | None
                        ) -> tuple[np.ndarray, np.ndarray, KernelState] | None:
        """Kernel columns and state fit: the attribute columns of ``batch`` as a compiled loop
        takes them (rows and kinds), with the kernel state they fit: ``held`` if it does,
        else one loaded from the Python loop's runs (which it then holds). None if a column
        or a value of V is neither a number nor a text the ``tables`` only compare for
        equality: the Python loop takes the batch."""
        found = kernel_state.columns([batch.column(x) for x in self.automaton.attributes],
                                     len(batch), self._texts)
        if found is None:
            return None
        rows, kinds = found
        if held is not None:
            if held.fits(rows, kinds):
                return rows, kinds, held
            # Texts where the state holds numbers or the other way round: V keeps no kinds,
            # so the state moves to Python objects and back with the batch's kinds.
            self._leave_kernel()
        text = kinds == kernel_state.TEXT
        if not tables.accepts(text):
            return None
        state = KernelState.load(tables, self._texts, text,
                                 [(p.key, p.runs) for p in self._partitions.values()])
        if state is None:
            return None
        self._partitions = {}
        return rows, kinds, state

    def _leave_kernel(self) -> None:
        """Move the compiled loop's state into the Python loop's objects."""
        if self._state is not None:
            self._partitions = self._exported(self._state)
            self._state = None

    def _exported(self, state: KernelState) -> dict[Any, PartitionState]:
        out = {}
        for key, runs in state.export(self._int_slots):
            part = out[key] = PartitionState(key, len(self.automaton.negations))
            part.runs = runs
        return out

    def _current(self) -> Iterable[PartitionState]:
        """The partitions as the Python loop holds them, without leaving the compiled loop."""
        if self._state is not None:
            return self._exported(self._state).values()
        return self._partitions.values()

    # --- one event in one partition -----------------------------------------------------------

    def _step(self, part: PartitionState, event: BufferedEvent, j: int, p: Prepared) -> list[Match]:
        a = self.automaton
        env = self._env
        env.row = event.row
        t = event.ts
        survivors: list[Run] = []
        completed: list[BufferNode] = []
        window = a.window
        steps = self._steps
        components = a.components
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
            # Take every move of the run that holds (§5.2.1): a split clones the run.
            step = steps[run.state]
            assert step is not None
            selects, proceeds, ignores = moves(step, run.v, j, p, env)
            if selects:
                n = 1 if step.begins else run.v[step.length_slot] + 1
                self._select(run, components[step.component], n, event, survivors, completed)
            if proceeds:
                self._select(run, components[step.proceeds_to], 1, event, survivors, completed)
            if ignores:
                survivors.append(run)
        first = components[0]
        if p.begin[0][j] and env.holds(first.begin.scalar, self._initial_v):
            member = Member(BufferNode(event, 0, None), t)
            self._arrive(first, Run(-1, first.update(self._initial_v, event.row, 1), [member]),
                         survivors, completed)
        if self.merge_runs and len(survivors) > 1:
            survivors = merge_equivalent(survivors, self._masks)
        part.runs = survivors
        if not completed:
            return []
        return self._complete(part, completed, t)

    def _select(self, run: Run, comp: ComponentProgram, n: int, event: BufferedEvent,
                survivors: list[Run], completed: list[BufferNode]) -> None:
        """A begin or take move: write the event to the buffer as element ``n`` of ``comp``."""
        if comp.last and not comp.kleene:
            # The move into F: a match needs its buffer node, not V.
            completed.extend([BufferNode(event, comp.index, m.node) for m in run.members])
            return
        members = [Member(BufferNode(event, comp.index, m.node), m.start) for m in run.members]
        self._arrive(comp, Run(-1, comp.update(run.v, event.row, n), members), survivors,
                     completed)

    def _arrive(self, comp: ComponentProgram, run: Run, survivors: list[Run],
                completed: list[BufferNode]) -> None:
        """Place a run that just selected an event for ``comp`` in its next state."""
        a = self.automaton
        if comp.kleene:
            run.state = comp.iterate_state
            survivors.append(run)
            # A trailing Kleene plus: the proceed edge into F is an ε-move taken at once, so
            # every valid extension is its own match (SEMANTICS.md).
            if comp.last and self._env.holds(comp.proceed, run.v):
                completed.extend([m.node for m in run.members])
        elif comp.last:
            completed.extend([m.node for m in run.members])
        else:
            run.state = a.components[comp.index + 1].begin_state
            survivors.append(run)

    # --- matches ------------------------------------------------------------------------------

    def _complete(self, part: PartitionState, completed: list[BufferNode], now: int) -> list[Match]:
        a = self.automaton
        trailing = any(g.before is None for g in a.negations)
        found: list[_Retrieved] = []
        negated = bool(a.negations)
        for node in completed:
            match = self._retrieve(node)
            if negated and self._negated(part, match.events):
                continue
            if trailing:
                pending = _Pending(match.events[0][0].ts + a.window, node, part.key)
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
        if len(found) > 1:
            # By the events' sequence numbers; the first events usually differ already.
            firsts = [f.history[3][0] if f.history[3] else f.node.event.seq for f in found]
            if len(set(firsts)) == len(firsts):
                found = [f for _, f in sorted(zip(firsts, found, strict=True),
                                              key=lambda x: x[0])]
            else:
                found.sort(key=lambda f: f.order)
        return [self._result(match, part.key, now, (1, 0, k)) for k, match in enumerate(found)]

    def _negated(self, part: PartitionState, events: list[list[BufferedEvent]]) -> bool:
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

    def _negative_arrives(self, part: PartitionState, g: int, event: BufferedEvent) -> None:
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

    def _retrieve(self, node: BufferNode) -> _Retrieved:
        """The match ending at ``node`` from the shared buffer (§5.1)."""
        return _Retrieved(node, len(self.automaton.components))

    def _result(self, match: _Retrieved, key: Any, now: int, order: tuple[Any, ...]) -> Match:
        a = self.automaton
        ids = match.ids
        values = {}
        if a.returns:
            env = MatchEnv(match.events)
            values = {name: json_value(f(env)) for name, f in a.returns}
        return Match(
            query=self.name,
            key=list(key) if isinstance(key, tuple) else json_value(key),
            ts=match.node.event.ts,
            emitted_at=now,
            values=values,
            bindings={c.var: ids[c.index] for c in a.components},
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
        if self._state is not None:
            self._state.prune(now, a.window)
            self._state.release()
            return
        horizon = now - a.window
        for key in list(self._partitions):
            part = self._partitions[key]
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
                del self._partitions[key]

    # --- state --------------------------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        """``partial_matches``: run members alive now, the paper's partial matches."""
        if self._state is not None:
            return {"partial_matches": self._state.live_runs()}
        return {"partial_matches": sum(len(r.members) for p in self._partitions.values()
                                       for r in p.runs)}

    def snapshot(self) -> dict[str, Any]:
        """The whole state as JSON-able data in the envelope of :mod:`situflow.snapshot`; see
        :meth:`restore`."""
        events: dict[int, int] = {}
        event_list: list[list[Any]] = []
        nodes: dict[int, int] = {}
        node_list: list[list[int]] = []

        def event_ref(e: BufferedEvent) -> int:
            found = events.get(id(e))
            if found is None:
                found = events[id(e)] = len(event_list)
                event_list.append([e.seq, _to_json(e.id), e.ts, [_to_json(x) for x in e.row]])
            return found

        def node_ref(node: BufferNode) -> int:
            for x in unnumbered(node, nodes):
                pred = nodes[id(x.pred)] if x.pred is not None else -1
                nodes[id(x)] = len(node_list)
                node_list.append([event_ref(x.event), x.component, pred])
            return nodes[id(node)]

        partitions = []
        for part in self._current():
            partitions.append({
                "key": _to_json(part.key),
                "last_position": part.last_position,
                "runs": [{"state": r.state, "v": [_to_json(x) for x in r.v],
                          "members": [[node_ref(m.node), m.start] for m in r.members]} for r in part.runs],
                "negatives": [[event_ref(e) for e in c] for c in part.negatives],
            })
        pending = [[p.deadline, node_ref(p.node), _to_json(p.key)]
                   for _, _, _, p in sorted(self._heap) if p.alive]
        return wrap(SNAPSHOT_KIND, SNAPSHOT_FORMAT, self.query_id, {
            "position": self.position,
            "last_ts": self.last_ts,
            "events": event_list,
            "nodes": node_list,
            "partitions": partitions,
            "pending": pending,
        })

    @classmethod
    def restore(cls, automaton: Automaton, name: str, query_id: str, snapshot: dict[str, Any],
                merge_runs: bool = True, compiled: bool = True) -> NfaOperator:
        """The operator ``snapshot`` was taken of; ``StateError`` if it belongs to another
        query, engine or format."""
        state = unwrap(SNAPSHOT_KIND, SNAPSHOT_FORMAT, query_id, snapshot)
        op = cls(automaton, name, query_id, merge_runs, compiled)
        op.position = state["position"]
        op.last_ts = state["last_ts"]
        events = [BufferedEvent(seq, _from_json(i), ts, tuple(_from_json(x) for x in row))
                  for seq, i, ts, row in state["events"]]
        nodes: list[BufferNode] = []
        for e, comp, pred in state["nodes"]:
            nodes.append(BufferNode(events[e], comp, nodes[pred] if pred >= 0 else None))
        for p in state["partitions"]:
            key = _from_json(p["key"])
            part = op._partitions[key] = PartitionState(key, len(automaton.negations))
            part.last_position = p["last_position"]
            part.runs = [Run(r["state"], tuple(_from_json(x) for x in r["v"]),
                             [Member(nodes[n], start)
                              for n, start in sorted(r["members"], key=lambda x: x[1])])
                         for r in p["runs"]]
            part.negatives = [deque(events[i] for i in c) for c in p["negatives"]]
        for deadline, node, key in state["pending"]:
            key = _from_json(key)
            pending = _Pending(deadline, nodes[node], key)
            part = op._partitions.setdefault(key, PartitionState(key, len(automaton.negations)))
            part.pending.append(pending)
            op._counter += 1
            heapq.heappush(op._heap, (deadline, op._retrieve(pending.node).order, op._counter,
                                      pending))
        return op


def _to_json(x: Any) -> Any:
    """A value as JSON: NaN/inf and tuples (multi-attribute keys) are tagged."""
    if hasattr(x, "item"):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return {"$float": repr(x)}
    if isinstance(x, tuple):
        return {"$tuple": [_to_json(v) for v in x]}
    return x


def _from_json(x: Any) -> Any:
    """The value :func:`_to_json` tagged."""
    if isinstance(x, dict):
        if "$float" in x:
            return float(x["$float"])
        return tuple(_from_json(v) for v in x["$tuple"])
    return x
