"""The long fuzz runs (``@pytest.mark.slow``) run only when selected, ``pytest -m slow
--hypothesis-profile=ci tests/fuzz``, or in the ``deep`` profile (tests/profiles.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import profiles

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "slow" in (config.getoption("markexpr") or "") or profiles.deep():
        return
    skip = pytest.mark.skip(reason="a long fuzz run; select it with -m slow")
    for item in items:
        if "slow" in item.keywords and item.path.is_relative_to(HERE):
            item.add_marker(skip)
