"""A query's structure as a node-and-edge diagram, drawn as a Vega-Lite chart.

The per-language modules (:mod:`~situflow.timeline.explain_tpstream`,
:mod:`~situflow.timeline.explain_sase`, :mod:`~situflow.timeline.explain_cogra`) turn a
compiled query into a :class:`Diagram` and do the layout arithmetic: every node and every point
of every edge carries its position in pixels. This module only draws, so the layout is plain
data that tests can read, and the drawing is the same for all three languages.

Each diagram is one layered Vega-Lite view with axes off and ``scale: null`` on x and y (the
positions are pixels). Its marks are named, and the names are what tests and the browser check
count (``count_marks``):

- ``{prefix}node``: one point per node;
- ``{prefix}edge``: one line per edge (a line grouped by edge, so Vega draws one path each;
  loops and arcs are polylines the layout computed, smoothed by ``basis`` interpolation);
- ``{prefix}arrow``: one triangle per edge, at its target end, turned along the edge;
- ``{prefix}node_label``, ``{prefix}caption`` (under a node), ``{prefix}edge_label``: the
  texts; ``{prefix}legend``: the lines below the drawing that spell out what labels abbreviate
  (conditions, formulas).

The prefix tells two diagrams of one picture apart (a SASE+ query's NFA^b and its plan):
Vega-Lite renames marks that share a name, so every name in a picture is unique.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import altair as alt

Point = tuple[float, float]

# Room around the drawing, in pixels: labels above the top nodes and beside the outer ones.
MARGIN = 60.0
LEGEND_LINE = 16.0
NODE_SIZE = 1400
ARROW_SIZE = 90
# Height and (about) width of a character of 11-pixel text, and the gap between a label and
# what it labels.
LINE_HEIGHT = 13.0
CHAR_WIDTH = 6.2
LABEL_GAP = 4.0
# A caption starts this far below its node's centre, under the circle.
CAPTION_OFFSET = 26.0
# Where an arrowhead sits: this far back from the target's centre, outside the node's circle.
ARROW_SETBACK = 24.0


@dataclass(frozen=True)
class Node:
    id: str
    label: str
    x: float
    y: float
    # Colours the node (a legend names the kinds).
    kind: str
    # A line or two under the node (its type, its cost), or right of it.
    caption: str = ""
    caption_right: bool = False
    # The full text behind the label, for the tooltip.
    detail: str = ""


@dataclass(frozen=True)
class Edge:
    id: str
    source: str
    target: str
    kind: str
    # The edge's polyline from source to target, in pixels (at least two points).
    path: tuple[Point, ...]
    label: str = ""
    # Where the label's centre goes (the layout keeps it clear of the edge).
    label_at: Point | None = None
    # The full text behind the label, for the tooltip.
    detail: str = ""
    # Drawn dashed: a pair the query leaves free.
    dashed: bool = False


@dataclass(frozen=True)
class Diagram:
    title: str
    subtitle: tuple[str, ...]
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    # A fixed colour per kind of node and of edge, so that a kind looks the same in every
    # picture; the legends list the kinds present, in this order.
    node_palette: tuple[tuple[str, str], ...]
    edge_palette: tuple[tuple[str, str], ...]
    # Lines printed under the drawing, each a key to a label of the drawing.
    legend: tuple[str, ...] = ()
    # Legend title of the node and edge colours.
    node_kinds: str = "node"
    edge_kinds: str = "edge"
    # Mark-name prefix (see the module docstring).
    prefix: str = ""


def arc(start: Point, end: Point, bend: float, steps: int = 12) -> tuple[Point, ...]:
    """Points of a curve from ``start`` to ``end`` bulging ``bend`` pixels to the left of the
    direction of travel (negative: to the right); ``bend=0`` is the straight segment."""
    (x0, y0), (x1, y1) = start, end
    if bend == 0:
        return (start, end)
    length = math.hypot(x1 - x0, y1 - y0) or 1.0
    nx, ny = (y1 - y0) / length, -(x1 - x0) / length
    # A quadratic Bezier whose control point is 2*bend off the middle peaks at bend.
    cx, cy = (x0 + x1) / 2 + 2 * bend * nx, (y0 + y1) / 2 + 2 * bend * ny
    return tuple(
        ((1 - t) ** 2 * x0 + 2 * (1 - t) * t * cx + t * t * x1,
         (1 - t) ** 2 * y0 + 2 * (1 - t) * t * cy + t * t * y1)
        for t in (k / steps for k in range(steps + 1))
    )


def loop(centre: Point, up: bool, radius: float = 26.0, steps: int = 16) -> tuple[Point, ...]:
    """A loop from a node back to itself, above it (``up``) or below it."""
    x, y = centre
    sign = -1.0 if up else 1.0
    cy = y + sign * (radius + 10)
    # From the node's edge round the circle and back, leaving a gap where it meets the node.
    angles = [math.radians(-60 + 300 * k / steps) for k in range(steps + 1)]
    return tuple((x + radius * math.sin(a) * 0.9, cy - sign * radius * math.cos(a))
                 for a in angles)


def peak(path: Sequence[Point], up: bool = True) -> Point:
    """Where a loop's label goes: its highest (``up``) or lowest point."""
    return min(path, key=lambda p: p[1]) if up else max(path, key=lambda p: p[1])


