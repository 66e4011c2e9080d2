"""Docstring examples are specifications too: every doctest in the package runs."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import situflow

MODULES = sorted(m.name for m in pkgutil.walk_packages(situflow.__path__, "situflow."))


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
