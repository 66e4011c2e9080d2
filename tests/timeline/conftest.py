"""What the picture tests share: a headless Chromium and the directory screenshots go to.

Chromium is looked up like the operations tools (``.tools/bin``, where ``make tools`` links
Debian's ``chromium``, then ``PATH``): missing, the browser tests skip on a developer's machine
and fail under CI.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ops.conftest import REPO, tool
from tests.timeline.browser import Browser

#: Where ``SITUFLOW_UPDATE_PICTURES=1`` writes the screenshots: the README's pictures.
README_PICTURES = REPO / "docs" / "images"


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """A headless Chromium with a new profile, for the tests of one module (it stops when they
    are done, not at the end of a long session)."""
    with Browser(tool("chromium"), tmp_path_factory.mktemp("chromium-profile")) as started:
        yield started


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory the screenshots are written to: a temporary one, or the README's
    ``docs/images/`` when ``SITUFLOW_UPDATE_PICTURES=1``."""
    if os.environ.get("SITUFLOW_UPDATE_PICTURES") == "1":
        return README_PICTURES
    return tmp_path_factory.mktemp("screenshots")
