"""The plain manifests of ``k8s/``: rendered from the chart and current (``k8s/render.py
--check``), and each overlay built by ``kubectl kustomize`` passes ``kubernetes-validate
--strict`` with what it promises (namespace, replicas, resources, image).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ops.conftest import REPO, tool

K8S = REPO / "k8s"
VALIDATOR = Path(sys.executable).with_name("kubernetes-validate")  # the dev extra's


def render_script(*args: str) -> subprocess.CompletedProcess[str]:
    tool("helm")  # skips (fails under CI) without it, as the script would
    return subprocess.run([sys.executable, str(K8S / "render.py"), *args],
                          capture_output=True, text=True, check=False)


def build(overlay: str) -> str:
    done = subprocess.run([tool("kubectl"), "kustomize", str(K8S / "overlays" / overlay)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def resources(manifest: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(manifest) if doc]


def test_the_committed_base_is_what_the_chart_renders() -> None:
    done = render_script("--check")
    assert done.returncode == 0, done.stderr


def test_the_check_names_each_stale_missing_or_extra_file_and_changes_nothing(
    tmp_path: Path
) -> None:
    base = tmp_path / "base"
    assert render_script("--base", str(base)).returncode == 0
    (base / "serviceaccount-situflow.yaml").write_text("# edited by hand\n")
    (base / "kustomization.yaml").unlink()
    (base / "configmap-old.yaml").write_text("# left over\n")
    done = render_script("--check", "--base", str(base))
    assert done.returncode == 1
    assert done.stderr == (f"{base} is stale (configmap-old.yaml, kustomization.yaml, "
                           "serviceaccount-situflow.yaml): run python k8s/render.py\n")
    assert (base / "serviceaccount-situflow.yaml").read_text() == "# edited by hand\n"


def test_hooks_become_plain_jobs_and_helm_manages_nothing() -> None:
    base = (K8S / "base").glob("*.yaml")
    docs = [doc for path in base for doc in yaml.safe_load_all(path.read_text()) if doc]
    jobs = [d for d in docs if d["kind"] == "Job"]
    assert [job["metadata"]["name"] for job in jobs] == ["situflow-topics"]
    assert "annotations" not in jobs[0]["metadata"]
    text = "\n".join(path.read_text() for path in (K8S / "base").glob("*.yaml"))
    assert "helm.sh/hook" not in text and "managed-by: Helm" not in text


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_an_overlay_builds_and_passes_kubernetes_validate_strict(
    overlay: str, tmp_path: Path
) -> None:
    manifest = tmp_path / f"{overlay}.yaml"
    manifest.write_text(build(overlay))
    done = subprocess.run([str(VALIDATOR), "--strict", "--quiet", str(manifest)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(("overlay", "namespace", "replicas", "memory_limit"), [
    ("dev", "situflow-dev", 1, "1Gi"),
    ("prod", "situflow", 2, "4Gi"),
])
def test_an_overlay_sets_its_namespace_replicas_resources_and_image(
    overlay: str, namespace: str, replicas: int, memory_limit: str
) -> None:
    docs = resources(build(overlay))
    workloads = [d for d in docs if d["kind"] == "StatefulSet"]
    assert {d["metadata"]["name"] for d in workloads} == {
        f"situflow-events-{service}" for service in ("kslack", "deriver", "matcher", "trends")}
    assert {d["metadata"]["namespace"] for d in docs} == {namespace}
    for workload in workloads:
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        assert workload["spec"]["replicas"] == replicas
        assert container["resources"]["limits"]["memory"] == memory_limit
        assert container["image"] == "ghcr.io/situflow/situflow:0.1.0"


def test_prod_replicates_the_topics_it_creates_three_times() -> None:
    (job,) = [d for d in resources(build("prod")) if d["kind"] == "Job"]
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--replication-factor") + 1] == "3"


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_the_topics_job_alone_carries_the_label_that_applies_it_first(overlay: str) -> None:
    """k8s/README.md applies it first by this label, before the services can declare topics."""
    labelled = [(d["kind"], d["metadata"]["name"]) for d in resources(build(overlay))
                if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "topics"]
    assert labelled == [("Job", "situflow-topics")]
