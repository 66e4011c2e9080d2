"""The range vocabulary of the archive's indexes: a :class:`Range` on one attribute and a
:class:`Condition`, a union of ranges. Secondary indexes answer them by lookup, the lightweight
indexes by block statistics; the offline planner builds them from a query's necessary
conditions (``situflow/offline/pattern.py``), so they live here, below both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Range:
    """``low <= attribute <= high`` (each bound optional; ``*_closed`` False makes it strict).
    Numbers compare as numbers, strings as strings; a missing attribute satisfies no range
    (SEMANTICS.md: comparisons with a missing value are false).

    >>> Range("price", low=10, low_closed=False).contains(10), Range("type", "a", "a").contains("a")
    (False, True)
    """

    attribute: str
    low: Any = None
    high: Any = None
    low_closed: bool = True
    high_closed: bool = True

    def contains(self, value: Any) -> bool:
        if value is None:
            return False
        try:
            if self.low is not None and (value < self.low or (value == self.low and not self.low_closed)):
                return False
            return not (self.high is not None
                        and (value > self.high or (value == self.high and not self.high_closed)))
        except TypeError:  # a string against a number bound: the comparison is false
            return False

    def overlaps(self, minimum: Any, maximum: Any) -> bool:
        """Whether some value in ``[minimum, maximum]`` (a block's statistics) can satisfy it;
        True when the comparison is undefined (conservative)."""
        try:
            if self.low is not None and (maximum < self.low or (maximum == self.low and not self.low_closed)):
                return False
            return not (self.high is not None
                        and (minimum > self.high or (minimum == self.high and not self.high_closed)))
        except TypeError:
            return True


@dataclass(frozen=True)
class Condition:
    """A necessary condition of a symbol on one attribute: the union of ``ranges``."""

    attribute: str
    ranges: tuple[Range, ...]

    def contains(self, value: Any) -> bool:
        return any(r.contains(value) for r in self.ranges)

    def overlaps(self, minimum: Any, maximum: Any) -> bool:
        return any(r.overlaps(minimum, maximum) for r in self.ranges)
