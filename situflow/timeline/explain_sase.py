"""A SASE+ query's structure: its NFA^b (Agrawal et al., SIGMOD 2008, §3.1, Figure 2) and, when
the query runs on a cost-based plan, that plan with its costs (Kolchinsky & Schuster, PVLDB
2018, §2.2–2.3, §3).

The automaton's states stand on a line in their NFA order (``a[1]``, ``a[i]``, ``b``, ..., the
final state ``F``); ``begin`` and ``proceed`` edges go to the right, ``take`` loops above a
state and ``ignore`` loops below it, as in Figure 2. Edges are labelled with their action; the
legend under the drawing lists each edge's optimized formula (Steps 5–6 of §3.2, what
``situflow check`` prints). A negated component ``~(T v)`` is a node under the stretch of the
line it guards: it has no state, runs only test it.

A plan is drawn beside the automaton, with the mark prefix ``plan_``: a ZStream tree (§2.3) as
a tree with its leaves at the bottom and each join above its inputs; an order for the lazy NFA
(§2.2) as a chain in binding order. Each node's caption is its term of the plan's cost
(:class:`situflow.plan.cost.Terms`: ``PM`` of a node, or of an order's prefix, §3.1–3.2), so
the captions add up to the plan's cost. The statistics are the priors (one event per time unit
of each type); a running operator measures its own before it chooses (``AUTO``) or re-plans.
"""

from __future__ import annotations

import math
from collections import defaultdict

from situflow.nfa.compiler.automaton import Automaton, StateKind
from situflow.plan import CostModel, Join, Leaf, OrderPlan, Plan, TreePlan, choose_plan
from situflow.plan.cost import CostInputs, Terms
from situflow.plan.plans import Node as PlanNode
from situflow.plan.plans import is_trailing
from situflow.sase import SaseCompiledQuery
from situflow.sase.planned import PlannedQuery
from situflow.timeline.explain_diagram import (
    Diagram,
    Edge,
    Node,
    Point,
    above,
    arc,
    below,
    loop,
    middle,
    peak,
)

STATE_GAP = 190.0
NEGATION_DROP = 150.0
# Bend of a forward edge that skips states, and the extra bend of each further edge between
# the same two states.
SKIP_BEND = 40.0
LEVEL_GAP = 110.0
STATE_COLOURS = (("begin", "#fbb4ae"), ("iterate", "#ccebc5"), ("final", "#b3cde3"),
                 ("negation", "#decbe4"))
ACTION_COLOURS = (("begin", "#4c78a8"), ("take", "#54a24b"), ("ignore", "#f58518"),
                  ("proceed", "#e45756"))
PLAN_COLOURS = (("input", "#fbb4ae"), ("step", "#fbb4ae"), ("join", "#b3cde3"))
FEED_COLOURS = (("input", "#4c78a8"), ("then", "#4c78a8"))
LEAF_GAP = 150.0


def diagrams(query: SaseCompiledQuery) -> tuple[Diagram, ...]:
    """The automaton, then the plan if the query runs on one."""
    automaton = nfa_diagram(query)
    if query.planned is None:
        return (automaton,)
    return automaton, plan_diagram(query.name, query.planned)


def nfa_diagram(query: SaseCompiledQuery) -> Diagram:
    automaton = query.automaton
    places = {s.index: (STATE_GAP * s.index, 0.0) for s in automaton.states}
    nodes = [
        Node(f"s{s.index}", s.name, *places[s.index], s.kind.value,
             detail=_state_detail(automaton, s.index))
        for s in automaton.states
    ]
    nodes += _negations(automaton)
    edges, legend = _nfa_edges(automaton, places)
    engine = ("runs on the plan below; the automaton defines its results"
              if query.planned is not None
              else f"runs on NFA^b ({query.unplanned_reason})" if query.unplanned_reason
              else "runs on NFA^b")
    window = (f"window {automaton.window:g} ticks" if math.isfinite(automaton.window)
              else "no window")
    return Diagram(
        title=f"SASE+ query {query.name}: NFA^b, {automaton.selection.strategy.value}",
        subtitle=(f"{window}; {engine}",
                  "begin/proceed go right, take loops above a state, ignore below; formulas "
                  "under the drawing"),
        nodes=tuple(nodes), edges=tuple(edges), legend=tuple(legend),
        node_kinds="state", edge_kinds="action", node_palette=STATE_COLOURS,
        edge_palette=ACTION_COLOURS,
    )


