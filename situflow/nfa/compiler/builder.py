"""Query compilation into NFA^b (§3.2, Steps 1–6).

:func:`compile_automaton` tells the whole story:

1. **Structure** (Step 1): the PATTERN clause fixes the states, a singleton state per single
   component, a pair ``p[1]``, ``p[i]`` per Kleene plus, and ``F``; negated components are left
   out and composed afterwards (§3.1).
2. **Predicates** (Step 2): the WHERE body is split into its conjuncts; ``[attr]`` expands to
   ``x.attr = a[1].attr`` for every identifier ``x``; each conjunct goes to the edge of its *last
   identifier*: ``v``/``v[1]`` on begin, ``v[i]``/``v[i-1]``/``v[..i-1]``/``v[k]`` on take,
   ``v[v.LEN]``/``v.LEN``/``v[ ]`` on proceed. Conjuncts on a negated variable form the negation.
3. **Selection strategy** (Step 3): the ignore edges, from :mod:`situflow.nfa.compiler.selection`.
4. **Window** (Step 4): the WITHIN condition on the edge into ``F``, inclusive (SEMANTICS.md:
   ``last.t - first.t <= w``, not Figure 2's ``<``).
5. **Window pushed early** (Step 5): the same condition on every begin, take and ignore edge
   after the start state, so runs that left the window die at once.
6. **Constrained proceed** (Step 6): a proceed edge not leading to ``F`` peeks at the event:
   ``θ*proceed = θproceed ∧ (θnext_begin ∨ (¬θ*take ∧ ¬θ*ignore))``. The paper shows the case
   ``θproceed = True``; its conjuncts (``a.LEN >= 2``) are kept here. This step decides the
   skip-till-next-match output (SEMANTICS.md): Query 3 yields exactly R1, R2, R3 on Figure 3.

Besides the formulas, the compiler builds the runtime programs: the value vector layout V
(§5.2.1) from the right operands of conjuncts, and per state the mask of V columns read at or
after it, which decides run merging (§5.2.2). Equivalence tests are not evaluated at runtime:
the stream is partitioned by their attributes, which makes them true.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from situflow.devices.vector import vector_compiler
from situflow.lang import ast
from situflow.lang.compile import Getter, compile_scalar
from situflow.lang.printer import expr_text
from situflow.lang.sase import (
    BEGIN,
    PROCEED,
    TAKE,
    Component,
    Equivalence,
    Index,
    KleeneLength,
    KleeneRef,
    SaseQuery,
    Strategy,
    identifier_stage,
    references,
)
from situflow.nfa.compiler.automaton import (
    FALSE,
    TRUE,
    Atom,
    Automaton,
    ComponentProgram,
    Edge,
    EdgeTest,
    Formula,
    NegationProgram,
    Or,
    State,
    StateKind,
    conjoin,
    negate,
)
from situflow.nfa.compiler.programs import NotNumeric, Program, Reference, compile_program, getters
from situflow.nfa.compiler.selection import SELECTIONS
from situflow.nfa.compiler.values import SlotKind, ValueLayout, Values
from situflow.nfa.matches import match_resolver


def compile_automaton(query: SaseQuery, time_unit: float = 1.0, device: str = "cpu") -> Automaton:
    """The NFA^b of a validated query; ``time_unit`` is seconds per event-time tick; ``device``
    evaluates the conjuncts on the current event (``QueryOptions.device``)."""
    return _Compiler(query, time_unit, device).build()


class _Placement:
    """Conjuncts of one positive component, by the edge of their last identifier (Step 2)."""

    def __init__(self) -> None:
        self.begin: list[ast.Node] = []
        self.take: list[ast.Node] = []
        self.guarded: list[tuple[int, ast.Node]] = []
        self.proceed: list[ast.Node] = []


class _Compiler:
    def __init__(self, query: SaseQuery, time_unit: float, device: str):
        self.query = query
        self.compile_vector = vector_compiler(device)
        self.positives: tuple[Component, ...] = query.positives
        self.position = {c.var: k for k, c in enumerate(self.positives)}
        self.selection = SELECTIONS[query.effective_strategy]
        self.window = (query.within.seconds / time_unit) if query.within is not None else np.inf
        self.attributes: dict[str, int] = {}
        self.layout = ValueLayout()
        self.partition_attributes = query.partition_attrs()

    def attribute(self, name: str) -> int:
        return self.attributes.setdefault(name, len(self.attributes))

    # --- the algorithm ------------------------------------------------------------------------

    def build(self) -> Automaton:
        names, kinds, owners, begin_states, iterate_states = self._create_states()  # Step 1
        placements, negation_conjuncts = self._place_conjuncts()  # Step 2
        final = len(names)
        programs, reads, values = self._create_programs(placements, begin_states, iterate_states)
        negations = self._create_negations(negation_conjuncts)
        returns = self._create_returns()
        edges = self._create_edges(names, placements, begin_states, iterate_states, final)
        masks = self._merge_masks(reads, len(names))
        states = [
            State(s, names[s], kinds[s], owners[s], tuple(edges[s]), masks[s])
            for s in range(len(names))
        ]
        states.append(State(final, "F", StateKind.FINAL, -1, (), ()))
        return Automaton(
            query=self.query,
            states=tuple(states),
            components=tuple(programs),
            negations=tuple(negations),
            returns=tuple(returns),
            selection=self.selection,
            values=values,
            attributes=tuple(self.attributes),
            partition_attributes=self.partition_attributes,
            window=float(self.window),
            consume=self.query.consume,
        )

    # --- Step 1: structure --------------------------------------------------------------------

    def _create_states(self) -> tuple[list[str], list[StateKind], list[int], list[int], list[int]]:
        names: list[str] = []
        kinds: list[StateKind] = []
        owners: list[int] = []
        begin_states: list[int] = []
        iterate_states: list[int] = []
        for k, c in enumerate(self.positives):
            begin_states.append(len(names))
            names.append(f"{c.var}[1]" if c.kleene else c.var)
            kinds.append(StateKind.BEGIN)
            owners.append(k)
            if c.kleene:
                iterate_states.append(len(names))
                names.append(f"{c.var}[i]")
                kinds.append(StateKind.ITERATE)
                owners.append(k)
            else:
                iterate_states.append(-1)
        return names, kinds, owners, begin_states, iterate_states

    # --- Step 2: predicates -------------------------------------------------------------------

    def _place_conjuncts(self) -> tuple[list[_Placement], dict[str, list[ast.Node]]]:
        placements = [_Placement() for _ in self.positives]
        negation: dict[str, list[ast.Node]] = {
            c.var: [] for c in self.query.components if c.negated
        }
        for conjunct in self.query.conjuncts():
            if isinstance(conjunct, Equivalence):
                continue  # expanded per identifier in the formulas, enforced by partitioning
            refs = list(references(conjunct))
            negated = [v for r in refs if (v := _var(r)) in negation]
            if negated:
                negation[negated[0]].append(conjunct)
                continue
            last, stage, k = 0, BEGIN, 0
            for r in refs:
                found = identifier_stage(r)
                assert found is not None
                var, s = found
                p = self.position[var]
                if (p, s) > (last, stage):
                    last, stage, k = p, s, 0
                if (p, s) == (last, stage) and isinstance(r, KleeneRef) and (
                    r.index is Index.CONST and r.k > 1
                ):
                    k = max(k, r.k)
            target = placements[last]
            if stage == BEGIN:
                target.begin.append(conjunct)
            elif stage == TAKE and k:
                # v[k]: checked as the k-th event is selected; if the iteration ends shorter,
                # v[k] is missing and the proceed edge checks the conjunct with it missing.
                target.guarded.append((k, conjunct))
                target.proceed.append(conjunct)
            elif stage == TAKE:
                target.take.append(conjunct)
            else:
                target.proceed.append(conjunct)
        return placements, negation

    # --- runtime programs ---------------------------------------------------------------------

    def _create_programs(
        self, placements: list[_Placement], begin_states: list[int], iterate_states: list[int]
    ) -> tuple[list[ComponentProgram], list[set[int]], Values]:
        n_states = len(begin_states) + sum(1 for s in iterate_states if s >= 0)
        reads: list[set[int]] = [set() for _ in range(n_states)]
        tests = []
        for k, c in enumerate(self.positives):
            pl = placements[k]
            begin = self._edge_test(c, k, BEGIN, pl.begin, [], reads[begin_states[k]])
            take = None
            proceed: tuple[Callable[[Any], Any], ...] = ()
            proceed_programs: tuple[Program, ...] | None = ()
            if c.kleene:
                it = iterate_states[k]
                length = self.layout.slot(SlotKind.LEN, k)
                take = self._edge_test(c, k, TAKE, pl.take, pl.guarded, reads[it])
                proceed = tuple(self._scalar(x, k, PROCEED, reads[it]) for x in pl.proceed)
                proceed_programs = self._programs(pl.proceed, k, PROCEED, reads[it])
                if pl.guarded:
                    reads[it].add(length)
            tests.append((begin, take, proceed, proceed_programs))
        # Reading v[k] needs the length of v to know when the k-th event comes (merge masks).
        for slot in self.layout.slots:
            if slot.kind is SlotKind.NTH and iterate_states[slot.component] >= 0:
                reads[iterate_states[slot.component]].add(
                    self.layout.slot(SlotKind.LEN, slot.component))
        values = self.layout.freeze(len(self.positives))
        programs = [
            ComponentProgram(
                index=k, var=c.var, type_name=c.type_name, kleene=c.kleene,
                last=k == len(self.positives) - 1, begin_state=begin_states[k],
                iterate_state=iterate_states[k], begin=begin, take=take, proceed=proceed,
                update=values.updater(k),
                length_slot=self.layout.slot(SlotKind.LEN, k) if c.kleene else -1,
                proceed_programs=proceed_programs,
            )
            for k, (c, (begin, take, proceed, proceed_programs))
            in enumerate(zip(self.positives, tests, strict=True))
        ]
        return programs, reads, values

    def _edge_test(self, c: Component, k: int, stage: int, conjuncts: list[ast.Node],
                   guarded: list[tuple[int, ast.Node]], reads: set[int]) -> EdgeTest:
        vector: list[Callable[[Any], Any]] = []
        on_runs: list[ast.Node] = []
        for x in conjuncts:
            if self._on_current_event(x, k, stage):
                vector.append(self.compile_vector(x, self._vector_resolve))
            else:
                on_runs.append(x)
        scalar = [self._scalar(x, k, stage, reads) for x in on_runs]
        checked = tuple((kk, self._scalar(x, k, TAKE, reads)) for kk, x in guarded)
        programs = self._programs(on_runs, k, stage, reads)
        guarded_programs = self._programs([x for _, x in guarded], k, TAKE, reads)
        return EdgeTest(c.type_name, tuple(vector), tuple(scalar), checked, programs,
                        None if guarded_programs is None else tuple(
                            (kk, g) for (kk, _), g in zip(guarded, guarded_programs, strict=True)))

    def _programs(self, conjuncts: list[ast.Node], k: int, stage: int,
                  reads: set[int]) -> tuple[Program, ...] | None:
        out = []
        for x in conjuncts:
            program = self._program(x, k, stage, reads)
            if program is None:
                return None
            out.append(program)
        return tuple(out)

    def _on_current_event(self, expr: ast.Node, k: int, stage: int) -> bool:
        """Whether a conjunct reads only the event being selected (then it is vectorized)."""
        for node in expr.walk():
            if isinstance(node, ast.Call | KleeneLength):
                return False
            if isinstance(node, ast.Ref) and (
                stage != BEGIN or self.position[node.qualifier or ""] != k
            ):
                return False
            if isinstance(node, KleeneRef) and (self.position[node.var] != k or not (
                (stage == BEGIN and node.index is Index.CONST and node.k == 1)
                or (stage == TAKE and node.index is Index.CURRENT)
            )):
                return False
        return True

    def _scalar(self, expr: ast.Node, k: int, stage: int, reads: set[int]) -> Callable[[Any], Any]:
        return compile_scalar(expr, self._run_getter(k, stage, reads))

    def _program(self, expr: ast.Node, k: int, stage: int, reads: set[int]) -> Program | None:
        """The conjunct as a postfix program for the compiled loop, if it has one."""
        try:
            return compile_program(expr, self._run_reference(k, stage, reads))
        except NotNumeric:
            return None

    def _vector_resolve(self, node: ast.Node) -> Getter:
        if isinstance(node, ast.Ref):
            name = node.name
        elif isinstance(node, KleeneRef) and node.attr is not None:
            name = node.attr
        else:
            raise TypeError(f"{type(node).__name__} is not a value of the current event")
        return lambda cols: cols[name]

    def _run_getter(self, k: int, stage: int, reads: set[int]) -> Callable[[ast.Node], Getter]:
        return getters(self._run_reference(k, stage, reads))

    def _run_reference(self, k: int, stage: int, reads: set[int]) -> Callable[[ast.Node],
                                                                               Reference]:
        """What a reference in a conjunct on an edge of component ``k`` at ``stage`` reads:
        the current event for the identifier being instantiated, V for everything selected
        before."""
        layout = self.layout

        def slot(kind: SlotKind, p: int, attr: str | None = None, kk: int = 0) -> Reference:
            i = layout.slot(kind, p, self.attribute(attr) if attr is not None else -1, kk)
            reads.add(i)
            return ("v", i, 0)

        def resolve(node: ast.Node) -> Reference:
            if isinstance(node, ast.Call):
                arg = node.args[0]
                assert isinstance(arg, KleeneRef) and arg.attr is not None
                return aggregate(node.name, self.position[arg.var], arg.attr)
            if isinstance(node, ast.Ref):
                assert node.qualifier is not None
                p = self.position[node.qualifier]
                if p == k and stage == BEGIN:
                    return ("row", self.attribute(node.name), 0)
                return slot(SlotKind.FIRST, p, node.name)
            if isinstance(node, KleeneLength):
                return slot(SlotKind.LEN, self.position[node.var])
            if isinstance(node, KleeneRef) and node.attr is not None:
                p, index = self.position[node.var], node.index
                mine = p == k
                if index is Index.CURRENT or (
                    mine and index is Index.CONST and (
                        (node.k == 1 and stage == BEGIN) or (node.k > 1 and stage == TAKE)
                    )
                ):
                    return ("row", self.attribute(node.attr), 0)
                if index is Index.CONST:
                    if node.k == 1:
                        return slot(SlotKind.FIRST, p, node.attr)
                    return slot(SlotKind.NTH, p, node.attr, node.k)
                return slot(SlotKind.LAST, p, node.attr)  # i-1 at take, v.LEN afterwards
            raise TypeError(f"cannot evaluate {type(node).__name__} in a run")

        def aggregate(name: str, p: int, attr: str) -> Reference:
            if name in ("max", "min"):
                return slot(SlotKind.MAX if name == "max" else SlotKind.MIN, p, attr)
            _, count, _ = slot(SlotKind.COUNT, p, attr)
            if name == "count":
                return ("v", count, 0)
            _, total, _ = slot(SlotKind.SUM, p, attr)
            return (name, total, count)  # sum or avg: missing over an empty prefix

        return resolve

    def _create_negations(self, conjuncts: dict[str, list[ast.Node]]) -> list[NegationProgram]:
        out: list[NegationProgram] = []
        comps = self.query.components
        for j, c in enumerate(comps):
            if not c.negated:
                continue
            before = [self.position[p.var] for p in comps[:j] if not p.negated]
            after = [self.position[p.var] for p in comps[j + 1:] if not p.negated]
            resolve = match_resolver(self.position, self.attribute, negated=c.var)
            vector, conditions = [], []
            for x in conjuncts[c.var]:
                if all(_var(r) == c.var for r in references(x)):
                    vector.append(self.compile_vector(x, self._vector_resolve))
                else:
                    conditions.append(compile_scalar(x, resolve))
            out.append(NegationProgram(
                c.var, c.type_name, before[-1] if before else None, after[0] if after else None,
                tuple(vector), tuple(conditions),
            ))
        return out

    def _create_returns(self) -> list[tuple[str, Callable[[Any], Any]]]:
        resolve = match_resolver(self.position, self.attribute)
        return [(item.name, compile_scalar(item.expr, resolve)) for item in self.query.returns]

    # --- formulas: Steps 2-6 ------------------------------------------------------------------

    def _create_edges(self, names: list[str], placements: list[_Placement],
                      begin_states: list[int], iterate_states: list[int],
                      final: int) -> list[list[Edge]]:
        edges: list[list[Edge]] = [[] for _ in names]
        anchor = names[0]
        within = expr_text(self.query.within) if self.query.within is not None else None

        def window(ident: str) -> Formula:
            return Atom(f"{ident}.time <= {anchor}.time + {within}") if within else TRUE

        def equivalence(ident: str) -> Formula:
            if ident == anchor:
                return TRUE
            return conjoin(*(Atom(f"{ident}.{a} = {anchor}.{a}")
                             for a in self.partition_attributes))

        def text(x: ast.Node) -> Formula:
            return Atom(expr_text(x))

        def ignore(ident: str, selectable: Formula) -> Formula:
            """Step 3."""
            strategy = self.selection.strategy
            if strategy is Strategy.STRICT:
                return FALSE
            if strategy is Strategy.PARTITION:
                return negate(equivalence(ident)) if self.partition_attributes else FALSE
            if strategy is Strategy.NEXT:
                return negate(selectable)
            return TRUE

        for k, c in enumerate(self.positives):
            pl = placements[k]
            b = begin_states[k]
            ident = names[b]
            after_begin = iterate_states[k] if c.kleene else (
                begin_states[k + 1] if k + 1 < len(self.positives) else final)
            into_final = after_begin == final
            selectable = conjoin(equivalence(ident), *map(text, pl.begin))
            basic = conjoin(selectable, window(ident) if into_final else TRUE)  # Step 4
            pushed = window(ident) if b > 0 and not into_final else TRUE  # Step 5
            edges[b].append(Edge("begin", b, after_begin, basic, conjoin(basic, pushed)))
            if b > 0:
                basic_ignore = ignore(ident, selectable)
                edges[b].append(Edge("ignore", b, b, basic_ignore,
                                     conjoin(basic_ignore, window(ident))))
            if not c.kleene:
                continue
            it = iterate_states[k]
            step = names[it]
            take = conjoin(equivalence(step), *map(text, pl.take),
                           *(Atom(f"({expr_text(x)} when i = {kk})") for kk, x in pl.guarded))
            edges[it].append(Edge("take", it, it, take, conjoin(take, window(step))))
            basic_ignore = ignore(step, take)
            optimized_ignore = conjoin(basic_ignore, window(step))
            edges[it].append(Edge("ignore", it, it, basic_ignore, optimized_ignore))
            nxt = begin_states[k + 1] if k + 1 < len(self.positives) else final
            proceed = conjoin(*map(text, pl.proceed))
            if nxt == final:
                basic = conjoin(proceed, window(f"{c.var}[{c.var}.LEN]"))  # Step 4
                edges[it].append(Edge("proceed", it, nxt, basic, basic))
            else:
                peek = Or((Atom(f"θ{names[nxt]}_begin"), conjoin(
                    negate(Atom(f"θ*{step}_take")), negate(Atom(f"θ*{step}_ignore")))))
                edges[it].append(Edge("proceed", it, nxt, proceed, conjoin(proceed, peek)))
        return edges

    def _merge_masks(self, reads: list[set[int]], n_states: int) -> list[tuple[int, ...]]:
        masks: list[tuple[int, ...]] = []
        needed: set[int] = set()
        for s in reversed(range(n_states)):
            needed |= reads[s]
            masks.append(tuple(sorted(needed)))
        masks.reverse()
        return masks


def _var(ref: ast.Node) -> str | None:
    if isinstance(ref, ast.Ref):
        return ref.qualifier
    if isinstance(ref, KleeneRef | KleeneLength):
        return ref.var
    return None
