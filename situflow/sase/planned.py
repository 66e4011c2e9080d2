"""Cost-based plans inside the SASE+ operator: the bridge to :mod:`situflow.plan`.

Kolchinsky & Schuster (PVLDB 2018) evaluate a *simple* pattern (§2.1) under
skip-till-any-match with an order-based lazy NFA or a ZStream tree whose shape a plan generator
picks from measured statistics (§3, §5), and re-plan when the statistics drift (§5). A SASE+
query (Agrawal et al., SIGMOD 2008, §2) is such a pattern when

* its selection strategy is ``skip_till_any_match`` and it has no ``CONSUME`` (the [KS] model
  reports every match; SASE+ §2 "all results", the default output format);
* it has a ``WITHIN`` window (the cost model needs ``W``);
* every conjunct reads one or two single-event variables (``a.x > 3``, ``a.x < b.y``): a unary
  filter ``c_i,i`` or a pairwise condition ``c_i,j`` of [KS] §2.1; conjuncts on a negated
  variable read it and at most one single-event positive variable;
* Kleene variables ``T+ v[]`` carry no conjunct of their own: the [KS] KL operator has no
  iteration predicates or aggregates (research notes C3), and SASE+ ``v[i]`` conjuncts skip
  the first element, which a KL condition cannot express.

Equivalence tests ``[attr]`` and ``PARTITION BY`` partition the stream (SASE+ §2, "commonly
used to form partitions"); in the pattern they become equality conditions between a
single-event anchor variable and every other variable, so that a match's events, and the
negated events that can void it, share the key. An event without a key is in no partition
and is not evaluated (as in NFA^b).

Everything else — the other strategies, ``CONSUME``, iteration predicates, ``v.LEN``,
aggregates — stays with NFA^b; :func:`translate` says why. ``RETURN`` values, result keys,
bindings and the order of results are computed exactly as :class:`~situflow.nfa.operator.
NfaOperator` computes them, so a query gives the same output on either path
(``tests/nfa/test_planned.py`` checks it for every plan generator).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from situflow.events import EventBatch, hashable_key
from situflow.lang import ast
from situflow.lang.compile import compile_scalar
from situflow.lang.sase import Equivalence, SaseQuery, Strategy, references
from situflow.nfa.compiler.automaton import Automaton
from situflow.nfa.matches import MatchEnv, json_value
from situflow.nfa.prepass import MISSING, edge_masks, partition_keys
from situflow.nfa.sharedbuffer.buffer import BufferedEvent
from situflow.plan import (
    AdaptiveEvaluator,
    Component,
    CostModel,
    Filter,
    Negation,
    Pattern,
    PlanMatch,
    Predicate,
    Statistics,
    choose_plan,
)
from situflow.plan import Event as PlanEvent
from situflow.plan.registry import DEFAULT
from situflow.results import Match
from situflow.snapshot import unwrap, wrap

SNAPSHOT_KIND = "sase-plan"
SNAPSHOT_FORMAT = 1
DEFAULT_ALGORITHM = DEFAULT
"""DP-B: tree-based plans beat order-based ones in [KS] §6.3."""

# Reserved attribute names of a plan event: its id and its partition key (attribute names
# cannot contain NUL, so they never meet a query's attributes).
_ID = "\0id"
_KEY = "\0key"


@dataclass(frozen=True)
class PlannedQuery:
    """A SASE+ query as a [KS] pattern, with the generator that plans it."""

    pattern: Pattern
    # Attributes the conditions and RETURN read; the automaton's layout comes first.
    attributes: tuple[str, ...]
    algorithm: str = DEFAULT_ALGORITHM
    check_every: int = 1000

    def prior(self) -> Statistics:
        """The statistics before any are measured: one event per time unit of every type and
        the conditions' prior selectivities."""
        return Statistics(dict.fromkeys(sorted(self.pattern.types()), 1.0))

    def initial_plan_text(self) -> str:
        """The plan the operator starts with, as ``situflow check`` shows it."""
        plan = choose_plan(self.pattern, self.prior(), self.algorithm, CostModel())
        return ("evaluation: cost-based plan (Kolchinsky & Schuster), skip-till-any-match; "
                "initial statistics: 1 event per time unit of each type, re-planned when the "
                f"measured rates or selectivities drift\n{plan.describe()}")


