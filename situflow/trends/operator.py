"""The COGRA streaming operator: batches in, one result per closed window and group out.

A :class:`TrendProgram` is the immutable, shareable part (the plan as kernel arrays plus the
compiled local predicates and operands); a :class:`TrendOperator` owns the run state, which
is plain arrays and snapshots to JSON-able data.

Streams are split into sub-streams by the equivalence and grouping attributes (§7); each
sub-stream is a *partition* with its own aggregates. Results combine the partitions of one
GROUP-BY group (counts and sums add, MIN/MAX take the extreme, AVG = SUM / COUNT(E), §2.3).
A window yields one result per group that has at least one event able to take a pattern
position in it; results come out when event time reaches the window end (SEMANTICS.md:
windows ``[k·SLIDE, k·SLIDE + WITHIN)``, ``k >= 0``), ordered by window start and then group,
so any batching of the same events gives the same results in the same order.

Aggregates are float64 with one shared binary exponent per partition and window
(:func:`situflow.trends.kernel._rescale`): counts and sums are exact up to 2**53 and rounded
beyond; skip-till-any-match counts grow like 2**n (§3.3, Table 4), and a count or sum beyond
float64's range (1.8e308) is reported as decimal text such as ``"3.141593e+150514"``, while
AVG stays an ordinary number.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from situflow.devices.vector import vector_compiler
from situflow.events import EventBatch
from situflow.lang import ast
from situflow.lang.cogra import NextRef
from situflow.results import TrendResult
from situflow.snapshot import unwrap, wrap
from situflow.trends import kernel
from situflow.trends.configuration import OPS, Position, TrendPlan
from situflow.trends.kernel import COUNT, COUNT_E, MAX, MIN, SUM

SNAPSHOT_KIND = "cogra"
STATE_VERSION = 1
_KIND = {COUNT: kernel.ADD, COUNT_E: kernel.ADD, SUM: kernel.ADD, MIN: kernel.SMALLEST,
         MAX: kernel.LARGEST}
_IDENT = {kernel.ADD: 0.0, kernel.SMALLEST: math.inf, kernel.LARGEST: -math.inf}
_EXACT = float(1 << 53)
# A watermark past every window: finish() closes them all.
END_OF_TIME = 1 << 62

Vector = Callable[[EventBatch], Any]
# One closed window of one partition: (window, partition key, slot values, binary exponent).
Record = tuple[int, tuple[Any, ...], np.ndarray, int]


@dataclass(frozen=True, eq=False)
class TrendProgram:
    """The plan in the kernel's terms; built once per compiled query and shared."""

    plan: TrendPlan
    follow: np.ndarray
    is_start: np.ndarray
    is_end: np.ndarray
    grained: np.ndarray
    atom_lo: np.ndarray
    atom_hi: np.ndarray
    atom_op: np.ndarray
    slot_kind: np.ndarray
    slot_role: np.ndarray
    slot_target: np.ndarray
    slot_attr: np.ndarray
    attrs: tuple[str, ...]
    ident: np.ndarray
    guarded: np.ndarray  # [p, q]: a negation guards the transition
    guard_of: np.ndarray  # per position: the negation guarding its transitions, or -1
    local: tuple[tuple[Vector, ...], ...]
    negation_local: tuple[tuple[Vector, ...], ...]
    prev_side: tuple[Vector, ...]
    next_side: tuple[Vector, ...]
    equality: np.ndarray  # per atom: `=` or `!=`, which also compare strings

    @classmethod
    def build(cls, plan: TrendPlan, device: str = "cpu") -> TrendProgram:
        """The program of ``plan``; ``device`` evaluates the event-local predicates and the
        adjacent predicates' operands (``QueryOptions.device``)."""
        compile_vector = vector_compiler(device)
        P = len(plan.positions)
        follow = np.zeros((P, P), dtype=np.bool_)
        for p, successors in enumerate(plan.follow):
            follow[p, list(successors)] = True
        # Atoms sorted by transition so the kernel reads the atoms of (p, q) as one range.
        atoms = sorted(plan.atoms, key=lambda a: (a.prev, a.next))
        atom_lo = np.zeros((P, P), dtype=np.int64)
        atom_hi = np.zeros((P, P), dtype=np.int64)
        for j, a in enumerate(atoms):
            if atom_hi[a.prev, a.next] == 0:
                atom_lo[a.prev, a.next] = j
            atom_hi[a.prev, a.next] = j + 1
        attrs = tuple(dict.fromkeys(s.attr for s in plan.slots if s.attr is not None))
        slot_target = np.zeros((len(plan.slots), P), dtype=np.bool_)
        for v, s in enumerate(plan.slots):
            slot_target[v, list(s.targets)] = True
        guarded = np.zeros((P, P), dtype=np.bool_)
        guard_of = np.full(P, -1, dtype=np.int64)
        for (p, q), g in plan.guarded:
            guarded[p, q] = True
            guard_of[p] = g
        return cls(
            plan,
            follow,
            np.array(plan.start, dtype=np.bool_),
            np.array(plan.end, dtype=np.bool_),
            np.array(plan.event_grained, dtype=np.bool_),
            atom_lo,
            atom_hi,
            np.array([OPS[a.op] for a in atoms], dtype=np.int64),
            slot_kinds(plan),
            np.array([s.role for s in plan.slots], dtype=np.int64),
            slot_target,
            np.array([attrs.index(s.attr) if s.attr else -1 for s in plan.slots], dtype=np.int64),
            attrs,
            slot_identities(plan),
            guarded,
            guard_of,
            tuple(tuple(compile_vector(c, _resolve) for c in p.local) for p in plan.positions),
            tuple(tuple(compile_vector(c, _resolve) for c in n.local) for n in plan.negations),
            tuple(compile_vector(a.prev_expr, _resolve) for a in atoms),
            tuple(compile_vector(a.next_expr, _resolve) for a in atoms),
            np.array([a.op in ("=", "!=") for a in atoms], dtype=np.bool_),
        )

    def prepare(self, batch: EventBatch) -> Inputs:
        """Per-event kernel inputs: eligibility per position, sub-stream membership, operands."""
        n = len(batch)
        types = batch.types if batch.types is not None else np.full(n, None, dtype=object)
        of_pattern_type = np.zeros(n, dtype=np.bool_)

        def matching(variables: tuple[Position, ...],
                     local: tuple[tuple[Vector, ...], ...]) -> np.ndarray:
            nonlocal of_pattern_type
            out = np.zeros((n, max(len(variables), 1)), dtype=np.bool_)
            for q, position in enumerate(variables):
                mask = np.asarray(types == position.type_name, dtype=np.bool_)
                of_pattern_type = of_pattern_type | mask
                for predicate in local[q]:
                    mask = mask & np.broadcast_to(np.asarray(predicate(batch), dtype=np.bool_), n)
                out[:, q] = mask
            return out

        elig = matching(self.plan.positions, self.local)[:, :len(self.plan.positions)]
        neg = matching(self.plan.negations, self.negation_local)
        # Local predicates filter the stream before contiguity is judged (§7); events of
        # types outside the pattern stay in it and are irrelevant events (Example 2.7).
        in_stream = ~of_pattern_type | elig.any(axis=1) | neg.any(axis=1)
        xs = np.zeros((n, max(len(self.attrs), 1)))
        for j, attr in enumerate(self.attrs):
            xs[:, j] = as_float64(batch.column(attr))
        return Inputs(
            np.ascontiguousarray(batch.ts, dtype=np.int64), np.ascontiguousarray(elig),
            in_stream, neg, xs, _operands(self.prev_side, self.equality, batch),
            _operands(self.next_side, self.equality, batch),
        )

    def empty(self) -> Inputs:
        """Inputs of no events (for advancing time)."""
        none = np.zeros((0, 1))
        return Inputs(np.zeros(0, dtype=np.int64),
                      np.zeros((0, len(self.plan.positions)), dtype=np.bool_),
                      np.zeros(0, dtype=np.bool_), np.zeros((0, 1), dtype=np.bool_),
                      none, none, none)


