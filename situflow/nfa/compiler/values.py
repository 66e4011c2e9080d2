"""The value vector V of a run's computation state (§5.2.1, Figure 5).

V holds what later edge formulas read from the events a run selected: an attribute of the first,
k-th or last selected event of a component, the length of a Kleene component, and running
aggregates over it (``avg`` as sum and count, as in Figure 5; ``max``, ``min``). Columns are
created on demand, in the order the compiler meets the references. A run keeps V as a tuple:
runs that split share it until one of them selects.

Missing values follow the expression compiler: NaN (or None for strings), false in every
comparison; aggregates skip them. A slot not yet filled (``a[3]`` of a two-event iteration) is
missing too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

NAN = math.nan


class SlotKind(Enum):
    FIRST = "first"
    NTH = "nth"
    LAST = "last"
    LEN = "len"
    SUM = "sum"
    COUNT = "count"
    MAX = "max"
    MIN = "min"


@dataclass(frozen=True, slots=True)
class Slot:
    kind: SlotKind
    component: int
    attr: int = -1  # index into the automaton's attribute layout; -1 for LEN
    k: int = 0  # for NTH


_DEFAULTS = {SlotKind.LEN: 0, SlotKind.SUM: 0.0, SlotKind.COUNT: 0}


def is_missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


class ValueLayout:
    """Builder of V's columns while compiling; frozen into :class:`Values` afterwards."""

    def __init__(self) -> None:
        self.slots: list[Slot] = []
        self._index: dict[Slot, int] = {}

    def slot(self, kind: SlotKind, component: int, attr: int = -1, k: int = 0) -> int:
        key = Slot(kind, component, attr, k)
        found = self._index.get(key)
        if found is None:
            found = self._index[key] = len(self.slots)
            self.slots.append(key)
        return found

    def freeze(self, components: int) -> Values:
        return Values(tuple(self.slots), components)


@dataclass(frozen=True)
class Values:
    slots: tuple[Slot, ...]
    components: int

    def initial(self) -> tuple[Any, ...]:
        return tuple(_DEFAULTS.get(s.kind, NAN) for s in self.slots)

    def updater(self, component: int) -> Callable[[tuple[Any, ...], tuple[Any, ...], int],
                                                   tuple[Any, ...]]:
        """V after selecting an event (``row``) as element ``n`` (1-based) of ``component``."""
        mine = [(i, s) for i, s in enumerate(self.slots) if s.component == component]
        # Split by kind once, so that the per-event update is a few tight loops.
        length = [i for i, s in mine if s.kind is SlotKind.LEN]
        last = [(i, s.attr) for i, s in mine if s.kind is SlotKind.LAST]
        first = [(i, s.attr) for i, s in mine if s.kind is SlotKind.FIRST]
        nth = [(i, s.attr, s.k) for i, s in mine if s.kind is SlotKind.NTH]
        folds = [(i, s.attr, _AGGREGATE_KINDS[s.kind]) for i, s in mine
                 if s.kind in _AGGREGATE_KINDS]

        def update(v: tuple[Any, ...], row: tuple[Any, ...], n: int) -> tuple[Any, ...]:
            out = list(v)
            for i in length:
                out[i] = n
            for i, attr in last:
                out[i] = row[attr]
            if n == 1:
                for i, attr in first:
                    out[i] = row[attr]
            for i, attr, k in nth:
                if n == k:
                    out[i] = row[attr]
            for i, attr, fold in folds:
                x = row[attr]
                if not is_missing(x):
                    out[i] = fold(out[i], x)
            return tuple(out)

        return update


def _max(acc: Any, x: Any) -> Any:
    return x if is_missing(acc) or x > acc else acc


def _min(acc: Any, x: Any) -> Any:
    return x if is_missing(acc) or x < acc else acc


_AGGREGATE_KINDS: dict[SlotKind, Callable[[Any, Any], Any]] = {
    SlotKind.SUM: lambda acc, x: acc + x,
    SlotKind.COUNT: lambda acc, x: acc + 1,
    SlotKind.MAX: _max,
    SlotKind.MIN: _min,
}
