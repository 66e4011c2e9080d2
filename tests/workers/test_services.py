"""The evaluating services are factories (workers/deriver.py, matcher.py, trends.py): importing
one reads no setting and starts nothing; ``build_app(config)`` wires the app of any config."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import faust
import pytest

from situflow.settings import ServiceSettings
from workers import deriver, matcher, trends
from workers.settings import ServiceConfig

REPO = Path(__file__).parents[2]


def test_a_service_module_imports_without_any_setting() -> None:
    """Before, an import read the environment and exited without SITUFLOW_KEY_FIELDS."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SITUFLOW_", "KAFKA_"))}
    code = "import workers.deriver, workers.matcher, workers.trends, faust; print('imported')"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO,
                          env={**env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "imported"


@pytest.mark.parametrize(("module", "agent"), [(deriver, "situflow-deriver-cars-evaluate"),
                                               (matcher, "situflow-matcher-cars-evaluate"),
                                               (trends, "situflow-trends-cars-evaluate")])
def test_build_app_wires_one_evaluating_agent_per_config(module: ModuleType, agent: str,
                                                         tmp_path: Path) -> None:
    service = module.__name__.rsplit(".", 1)[1]
    config = ServiceConfig.from_settings(service, ServiceSettings(
        stream="cars", key_fields=("car_id",), data_dir=str(tmp_path)))
    app = module.build_app(config)
    assert isinstance(app, faust.App)
    assert app.conf.id == f"situflow-{service}-cars"
    assert [name.rsplit(".", 1)[-1] for name in app.agents] == [agent]
