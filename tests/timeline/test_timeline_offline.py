"""``situflow offline --timeline``: the picture is drawn from the results alone (the events stay
inside Spark) and counts the same matches, bindings and windows as the results."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark", reason="the Spark tests need the spark extra")

from situflow.cli import main  # noqa: E402
from situflow.timeline.page import count_marks  # noqa: E402
from tests.batch.test_offline import WORKLOADS, archive  # noqa: E402

EXAMPLES = Path(__file__).parents[2] / "situflow" / "examples"


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from batch.session import spark_session

    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        pytest.fail("the Spark tests need Java 17 or later", pytrace=False)
    # Not stopped here: Spark has one session per process, which tests/batch's session-scoped
    # fixture may hold too (a worker of pytest -n runs both); the process's end stops it.
    yield spark_session("local[2]", app="situflow-timeline-tests")


def offline_timeline(example: str, root: Path) -> tuple[list[dict[str, Any]], str]:
    stream, generate, keys, _ = WORKLOADS[example]
    archive(root, stream, generate(), key_fields=keys)
    results, picture = root / "offline.jsonl", root / "timeline.svg"
    assert main(["offline", str(EXAMPLES / example), "--archive", str(root), "--stream", stream,
                 "--output", str(results), "--timeline", str(picture)]) == 0
    return [json.loads(line) for line in results.read_text().splitlines()], picture.read_text()


def test_a_tpstream_timeline_draws_the_bindings_of_the_matches(spark, tmp_path):
    results, svg = offline_timeline("aggressive_drivers.tps", tmp_path)
    assert results
    assert count_marks(svg, "match") == len(results)
    assert count_marks(svg, "situation") == len({
        (r["key"], name, b["ts"]) for r in results for name, b in r["bindings"].items()})


def test_a_sase_timeline_draws_each_match_at_its_result_time(spark, tmp_path, capsys):
    results, svg = offline_timeline("rising_stocks.sase", tmp_path)
    drawn = sum(min(25, sum(r["key"] == key for r in results)) for key in {r["key"] for r in results})
    assert count_marks(svg, "match") == drawn
    assert count_marks(svg, "event") == 0
    assert "events not drawn (the offline job keeps them in Spark)" in svg


def test_a_cogra_timeline_draws_one_bar_per_window_row(spark, tmp_path):
    results, svg = offline_timeline("rising_trends.cogra", tmp_path)
    assert results
    assert count_marks(svg, "window") == len(results)
