"""The Spark commands say what to install when Java is missing, instead of py4j's "Java gateway
process exited" (batch/session.py)."""

from __future__ import annotations

import pytest

from batch.session import spark_session
from situflow.errors import SituflowError


def test_without_java_the_session_says_what_to_install(monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SituflowError, match="Java 17 or later"):
        spark_session("local[1]")
