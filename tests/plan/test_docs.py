"""The examples in the plan package's docstrings run (STYLE.md §14)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import situflow.plan

MODULES = [situflow.plan.__name__] + [
    f"{situflow.plan.__name__}.{info.name}" for info in pkgutil.iter_modules(situflow.plan.__path__)
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
