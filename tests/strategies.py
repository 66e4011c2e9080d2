"""Hypothesis strategies that several test modules draw from."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st


def json_values(max_leaves: int = 8, max_size: int = 3) -> st.SearchStrategy[Any]:
    """Any JSON value: null, booleans, integers beyond 64 bits, finite floats and text, nested
    in lists and objects of at most ``max_size`` items."""
    return st.recursive(
        st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False)
        | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=max_size)
        | st.dictionaries(st.text(max_size=4), inner, max_size=max_size),
        max_leaves=max_leaves)
