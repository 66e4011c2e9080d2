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
import time
from collections import deque
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
from situflow.nfa.operator import NfaOperator
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
    dp_bushy,
    dp_left_deep,
)
from situflow.plan import Event as PlanEvent
from situflow.plan.choice import decide
from situflow.plan.stats import StatisticsCollector
from situflow.results import Match
from situflow.snapshot import unwrap, wrap

SNAPSHOT_KIND = "sase-plan"
SNAPSHOT_FORMAT = 2
AUTO = "AUTO"
"""The default: NFA^b while the statistics are measured, then the DP-B or DP-LD plan if one
can win (:mod:`situflow.plan.choice`), else NFA^b."""
AUTO_CANDIDATES = (dp_bushy.NAME, dp_left_deep.NAME)
DEFAULT_ALGORITHM = AUTO
WARMUP_EVENTS = 10_000
WARMUP_PUSHED = 500
"""``AUTO`` measures, and then tries a plan, for at most ``WARMUP_EVENTS`` events or
``WARMUP_PUSHED`` events a plan would be pushed each: on a stream where most events are
pushable NFA^b may be the slow engine, and the warm-up runs on it."""
_MEASURE, _TRIAL, _DONE = "measure", "trial", "done"

# Reserved attribute names of a plan event: its id and its partition key (attribute names
# cannot contain NUL, so they never meet a query's attributes).
_ID = "\0id"
_KEY = "\0key"


