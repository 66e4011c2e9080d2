"""The compiled loop's state in arrays, kept from batch to batch (§5.2.1, §5.1, §5.3).

:class:`KernelState` holds what :func:`situflow.nfa.kernel.loop.advance_runs` works on: a slot
per partition key (its runs as a linked list), the runs (state, last buffer node, V, start
time), the shared buffer's nodes and the events they hold (sequence number, time, id and the
attributes the query reads, texts as their codes in the operator's
:class:`~situflow.nfa.kernel.texts.Texts`). Which attributes hold texts is fixed for the life
of a state (``text``): V keeps no kind per value, and a text's code must never meet a number
in a comparison. Nothing moves to Python objects between batches. Buffer nodes are
appended; once the arrays hold more than twice what the runs still reach, pruning (§5.3) moves
the reachable nodes and events to the front. Matches of earlier batches that have not been read
yet point into these arrays (:class:`~situflow.nfa.kernel.compressed.MatchBatch`): while one is
alive, pruning copies into new arrays instead, so the old ones stay as the match saw them.

:meth:`KernelState.load` and :meth:`KernelState.export` convert from and to the Python loop's
runs (:mod:`situflow.nfa.runs`), exactly: snapshots, and batches the kernel does not take, go
through them.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any

import numpy as np

from situflow.nfa.kernel import loop
from situflow.nfa.kernel.texts import MISSING_CODE, Texts
from situflow.nfa.matches import json_value
from situflow.nfa.runs import Member, Run
from situflow.nfa.sharedbuffer.buffer import BufferedEvent, BufferNode, unnumbered

# How a stored attribute value was typed in its batch, to give it back as the Python loop has it.
FLOAT, INT, BOOL, TEXT = 0, 1, 2, 3
# Integers beyond this lose precision as float64: such batches stay on the Python loop.
EXACT = 2**53
# Fewest buffer nodes before pruning moves the live ones.
_COLLECT_AT = 1 << 14
# A partition's state as the Python loop holds it: key, runs.
PartitionRuns = tuple[Any, list[Run]]


class KernelState:
    """Partitions, runs, buffer nodes and stored events as arrays (see the module docstring)."""

    def __init__(self, tables: loop.Tables, texts: Texts, text: np.ndarray):
        """``text``: per attribute, whether it holds texts (as codes of ``texts``)."""
        attributes = len(text)
        self.tables = tables
        self.texts = texts
        self.text = text
        self.head = np.full(4, -1, dtype=np.int64)
        self.count = np.zeros(4, dtype=np.int64)
        self.taken = np.zeros(4, dtype=bool)
        self.keys: list[Any] = []
        self.slot_of: dict[Any, int] = {}
        self.free_slots: list[int] = []
        runs = 64
        self.runs = np.zeros((runs, loop.RUN_FIELDS), dtype=np.int64)
        self.starts = np.zeros(runs, dtype=np.int64)
        self.values = np.zeros((runs, tables.initial.shape[1]), dtype=np.float64)
        self.free = np.arange(runs - 1, -1, -1, dtype=np.int64)
        self.nodes = np.zeros((256, 3), dtype=np.int64)
        self.events = np.zeros((256, 3), dtype=np.int64)
        self.event_rows = np.zeros((256, attributes), dtype=np.float64)
        self.event_kinds = np.zeros((256, attributes), dtype=np.int8)
        self.ids: np.ndarray = np.zeros(256, dtype=np.int64)
        self.counters = np.array([runs, 0, 0, 0], dtype=np.int64)
        self.stack = np.zeros(tables.stack, dtype=np.float64)
        # Per batch: where each event of the batch is stored, and the matches it completes.
        self.stored = np.zeros(0, dtype=np.int64)
        self.done = np.zeros((64, 3), dtype=np.int64)
        # The batches of matches that still read the arrays, by id (they are not hashable).
        self.readers: weakref.WeakValueDictionary[int, object] = weakref.WeakValueDictionary()
        self._collect_at = _COLLECT_AT

    def fits(self, rows: np.ndarray, kinds: np.ndarray) -> bool:
        """Whether a batch's attributes (:func:`columns`) hold texts where this state's do: an
        attribute missing from every event of the batch fits either way."""
        differs = (kinds == TEXT) != self.text
        if not differs.any():
            return True
        return not any(differs[a] and not np.isnan(rows[a]).all()
                       for a in np.flatnonzero(differs).tolist())

    # --- partitions ---------------------------------------------------------------------------

    def slots(self, keys: list[Any], opening: np.ndarray) -> np.ndarray:
        """The slot of each key, and -1 after them (for events without a key): the key's
        partition's, a new one if ``opening`` says an event of the key may start a run, else
        -1 (the key has no run to advance and starts none)."""
        out = np.full(len(keys) + 1, -1, dtype=np.int64)
        for i, key in enumerate(keys):
            found = self.slot_of.get(key)
            if found is not None:
                out[i] = found
            elif opening[i]:
                out[i] = self._new_slot(key)
        return out

    def _new_slot(self, key: Any) -> int:
        if self.free_slots:
            c = self.free_slots.pop()
            self.keys[c] = key
        else:
            c = len(self.keys)
            self.keys.append(key)
            if c == len(self.head):
                self.head = np.concatenate([self.head, np.full(c, -1, dtype=np.int64)])
                self.count = np.concatenate([self.count, np.zeros(c, dtype=np.int64)])
                self.taken = np.concatenate([self.taken, np.zeros(c, dtype=bool)])
        self.slot_of[key] = c
        self.taken[c] = True
        return c

    def release(self) -> None:
        """Forget the partitions left without runs, as the Python loop deletes them."""
        for c in np.flatnonzero(self.taken & (self.count == 0)).tolist():
            del self.slot_of[self.keys[c]]
            self.keys[c] = None
            self.taken[c] = False
            self.free_slots.append(c)

    def live_runs(self) -> int:
        return int(self.count.sum())

    # --- capacity -----------------------------------------------------------------------------

    def reserve(self, runs: int, nodes: int, events: int) -> None:
        """Room for ``runs`` more runs, ``nodes`` more nodes and ``events`` more events."""
        while self.counters[loop.K_FREE] < runs:
            size = len(self.runs)
            free = int(self.counters[loop.K_FREE])
            self.runs = np.concatenate([self.runs, np.zeros_like(self.runs)])
            self.starts = np.concatenate([self.starts, np.zeros_like(self.starts)])
            self.values = np.concatenate([self.values, np.zeros_like(self.values)])
            self.free = np.concatenate([self.free[:free], np.arange(2 * size - 1, size - 1, -1),
                                        np.zeros(size - free, dtype=np.int64)])
            self.counters[loop.K_FREE] = free + size
        while self.counters[loop.K_NODES] + nodes > len(self.nodes):
            self.nodes = np.concatenate([self.nodes, np.zeros_like(self.nodes)])
        while self.counters[loop.K_EVENTS] + events > len(self.events):
            self.events = np.concatenate([self.events, np.zeros_like(self.events)])
            self.event_rows = np.concatenate([self.event_rows, np.zeros_like(self.event_rows)])
            self.event_kinds = np.concatenate([self.event_kinds,
                                               np.zeros_like(self.event_kinds)])
            self.ids = np.concatenate([self.ids, np.zeros_like(self.ids)])

    def batch(self, n: int) -> None:
        """Ready the per-batch arrays for a batch of ``n`` events."""
        if len(self.stored) < n:
            self.stored = np.empty(2 * n, dtype=np.int64)
        self.stored[:n] = -1
        self.counters[loop.K_DONE] = 0

    def reserve_matches(self, matches: int) -> None:
        """Room for ``matches`` more matches in this batch."""
        while self.counters[loop.K_DONE] + matches > len(self.done):
            self.done = np.concatenate([self.done, np.zeros_like(self.done)])

    def store_ids(self, start: int, ids: np.ndarray) -> None:
        """The ids of the events stored from ``start`` on, from the batch's ``ids``."""
        stop = int(self.counters[loop.K_EVENTS])
        if stop == start:
            return
        if start == 0:
            self.ids = np.zeros(len(self.ids), dtype=ids.dtype)
        elif ids.dtype != self.ids.dtype:
            self.ids = self.ids.astype(object)  # mixed id types keep each value's own type
        self.ids[start:stop] = ids[self.events[start:stop, loop.E_SOURCE]]

    def prune(self, now: float, window: float) -> None:
        """Drop the runs whose window has closed, and copy the buffer out once it is mostly
        dead (§5.3)."""
        loop.prune(now, window, self.head, self.count, self.runs, self.starts, self.free,
                     self.counters)
        used = int(self.counters[loop.K_NODES])
        if used <= self._collect_at:
            return
        # In place, unless a batch of matches still reads the arrays as they are.
        fresh = len(self.readers) > 0
        nodes = np.zeros_like(self.nodes) if fresh else self.nodes
        kept, events = loop.live(self.head, self.runs, self.nodes, used,
                                   int(self.counters[loop.K_EVENTS]), nodes)
        self.nodes = nodes
        self.counters[loop.K_NODES] = kept
        self.counters[loop.K_EVENTS] = len(events)
        self.events = _moved(self.events, events, fresh)
        self.event_rows = _moved(self.event_rows, events, fresh)
        self.event_kinds = _moved(self.event_kinds, events, fresh)
        self.ids = _moved(self.ids, events, fresh)
        self._collect_at = max(2 * kept, _COLLECT_AT)

    # --- conversion from and to the Python loop's runs ----------------------------------------

    @classmethod
    def load(cls, tables: loop.Tables, texts: Texts, text: np.ndarray,
             partitions: Iterable[PartitionRuns]) -> KernelState | None:
        """The kernel state of the Python loop's runs (a run per member: the kernel does not
        merge), or None if a V value or a buffered attribute is neither a number nor, where
        ``text`` says an attribute holds texts, a text."""
        state = cls(tables, texts, text)
        slot_text = state.slot_text()
        nodes: dict[int, int] = {}
        events: dict[int, int] = {}
        ids: list[Any] = []

        def event_index(e: BufferedEvent) -> int | None:
            found = events.get(id(e))
            if found is None:
                kinds = [_text_kind(x) if t else _kind(x) for x, t in zip(e.row, text.tolist(),
                                                                           strict=True)]
                if any(k < 0 for k in kinds):
                    return None
                found = events[id(e)] = len(ids)
                state.reserve(0, 0, 1)
                state.events[found] = (e.seq, e.ts, -1)
                state.event_rows[found] = [state._encoded(x, t) for x, t in zip(
                    e.row, text.tolist(), strict=True)]
                state.event_kinds[found] = kinds
                state.counters[loop.K_EVENTS] += 1
                ids.append(e.id)
            return found

        def node_index(node: BufferNode) -> int | None:
            for x in unnumbered(node, nodes):
                event = event_index(x.event)
                if event is None:
                    return None
                state.reserve(0, 1, 0)
                i = int(state.counters[loop.K_NODES])
                pred = nodes[id(x.pred)] if x.pred is not None else loop.NO_NODE
                state.nodes[i] = (event, x.component, pred)
                state.counters[loop.K_NODES] += 1
                nodes[id(x)] = i
            return nodes[id(node)]

        for key, runs in partitions:
            c = state._new_slot(key)
            last = -1
            for run in runs:
                if any((_text_kind(x) if t else _kind(x)) < 0
                       for x, t in zip(run.v, slot_text, strict=True)):
                    return None
                v = [state._encoded(x, t) for x, t in zip(run.v, slot_text, strict=True)]
                for member in run.members:
                    node = node_index(member.node)
                    if node is None:
                        return None
                    first = member.node
                    while first.pred is not None:
                        first = first.pred
                    state.reserve(1, 0, 0)
                    state.counters[loop.K_FREE] -= 1
                    r = int(state.free[state.counters[loop.K_FREE]])
                    state.runs[r] = (run.state, node, -1, first.event.seq)
                    state.starts[r] = member.start
                    state.values[r] = v
                    if last >= 0:
                        state.runs[last, loop.R_NEXT] = r
                    else:
                        state.head[c] = r
                    last = r
                    state.count[c] += 1
        if ids:
            state.ids = np.zeros(len(state.events), dtype=_id_dtype(ids))
            state.ids[:len(ids)] = ids
        return state

    def export(self, int_slots: list[int]) -> list[PartitionRuns]:
        """Every partition's runs as the Python loop holds them (``int_slots``: the V columns
        that hold integers)."""
        made: dict[int, BufferNode] = {}
        events: dict[int, BufferedEvent] = {}

        def node(i: int) -> BufferNode:
            chain = []
            x = i
            while x >= 0 and x not in made:
                chain.append(x)
                x = int(self.nodes[x, loop.N_PRED])
            pred = made[x] if x >= 0 else None
            for y in reversed(chain):
                e, comp, _ = self.nodes[y].tolist()
                found = events.get(e)
                if found is None:
                    found = events[e] = self.event(e)
                pred = made[y] = BufferNode(found, comp, pred)
            return made[i]

        texts = [i for i, t in enumerate(self.slot_text()) if t]
        out: list[PartitionRuns] = []
        for c, key in enumerate(self.keys):
            if not self.taken[c]:
                continue
            runs = []
            r = int(self.head[c])
            while r >= 0:
                v = self.values[r].tolist()
                for i in int_slots:
                    v[i] = int(v[i])
                for i in texts:
                    v[i] = self.texts.text(v[i]) if v[i] == v[i] else v[i]
                runs.append(Run(int(self.runs[r, loop.R_STATE]), tuple(v),
                                [Member(node(int(self.runs[r, loop.R_NODE])),
                                        int(self.starts[r]))]))
                r = int(self.runs[r, loop.R_NEXT])
            out.append((key, runs))
        return out

    def event(self, x: int) -> BufferedEvent:
        """Stored event ``x`` as the Python loop's buffer holds it."""
        seq, ts, _ = self.events[x].tolist()
        return BufferedEvent(seq, id_values(self.ids[x:x + 1])[0], ts,
                             row_values(self.event_rows[x], self.event_kinds[x], self.texts))

    def slot_text(self) -> list[bool]:
        """Per V column, whether it holds texts: the first, k-th or last value of a text
        attribute."""
        return [attr >= 0 and bool(self.text[attr]) and kind in (loop.FIRST, loop.NTH, loop.LAST)
                for _, kind, attr, _ in self.tables.slots.tolist()]

    def _encoded(self, x: Any, text: bool) -> float:
        """A buffered or V value as the kernel holds it: texts as codes, missing ones NaN."""
        if not text:
            return x
        return self.texts.code(x) if isinstance(x, str) else MISSING_CODE