def _state_detail(automaton: Automaton, index: int) -> str:
    state = automaton.states[index]
    if state.kind is StateKind.FINAL:
        return "F: the final state, a match"
    component = automaton.components[state.component]
    written = (f"{component.type_name}+ {component.var}[ ]" if component.kleene
               else f"{component.type_name} {component.var}")
    role = {StateKind.BEGIN: "first event of", StateKind.ITERATE: "further events of"}
    return f"{state.name}: {role[state.kind]} {written}"


def _negations(automaton: Automaton) -> list[Node]:
    """A node per negated component, under the states between its neighbours."""
    begins = {c.index: c.begin_state for c in automaton.components}
    ends = {c.index: c.iterate_state if c.kleene else c.begin_state
            for c in automaton.components}
    last = len(automaton.states) - 1
    nodes = []
    for k, negation in enumerate(automaton.negations):
        left = ends[negation.after] if negation.after is not None else 0
        right = begins[negation.before] if negation.before is not None else last
        after = (automaton.components[negation.after].var if negation.after is not None
                 else "the window's start")
        before = (automaton.components[negation.before].var if negation.before is not None
                  else "the window's end")
        nodes.append(Node(
            f"n{k}", f"~{negation.var}", STATE_GAP * (left + right) / 2, NEGATION_DROP,
            "negation", caption=negation.type_name,
            detail=f"~({negation.type_name} {negation.var}): no such event between {after} "
                   f"and {before}"))
    return nodes


def _nfa_edges(automaton: Automaton,
               places: dict[int, Point]) -> tuple[list[Edge], list[str]]:
    edges: list[Edge] = []
    legend: list[str] = []
    loops: dict[int, int] = defaultdict(int)
    between: dict[tuple[int, int], int] = defaultdict(int)
    for state in automaton.states:
        type_name = (automaton.components[state.component].type_name
                     if state.kind is not StateKind.FINAL else "")
        for e in state.edges:
            source, target = places[e.source], places[e.target]
            if e.source == e.target:
                up = e.action == "take" or (e.action != "ignore" and loops[e.source] % 2 == 0)
                loops[e.source] += 1
                path = loop(source, up)
                label_at = (above if up else below)(peak(path, up), e.action)
            else:
                rank = between[(e.source, e.target)]
                between[(e.source, e.target)] += 1
                skip = abs(e.target - e.source) > 1
                # Left of travel is up for a rightward edge.
                bend = (SKIP_BEND if skip else 0.0) + SKIP_BEND * rank
                path = arc(source, target, bend if e.target > e.source else -bend)
                label_at = above(middle(path), e.action)
            names = (automaton.states[e.source].name, automaton.states[e.target].name)
            formula = e.formula.text()
            edges.append(Edge(f"{names[0]}-{e.action}-{names[1]}", f"s{e.source}",
                              f"s{e.target}", e.action, path, e.action, label_at,
                              f"[{type_name}] {formula}"))
            legend.append(f"{names[0]} --{e.action}--> {names[1]} [{type_name}]: {formula}")
    return edges, legend


def plan_diagram(name: str, planned: PlannedQuery) -> Diagram:
    """The plan the operator starts with (as ``situflow check`` prints it), with its costs."""
    stats = planned.prior()
    model = CostModel()
    plan = choose_plan(planned.pattern, stats, planned.algorithm, model)
    terms = Terms(CostInputs.build(planned.pattern, stats), model)
    if isinstance(plan, OrderPlan):
        nodes, edges = _order(plan, terms)
        shape = "order-based (lazy NFA): components bound left to right"
    else:
        nodes, edges = _tree(plan, terms)
        shape = "tree-based (ZStream): inputs join upwards"
    return Diagram(
        title=f"SASE+ query {name}: plan {plan.algorithm}, cost {plan.cost:.4g}",
        subtitle=(f"{shape}; a caption is the node's term of the cost (partial matches, "
                  "Kolchinsky & Schuster §3)",
                  "initial statistics: 1 event per time unit of each type; the operator "
                  "re-plans when measured rates or selectivities drift"),
        nodes=tuple(nodes), edges=tuple(edges),
        legend=tuple(f"pattern: {plan.pattern.describe()}".splitlines()),
        node_kinds="plan node", edge_kinds="feeds", node_palette=PLAN_COLOURS,
        edge_palette=FEED_COLOURS, prefix="plan_",
    )


