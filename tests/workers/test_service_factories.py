"""The K-slack and archiver services are factories: importing them reads and exits nothing, and
``build_app`` wires a Faust app from settings given as values (no broker is contacted)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from situflow.settings import ServiceSettings
from workers import archiver, kslack
from workers.settings import ServiceConfig

REPO = Path(__file__).resolve().parents[2]


def test_importing_a_service_needs_no_settings() -> None:
    # Without SITUFLOW_KEY_FIELDS K-slack used to exit at import.
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-c", "import workers.archiver, workers.kslack"], env=env,
                   cwd=REPO, check=True)


@pytest.mark.parametrize(("module", "inputs"), [
    (kslack, {"cars"}),
    (archiver, {"cars.ordered", "matches.q"}),
])
def test_build_app_wires_the_topics_of_its_settings(module: object, inputs: set[str],
                                                    tmp_path: Path) -> None:
    settings = ServiceSettings(stream="cars", key_fields=("car",), data_dir=str(tmp_path),
                               archive_dir=str(tmp_path / "archive"),
                               archive_topics=("matches.q",))
    name = module.__name__.rsplit(".", 1)[1]
    app = module.build_app(ServiceConfig.from_settings(name, settings))  # type: ignore[attr-defined]
    topics = {topic for agent in app.agents.values() for topic in agent.channel.topics}
    assert inputs | {f"{app.conf.id}-ticks"} == topics
