"""Text values for the compiled loop: object columns factorized by identity, and a dictionary
that gives every text a number for the life of an operator.

The compiled loop (:mod:`situflow.nfa.kernel.loop`) reads attributes as float64. A text
attribute enters it as the code of its value in :class:`Texts`, a dictionary per operator that
only grows, so a code written into a run's V or the shared buffer in one batch still means the
same text in the next one; the dictionary starts with the query's text constants, which the
postfix programs hold as codes. Two texts are equal exactly when their codes are, which is all
that ``=`` and ``!=`` need; ordering, arithmetic and aggregates on texts have no code form
(:meth:`situflow.nfa.kernel.loop.Tables.accepts` sends such batches to the Python loop).

Columns of Python objects are factorized by object identity first (:func:`factorize_objects`):
a compiled pass over the objects' addresses finds the distinct objects, and only those are
looked up by value. Columns that repeat a few objects (symbols, types, states read from a
small vocabulary) cost one compiled pass instead of one dictionary lookup per event; a column
of all-distinct objects costs what a lookup per event does.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

import numpy as np

from situflow.jit import njit

# Fibonacci hashing's multiplier (2^64 / golden ratio) as an int64, so products wrap in int64.
_GOLDEN = np.int64(-7046029254386353131)
# The code of a missing text (None): NaN, false in every comparison, as the closures have it.
MISSING_CODE = math.nan


class Texts:
    """Text -> code (a float64 the kernel compares), and code -> text."""

    def __init__(self, constants: tuple[str, ...] = ()):
        self.values: list[str] = []
        self._codes: dict[str, float] = {}
        for text in constants:
            self.code(text)

    def code(self, text: str) -> float:
        found = self._codes.get(text)
        if found is None:
            found = self._codes[text] = float(len(self.values))
            self.values.append(text)
        return found

    def text(self, code: float) -> str | None:
        """The text of ``code``; None for :data:`MISSING_CODE`."""
        return None if code != code else self.values[int(code)]

    def encode(self, column: np.ndarray) -> np.ndarray | None:
        """The codes of an object column of texts and missing values (None, NaN), or None if it
        holds anything else."""
        objects, inverse = factorize_objects(column)
        # Distinct objects may still be equal texts: group them by value, then type-check and
        # look up each distinct value once.
        values: dict[Any, int] = {}
        try:
            grouped = np.fromiter((values.setdefault(x, len(values)) for x in objects),
                                  dtype=np.int64, count=len(objects))
        except TypeError:  # an unhashable value (a list, a dict) is no text
            return None
        codes = np.empty(len(values), dtype=np.float64)
        for i, x in enumerate(values):
            if isinstance(x, str):
                codes[i] = self.code(x)
            elif x is None or (isinstance(x, float) and math.isnan(x)):
                codes[i] = MISSING_CODE
            else:
                return None
        return codes[grouped][inverse]


# The last columns factorized, with the result: a batch's text partition key is also read as
# an attribute (``RETURN a.symbol``), and several queries read one batch. The entries hold
# their columns, so an identity test cannot meet a new array at a reused address; batch
# columns are never written to.
_RECENT: list[tuple[np.ndarray, tuple[list[Any], np.ndarray]]] = []
_REMEMBERED = 4


def factorize_objects(column: np.ndarray) -> tuple[list[Any], np.ndarray]:
    """The distinct objects (by identity) of an object column in the order they first occur,
    and the index of each row's object among them."""
    for seen, found in _RECENT:
        if seen is column:
            return found
    found = _factorize_objects(column)
    _RECENT.insert(0, (column, found))
    del _RECENT[_REMEMBERED:]
    return found


def _factorize_objects(column: np.ndarray) -> tuple[list[Any], np.ndarray]:
    column = np.ascontiguousarray(column, dtype=object)
    n = len(column)
    if n == 0:
        return [], np.zeros(0, dtype=np.int64)
    # The column's references as integers (the objects' addresses); ``column`` keeps every
    # object alive while they are read, and nothing is dereferenced in compiled code.
    addresses = np.ctypeslib.as_array((ctypes.c_ssize_t * n).from_address(column.ctypes.data))
    first, inverse = _factorize(addresses)
    return column[first].tolist(), inverse


@njit(cache=True, nogil=True)
def _factorize(keys):  # pragma: no cover - compiled
    """First occurrence of each distinct key, and each key's index among them (open
    addressing, doubled whenever half full)."""
    n = keys.shape[0]
    size = 64
    table = np.full(size, -1, dtype=np.int64)  # index into ``first``
    first = np.empty(n, dtype=np.int64)
    inverse = np.empty(n, dtype=np.int64)
    distinct = 0
    for i in range(n):
        key = keys[i]
        h = (key >> 4) * _GOLDEN
        mask = size - 1
        j = (h ^ (h >> 29)) & mask
        while True:
            found = table[j]
            if found < 0:
                table[j] = distinct
                first[distinct] = i
                inverse[i] = distinct
                distinct += 1
                break
            if keys[first[found]] == key:
                inverse[i] = found
                break
            j = (j + 1) & mask
        if 2 * distinct > size:
            size *= 2
            table = np.full(size, -1, dtype=np.int64)
            mask = size - 1
            for d in range(distinct):
                h = (keys[first[d]] >> 4) * _GOLDEN
                j = (h ^ (h >> 29)) & mask
                while table[j] >= 0:
                    j = (j + 1) & mask
                table[j] = d
    return first[:distinct], inverse