def _order(plan: OrderPlan, terms: Terms) -> tuple[list[Node], list[Edge]]:
    """One node per step of the order, captioned with what the step adds to the cost."""
    checks: dict[int, list[str]] = defaultdict(list)
    for k, step in enumerate(plan.negation_steps()):
        checks[step - 1].append(_negation_note(plan, k))
    nodes: list[Node] = []
    edges: list[Edge] = []
    prefix = 0
    for k, c in enumerate(plan.order):
        component = plan.pattern.components[c]
        cost = terms.order_step(prefix, c)
        prefix |= 1 << c
        caption = "\n".join([f"cost {cost:.3g}", *checks[k]])
        nodes.append(Node(f"p{k}", component.var, LEAF_GAP * k, 0.0, "step",
                          caption=caption, detail=f"step {k + 1}: bind {component.describe()}"))
        if k:
            start, end = (LEAF_GAP * (k - 1), 0.0), (LEAF_GAP * k, 0.0)
            edges.append(Edge(f"p{k - 1}-p{k}", f"p{k - 1}", f"p{k}", "then", (start, end)))
    return nodes, edges


def _tree(plan: TreePlan, terms: Terms) -> tuple[list[Node], list[Edge]]:
    """The tree with its leaves, left to right, on the bottom row, each join centred over its
    inputs, and each node captioned with its ``PM``."""
    notes: dict[PlanNode, list[str]] = defaultdict(list)
    for k, node in enumerate(plan.negation_nodes()):
        notes[node].append(_negation_note(plan, k))
    bottom = LEVEL_GAP * _height(plan.root)
    column = {leaf: k for k, leaf in enumerate(plan.root.leaves)}
    nodes: list[Node] = []
    edges: list[Edge] = []

    def place(node: PlanNode, level: int) -> tuple[str, Point]:
        if isinstance(node, Leaf):
            component = plan.pattern.components[node.index]
            at = (LEAF_GAP * column[node.index], bottom)
            cost = terms.leaf(node.index)
            label, kind, detail = component.var, "input", f"buffer of {component.describe()}"
            head = [component.describe()]
        else:
            inputs = [place(child, level + 1) for child in (node.left, node.right)]
            at = ((inputs[0][1][0] + inputs[1][1][0]) / 2, LEVEL_GAP * level)
            cost = terms.join(_mask(node.left), _mask(node.right))
            label, kind, detail = "⋈", "join", node.describe(plan.pattern)
            head = []
        ident = f"t{len(nodes)}"
        # A join's inputs come from below, so its caption goes on its right.
        nodes.append(Node(ident, label, *at, kind,
                          caption="\n".join([*head, f"PM {cost:.3g}", *notes[node]]),
                          caption_right=isinstance(node, Join), detail=detail))
        if isinstance(node, Join):
            edges.extend(Edge(f"{child}-{ident}", child, ident, "input", (child_at, at))
                         for child, child_at in inputs)
        return ident, at

    place(plan.root, 0)
    return nodes, edges


def _height(node: PlanNode) -> int:
    if isinstance(node, Join):
        return 1 + max(_height(node.left), _height(node.right))
    return 0


def _mask(node: PlanNode) -> int:
    mask = 0
    for leaf in node.leaves:
        mask |= 1 << leaf
    return mask


def _negation_note(plan: Plan, k: int) -> str:
    negation = plan.pattern.negations[k].describe()
    if is_trailing(plan.pattern, k):
        return f"{negation} until first.t + W"
    return f"checks {negation}"
