"""One Spark session for the whole test session (starting one costs seconds): ``local[2]``,
the machine's two cores. Offline queries replay on Spark here however few rows they read (the
driver's replay of small plans is tested where it is named: ``--driver-rows``)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

pyspark = pytest.importorskip("pyspark", reason="the Spark tests need the spark extra")

from batch.session import spark_session  # noqa: E402


@pytest.fixture(scope="session")
def spark() -> Iterator[pyspark.sql.SparkSession]:
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        pytest.fail("the Spark tests need Java 17 or later: install a JDK (java on the PATH, "
                    "or JAVA_HOME)", pytrace=False)
    session = spark_session("local[2]", app="situflow-tests")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def replay_on_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    import batch.offline

    monkeypatch.setattr(batch.offline, "DRIVER_ROWS", 0)