def middle(path: Sequence[Point]) -> Point:
    """Where an edge's label goes: half way along a segment, at the crest of an ``arc``."""
    if len(path) == 2:
        (x0, y0), (x1, y1) = path
        return (x0 + x1) / 2, (y0 + y1) / 2
    return path[len(path) // 2]


def above(point: Point, text: str) -> Point:
    """Where to centre ``text`` so that it ends just above ``point``."""
    return point[0], point[1] - LABEL_GAP - LINE_HEIGHT * (text.count("\n") + 1) / 2


def below(point: Point, text: str) -> Point:
    """Where to centre ``text`` so that it starts just below ``point``."""
    return point[0], point[1] + LABEL_GAP + LINE_HEIGHT * (text.count("\n") + 1) / 2


def chart(diagram: Diagram) -> alt.LayerChart:
    """The diagram as a layered Vega-Lite chart sized to its content."""
    diagram = _framed(diagram)
    p = diagram.prefix
    xs, ys = _extent(diagram)
    captions = any(n.caption for n in diagram.nodes)
    bottom = (max(ys) if ys else 0.0) + MARGIN / 2 + (2 * CAPTION_OFFSET if captions else 0.0)
    width = (max(xs) if xs else 0.0) + MARGIN
    height = bottom + LEGEND_LINE * len(diagram.legend) + (MARGIN / 2 if diagram.legend else 0)
    edge_colour = alt.Color("kind:N", title=diagram.edge_kinds,
                            scale=_scale(diagram.edge_palette, [e.kind for e in diagram.edges]))
    x = alt.X("x:Q", scale=None, axis=None)
    y = alt.Y("y:Q", scale=None, axis=None)

    edge_points = [
        {"edge": e.id, "step": k, "x": px, "y": py, "kind": e.kind, "dashed": e.dashed,
         "detail": e.detail or e.label}
        for e in diagram.edges for k, (px, py) in enumerate(e.path)
    ]
    edges = alt.Chart(alt.InlineData(values=edge_points), name=f"{p}edge").mark_line(
        interpolate="basis", strokeWidth=1.8
    ).encode(
        x=x, y=y, detail="edge:N", order="step:Q",
        color=edge_colour,
        strokeDash=alt.condition("datum.dashed", alt.value([5, 4]), alt.value([1, 0])),
        tooltip=[alt.Tooltip("kind:N", title=diagram.edge_kinds),
                 alt.Tooltip("detail:N", title="detail")],
    )
    arrows = alt.Chart(alt.InlineData(values=[_arrow(e) for e in diagram.edges]),
                       name=f"{p}arrow").mark_point(
        shape="triangle-up", filled=True, size=ARROW_SIZE, opacity=1
    ).encode(x=x, y=y, angle=alt.Angle("angle:Q", scale=None), color=edge_colour)
    edge_labels = alt.Chart(alt.InlineData(values=[
        {"x": e.label_at[0], "y": e.label_at[1], "text": e.label}
        for e in diagram.edges if e.label and e.label_at is not None
    ]), name=f"{p}edge_label").mark_text(
        fontSize=11, lineBreak="\n", baseline="middle"
    ).encode(x=x, y=y, text="text:N")
    nodes = alt.Chart(alt.InlineData(values=[
        {"id": n.id, "x": n.x, "y": n.y, "kind": n.kind, "label": n.label,
         "detail": n.detail or n.label} for n in diagram.nodes
    ]), name=f"{p}node").mark_point(
        shape="circle", filled=True, size=NODE_SIZE, opacity=1, stroke="#333", strokeWidth=1
    ).encode(
        x=x, y=y,
        fill=alt.Fill("kind:N", title=diagram.node_kinds,
                      scale=_scale(diagram.node_palette, [n.kind for n in diagram.nodes])),
        tooltip=[alt.Tooltip("label:N", title=diagram.node_kinds),
                 alt.Tooltip("detail:N", title="detail")],
    )
    node_labels = alt.Chart(alt.InlineData(values=[
        {"x": n.x, "y": n.y, "text": n.label} for n in diagram.nodes
    ]), name=f"{p}node_label").mark_text(fontSize=12, fontWeight="bold", lineBreak="\n").encode(
        x=x, y=y, text="text:N")
    caption_marks = alt.Chart(alt.InlineData(values=[
        {"x": x_, "y": y_, "text": n.caption}
        for n in diagram.nodes if n.caption for x_, y_ in [_caption_at(n)]
    ]), name=f"{p}caption").mark_text(fontSize=11, baseline="top", lineBreak="\n").encode(
        x=x, y=y, text="text:N")
    legend = alt.Chart(alt.InlineData(values=[
        {"x": 10.0, "y": bottom + LEGEND_LINE * k, "text": line}
        for k, line in enumerate(diagram.legend)
    ]), name=f"{p}legend").mark_text(align="left", fontSize=11, font="monospace").encode(
        x=x, y=y, text="text:N")
    title = alt.TitleParams(diagram.title, subtitle=list(diagram.subtitle), anchor="start")
    return alt.LayerChart(layer=[edges, arrows, edge_labels, nodes, node_labels, caption_marks,
                                 legend], title=title, width=width, height=height)


def _caption_at(node: Node) -> Point:
    """Where a caption's text starts, centred: under the node, or beside it on the right."""
    if not node.caption_right:
        return node.x, node.y + CAPTION_OFFSET
    lines = node.caption.split("\n")
    width = CHAR_WIDTH * max(len(line) for line in lines)
    return node.x + CAPTION_OFFSET + width / 2, node.y - LINE_HEIGHT * len(lines) / 2


def _extent(diagram: Diagram) -> tuple[list[float], list[float]]:
    """The x and y of every point the drawing covers: nodes, edges and edge labels (a label's
    text reaches ``LINE_HEIGHT`` beyond its point)."""
    points = [(n.x, n.y) for n in diagram.nodes] + [q for e in diagram.edges for q in e.path]
    for e in diagram.edges:
        if e.label and e.label_at is not None:
            half = LINE_HEIGHT * (e.label.count("\n") + 1) / 2
            points += [(e.label_at[0], e.label_at[1] - half), (e.label_at[0], e.label_at[1] + half)]
    return [x for x, _ in points], [y for _, y in points]


def _scale(palette: tuple[tuple[str, str], ...], kinds: list[str]) -> alt.Scale:
    """The palette's colours of the kinds present."""
    present = [(kind, colour) for kind, colour in palette if kind in kinds]
    return alt.Scale(domain=[k for k, _ in present], range=[c for _, c in present])


def _framed(diagram: Diagram) -> Diagram:
    """``diagram`` moved so that its top-left point is ``MARGIN`` pixels from the corner."""
    xs, ys = _extent(diagram)
    if not xs:
        return diagram
    dx, dy = MARGIN - min(xs), MARGIN - min(ys)

    def moved(point: Point) -> Point:
        return point[0] + dx, point[1] + dy

    return replace(
        diagram,
        nodes=tuple(replace(n, x=n.x + dx, y=n.y + dy) for n in diagram.nodes),
        edges=tuple(replace(e, path=tuple(moved(q) for q in e.path),
                            label_at=moved(e.label_at) if e.label_at else None)
                    for e in diagram.edges),
    )


def _arrow(edge: Edge) -> dict[str, Any]:
    """The arrowhead of ``edge``: on the rim of the target's circle, pointing from the first
    point of the path outside that circle towards the target's centre."""
    tx, ty = edge.path[-1]
    fx, fy = next(((px, py) for px, py in reversed(edge.path[:-1])
                   if math.hypot(px - tx, py - ty) >= ARROW_SETBACK), edge.path[0])
    dx, dy = tx - fx, ty - fy
    length = math.hypot(dx, dy) or 1.0
    ax, ay = tx - dx / length * ARROW_SETBACK, ty - dy / length * ARROW_SETBACK
    # Vega turns a symbol clockwise by ``angle`` degrees; an unturned triangle-up points up.
    angle = math.degrees(math.atan2(dx, -dy)) % 360
    return {"x": ax, "y": ay, "angle": angle, "kind": edge.kind}