@dataclass(frozen=True)
class Inputs:
    """One batch in the kernel's terms (see :func:`situflow.trends.kernel.aggregate_events`)."""

    ts: np.ndarray
    elig: np.ndarray  # [event, position]: the event may take the position
    in_stream: np.ndarray  # the event is part of its sub-stream (not filtered out)
    neg: np.ndarray  # [event, negation]: the event matches the negated variable
    xs: np.ndarray  # aggregated attributes
    prev_vals: np.ndarray  # adjacent-predicate operands when the event is the earlier one
    next_vals: np.ndarray  # ... and when it is the later one


def _resolve(node: ast.Node) -> Vector:
    if isinstance(node, ast.Ref | NextRef):
        name = node.name
        return lambda batch: batch.column(name)
    raise TypeError(f"unexpected {type(node).__name__} in a COGRA predicate")


def _operands(sides: tuple[Vector, ...], equality: np.ndarray, batch: EventBatch) -> np.ndarray:
    """Adjacent-predicate operands as float64; for ``=``/``!=`` strings become their 52-bit
    hash (exact in a double), so equal strings compare equal and differ from every number."""
    out = np.zeros((len(batch), max(len(sides), 1)))
    for j, side in enumerate(sides):
        values = np.asarray(side(batch))
        if equality[j] and values.dtype.kind not in "fiub":
            values = np.array([_hash(v) if isinstance(v, str) else v
                               for v in np.broadcast_to(values, len(batch)).tolist()],
                              dtype=object)
        out[:, j] = np.broadcast_to(as_float64(values), len(batch))
    return out