def columns(batch_columns: list[np.ndarray], n: int, texts: Texts
            ) -> tuple[np.ndarray, np.ndarray] | None:
    """``n`` events' attribute columns as float64 rows (one row per attribute) and the kind of
    each, or None unless all are exact numbers or texts (with missing values), which are
    written as their codes in ``texts``."""
    rows = np.empty((len(batch_columns), n), dtype=np.float64)
    kinds = np.zeros(len(batch_columns), dtype=np.int8)
    for i, column in enumerate(batch_columns):
        kind = column.dtype.kind
        if kind == "O":
            codes = texts.encode(column)
            if codes is None:
                return None
            rows[i] = codes
            kinds[i] = TEXT
            continue
        if kind not in "iufb":
            return None
        if kind in "iu":
            if n and max(-int(column.min()), int(column.max())) >= EXACT:
                return None
            kinds[i] = INT
        elif kind == "b":
            kinds[i] = BOOL
        rows[i] = column
    return rows, kinds


def row_values(values: np.ndarray, kinds: np.ndarray, texts: Texts) -> tuple[Any, ...]:
    """A stored row as Python values of the types its batch had."""
    out = values.tolist()
    for i, kind in enumerate(kinds.tolist()):
        if kind == INT:
            out[i] = int(out[i])
        elif kind == BOOL:
            out[i] = bool(out[i])
        elif kind == TEXT:
            out[i] = texts.text(out[i])
    return tuple(out)


