"""Where each key of a handed-off TPStream query begins: at its first quiet event.

A TPStream operator that begins on a partition at an arbitrary message sees a situation open
there start at its first event after it, so it would emit matches with cut situations under
other ids than the whole stream has. A query submitted with a backfill (batch/README.md,
"Backfill") therefore begins each key at the key's first *quiet* event (no definition holds:
:func:`situflow.tpstream.query.quiet_mask`) at or after the start: no situation spans it, so
every situation from there on is whole. The key's earlier events are not evaluated; the
backfill finds the same event in the archive and publishes the matches before it. A begun key
is remembered with the (event time, input seq) of its begin event, in the partition's
checkpoint (:class:`situflow.runtime.PartitionOperators`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from situflow.events import EventBatch, factorize, plain
from situflow.results import json_number


def key_name(values: Sequence[Any]) -> str:
    """A key's name from its attribute values (in the query's ``PARTITION BY`` order): the
    same online, in the checkpoint and in the backfill, and for a match's key (whole floats
    as integers, as :class:`situflow.results.Match` holds them)."""
    return json.dumps([json_number(plain(v)) for v in values])


def key_names(events: EventBatch, fields: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The distinct keys of ``events`` by name, and each event's index among them."""
    if not fields:
        return [key_name([])], np.zeros(len(events), dtype=np.int64)
    codes = [factorize(events.column(name)) for name in fields]
    stacked = np.stack([inverse for _, inverse in codes], axis=1)
    rows, group = np.unique(stacked, axis=0, return_inverse=True)
    names = [key_name([codes[k][0][r] for k, r in enumerate(row)]) for row in rows.tolist()]
    return names, np.asarray(group).reshape(-1)


def begin_keys(begun: dict[str, list[int]], events: EventBatch, quiet: np.ndarray,
               fields: Sequence[str]) -> np.ndarray:
    """Which of ``events`` (in stream order) are evaluated: every event of a key in ``begun``,
    and of any other key those from its first ``quiet`` one on, which begins the key (added to
    ``begun`` with that event's time and seq)."""
    keep = np.zeros(len(events), dtype=bool)
    if not len(events):
        return keep
    names, group = key_names(events, fields)
    order = np.argsort(group, kind="stable")
    bounds = np.flatnonzero(np.diff(group[order], prepend=-1, append=len(names)))
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        rows = order[lo:hi]
        name = names[int(group[rows[0]])]
        if name in begun:
            keep[rows] = True
            continue
        quiet_rows = rows[quiet[rows]]
        if len(quiet_rows):
            first = int(quiet_rows[0])
            begun[name] = [int(events.ts[first]), int(events.seq[first])]
            keep[rows[rows >= first]] = True
    return keep
