"""The slices of time (or count) windows (thesis §3.3.3): every window is a run of whole
slices, ``slide2 = size mod slide`` and ``slide1 = slide - slide2`` long (just ``slide`` when
it divides ``size``). :class:`WindowError`, the package's one error, is here, at the bottom of
its imports, since a slicing is the first thing to refuse a window."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from situflow.errors import SituflowError


class WindowError(SituflowError):
    """A windowed aggregation that cannot run as asked (e.g. the index method forced on a
    query the index cannot answer)."""


@dataclass(frozen=True)
class Slicing:
    """The slices of windows ``[k·slide, k·slide + size)``, ``k >= 0`` (§3.3.3).

    When ``slide`` divides ``size``, slice ``s`` is ``[s·slide, (s+1)·slide)``. Otherwise each
    slide splits into ``slide2 = size mod slide`` and then ``slide1 = slide - slide2``: slice
    ``2j`` is ``[j·slide, j·slide + slide2)``, slice ``2j+1`` the rest of the slide, and
    ``size = slide2 + (size // slide)·(slide1 + slide2)``. A slide longer than the window
    (hopping windows) needs no special case: slide1 is then the gap between windows.

    >>> Slicing(10, 3).slide1, Slicing(10, 3).slide2, Slicing(10, 3).initial_lengths()
    (2, 1, [1, 2, 1, 2, 1, 2, 1])
    """

    size: int
    slide: int

    def __post_init__(self) -> None:
        if self.size <= 0 or self.slide <= 0:
            raise WindowError(f"window size {self.size} and slide {self.slide} must be positive")

    @property
    def slide2(self) -> int:
        return self.size % self.slide

    @property
    def slide1(self) -> int:
        return self.slide - self.slide2

    @property
    def _split(self) -> bool:
        return self.slide2 != 0

    def slice_of(self, t: np.ndarray) -> np.ndarray:
        """The slice of each position ``t`` (floor division, so negative times work too)."""
        t = np.asarray(t, dtype=np.int64)
        j = np.floor_divide(t, self.slide)
        if not self._split:
            return j
        return 2 * j + (t - j * self.slide >= self.slide2)

    def bounds(self, s: int) -> tuple[int, int]:
        """Slice ``s`` as ``[start, end)``."""
        if not self._split:
            return s * self.slide, (s + 1) * self.slide
        j, second = divmod(s, 2)
        start = j * self.slide + (self.slide2 if second else 0)
        return start, (j + 1) * self.slide if second else j * self.slide + self.slide2

    def window_slices(self, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The first and last slice of each window ``k`` (inclusive)."""
        k = np.asarray(k, dtype=np.int64)
        q = self.size // self.slide
        if not self._split:
            return k, k + q - 1
        return 2 * k, 2 * (k + q)

    def windows_of(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The first and last window holding each slice ``s`` (empty when first > last)."""
        s = np.asarray(s, dtype=np.int64)
        q = self.size // self.slide
        if not self._split:
            return s - q + 1, s
        j, second = np.divmod(s, 2)
        return j - q + second, j

    def initial_lengths(self) -> list[int]:
        """The slice lengths of window 0 (the thesis' initial tree ⟨slide2, slide1, ...⟩)."""
        first, last = self.window_slices(np.array([0]))
        lengths = [end - start for start, end in map(self.bounds, range(int(first[0]), int(last[0]) + 1))]
        return [n for n in lengths if n > 0]