@dataclass(frozen=True)
class PlannedQuery:
    """A SASE+ query as a [KS] pattern, with the generator that plans it.

    ``warmup > 0`` makes the operator start on NFA^b and decide between NFA^b and the plans
    of ``candidates``: a plan is tried if it is estimated to need ``advantage`` times fewer
    tests (:func:`situflow.plan.choice.decide`), and kept if it runs faster than NFA^b on the
    trial (``trial=False``: kept on the estimate); see :class:`PlannedOperator`.
    ``warmup = 0`` runs the plan of ``algorithm`` from the first event.
    """

    pattern: Pattern
    # Attributes the conditions and RETURN read; the automaton's layout comes first.
    attributes: tuple[str, ...]
    algorithm: str = dp_bushy.NAME
    check_every: int = 1000
    warmup: int = 0
    warmup_pushed: int = WARMUP_PUSHED
    candidates: tuple[str, ...] = ()
    advantage: float = 1.0
    trial: bool = True

    def prior(self) -> Statistics:
        """The statistics before any are measured: one event per time unit of every type and
        the conditions' prior selectivities."""
        return Statistics(dict.fromkeys(sorted(self.pattern.types()), 1.0))

    def initial_plan_text(self) -> str:
        """The plan the operator starts with, as ``situflow check`` shows it."""
        plan = choose_plan(self.pattern, self.prior(), self.algorithm, CostModel())
        if self.warmup:
            return (f"evaluation: NFA^b while the rates and selectivities are measured (at "
                    f"most {self.warmup:,} events); then, if the cost-based plan (Kolchinsky & "
                    f"Schuster; of {', '.join(self.candidates)} the one with the fewest tests) "
                    "is estimated to need fewer tests than the pattern order, the plan runs "
                    "beside NFA^b as long again and the faster one continues, skip-till-any-"
                    f"match; the {self.algorithm} plan under 1 event per time unit of each "
                    f"type:\n{plan.describe()}")
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
    if algorithm.upper() == AUTO:
        return PlannedQuery(pattern, tuple(attributes), dp_bushy.NAME, check_every,
                            warmup=WARMUP_EVENTS, candidates=AUTO_CANDIDATES)
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

    With ``planned.warmup`` the operator starts on NFA^b and decides in two phases of at most
    ``warmup`` events or ``warmup_pushed`` pushable events each. *Measure*: NFA^b evaluates;
    the events a plan would be pushed are measured and the last window of them retained. Then
    :func:`decide` estimates whether a candidate plan needs fewer tests than the pattern
    order; if not, NFA^b stays for good. Otherwise the plan starts from the measured
    statistics and replays the retained events, discarding what it emits on them (NFA^b
    emitted it already), as :meth:`AdaptiveEvaluator.switch_to` does. *Trial* (with
    ``planned.trial``): NFA^b still emits while the plan evaluates the same events in its
    shadow, both timed in CPU seconds; the faster one continues alone. Either engine gives
    the same results, so the decision (which depends on the machine) never changes them.
    """

    def __init__(self, automaton: Automaton, planned: PlannedQuery, name: str, query_id: str,
                 evaluator: AdaptiveEvaluator | None = None, nfa: NfaOperator | None = None):
        self.automaton = automaton
        self.planned = planned
        self.name = name
        self.query_id = query_id
        self.position = 0
        self.last_ts: int | None = None
        self._clock = -math.inf
        self._trailing = any(n.position == planned.pattern.size
                             for n in planned.pattern.negations)
        fresh = evaluator is None and nfa is None
        self._phase = _MEASURE if planned.warmup and fresh else _DONE
        self._nfa = NfaOperator(automaton, name, query_id) if self._phase == _MEASURE else nfa
        # Measure phase: the collector measures the pushable events and ``_recent`` keeps the
        # last window of them for the plan to replay.
        self._collector = StatisticsCollector(planned.pattern, 10 * planned.pattern.window)
        self._recent: deque[PlanEvent] = deque()
        self._phase_events = self._phase_pushed = 0
        self._seconds = {"nfa": 0.0, "plan": 0.0}  # trial phase: CPU seconds of each engine
        self.evaluator = evaluator
        if fresh and self._nfa is None:
            self.evaluator = AdaptiveEvaluator(planned.pattern, planned.algorithm,
                                               stats=planned.prior(),
                                               check_every=planned.check_every)
        self.decision = (f"plan {planned.algorithm} (asked for)" if not planned.warmup else
                         "NFA^b (measuring)" if self._phase == _MEASURE else "")

    def process(self, batch: EventBatch) -> Sequence[Match]:
        n = len(batch)
        if n == 0:
            return []
        if self._phase == _DONE:
            if self._nfa is not None:
                found = self._nfa.process(batch)
                self.position, self.last_ts = self._nfa.position, self._nfa.last_ts
                return found
            return self._planned(batch)
        assert self._nfa is not None
        pushable = np.cumsum(self._wanted(batch))
        pushed_left = self.planned.warmup_pushed - self._phase_pushed
        cut = min(n, self.planned.warmup - self._phase_events,
                  int(np.searchsorted(pushable, pushed_left)) + 1)
        head = batch if cut == n else batch.slice(0, cut)
        if self._phase == _MEASURE:
            out = list(self._nfa.process(head))
            self._measure(head)
        else:
            started = time.process_time()
            out = list(self._nfa.process(head))
            between = time.process_time()
            self._planned(head)  # NFA^b emitted these matches
            self._seconds["nfa"] += between - started
            self._seconds["plan"] += time.process_time() - between
        self._phase_events += cut
        self._phase_pushed += int(pushable[cut - 1])
        if self._phase_events >= self.planned.warmup or pushed_left <= pushable[cut - 1]:
            self._end_phase()
        if cut < n:
            out += self.process(batch.slice(cut, n))
        return out

    def _measure(self, batch: EventBatch) -> None:
        """Measure phase: observe and retain the events the plan would be pushed."""
        self.position += len(batch)
        self.last_ts = int(batch.ts[-1])
        self._clock = max(self._clock, self.last_ts)
        window = self.planned.pattern.window
        for _, event in self._events(batch):
            if event is None:
                continue
            self._collector.observe(event)
            self._recent.append(event)
            while self._recent[0].ts < event.ts - window:
                self._recent.popleft()

    def _end_phase(self) -> None:
        planned = self.planned
        events = self._phase_events
        self._phase_events = self._phase_pushed = 0
        if self._phase == _TRIAL:
            nfa, plan = self._seconds["nfa"], self._seconds["plan"]
            measured = (f"; trial on {events:,} events: plan {plan * 1e3:.3g} ms CPU, NFA^b "
                        f"{nfa * 1e3:.3g} ms")
            self._phase = _DONE
            tried = self.decision.removeprefix("trying ")
            if plan < nfa:
                self._nfa = None
                self.decision = tried + measured
            else:
                self.evaluator = None
                self.decision = f"NFA^b: {tried}{measured}"
            return
        stats = self._collector.snapshot()
        decision = decide(planned.pattern, stats, planned.candidates, planned.advantage)
        self._phase = _DONE
        if decision.plan is None:
            self.decision = decision.describe()
            return
        evaluator = AdaptiveEvaluator(planned.pattern, decision.algorithm, stats=stats,
                                      check_every=planned.check_every)
        for event in self._recent:
            evaluator.push(event)
        evaluator.advance_to(self._clock)
        self.evaluator = evaluator
        self._recent.clear()
        if planned.trial:
            self._phase = _TRIAL
            self.decision = f"trying {decision.describe()}"
        else:
            self._nfa = None
            self.decision = decision.describe()

    def _wanted(self, batch: EventBatch) -> np.ndarray:
        """Rows some edge or negation can select (by their type and the conditions on them
        alone, evaluated column-wise)."""
        begin, take, negative = edge_masks(self.automaton, batch)
        wanted = np.zeros(len(batch), dtype=bool)
        for mask in (*begin, *(m for m in take if m is not None), *negative):
            wanted |= mask
        return wanted

    def _events(self, batch: EventBatch) -> list[tuple[int, PlanEvent | None]]:
        """The rows to visit, each with its time and the plan event to push (``None``: the
        row only advances event time)."""
        n = len(batch)
        # An event no edge or negation can select is not pushed: no plan could use it. This
        # keeps every product of a measured rate and a filter selectivity — what the cost
        # model reads — equal to its value on the whole stream.
        wanted = self._wanted(batch)
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
        out: list[tuple[int, PlanEvent | None]] = []
        for i, j in enumerate(rows_at.tolist()):
            t = stamps[i]
            key = keys[j]
            if not pushed[i] or key is MISSING:
                out.append((t, None))
                continue
            attrs = {name: rows[k][i] for k, name in enumerate(names)}
            attrs[_ID] = json_value(ids[i])
            attrs[_KEY] = key
            out.append((t, PlanEvent(str(types[i]), t, seqs[i], attrs)))
        return out

    def _planned(self, batch: EventBatch) -> list[Match]:
        assert self.evaluator is not None
        self.position += len(batch)
        self.last_ts = int(batch.ts[-1])
        out: list[Match] = []
        for t, event in self._events(batch):
            if event is None:
                if t > self._clock:
                    self._clock = t
                    out += self._results(self.evaluator.advance_to(t), t)
                continue
            self._clock = t
            out += self._results(self.evaluator.push(event), t)
        return out

    def advance_to(self, watermark: int) -> Sequence[Match]:
        self._clock = max(self._clock, watermark)
        if self.evaluator is not None:
            found = self._results(self.evaluator.advance_to(watermark), watermark)
            if self._nfa is None:
                return found
        assert self._nfa is not None
        return self._nfa.advance_to(watermark)

    def finish(self) -> Sequence[Match]:
        if self._nfa is not None:
            return self._nfa.finish()
        assert self.evaluator is not None
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
        """``partial_matches``: partial matches and buffered events the current engine
        holds."""
        if self._nfa is not None:
            return self._nfa.stats()
        assert self.evaluator is not None
        return {"partial_matches": self.evaluator.state_size()}

    def snapshot(self) -> dict[str, Any]:
        """The engines' states — NFA^b's snapshot, the plan evaluator's retained events and
        statistics (:meth:`AdaptiveEvaluator.snapshot`) and, while measuring, the retained
        events — with the warm-up's progress and this operator's stream position, in the
        envelope of :mod:`situflow.snapshot`."""
        state: dict[str, Any] = {
            "position": self.position,
            "last_ts": self.last_ts,
            "clock": None if self._clock == -math.inf else self._clock,
            "decision": self.decision,
            "phase": self._phase,
            "progress": [self._phase_events, self._phase_pushed],
            "seconds": self._seconds,
            "events": [[e.type, e.ts, e.seq, dict(e.attrs)] for e in self._recent],
        }
        if self._nfa is not None:
            state["nfa"] = self._nfa.snapshot()
        if self.evaluator is not None:
            state["evaluator"] = self.evaluator.snapshot()
            state["algorithm"] = self.evaluator.algorithm
        return wrap(SNAPSHOT_KIND, SNAPSHOT_FORMAT, self.query_id, state)

    @classmethod
    def restore(cls, automaton: Automaton, planned: PlannedQuery, name: str, query_id: str,
                snapshot: dict[str, Any]) -> PlannedOperator:
        """The operator ``snapshot`` was taken of; ``StateError`` if it belongs to another
        query, engine or format. A measure phase resumes from the retained events only, so
        its decision may differ from an uninterrupted one (never its results)."""
        state = unwrap(SNAPSHOT_KIND, SNAPSHOT_FORMAT, query_id, snapshot)
        nfa = None
        if "nfa" in state:
            nfa = NfaOperator.restore(automaton, name, query_id, state["nfa"])
        evaluator = None
        if "evaluator" in state:
            data = dict(state["evaluator"])
            data["events"] = [[e.type, e.ts, e.seq, e.attrs]
                              for e in (_event(*row) for row in data["events"])]
            evaluator = AdaptiveEvaluator.restore(planned.pattern, data, state["algorithm"],
                                                  check_every=planned.check_every)
        op = cls(automaton, planned, name, query_id, evaluator, nfa)
        op._phase = state["phase"]
        op._phase_events, op._phase_pushed = state["progress"]
        op._seconds = dict(state["seconds"])
        for kind, ts, seq, attrs in state["events"]:
            event = _event(kind, ts, seq, attrs)
            op._collector.observe(event)
            op._recent.append(event)
        op.decision = state["decision"]
        op.position = state["position"]
        op.last_ts = state["last_ts"]
        if state["clock"] is not None:
            op._clock = state["clock"]
        return op


def _event(kind: str, ts: float, seq: int, attrs: dict[str, Any]) -> PlanEvent:
    """A plan event from its snapshot; JSON has no tuples, so keys come back as lists."""
    return PlanEvent(kind, ts, seq, {**attrs, _KEY: hashable_key(attrs[_KEY])})