def id_values(ids: np.ndarray) -> list[Any]:
    """Event ids as results carry them (``json_value``: NaN as null)."""
    out = ids.tolist()
    if ids.dtype.kind in "fO":
        out = [json_value(x) for x in out]
    return out


def _id_dtype(ids: list[Any]) -> Any:
    return np.int64 if all(type(x) is int and abs(x) < 2**63 for x in ids) else object


def _kind(x: Any) -> int:
    """The kind of a buffered value or a V value; -1 if float64 cannot hold it exactly."""
    if isinstance(x, bool):
        return BOOL
    if isinstance(x, int):
        return INT if abs(x) < EXACT else -1
    if isinstance(x, float):
        return FLOAT
    return -1


def _text_kind(x: Any) -> int:
    """The kind of a value of a text attribute: a text or missing (None: TEXT, NaN: FLOAT, as
    the column it came from was typed); -1 for anything else."""
    if isinstance(x, str) or x is None:
        return TEXT
    if isinstance(x, float) and x != x:
        return FLOAT
    return -1


def _moved(array: np.ndarray, kept: np.ndarray, fresh: bool) -> np.ndarray:
    """``array[kept]`` at the start of an array of the same size: a new one if ``fresh``."""
    out = np.zeros_like(array) if fresh else array
    out[:len(kept)] = array[kept]
    return out
