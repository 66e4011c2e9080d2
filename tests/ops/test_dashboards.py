"""The Grafana dashboards (``charts/situflow/files/dashboards/*.json``): written by
``monitoring/dashboards.py`` and not edited by hand (the check fails on a stale file), valid
JSON, every panel with a PromQL query on the data source chosen in the ``datasource``
variable. That the queries return data is ``test_prometheus.py``'s.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from monitoring import dashboards
from tests.ops.conftest import REPO

FILES = sorted((REPO / "charts/situflow/files/dashboards").glob("*.json"))
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def load(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def test_the_json_files_are_those_the_code_writes() -> None:
    assert dashboards.main(["--check"]) == 0, "run python -m monitoring.dashboards"


def test_the_check_names_a_stale_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    assert dashboards.main(["--out", str(tmp_path)]) == 0
    (tmp_path / "queries.json").write_text("{}")
    assert dashboards.main(["--check", "--out", str(tmp_path)]) == 1
    assert "queries.json" in capsys.readouterr().err


def test_there_is_one_file_per_dashboard_each_with_its_own_uid() -> None:
    assert [path.stem for path in FILES] == sorted(dashboards.DASHBOARDS)
    uids = [load(path)["uid"] for path in FILES]
    assert len(set(uids)) == len(uids)


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.stem)
def test_every_panel_queries_prometheus_through_the_datasource_variable(path: Path) -> None:
    dashboard = load(path)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    found = dashboards.panels(dashboard)
    assert found
    for panel in found:
        assert panel["title"] and panel["datasource"] == DATASOURCE
        assert panel["targets"], f"{panel['title']} has no query"
        for target in panel["targets"]:
            assert target["expr"].strip() and target["datasource"] == DATASOURCE


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.stem)
def test_the_variables_a_query_uses_are_defined(path: Path) -> None:
    dashboard = load(path)
    defined = {v["name"] for v in dashboard["templating"]["list"]}
    for expr in dashboards.expressions(dashboard):
        for name in ("service", "query"):
            if f"${name}" in expr:
                assert name in defined, expr
