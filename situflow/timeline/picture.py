"""What every timeline returns, and the pieces all of them share: the title with its notes,
the picture of an empty result, and how a partition key is written."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Picture:
    """A Vega-Lite chart (altair) and the notes its subtitle shows (what is not drawn, or that
    nothing was found), which the CLI also prints on standard error."""

    chart: Any
    notes: list[str] = field(default_factory=list)


def titled(chart: Any, title: str, notes: list[str]) -> Any:
    """``chart`` with ``title`` and one subtitle line per note."""
    import altair as alt

    return chart.properties(title=alt.TitleParams(title, subtitle=notes or alt.Undefined,
                                                  anchor="start"))


def no_results(title: str, notes: list[str]) -> Picture:
    """The picture of a run with nothing to draw: its title and notes, and the first note
    ("no matches", "no results") in large type where the timeline would be."""
    import altair as alt

    text = alt.Chart(alt.Data(values=[{"text": notes[0]}]), name="empty").mark_text(
        fontSize=20, color="#666").encode(text="text:N").properties(width=400, height=80)
    return Picture(titled(text, title, notes[1:]), notes)


def key_label(key: Any) -> str:
    """A partition key as text: a value as JSON writes it, a multi-attribute key as a list.

    >>> key_label(7), key_label("tech"), key_label([1, "a"])
    ('7', 'tech', '[1, "a"]')
    """
    return key if isinstance(key, str) else json.dumps(list(key) if isinstance(key, tuple) else key)