def translate(query: SaseQuery, automaton: Automaton,
              algorithm: str = DEFAULT_ALGORITHM, check_every: int = 1000) -> PlannedQuery | str:
    """The [KS] pattern of ``query`` with its planner, or the reason NFA^b must evaluate it."""
    if query.effective_strategy is not Strategy.ANY:
        return "plans are for skip_till_any_match only"
    if query.consume:
        return "CONSUME is an NFA^b output policy"
    if query.within is None or not math.isfinite(automaton.window):
        return "plans need a WITHIN window"
    positives = query.positives
    kleene = {c.var for c in positives if c.kleene}
    negated = {c.var for c in query.components if c.negated}
    filters: list[Filter] = []
    predicates: list[Predicate] = []
    attributes = dict.fromkeys(automaton.attributes)
    for conjunct in query.conjuncts():
        if isinstance(conjunct, Equivalence):
            continue
        variables: list[str] = []
        for ref in references(conjunct):
            if not isinstance(ref, ast.Ref):
                return "a Kleene iteration predicate or aggregate needs NFA^b"
            assert ref.qualifier is not None
            if ref.qualifier in kleene:
                return f"a condition on the Kleene variable '{ref.qualifier}' needs NFA^b"
            if ref.qualifier not in variables:
                variables.append(ref.qualifier)
            attributes[ref.name] = None
        if any(isinstance(node, ast.Call) for node in conjunct.walk()):
            return "aggregates need NFA^b"
        if len(variables) == 1:
            filters.append(Filter(variables[0], _unary(conjunct)))
        elif len(variables) == 2 and not set(variables) <= negated:
            predicates.append(Predicate(variables[0], variables[1], _pairwise(conjunct, variables)))
        else:
            return "a condition on no variable, on two negated ones or on more than two needs NFA^b"
    partition = automaton.partition_attributes
    if partition:
        anchor = next((c.var for c in positives if not c.kleene), None)
        others = [c.var for c in query.components if c.var != anchor]
        if anchor is None and (negated or len(positives) < 2):
            return "partitioning by a key needs a single-event variable to compare it with"
        if anchor is None:  # only Kleene variables: chain them, each pair for all events
            pairs = list(itertools.pairwise(c.var for c in positives))
        else:
            pairs = [(anchor, other) for other in others]
        predicates += [Predicate(u, v, _same_key, name=f"[{','.join(partition)}] {u}~{v}")
                       for u, v in pairs]
    components = tuple(Component(c.var, c.type_name, c.kleene) for c in positives)
    negations: list[Negation] = []
    seen = 0
    for c in query.components:
        if c.negated:
            negations.append(Negation(c.var, c.type_name, seen))
        else:
            seen += 1
    pattern = Pattern(components, automaton.window, tuple(predicates), tuple(filters),
                      tuple(negations))
    return PlannedQuery(pattern, tuple(attributes), algorithm, check_every)


def _unary(expr: ast.Node) -> Callable[[PlanEvent], bool]:
    test = compile_scalar(expr, lambda node: _attribute(node, lambda env: env))
    return lambda event: bool(test(event))


def _pairwise(expr: ast.Node, variables: Sequence[str]) -> Callable[[PlanEvent, PlanEvent], bool]:
    left = variables[0]

    def resolve(node: ast.Node) -> Callable[[Any], Any]:
        assert isinstance(node, ast.Ref)
        if node.qualifier == left:
            return _attribute(node, lambda env: env[0])
        return _attribute(node, lambda env: env[1])

    test = compile_scalar(expr, resolve)
    return lambda x, y: bool(test((x, y)))


def _attribute(node: ast.Node, pick: Callable[[Any], PlanEvent]) -> Callable[[Any], Any]:
    if not isinstance(node, ast.Ref):
        raise TypeError(f"no event attribute for {type(node).__name__}")
    name = node.name
    return lambda env: pick(env).attrs[name]


def _same_key(x: PlanEvent, y: PlanEvent) -> bool:
    return bool(x.attrs[_KEY] == y.attrs[_KEY])


