"""``situflow explain``: a compiled query's structure as a picture.

One diagram per structure the engine evaluates, drawn by
:mod:`~situflow.timeline.explain_diagram` and written by
:func:`situflow.timeline.page.write_picture`:

- TPStream: the situation definitions and the Allen relations allowed between each pair
  (:mod:`~situflow.timeline.explain_tpstream`);
- SASE+: the NFA^b, and, for a query that runs on a cost-based plan, the plan with its costs
  under it (:mod:`~situflow.timeline.explain_sase`);
- COGRA: the pattern graph with the chosen aggregator (:mod:`~situflow.timeline.explain_cogra`).

Mark names, which tests count: ``node`` and ``edge`` in every picture (the automaton's, for
SASE+), ``plan_node`` and ``plan_edge`` in a SASE+ plan.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from situflow.operator import CompiledQuery
from situflow.timeline.explain_diagram import Diagram


def diagrams(query: CompiledQuery) -> tuple[Diagram, ...]:
    """The diagrams of ``query``'s structure, in the order the picture shows them."""
    # Each language's module is imported on its own: explaining a COGRA query loads no NFA.
    if query.language == "tpstream":
        from situflow.timeline import explain_tpstream
        from situflow.tpstream.query import TPStreamQuery

        assert isinstance(query, TPStreamQuery)
        return (explain_tpstream.diagram(query),)
    if query.language == "sase":
        from situflow.sase import SaseCompiledQuery
        from situflow.timeline import explain_sase

        assert isinstance(query, SaseCompiledQuery)
        return explain_sase.diagrams(query)
    from situflow.timeline import explain_cogra
    from situflow.trends.query import CompiledTrendQuery

    assert isinstance(query, CompiledTrendQuery)
    return (explain_cogra.diagram(query),)


def explain_spec(query: CompiledQuery) -> dict[str, Any]:
    """The Vega-Lite specification of ``query``'s picture: its diagrams one under another."""
    import altair as alt

    from situflow.timeline.explain_diagram import chart

    charts = [chart(d) for d in diagrams(query)]
    # Each diagram keeps its own colours: a plan's node kinds are not an automaton's.
    picture = charts[0] if len(charts) == 1 else alt.vconcat(*charts, spacing=30).resolve_scale(
        color="independent", fill="independent")
    spec: dict[str, Any] = picture.configure_view(stroke=None).to_dict()
    _restore_names(spec)
    return spec


def _restore_names(node: Any) -> None:
    """Undo altair's renaming of the units of concatenated charts (``node`` -> ``node_0``): the
    diagrams' names are unique already (their prefixes), and tests count marks by them."""
    if isinstance(node, dict):
        name = node.get("name")
        if "mark" in node and isinstance(name, str):
            node["name"] = re.sub(r"_\d+$", "", name)
        for value in node.values():
            _restore_names(value)
    elif isinstance(node, list):
        for value in node:
            _restore_names(value)


def write_explanation(query: CompiledQuery, path: Path) -> None:
    """Write the picture of ``query``'s structure to ``path`` (``.html`` or ``.svg``); raises
    :class:`~situflow.timeline.page.PictureFormatError` for another suffix."""
    from situflow.timeline.page import picture_format, write_picture

    picture_format(path)
    write_picture(explain_spec(query), path, title=f"situflow explain {query.name}")
