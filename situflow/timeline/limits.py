"""How much of a large result a timeline draws, and how it says what it left out.

The rule, the same for every language (``situflow run --help`` repeats it):

- at most :attr:`Limits.keys` partition keys (COGRA: groups) are drawn: the keys with results
  first, in the order of their first result, then keys without results in the order they were
  first seen;
- per drawn key, the last :attr:`Limits.results` matches (TPStream, SASE+) or the last
  :attr:`Limits.windows` window rows (COGRA) are drawn;
- per drawn key, the last :attr:`Limits.situations` finished situations (TPStream) are drawn,
  with the situations still open at the end of input;
- per drawn SASE+ match, the first :attr:`Limits.events` of its selected events are drawn (a
  Kleene run's label gives its whole length).

What is left out is counted, and each count becomes a line of the picture's subtitle and of
standard error (:meth:`Omissions.lines`); nothing is dropped silently. The recorders keep only
what the rule may draw (the last items of each key, as bounded queues), so memory grows with
the number of keys, as the operator's own state does, not with the length of the stream.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from situflow.events import hashable_key
from situflow.results import json_number

T = TypeVar("T")


@dataclass(frozen=True)
class Limits:
    """The caps of the rule above."""

    keys: int = 20
    results: int = 25
    windows: int = 500
    situations: int = 200
    events: int = 100


#: The rule as ``situflow run --timeline`` applies it.
LIMITS = Limits()


def key_of(key: object) -> Hashable:
    """A result's or record's partition key as one dict key: a whole float and an int are the
    same key, a multi-attribute key is a tuple."""
    found: Hashable = hashable_key(json_number(key))
    return found


@dataclass
class LastPerKey(Generic[T]):
    """The last ``cap`` items of each key, with the count of those pushed out."""

    cap: int
    items: dict[Hashable, deque[T]] = field(default_factory=dict)
    dropped: Counter[Hashable] = field(default_factory=Counter)

    def add(self, key: Hashable, item: T) -> None:
        queue = self.items.get(key)
        if queue is None:
            queue = self.items[key] = deque(maxlen=self.cap)
        if len(queue) == self.cap:
            self.dropped[key] += 1
        queue.append(item)

    def of(self, key: Hashable) -> list[T]:
        return list(self.items.get(key, ()))


def chosen_keys(with_results: Iterable[Hashable], seen: Iterable[Hashable],
                cap: int) -> tuple[list[Hashable], int]:
    """The keys to draw (with results first, then the others, in the orders given) and how
    many keys are left out.

    >>> chosen_keys(["b", "a"], ["a", "c", "b", "d"], 3)
    (['b', 'a', 'c'], 1)
    """
    ordered = list(dict.fromkeys([*with_results, *seen]))
    return ordered[:cap], max(0, len(ordered) - cap)


@dataclass
class Omissions:
    """What a picture leaves out, as sentences."""

    limits: Limits
    keys: int = 0
    results: int = 0
    situations: int = 0
    key_word: str = "keys"
    result_word: str = "matches"
    per_key: int | None = None  # the results cap, if not limits.results

    def lines(self) -> list[str]:
        """One sentence per kind of omission (none when everything is drawn).

        >>> for line in Omissions(Limits(), keys=3, results=40).lines():
        ...     print(line)
        3 keys not drawn: at most 20 are drawn, those with matches first
        40 matches not drawn: only the last 25 of each drawn key are
        """
        out = []
        if self.keys:
            out.append(f"{self.keys} {self.key_word} not drawn: at most {self.limits.keys} are "
                       f"drawn, those with {self.result_word} first")
        if self.results:
            out.append(f"{self.results} {self.result_word} not drawn: only the last "
                       f"{self.per_key or self.limits.results} of each drawn "
                       f"{self.key_word[:-1]} are")
        if self.situations:
            out.append(f"{self.situations} situations not drawn: only the last "
                       f"{self.limits.situations} finished ones of each drawn key are")
        return out
