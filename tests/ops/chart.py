"""Rendering the Helm chart for the tests: ``helm template`` of ``charts/situflow`` with values
files of ``ci/`` and ``--set`` pairs, as parsed documents, and what they hold (pods,
containers, environment)."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from tests.ops.conftest import REPO, tool

CHART = REPO / "charts" / "situflow"
CI = CHART / "ci"
SCHEMAS = REPO / "tests" / "ops" / "schemas"
#: Kinds kubernetes-validate has no schema for, with the schema written for them here.
CRD_SCHEMAS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor-monitoring-v1.json",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "prometheusrule-monitoring-v1.json",
}
#: Kinds whose objects hold a pod template, with the path to it.
POD_PATHS = {
    "StatefulSet": ("spec", "template", "spec"),
    "Deployment": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "Pod": ("spec",),
}


class RenderError(Exception):
    """``helm template`` refused the values; the message is helm's."""


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    """``helm ARGS`` (the test skips, or fails under CI, without helm)."""
    return subprocess.run([tool("helm"), *args], capture_output=True, text=True, check=False)


def template_text(*values: str, sets: tuple[str, ...] = (), release: str = "rel") -> str:
    """The manifests of ``helm template`` with values files (names in ci/, or paths) and
    ``--set`` pairs."""
    return _template_text(values, sets, release)


@functools.lru_cache(maxsize=64)
def _template_text(values: tuple[str, ...], sets: tuple[str, ...], release: str) -> str:
    return _helm_template(CHART, release, values, sets)


def _helm_template(chart: Path, release: str, values: tuple[str, ...], sets: tuple[str, ...],
                   *extra: str) -> str:
    """``helm template`` of ``chart`` with values files (names in ci/, or paths) and ``--set``
    pairs; raises :class:`RenderError` with helm's message."""
    args = ["template", release, str(chart), *extra]
    for name in values:
        args += ["--values", str(CI / name)]
    for pair in sets:
        args += ["--set", pair]
    result = helm(*args)
    if result.returncode:
        raise RenderError(result.stderr.strip())
    return result.stdout


def render(*values: str, sets: tuple[str, ...] = (), release: str = "rel") -> list[dict[str, Any]]:
    """The objects ``helm template`` renders, as dicts."""
    text = template_text(*values, sets=sets, release=release)
    return [doc for doc in yaml.safe_load_all(text) if doc]


def kinds(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def named(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [found] = [obj for obj in kinds(objects, kind) if obj["metadata"]["name"] == name]
    return found


def pod_specs(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each object's pod spec, with ``kind/name``."""
    for obj in objects:
        path = POD_PATHS.get(obj["kind"])
        if path is None:
            continue
        spec: Any = obj
        for key in path:
            spec = spec[key]
        yield f"{obj['kind']}/{obj['metadata']['name']}", spec


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec["containers"]]


def env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A container's environment by variable name."""
    return {item["name"]: item for item in container.get("env", [])}


def env_values(container: dict[str, Any]) -> dict[str, str]:
    """The literal values of a container's environment."""
    return {name: item["value"] for name, item in env(container).items() if "value" in item}


def crd_violations(obj: dict[str, Any]) -> list[str]:
    """What the schema of a custom resource kind (CRD_SCHEMAS) finds wrong with ``obj``."""
    schema = json.loads((SCHEMAS / CRD_SCHEMAS[obj["apiVersion"], obj["kind"]]).read_text())
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{'.'.join(map(str, error.absolute_path))}: {error.message}"
            for error in validator.iter_errors(obj)]


def notes(*values: str, sets: tuple[str, ...] = ()) -> str:
    """NOTES.txt as ``helm install`` prints it (``helm template`` leaves it out, and
    ``helm install --dry-run`` wants a cluster): rendered as the value of a template."""
    with tempfile.TemporaryDirectory() as directory:
        chart = Path(directory) / "situflow"
        shutil.copytree(CHART, chart)
        text = (chart / "templates" / "NOTES.txt").read_text()
        (chart / "templates" / "NOTES.txt").unlink()
        (chart / "templates" / "notes.yaml").write_text(
            '{{- define "notes" }}' + text + '{{- end }}\nnotes: {{ include "notes" . | quote }}\n')
        text = _helm_template(chart, "rel", values, sets, "--show-only", "templates/notes.yaml")
    rendered: str = yaml.safe_load(text)["notes"]
    return rendered
