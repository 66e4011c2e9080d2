"""Writing a picture to a file: one self-contained HTML page or one SVG document.

A picture is a Vega-Lite specification (an altair chart or its dict). It is compiled once to
Vega by vl-convert and the same Vega specification is used twice:

* ``.html``: a page with the Vega, Vega-Lite and vega-embed libraries inlined (the bundle
  vl-convert ships; the page loads nothing from the network), drawn by Vega's **SVG renderer**
  so that every item of every mark is an element of the page's DOM, with no action menu;
* ``.svg``: the SVG document vl-convert's Vega renders.

Mark names. Vega-Lite names a unit's Vega mark ``NAME_marks`` when the unit is named ``NAME``
(``alt.Chart(data, name="situation")``). Pictures refer to their marks by the short name, so
:func:`write_picture` renames those marks to ``NAME`` (and the data references to them) before
drawing. Both renderers then put a named mark in the same structure::

    <g class="mark-rect role-mark situation" ...>   one container per mark instance
      <path .../>                                   one child element per item
      <path .../>
    </g>

A mark inside a facet cell or a per-series group (a line with ``detail``) has one container per
cell or series, so the items of mark ``NAME`` are the child elements of every ``g`` whose
class holds both ``role-mark`` and ``NAME``; that is what :func:`count_marks` counts, and what
a browser test counts with the selector ``g.role-mark.NAME > *``. A mark with no items draws
an empty container or none at all: zero either way.

altair and vl-convert are imported here only when a picture is written, so the CLI starts as
fast without ``--timeline``.
"""

from __future__ import annotations

import functools
import html
import importlib.util
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from xml.etree import ElementTree

from situflow.errors import SituflowError

Format = Literal["html", "svg"]
SVG_NS = "{http://www.w3.org/2000/svg}"


class PictureFormatError(SituflowError):
    """A picture file name whose suffix names no format situflow writes."""

    def __init__(self, path: Path):
        super().__init__(f"must end .html or .svg (got '{path}')")
        self.path = path


def picture_format(path: Path) -> Format:
    """The format a picture file name asks for, from its suffix.

    >>> picture_format(Path("run.HTML")), picture_format(Path("run.svg"))
    ('html', 'svg')
    >>> picture_format(Path("run.png"))
    Traceback (most recent call last):
    ...
    situflow.timeline.page.PictureFormatError: must end .html or .svg (got 'run.png')
    """
    suffix = path.suffix.lower()
    if suffix == ".html":
        return "html"
    if suffix == ".svg":
        return "svg"
    raise PictureFormatError(path)


class MissingExtraError(SituflowError):
    """The plotting libraries are not installed."""

    def __init__(self) -> None:
        super().__init__("pictures need the timeline extra (altair, vl-convert-python): "
                         "pip install 'situflow[timeline]'")


def check_picture(path: Path) -> Format:
    """:func:`picture_format`, and :class:`MissingExtraError` unless the libraries that draw
    are installed (found without importing them): a command checks before its run, not after."""
    kind = picture_format(path)
    if any(importlib.util.find_spec(name) is None for name in ("altair", "vl_convert")):
        raise MissingExtraError
    return kind


def write_picture(spec: Any, path: Path, *, title: str) -> None:
    """Draw ``spec`` (an altair chart or a Vega-Lite dict) into ``path`` (``.html``/``.svg``).

    ``title`` is the HTML page's title (the picture's own title is part of ``spec``).
    Raises :class:`PictureFormatError` for any other suffix, before any work is done.
    """
    kind = picture_format(path)
    vega = to_vega(spec)
    if kind == "svg":
        import vl_convert

        path.write_text(vl_convert.vega_to_svg(vega), encoding="utf-8")
    else:
        path.write_text(_page(vega, title), encoding="utf-8")


def to_vega(spec: Any) -> dict[str, Any]:
    """The Vega specification of a Vega-Lite one, with named marks renamed ``NAME_marks`` ->
    ``NAME`` (see the module docstring)."""
    import vl_convert

    lite = spec if isinstance(spec, Mapping) else spec.to_dict()
    vega: dict[str, Any] = vl_convert.vegalite_to_vega(dict(lite))
    names = {f"{name}_marks": name for name in _unit_names(lite)}
    _rename_marks(vega, names)
    return vega


def _unit_names(spec: Any) -> set[str]:
    """The names given to the units (specifications with a ``mark``) of a Vega-Lite spec."""
    found: set[str] = set()
    if isinstance(spec, Mapping):
        if "mark" in spec and isinstance(spec.get("name"), str):
            found.add(spec["name"])
        for value in spec.values():
            found |= _unit_names(value)
    elif isinstance(spec, list):
        for value in spec:
            found |= _unit_names(value)
    return found


def _rename_marks(node: Any, names: dict[str, str]) -> None:
    """Rename, in place, the Vega marks in ``names`` and the ``from: {data: …}`` references to
    them (a mark's items can be the data of another mark)."""
    if isinstance(node, dict):
        for mark in node.get("marks", []):
            if mark.get("name") in names:
                mark["name"] = names[mark["name"]]
            source = mark.get("from", {})
            if source.get("data") in names:
                source["data"] = names[source["data"]]
        for value in node.values():
            _rename_marks(value, names)
    elif isinstance(node, list):
        for value in node:
            _rename_marks(value, names)


@functools.cache
def _bundle() -> str:
    """The JavaScript every page inlines (built once per process: it takes seconds)."""
    import vl_convert

    # The page's one use of the bundle is vegaEmbed, which brings Vega and Vega-Lite with it.
    return str(vl_convert.javascript_bundle("window.vegaEmbed = vegaEmbed;"))


def _page(vega: dict[str, Any], title: str) -> str:
    bundle = _bundle()
    # A "</" inside the JSON would end the <script> element early.
    spec = json.dumps(vega).replace("</", "<\\/")
    options = json.dumps({"mode": "vega", "renderer": "svg", "actions": False})
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{html.escape(title)}</title>
<style>body {{ font-family: sans-serif; margin: 1em; }}</style>
<script>{bundle}</script>
</head>
<body>
<div id="picture"></div>
<script>
vegaEmbed("#picture", {spec}, {options}).catch(error => console.error(error));
</script>
</body>
</html>
"""


def count_marks(svg_text: str, name: str) -> int:
    """The number of items of the Vega mark ``name`` in an SVG document: the child elements of
    every ``<g>`` whose class holds ``role-mark`` and ``name`` (see the module docstring).

    >>> count_marks('<svg xmlns="http://www.w3.org/2000/svg">'
    ...             '<g class="mark-rect role-mark situation"><path/><path/></g>'
    ...             '<g class="mark-rect role-mark situation_x"><path/></g>'
    ...             '<g class="mark-rect role-mark situation"><path/></g></svg>', "situation")
    3
    """
    root = ElementTree.fromstring(svg_text)
    total = 0
    for group in root.iter(f"{SVG_NS}g"):
        classes = group.get("class", "").split()
        if "role-mark" in classes and name in classes:
            total += len(group)
    return total
