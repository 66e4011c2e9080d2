"""What the operations tests share: the repository root and the tools they run.

A tool is looked up in ``<repo>/.tools/bin`` (``make tools`` puts helm, kubectl, promtool and
prometheus there) and then on ``PATH``. A test whose tool is missing skips on a developer's
machine and fails under CI (the ``CI`` variable set), where a skip would hide that nothing was
checked.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

#: The repository root (this worktree).
REPO = Path(__file__).resolve().parents[2]


def tool(name: str) -> str:
    """The path of the command-line tool ``name``; skips the test when it is missing (fails
    under CI: run ``make tools``)."""
    local = REPO / ".tools" / "bin" / name
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    found = shutil.which(name)
    if found:
        return found
    message = f"{name} not found in .tools/bin or on PATH: run make tools"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