def _hash(text: str) -> float:
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    # Above 2**53, so no small number shares a string's code; below 2**54, so it is exact.
    return float((int.from_bytes(digest, "big") >> 12) | (1 << 53))


def as_float64(values: Any) -> np.ndarray:
    """Values as float64 (booleans as 0 and 1); missing and other values become NaN."""
    array = np.asarray(values)
    if array.dtype.kind in "fiub":
        return array.astype(np.float64)
    flat = [float(v) if isinstance(v, int | float | np.number) else math.nan
            for v in array.ravel().tolist()]
    return np.array(flat, dtype=np.float64).reshape(array.shape)


class TrendOperator:
    """Runs one COGRA query over an ordered stream (lifecycle: situflow.operator)."""

    # Per partition: pending aggregates [part, position, window slot, value], finals
    # [part, slot, value], whether the slot's window saw an event, the window a slot holds,
    # and the first kept event node per position.
    pend: np.ndarray
    stale: np.ndarray  # pending aggregates a negated event has cut off from guarded transitions
    final: np.ndarray
    seen: np.ndarray
    slot_win: np.ndarray
    scale: np.ndarray  # binary exponent of the additive aggregates (kernel._rescale)
    head: np.ndarray
    # The node pool of kept events (event-grained positions): aggregates per window slot,
    # adjacent-predicate operands, and the next node in its list (or in the free list).
    node_vals: np.ndarray
    node_prev: np.ndarray
    node_next: np.ndarray
    node_stale: np.ndarray

    def __init__(self, program: TrendProgram, name: str, query_id: str):
        self.program = program
        self.name = name
        self.query_id = query_id
        plan = program.plan
        self._P = len(plan.positions)
        self._K = max(1, -(-plan.size // plan.slide))
        self._V = len(plan.slots)
        self._NT = max(len(plan.atoms), 1)
        self._keys: dict[tuple[Any, ...], int] = {}
        self._key_list: list[tuple[Any, ...]] = []
        self.scal = np.zeros(kernel.N_SCALARS, dtype=np.int64)
        self.scal[kernel.K_HI_MAX] = -1
        self.scal[kernel.FREE_HEAD] = -1
        self._alloc_parts(0, 4)
        self._alloc_nodes(0, 64)

    # --- state arrays ---------------------------------------------------------------------

    def _alloc_parts(self, used: int, capacity: int) -> None:
        pend = np.empty((capacity, self._P, self._K, self._V))
        pend[:] = self.program.ident
        stale = pend.copy()
        final = np.empty((capacity, self._K, self._V))
        final[:] = self.program.ident
        seen = np.zeros((capacity, self._K), dtype=np.bool_)
        slot_win = np.full((capacity, self._K), kernel.NO_WINDOW, dtype=np.int64)
        scale = np.zeros((capacity, self._K), dtype=np.int64)
        head = np.full((capacity, self._P), -1, dtype=np.int64)
        if used:
            pend[:used] = self.pend[:used]
            stale[:used] = self.stale[:used]
            final[:used] = self.final[:used]
            seen[:used] = self.seen[:used]
            slot_win[:used] = self.slot_win[:used]
            scale[:used] = self.scale[:used]
            head[:used] = self.head[:used]
        self.pend, self.stale, self.final = pend, stale, final
        self.seen, self.slot_win, self.scale, self.head = seen, slot_win, scale, head

    def _alloc_nodes(self, used: int, capacity: int) -> None:
        node_vals = np.empty((capacity, self._K, self._V))
        node_vals[:] = self.program.ident
        node_prev = np.zeros((capacity, self._NT))
        node_next = np.full(capacity, -1, dtype=np.int64)
        node_stale = np.zeros(capacity, dtype=np.bool_)
        if used:
            node_vals[:used] = self.node_vals
            node_prev[:used] = self.node_prev
            node_next[:used] = self.node_next
            node_stale[:used] = self.node_stale
        # New nodes join the free list in front of the old free nodes.
        node_next[used:capacity - 1] = np.arange(used + 1, capacity)
        node_next[capacity - 1] = self.scal[kernel.FREE_HEAD]
        self.scal[kernel.FREE_HEAD] = used
        self.scal[kernel.N_FREE] += capacity - used
        self.node_vals, self.node_prev, self.node_next = node_vals, node_prev, node_next
        self.node_stale = node_stale

    def _partition_ids(self, batch: EventBatch) -> np.ndarray:
        attrs = self.program.plan.partition_attrs
        n = len(batch)
        if not attrs:
            if not self._key_list:
                self._new_partition(())
            return np.zeros(n, dtype=np.int64)
        codes = np.empty((n, len(attrs)), dtype=np.int64)
        uniques: list[list[Any]] = []
        for j, attr in enumerate(attrs):
            values, inverse = factorize(batch.column(attr))
            uniques.append(values)
            codes[:, j] = inverse
        combos, inverse = np.unique(codes, axis=0, return_inverse=True)
        ids = np.empty(len(combos), dtype=np.int64)
        for c, combo in enumerate(combos):
            key = tuple(uniques[j][code] for j, code in enumerate(combo))
            found = self._keys.get(key)
            ids[c] = self._new_partition(key) if found is None else found
        return ids[np.asarray(inverse).reshape(-1)]

    def _new_partition(self, key: tuple[Any, ...]) -> int:
        part = len(self._key_list)
        if part >= self.pend.shape[0]:
            self._alloc_parts(part, 2 * self.pend.shape[0])
        self._keys[key] = part
        self._key_list.append(key)
        return part

    # --- lifecycle ------------------------------------------------------------------------

    def process(self, batch: EventBatch) -> list[TrendResult]:
        return window_results(self.program.plan, self.name, self.process_records(batch))

    def advance_to(self, watermark: int) -> list[TrendResult]:
        return window_results(self.program.plan, self.name, self.advance_records(int(watermark)))

    def finish(self) -> list[TrendResult]:
        return self.advance_to(END_OF_TIME)

    def process_records(self, batch: EventBatch) -> list[Record]:
        """The windows that ``batch`` closes, one record per partition that saw an event."""
        if len(batch) == 0:
            return []
        parts = self._partition_ids(batch)
        return self._run(parts, self.program.prepare(batch), kernel.NO_WINDOW)

    def advance_records(self, close_to: int) -> list[Record]:
        """The windows that end at or before ``close_to``, as :meth:`process_records`."""
        return self._run(np.zeros(0, dtype=np.int64), self.program.empty(), close_to)

    def _run(self, parts: np.ndarray, ev: Inputs, close_to: int) -> list[Record]:
        pr, plan = self.program, self.program.plan
        records: list[Record] = []
        i = 0
        while True:
            n_parts = len(self._key_list)
            out_cap = max(64, n_parts)
            out_win = np.empty(out_cap, dtype=np.int64)
            out_part = np.empty(out_cap, dtype=np.int64)
            out_vals = np.empty((out_cap, self._V))
            out_scale = np.empty(out_cap, dtype=np.int64)
            self.scal[kernel.N_OUT] = 0
            i, done = kernel.aggregate_events(
                parts, ev.ts, ev.elig, ev.in_stream, ev.neg, ev.xs, ev.prev_vals, ev.next_vals,
                plan.mode, plan.size, plan.slide, pr.follow, pr.is_start, pr.is_end, pr.grained,
                pr.atom_lo, pr.atom_hi, pr.atom_op, pr.guarded, pr.guard_of, pr.slot_kind,
                pr.slot_role, pr.slot_target, pr.slot_attr, pr.ident,
                n_parts, self.pend, self.stale, self.final, self.seen, self.slot_win, self.scale,
                self.head, self.node_vals, self.node_prev, self.node_next, self.node_stale,
                self.scal, out_win, out_part, out_vals, out_scale, i, close_to,
            )
            for o in range(int(self.scal[kernel.N_OUT])):
                records.append((int(out_win[o]), self._key_list[int(out_part[o])],
                                out_vals[o].copy(), int(out_scale[o])))
            self.scal[kernel.N_OUT] = 0
            if done:
                break
            if self.scal[kernel.N_FREE] < self._P:
                used = self.node_vals.shape[0]
                self._alloc_nodes(used, 2 * used)
        return records

    # --- state ----------------------------------------------------------------------------

    def counts(self, key: tuple[Any, ...] = (), window: int = 0) -> dict[str, float]:
        """Trend counts held for partition ``key`` in window ``window``: per variable the
        pending aggregate (Tables 6–8's ``A.count``/``e_l.count``) and ``final``."""
        part = self._keys.get(key)
        slot = window % self._K
        if part is None or self.slot_win[part, slot] != window:
            return {}
        names = [p.variable for p in self.program.plan.positions]
        out = {name: float(self.pend[part, q, slot, 0]) for q, name in enumerate(names)}
        node = self.head[part]
        for q, name in enumerate(names):
            n = int(node[q])
            while n >= 0:
                out[name] += float(self.node_vals[n, slot, 0])
                n = int(self.node_next[n])
        out["final"] = float(self.final[part, slot, 0])
        return out

    def stats(self) -> dict[str, int]:
        """How much state the operator holds: partitions, aggregate slots and kept events
        (Thm 4.3/5.3/6.4); COGRA keeps no partial matches."""
        n_parts = len(self._key_list)
        return {
            "partitions": n_parts,
            "aggregates": int(self.pend[:n_parts].size + self.final[:n_parts].size
                              + (self.stale[:n_parts].size if self.program.plan.negations else 0)),
            "kept_events": int(self.node_vals.shape[0] - self.scal[kernel.N_FREE]),
        }

    def snapshot(self) -> dict[str, Any]:
        n = len(self._key_list)
        return wrap(SNAPSHOT_KIND, STATE_VERSION, self.query_id, {
            "keys": [list(k) for k in self._key_list],
            "scal": self.scal.tolist(),
            "pend": _array_to_json(self.pend[:n]),
            "stale": _array_to_json(self.stale[:n]),
            "final": _array_to_json(self.final[:n]),
            "seen": self.seen[:n].tolist(),
            "slot_win": self.slot_win[:n].tolist(),
            "scale": self.scale[:n].tolist(),
            "head": self.head[:n].tolist(),
            "node_vals": _array_to_json(self.node_vals),
            "node_prev": _array_to_json(self.node_prev),
            "node_next": self.node_next.tolist(),
            "node_stale": self.node_stale.tolist(),
        })

    @classmethod
    def restore(cls, program: TrendProgram, name: str, query_id: str,
                snapshot: dict[str, Any]) -> TrendOperator:
        state = unwrap(SNAPSHOT_KIND, STATE_VERSION, query_id, snapshot)
        op = cls(program, name, query_id)
        keys = [tuple(k) for k in state["keys"]]
        op._key_list = keys
        op._keys = {k: i for i, k in enumerate(keys)}
        n = len(keys)
        op._alloc_parts(0, max(4, n))
        if n:
            op.pend[:n] = _array_from_json(state["pend"])
            op.stale[:n] = _array_from_json(state["stale"])
            op.final[:n] = _array_from_json(state["final"])
            op.seen[:n] = np.array(state["seen"], dtype=np.bool_)
            op.slot_win[:n] = np.array(state["slot_win"], dtype=np.int64)
            op.scale[:n] = np.array(state["scale"], dtype=np.int64)
            op.head[:n] = np.array(state["head"], dtype=np.int64)
        op.node_vals = _array_from_json(state["node_vals"]).reshape(-1, op._K, op._V)
        op.node_prev = _array_from_json(state["node_prev"]).reshape(-1, op._NT)
        op.node_next = np.array(state["node_next"], dtype=np.int64)
        op.node_stale = np.array(state["node_stale"], dtype=np.bool_)
        op.scal = np.array(state["scal"], dtype=np.int64)
        return op


def slot_kinds(plan: TrendPlan) -> np.ndarray:
    """How each value slot combines (kernel.ADD, SMALLEST or LARGEST)."""
    return np.array([_KIND[s.role] for s in plan.slots], dtype=np.int64)


def slot_identities(plan: TrendPlan) -> np.ndarray:
    """The value of each slot over no trends: 0 for counts and sums, ±inf for MIN/MAX."""
    return np.array([_IDENT[k] for k in slot_kinds(plan)])


def window_results(plan: TrendPlan, name: str, records: list[Record]) -> list[TrendResult]:
    """One result per window and GROUP-BY group, ordered by window start, then group; the
    partitions of a group combine as in §2.3 (counts and sums add, MIN/MAX take the extreme)."""
    kind = slot_kinds(plan)
    group_index = [plan.partition_attrs.index(g) for g in plan.group_by]
    by_window: dict[int, dict[tuple[Any, ...], tuple[np.ndarray, int]]] = {}
    for k, key, vals, exp in records:
        group = tuple(key[j] for j in group_index)
        groups = by_window.setdefault(k, {})
        if group in groups:
            groups[group] = _merge(groups[group], (vals, exp), kind)
        else:
            groups[group] = (vals, exp)
    results = []
    for k in sorted(by_window):
        groups = by_window[k]
        for group in sorted(groups, key=_order):
            results.append(TrendResult(
                name,
                None if not group else group[0] if len(group) == 1 else list(group),
                k * plan.slide,
                k * plan.slide + plan.size,
                _values(plan, groups[group], dict(zip(plan.group_by, group, strict=True))),
            ))
    return results


def _values(plan: TrendPlan, scaled: tuple[np.ndarray, int], group: dict[str, Any]) -> dict[str, Any]:
    vals, exp = scaled
    out: dict[str, Any] = {}
    for o in plan.outputs:
        if o.group_attr is not None:
            out[o.label] = group[o.group_attr]
        elif o.func == "AVG":
            total, count = vals[o.slots[0]], vals[o.slots[1]]
            out[o.label] = float(total / count) if count > 0 else None
        elif o.func in ("MIN", "MAX"):
            out[o.label] = _number(vals[o.slots[0]]) if math.isfinite(vals[o.slots[0]]) \
                else None
        else:
            out[o.label] = _scaled(float(vals[o.slots[0]]), exp)
    return out


def factorize(column: np.ndarray) -> tuple[list[Any], np.ndarray]:
    """Distinct values (as plain Python, NaN as None) and each row's index among them."""
    try:
        values, inverse = np.unique(column, return_inverse=True)
        return [plain(v) for v in values.tolist()], np.asarray(inverse).reshape(-1)
    except TypeError:  # mixed types in an object column
        index: dict[Any, int] = {}
        plains = [plain(v) for v in column.tolist()]
        codes = np.fromiter((index.setdefault((type(v).__name__, v), len(index)) for v in plains),
                            dtype=np.int64, count=len(plains))
        uniques: list[Any] = [None] * len(index)
        for (_, v), c in index.items():
            uniques[c] = v
        return uniques, codes


def plain(value: Any) -> Any:
    """A group value as JSON shows it. Integral floats become ints: an integer attribute
    reads as float in a batch where some event lacks it, and the group must not change."""
    if isinstance(value, float):
        if value != value:
            return None
        if value.is_integer():
            return int(value)
    return value


def _order(group: tuple[Any, ...]) -> tuple[Any, ...]:
    """A total order over group values of mixed types: null, booleans, numbers, strings."""
    def rank(v: Any) -> tuple[int, Any]:
        if v is None:
            return (0, 0)
        if isinstance(v, bool):
            return (1, v)
        if isinstance(v, int | float):
            return (2, v)
        return (3, str(v))
    return tuple(rank(v) for v in group)


def _merge(a: tuple[np.ndarray, int], b: tuple[np.ndarray, int],
           kind: np.ndarray) -> tuple[np.ndarray, int]:
    """Combine two partitions' window aggregates, aligning their scales."""
    exp = max(a[1], b[1])
    added = np.ldexp(a[0], a[1] - exp) + np.ldexp(b[0], b[1] - exp)
    merged = np.where(kind == kernel.ADD, added,
                      np.where(kind == kernel.SMALLEST, np.minimum(a[0], b[0]),
                               np.maximum(a[0], b[0])))
    return merged, exp


def _scaled(value: float, exp: int) -> int | float | str:
    """``value * 2**exp`` as a JSON number, or as decimal text beyond float64's range."""
    try:
        return _number(math.ldexp(value, exp))
    except OverflowError:
        digits = math.log10(abs(value)) + exp * math.log10(2)
        power = math.floor(digits)
        sign = "-" if value < 0 else ""
        return f"{sign}{10 ** (digits - power):.6f}e+{power}"


def _number(value: float) -> int | float:
    if value.is_integer() and abs(value) < _EXACT:
        return int(value)
    return float(value)


def _array_to_json(array: np.ndarray) -> list[Any]:
    """Float arrays as [shape, values] with infinities and NaN spelled out (JSON has neither)."""
    flat = [v if math.isfinite(v) else str(v) for v in array.ravel().tolist()]
    return [list(array.shape), flat]


def _array_from_json(data: list[Any]) -> np.ndarray:
    shape, flat = data
    return np.array([float(v) for v in flat], dtype=np.float64).reshape(shape)
