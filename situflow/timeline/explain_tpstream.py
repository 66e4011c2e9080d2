"""A TPStream query's structure (thesis §5.3): its situation definitions as nodes and, between
every pair of them, the Allen relations the PATTERN allows (§5.3.1, Table 5.1) as a labelled
edge; ``PATTERN B`` draws B alone.

An edge ``X → Y`` labelled ``r1, r2`` reads "X r1 Y or X r2 Y", oriented as the query wrote the
pair; relation names are the standard Allen ones (:mod:`situflow.lang.allen`). The relations
are the compiled query's (``TPStreamQuery.constraints``): two constraints on one pair are
already intersected there. A pair the PATTERN leaves free allows any relation and is drawn
dashed, so the picture shows every pair the matcher may have to relate.
"""

from __future__ import annotations

import math

from situflow.lang.allen import RELATIONS
from situflow.lang.printer import expr_text
from situflow.timeline.explain_diagram import CHAR_WIDTH, LINE_HEIGHT, Diagram, Edge, Node, Point
from situflow.tpstream.query import TPStreamQuery

# Distance of the definitions from the centre of the drawing, per definition.
RADIUS_PER_NODE = 70.0
MIN_RADIUS = 140.0
# How far a relation label sits from its edge, outwards.
LABEL_OFFSET = 16.0
# Where along a diagonal (from its first definition) its label goes.
DIAGONAL_LABEL_AT = 0.3


def diagram(query: TPStreamQuery) -> Diagram:
    definitions = query.ast.definitions
    places = _places(len(definitions))
    centre = (sum(x for x, _ in places) / len(places), sum(y for _, y in places) / len(places))
    single = query.ast.single
    nodes = tuple(
        # A lone node's caption goes beside it: centred under it, it would reach off the left.
        Node(d.name, d.name, x, y, "situation",
             caption=d.duration.to_text().lower() if d.duration else "",
             caption_right=single is not None, detail=d.to_text())
        for d, (x, y) in zip(definitions, places, strict=True)
    )
    edges = tuple(_edge(query, i, j, places, centre) for i, j in _pairs(query))
    head = f"FROM {query.ast.stream}"
    if query.partition_by:
        head += " PARTITION BY " + ", ".join(query.partition_by)
    if query.ast.within is not None:
        head += f", WITHIN {expr_text(query.ast.within)}"
    return Diagram(
        title=f"TPStream query {query.name}: " + (
            f"PATTERN {single.name}, each situation of {single.name} a match" if single
            else "situations and the Allen relations allowed between them"),
        subtitle=(head, "one situation, so no relations: a match is reported when its "
                        "situation ends" if single else
                        "an arrow X → Y labelled r reads 'X r Y'; a dashed one: any relation"),
        nodes=nodes, edges=edges,
        legend=(*(f"{d.name}: {expr_text(d.condition)}"
                  + (f", {d.duration.to_text().lower()}" if d.duration else "")
                  for d in definitions),
                "evaluation order of the matcher (thesis eqs. 5.2-5.5, prior statistics):",
                *query.engine.plan(query)),
        node_kinds="definition", edge_kinds="relations",
        node_palette=(("situation", "#fbb4ae"),),
        edge_palette=(("allowed", "#4c78a8"), ("unconstrained", "#9d9d9d")),
    )


def _places(n: int) -> list[Point]:
    """The definitions around a circle, the first on the left going clockwise; two side by
    side."""
    if n == 1:
        return [(0.0, 0.0)]
    if n == 2:
        return [(0.0, 0.0), (2 * MIN_RADIUS, 0.0)]
    radius = max(MIN_RADIUS, RADIUS_PER_NODE * n)
    places = []
    for k in range(n):
        angle = math.radians(90 + 360 * (1 - k) / n)
        places.append((radius * math.cos(angle), -radius * math.sin(angle)))
    return places


def _pairs(query: TPStreamQuery) -> list[tuple[int, int]]:
    """Every pair of definitions once: constrained ones as the PATTERN first orients them, in
    its order, then the free ones."""
    names = {d.name: i for i, d in enumerate(query.ast.definitions)}
    pairs: list[tuple[int, int]] = []
    for constraint in query.ast.constraints:
        i, j = (names[v] for v in constraint.pair)
        if (i, j) not in pairs and (j, i) not in pairs:
            pairs.append((i, j))
    n = len(names)
    pairs += [(i, j) for i in range(n) for j in range(i + 1, n)
              if (i, j) not in pairs and (j, i) not in pairs]
    return pairs


def _edge(query: TPStreamQuery, i: int, j: int, places: list[Point], centre: Point) -> Edge:
    left, right = query.definitions[i].name, query.definitions[j].name
    allowed = query.constraints[i][j]
    relations = [r for r in RELATIONS if allowed is None or r in allowed]
    label = "any" if allowed is None else "\n".join(relations)
    (x0, y0), (x1, y1) = places[i], places[j]
    # A side of the polygon is labelled at its middle; a diagonal nearer one end, so that
    # diagonals crossing at the centre keep their labels apart.
    n = len(places)
    t = 0.5 if abs(i - j) in (1, n - 1) else DIAGONAL_LABEL_AT
    px, py = x0 + t * (x1 - x0), y0 + t * (y1 - y0)
    # The label sits beside the edge, on the side away from the centre (above a diagonal
    # through it).
    length = math.hypot(x1 - x0, y1 - y0) or 1.0
    ox, oy = (y1 - y0) / length, -(x1 - x0) / length
    away = (px - centre[0]) * ox + (py - centre[1]) * oy
    if away < 0 or (abs(away) < 1 and oy > 0):
        ox, oy = -ox, -oy
    # Far enough out that the whole block of lines clears the edge.
    width = CHAR_WIDTH * max(len(line) for line in label.split("\n"))
    height = LINE_HEIGHT * (label.count("\n") + 1)
    reach = LABEL_OFFSET + abs(ox) * width / 2 + abs(oy) * height / 2
    label_at = (px + ox * reach, py + oy * reach)
    detail = (f"{left} and {right}: any relation" if allowed is None
              else " or ".join(f"{left} {r} {right}" for r in relations))
    return Edge(f"{left}-{right}", left, right,
                "unconstrained" if allowed is None else "allowed",
                ((x0, y0), (x1, y1)), label, label_at, detail, dashed=allowed is None)
