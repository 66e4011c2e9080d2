"""A COGRA query's structure (Poppe et al., SIGMOD 2019, Fig. 3): the pattern graph its
static analyzer built and the aggregator it chose.

Nodes are the automaton's positions (§3.1: one per pattern variable, or more when a variable
occurs in several places), left to right in pattern order; an edge ``P → Q`` says an event of
``Q`` may follow one of ``P`` in a trend (``Q.predTypes`` holds ``P``), a loop is a Kleene plus.
An edge is labelled with its adjacent predicates (§3.2) and with the negation that guards it
(Appendix C). The title names the aggregator the granularity selector chose (§3.3, Table 5:
type-, mixed- or pattern-grained) and the subtitle how the executor runs it. A conjunction
``P1 AND P2`` (Appendix C) has one graph per side, one above the other.
"""

from __future__ import annotations

from collections import defaultdict

from situflow.lang.printer import expr_text
from situflow.timeline.explain_diagram import (
    Diagram,
    Edge,
    Node,
    above,
    arc,
    loop,
    middle,
    peak,
)
from situflow.trends.configuration import TrendPlan
from situflow.trends.query import CompiledTrendQuery

POSITION_GAP = 200.0
SIDE_GAP = 230.0
BACK_BEND = 45.0
POSITION_COLOURS = (("start", "#ccebc5"), ("inner", "#b3cde3"), ("end", "#fbb4ae"),
                    ("start and end", "#fed9a6"))


def diagram(query: CompiledTrendQuery) -> Diagram:
    plan = query.plan
    sides = plan.factors or (plan,)
    nodes: list[Node] = []
    edges: list[Edge] = []
    for k, side in enumerate(sides):
        prefix = f"{k + 1}:" if plan.factors else ""
        side_nodes, side_edges = _graph(side, prefix, SIDE_GAP * k)
        nodes += side_nodes
        edges += side_edges
    window = f"windows of {plan.size} ticks every {plan.slide}"
    partitions = (f", partitioned by {', '.join(plan.partition_attrs)}"
                  if plan.partition_attrs else "")
    if plan.factors:
        chosen = "aggregators " + ", ".join(
            f"side {k + 1} {side.granularity}-grained" for k, side in enumerate(sides))
    else:
        chosen = f"{plan.granularity}-grained aggregator"
    return Diagram(
        title=f"COGRA query {query.name}: pattern graph, {chosen} (Table 5)",
        subtitle=(f"{plan.semantics}; {window}{partitions}", f"executor: {plan.path}"),
        nodes=tuple(nodes), edges=tuple(edges),
        legend=(f"RETURN, per window{' and group' if plan.group_by else ''}: "
                + ", ".join(o.label for o in plan.outputs),),
        node_kinds="position", edge_kinds="follows",
        node_palette=POSITION_COLOURS, edge_palette=(("follows", "#4c78a8"),),
    )


def _graph(plan: TrendPlan, prefix: str, top: float) -> tuple[list[Node], list[Edge]]:
    names = _names(plan)
    nodes = []
    for p, position in enumerate(plan.positions):
        ends = [role for role, on in (("start", plan.start[p]), ("end", plan.end[p])) if on]
        local = " AND ".join(expr_text(c) for c in position.local)
        nodes.append(Node(
            f"{prefix}{names[p]}", f"{prefix}{names[p]}", POSITION_GAP * p, top,
            " and ".join(ends) if ends else "inner",
            caption="\n".join(filter(None, [position.type_name, local])),
            detail=f"{position.type_name} {position.variable}"
                   + (f" ({', '.join(ends)})" if ends else "")
                   + (f" where {local}" if local else "")))
    labels: dict[tuple[int, int], list[str]] = defaultdict(list)
    for atom in plan.atoms:
        labels[(atom.prev, atom.next)].append(
            f"{expr_text(atom.prev_expr)} {atom.op} {expr_text(atom.next_expr)}")
    for (p, q), g in plan.guarded:
        negation = plan.negations[g]
        local = " AND ".join(expr_text(c) for c in negation.local)
        labels[(p, q)].append(f"no {negation.type_name} {negation.variable}"
                              + (f" where {local}" if local else ""))
    edges = []
    for p in range(len(plan.positions)):
        for q in plan.follow[p]:
            start, end = (POSITION_GAP * p, top), (POSITION_GAP * q, top)
            if p == q:
                path = loop(start, up=True)
            else:
                # Forward to the next position: straight; further or backwards: arched above.
                bend = 0.0 if q == p + 1 else BACK_BEND * abs(q - p)
                path = arc(start, end, bend if q > p else -bend)
            label = "\n".join(labels[(p, q)])
            edges.append(Edge(
                f"{prefix}{names[p]}-{names[q]}", f"{prefix}{names[p]}", f"{prefix}{names[q]}",
                "follows", path, label, above(peak(path) if p == q else middle(path), label),
                f"{names[q]} may follow {names[p]}" + (f": {label}" if label else "")))
    return nodes, edges


def _names(plan: TrendPlan) -> list[str]:
    """Position names: the variable, numbered ``#1``, ``#2`` when it has several positions."""
    variables = [p.variable for p in plan.positions]
    return [v if variables.count(v) == 1 else f"{v}#{variables[:i + 1].count(v)}"
            for i, v in enumerate(variables)]