class PlannedOperator:
    """The SASE+ operator of a planned query: an :class:`AdaptiveEvaluator` over the stream.

    Per event (SASE+ §5.2 emits a match at the event that completes it): an event that a
    component or negation may select and that has a partition key is pushed to the evaluator;
    any other event only advances event time, which releases matches waiting on a trailing
    negation (SEMANTICS.md). Results of one
    event are ordered as NFA^b orders them: by waiting deadline, then by the events' sequence
    numbers per variable.
    """

    def __init__(self, automaton: Automaton, planned: PlannedQuery, name: str, query_id: str,
                 evaluator: AdaptiveEvaluator | None = None):
        self.automaton = automaton
        self.planned = planned
        self.name = name
        self.query_id = query_id
        self.evaluator = evaluator or AdaptiveEvaluator(
            planned.pattern, planned.algorithm, stats=planned.prior(),
            check_every=planned.check_every)
        self.position = 0
        self.last_ts: int | None = None
        self._clock = -math.inf
        self._trailing = any(n.position == planned.pattern.size
                             for n in planned.pattern.negations)

    def process(self, batch: EventBatch) -> list[Match]:
        n = len(batch)
        if n == 0:
            return []
        # An event no edge or negation can select (by its type and the conditions on it
        # alone, evaluated column-wise) is not pushed: no plan could use it. This keeps every
        # product of a measured rate and a filter selectivity — what the cost model reads —
        # equal to its value on the whole stream.
        begin, take, negative = edge_masks(self.automaton, batch)
        wanted = np.zeros(n, dtype=bool)
        for mask in (*begin, *(m for m in take if m is not None), *negative):
            wanted |= mask
        self.position += n
        self.last_ts = int(batch.ts[-1])
        # Without a trailing negation an unpushed event changes nothing, so only the wanted
        # events are visited; with one, every event advances event time.
        rows_at = np.arange(n) if self._trailing else np.flatnonzero(wanted)
        if len(rows_at) == 0:
            return []
        keys = partition_keys(self.automaton, batch, n)
        types = batch.types[rows_at].tolist() if batch.types is not None else [None] * n
        names = self.planned.attributes
        rows = [batch.column(name)[rows_at].tolist() for name in names]
        stamps = batch.ts[rows_at].tolist()
        seqs = batch.seq[rows_at].tolist()
        ids = batch.ids[rows_at].tolist()
        pushed = wanted[rows_at].tolist()
        out: list[Match] = []
        for i, j in enumerate(rows_at.tolist()):
            t = stamps[i]
            key = keys[j]
            if not pushed[i] or key is MISSING:
                if t > self._clock:
                    self._clock = t
                    out += self._results(self.evaluator.advance_to(t), t)
                continue
            attrs = {name: rows[k][i] for k, name in enumerate(names)}
            attrs[_ID] = json_value(ids[i])
            attrs[_KEY] = key
            self._clock = t
            event = PlanEvent(str(types[i]), t, seqs[i], attrs)
            out += self._results(self.evaluator.push(event), t)
        return out

    def advance_to(self, watermark: int) -> list[Match]:
        self._clock = max(self._clock, watermark)
        return self._results(self.evaluator.advance_to(watermark), watermark)

    def finish(self) -> list[Match]:
        now = self.last_ts if self.last_ts is not None else 0
        return self._results(self.evaluator.flush(), now)

    def _results(self, found: list[PlanMatch], now: int) -> list[Match]:
        if not found:
            return []
        window = self.planned.pattern.window
        names = self.automaton.attributes
        results = []
        for m in found:
            events = [[BufferedEvent(e.seq, e.attrs[_ID], int(e.ts), tuple(e.attrs[a] for a in names))
                       for e in per] for per in m.events]
            order = tuple(tuple(e.seq for e in per) for per in events)
            key = m.events[0][0].attrs[_KEY]
            env = MatchEnv(events)
            rank = (0, events[0][0].ts + window, order) if self._trailing else (1, 0, order)
            results.append(Match(
                query=self.name,
                key=list(key) if isinstance(key, tuple | list) else json_value(key),
                ts=events[-1][-1].ts,
                emitted_at=now,
                values={name: json_value(f(env)) for name, f in self.automaton.returns},
                bindings={v: [e.id for e in per] for v, per in zip(m.vars, events, strict=True)},
                order=rank,
            ))
        results.sort(key=lambda r: r.order)
        return results

    def stats(self) -> dict[str, int]:
        """``partial_matches``: partial matches and buffered events the current evaluator
        holds."""
        return {"partial_matches": self.evaluator.state_size()}

    def snapshot(self) -> dict[str, Any]:
        """The evaluator's retained events and statistics (:meth:`AdaptiveEvaluator.snapshot`)
        and this operator's stream position, in the envelope of :mod:`situflow.snapshot`."""
        return wrap(SNAPSHOT_KIND, SNAPSHOT_FORMAT, self.query_id, {
            "position": self.position,
            "last_ts": self.last_ts,
            "clock": None if self._clock == -math.inf else self._clock,
            "evaluator": self.evaluator.snapshot(),
        })

    @classmethod
    def restore(cls, automaton: Automaton, planned: PlannedQuery, name: str, query_id: str,
                snapshot: dict[str, Any]) -> PlannedOperator:
        """The operator ``snapshot`` was taken of; ``StateError`` if it belongs to another
        query, engine or format."""
        state = unwrap(SNAPSHOT_KIND, SNAPSHOT_FORMAT, query_id, snapshot)
        data = dict(state["evaluator"])
        # JSON has no tuples: multi-attribute keys come back as lists.
        data["events"] = [[kind, ts, seq, {**attrs, _KEY: hashable_key(attrs[_KEY])}]
                          for kind, ts, seq, attrs in data["events"]]
        evaluator = AdaptiveEvaluator.restore(planned.pattern, data, planned.algorithm,
                                              check_every=planned.check_every)
        op = cls(automaton, planned, name, query_id, evaluator)
        op.position = state["position"]
        op.last_ts = state["last_ts"]
        if state["clock"] is not None:
            op._clock = state["clock"]
        return op
