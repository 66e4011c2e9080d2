"""The chart's jobs: topic bootstrap and query registration hooks, the index-build CronJob, the
offline and backfill runs, the Spark master and the archive (templates/job-*.yaml,
cronjob-*.yaml, configmap-queries.yaml, configmap-spark.yaml, rbac-spark.yaml).

Each test renders one set of values with ``helm template`` and asserts on fields; then a
rendering with every job on goes through ``kubernetes-validate --strict``, the schema refuses
what the jobs cannot run, and the rendered hooks run twice against an embedded broker.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from situflow.cli import main
from situflow.settings import ENV_BOOTSTRAP
from tests.ops.conftest import REPO, tool
from topics.registry import ENV_TOPIC
from workers.broker import EmbeddedBroker

CHART = REPO / "charts" / "situflow"
CI = CHART / "ci"
SPARK_VALUES = CI / "spark-jobs-values.yaml"
ALL_ON = CI / "all-on-values.yaml"

STREAMS = {"streams": [
    {"name": "cars", "keyFields": ["car_id"], "partitions": 6},
    {"name": "plant.sensors", "unpartitioned": True, "timeUnit": 0.001,
     "situationsTopic": "situations.plant"},
]}
EXAMPLES = REPO / "situflow" / "examples"
DRIVERS = "FROM cars PARTITION BY car_id\nDEFINE A AS speed > 70\nPATTERN A before A\n"
RISING = "PATTERN SEQ(Stock a, Stock b) WHERE [symbol] WITHIN 1 hour\n"
QUERIES = {"queries": [
    {"name": "aggressive_drivers", "stream": "cars", "text": DRIVERS},
    {"name": "overheating", "stream": "plant.sensors", "text": "FROM plant\n"},
]}


def helm_template(*values: dict[str, Any] | Path, check: bool = True
                  ) -> subprocess.CompletedProcess[str]:
    """``helm template situflow charts/situflow`` with these values files or objects."""
    args = [tool("helm"), "template", "situflow", str(CHART), "--namespace", "cep"]
    for given in values:
        args += ["--values", str(given) if isinstance(given, Path) else "-"]
    objects = [v for v in values if not isinstance(v, Path)]
    assert len(objects) <= 1, "helm reads one values document from standard input"
    done = subprocess.run(args, input=yaml.safe_dump(objects[0]) if objects else None,
                          capture_output=True, text=True, check=False)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def render(*values: dict[str, Any] | Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(helm_template(*values).stdout) if doc]


def find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def pod(workload: dict[str, Any]) -> dict[str, Any]:
    spec = workload["spec"]
    template = spec["jobTemplate"]["spec"]["template"] if "jobTemplate" in spec \
        else spec["template"]
    return dict(template["spec"])


def steps(workload: dict[str, Any]) -> list[dict[str, Any]]:
    """The containers of a job's pod in the order they run (init containers first)."""
    spec = pod(workload)
    return [*spec.get("initContainers", []), *spec["containers"]]


def hooks(resource: dict[str, Any]) -> dict[str, str]:
    annotations = resource["metadata"].get("annotations", {})
    return {k: v for k, v in annotations.items() if k.startswith("helm.sh/hook")}


def job_pods(docs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(d["metadata"]["name"], pod(d)) for d in docs if d["kind"] in ("Job", "CronJob")]


def test_the_topic_bootstrap_is_a_pre_install_and_pre_upgrade_hook_replaced_at_each_run() -> None:
    job = find(render(STREAMS), "Job", "situflow-topics")
    assert hooks(job) == {
        "helm.sh/hook": "pre-install,pre-upgrade",
        "helm.sh/hook-weight": "0",
        "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded",
    }


def test_the_topic_bootstrap_creates_each_stream_with_its_partitions_one_after_another() -> None:
    docs = render(STREAMS)
    cars, sensors = (step["args"] for step in steps(find(docs, "Job", "situflow-topics")))
    assert cars == ["topics", "create", "--stream", "cars", "--partitions", "6",
                    "--situations", "situations", "--time-field", "ts",
                    "--replication-factor", "1", "--wait", "120"]
    assert sensors[:8] == ["topics", "create", "--stream", "plant.sensors", "--partitions", "4",
                           "--situations", "situations.plant"]
    assert sensors[-1] == "--unpartitioned"


def test_two_streams_sharing_a_situations_topic_fail_the_render() -> None:
    """The matcher reads a stream's situations with its ordered events: one topic each."""
    done = helm_template({"streams": [{"name": "cars", "keyFields": ["car_id"]},
                                      {"name": "bikes", "keyFields": ["bike_id"]}]},
                         check=False)
    assert done.returncode != 0
    assert ('streams: "cars" and "bikes" share the situations topic "situations": give each '
            'stream its own situationsTopic') in done.stderr


def test_the_topic_bootstrap_creates_the_situations_topic_the_services_use() -> None:
    docs = render(ALL_ON)
    (job,) = [d for d in docs if d["kind"] == "Job" and d["metadata"]["name"].endswith("-topics")]
    created = {step["args"][3]: step["args"][step["args"].index("--situations") + 1]
               for step in steps(job)}
    used = {(env["SITUFLOW_STREAM"], env["SITUFLOW_SITUATIONS_TOPIC"])
            for w in docs if w["kind"] == "StatefulSet"
            for env in [{e["name"]: e.get("value") for e in
                         w["spec"]["template"]["spec"]["containers"][0]["env"]}]
            if "SITUFLOW_SITUATIONS_TOPIC" in env}
    assert created == {"cars": "situations", "plant.sensors": "situations.sensors"}
    assert used <= set(created.items())


def test_the_topic_bootstrap_runs_before_the_release_service_account_exists() -> None:
    assert "serviceAccountName" not in pod(find(render(STREAMS), "Job", "situflow-topics"))


def test_each_query_is_a_file_of_the_queries_config_map() -> None:
    docs = render({**STREAMS, **QUERIES})
    assert find(docs, "ConfigMap", "situflow-queries")["data"] == {
        "aggressive_drivers.query": DRIVERS, "overheating.query": "FROM plant\n"}


def test_the_registration_submits_each_query_against_its_stream_after_install_and_upgrade() -> None:
    """`query submit` is idempotent (an unchanged query writes nothing:
    tests/integration/test_registry.py), so the hook re-runs it at every upgrade."""
    job = find(render({**STREAMS, **QUERIES}), "Job", "situflow-queries")
    assert hooks(job)["helm.sh/hook"] == "post-install,post-upgrade"
    assert hooks(job)["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
    drivers, overheating = (step["args"] for step in steps(job))
    assert drivers == ["query", "submit", "/etc/situflow/queries/aggressive_drivers.query",
                       "--name", "aggressive_drivers", "--stream", "cars", "--time-unit", "1",
                       "--wait", "120", "--key-fields", "car_id"]
    assert overheating[overheating.index("--time-unit") + 1] == "0.001"
    assert overheating[-1] == "--unpartitioned"
    assert {"name": "queries", "mountPath": "/etc/situflow/queries", "readOnly": True} in \
        steps(job)[0]["volumeMounts"]


def test_a_query_with_backfill_from_hands_off_from_the_archive() -> None:
    values = {**STREAMS, "queries": [
        {"name": "rising", "stream": "cars", "text": RISING, "backfillFrom": 1700000000}],
        "archive": {"uri": "s3://bucket/archive", "existingSecret": "archive-credentials"}}
    (step,) = steps(find(render(values), "Job", "situflow-queries"))
    assert step["args"][-4:] == ["--backfill-from", "1700000000", "--archive",
                                 "s3://bucket/archive"]
    assert step["envFrom"] == [{"secretRef": {"name": "archive-credentials"}}]


def test_without_queries_there_is_no_registration_and_no_query_files() -> None:
    names = {(d["kind"], d["metadata"]["name"]) for d in render(STREAMS)}
    assert not names & {("Job", "situflow-queries"), ("ConfigMap", "situflow-queries")}


def test_a_query_over_an_unknown_stream_fails_the_render_naming_it() -> None:
    done = helm_template({**STREAMS, "queries": [{"name": "q", "stream": "bikes", "text": "x"}]},
                         check=False)
    assert done.returncode != 0
    assert 'queries[0] (q) names the stream "bikes", which is not in streams' in done.stderr


def test_the_index_build_is_a_cron_job_on_its_schedule_with_the_spark_image() -> None:
    docs = render(SPARK_VALUES)
    cron = find(docs, "CronJob", "situflow-index-build")
    assert (cron["spec"]["schedule"], cron["spec"]["concurrencyPolicy"]) == ("*/30 * * * *",
                                                                            "Forbid")
    (cars,) = steps(cron)
    assert cars["image"] == "ghcr.io/situflow/situflow:0.1.0-spark"
    assert cars["args"] == ["index", "build", "--archive", "/var/lib/situflow-archive",
                            "--topic", "cars.ordered", "--attributes", "speed,accel",
                            "--master", "spark://spark-master:7077"]


def test_every_spark_command_takes_the_configured_master_and_local_is_the_default() -> None:
    values = yaml.safe_load(SPARK_VALUES.read_text())
    del values["spark"]["master"]
    docs = render(values)
    offline = find(docs, "Job", "situflow-offline-drivers-2024")
    for workload in (offline, find(docs, "CronJob", "situflow-index-build")):
        args = steps(workload)[-1]["args"]
        assert args[args.index("--master") + 1] == "local[*]"
    assert steps(offline)[0]["args"][:2] == ["offline",
                                            "/etc/situflow/queries/aggressive_drivers.query"]
    args = steps(offline)[-1]["args"]
    assert args[args.index("--driver-rows") + 1] == "0", "a run that names it always uses Spark"


def test_on_a_kubernetes_master_an_offline_run_goes_through_spark_submit_in_client_mode() -> None:
    master = "k8s://https://kubernetes.default.svc"
    docs = render(SPARK_VALUES, {"spark": {"master": master}})
    (step,) = steps(find(docs, "Job", "situflow-offline-drivers-2024"))
    assert step["command"] == ["spark-submit"]
    assert step["args"][:7] == ["--master", master, "--deploy-mode", "client", "--conf",
                                "spark.driver.host=$(POD_IP)",
                                "/opt/venv/lib/python3.11/site-packages/batch/submit.py"]
    conf = find(docs, "ConfigMap", "situflow-spark")["data"]["spark-defaults.conf"]
    assert "spark.kubernetes.container.image ghcr.io/situflow/situflow:0.1.0-spark" in conf
    role = find(docs, "Role", "situflow-spark")
    assert "pods" in role["rules"][0]["resources"]
    assert find(docs, "RoleBinding", "situflow-spark")["subjects"][0]["namespace"] == "cep"


def test_spark_writes_only_under_the_tmp_empty_dir() -> None:
    docs = render(SPARK_VALUES)
    conf = find(docs, "ConfigMap", "situflow-spark")["data"]["spark-defaults.conf"]
    assert {"spark.local.dir /tmp/spark-local", "spark.jars.ivy /tmp/ivy",
            "spark.sql.warehouse.dir /tmp/spark-warehouse"} <= set(conf.splitlines())
    (step,) = steps(find(docs, "CronJob", "situflow-index-build"))
    env = {e["name"]: e.get("value") for e in step["env"]}
    assert env["SPARK_CONF_DIR"] == "/etc/situflow/spark"


def test_a_file_archive_is_mounted_from_an_existing_claim() -> None:
    docs = render(SPARK_VALUES)
    spec = pod(find(docs, "CronJob", "situflow-index-build"))
    assert {"name": "archive", "persistentVolumeClaim": {"claimName": "situflow-archive"}} in \
        spec["volumes"]
    assert {"name": "archive", "mountPath": "/var/lib/situflow-archive"} in \
        spec["containers"][0]["volumeMounts"]


def test_a_backfill_run_publishes_with_the_runtime_image_and_kafka() -> None:
    docs = render(SPARK_VALUES)
    (step,) = steps(find(docs, "Job", "situflow-backfill-drivers-history"))
    assert step["image"] == "ghcr.io/situflow/situflow:0.1.0"
    assert step["args"] == ["backfill", "/etc/situflow/queries/aggressive_drivers.query",
                            "--archive", "/var/lib/situflow-archive", "--stream", "cars",
                            "--name", "aggressive_drivers", "--from", "0", "--to", "86400"]
    assert "KAFKA_BOOTSTRAP_SERVERS" in {e["name"] for e in step["env"]}


def test_every_job_pod_runs_as_the_services_do() -> None:
    """Non-root, read-only root file system, no privilege escalation, no capabilities, and
    /tmp an emptyDir: the security context of the services' values."""
    docs = render(ALL_ON)
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    pods = job_pods(docs)
    assert {name.removeprefix("situflow-cep-") for name, _ in pods} == {
        "topics", "queries", "index-build", "offline-drivers-2024", "offline-hard-braking",
        "backfill-drivers-history"}
    for name, spec in pods:
        assert spec["securityContext"] == values["podSecurityContext"], name
        assert {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}} in spec["volumes"], name
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            assert container["securityContext"] == values["securityContext"], name
            assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"], name
    assert values["securityContext"]["readOnlyRootFilesystem"] is True
    assert values["podSecurityContext"]["runAsNonRoot"] is True


def test_no_secret_value_is_rendered_into_a_job() -> None:
    """Credentials come from existing Secrets by reference only."""
    rendered = helm_template(ALL_ON).stdout
    assert "kind: Secret\n" not in rendered
    for _, spec in job_pods(render(ALL_ON)):
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            for env in container.get("env", []):
                assert "PASSWORD" not in env["name"] or "valueFrom" in env, env


def test_a_long_release_name_keeps_job_names_whole_and_a_cron_job_within_52() -> None:
    """A CronJob's Jobs append 11 characters to its name, and a name holds 63."""
    release = "a-long-release-name-of-a-platform-teams-deployment-x"
    done = subprocess.run([tool("helm"), "template", release, str(CHART), "--values",
                           str(ALL_ON)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    names: dict[str, list[str]] = {}
    for doc in docs:
        names.setdefault(doc["kind"], []).append(doc["metadata"]["name"])
    assert all(len(name) <= 63 for kind in names for name in names[kind])
    (cron,) = names["CronJob"]
    assert len(cron) <= 52 and cron.endswith("-index-build")
    for suffix in ("-topics", "-queries", "-offline-drivers-2024", "-backfill-drivers-history"):
        assert [name for name in names["Job"] if name.endswith(suffix)], suffix


def test_the_rendering_with_every_job_on_passes_kubernetes_validate_strict(tmp_path: Path) -> None:
    validator = Path(sys.executable).with_name("kubernetes-validate")  # the dev extra's
    manifest = tmp_path / "jobs.yaml"
    docs = render(ALL_ON)
    jobs_only = [d for d in docs if d["kind"] in ("Job", "CronJob", "ConfigMap", "Role",
                                                   "RoleBinding")]
    manifest.write_text(yaml.safe_dump_all(jobs_only))
    done = subprocess.run([str(validator), "--strict", "--quiet", str(manifest)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(("values", "complaint"), [
    ({"queries": [{"name": "q", "stream": "cars", "text": "x", "file": "q.tps"}]}, "file"),
    ({"queries": [{"name": "bad name", "stream": "cars", "text": "x"}]}, "name"),
    ({"jobs": {"indexBuild": {"concurrencyPolicy": "Sometimes"}}}, "concurrencyPolicy"),
    ({"spark": {"master": "mesos://m:5050"}}, "master"),
    ({"archive": {"password": "hunter2"}}, "password"),
])
def test_the_schema_refuses_what_the_jobs_cannot_run(values: dict[str, Any], complaint: str) -> None:
    done = helm_template({**STREAMS, **values}, check=False)
    assert done.returncode != 0
    assert complaint in done.stderr


@pytest.fixture(scope="module")
def broker() -> Iterator[str]:
    with EmbeddedBroker() as running:
        yield running.bootstrap_servers


@pytest.mark.integration
def test_the_rendered_hooks_run_twice_against_a_broker_change_nothing_the_second_time(
    broker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    """What an upgrade that changes nothing does: each step of the topic bootstrap and of the
    registration, as rendered, run through the CLI a second time leaves everything as it was."""
    prefix = f"ops-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv(ENV_BOOTSTRAP, broker)
    monkeypatch.setenv(ENV_TOPIC, f"{prefix}.queries")
    values = {"streams": [
        {"name": f"{prefix}.cars", "keyFields": ["car_id"], "partitions": 2,
         "situationsTopic": f"{prefix}.situations"},
        {"name": f"{prefix}.stocks", "keyFields": ["symbol"], "partitions": 1,
         "situationsTopic": f"{prefix}.situations.stocks"}],
        "queries": [
            {"name": f"{prefix}.drivers", "stream": f"{prefix}.cars",
             "text": (EXAMPLES / "aggressive_drivers.tps").read_text()},
            {"name": f"{prefix}.rising", "stream": f"{prefix}.stocks",
             "text": (EXAMPLES / "rising_stocks.sase").read_text()}]}
    docs = render(values)
    for name, text in find(docs, "ConfigMap", "situflow-queries")["data"].items():
        (tmp_path / name).write_text(text)
    commands = [[arg.replace("/etc/situflow/queries", str(tmp_path)) for arg in step["args"]]
                for job in ("situflow-topics", "situflow-queries")
                for step in steps(find(docs, "Job", job))]

    def run_all() -> list[str]:
        for command in commands:
            assert main(command) == 0, capsys.readouterr().err
        return [line.split()[0] for line in capsys.readouterr().out.splitlines()]

    first, again = run_all(), run_all()
    assert first.count("created") >= 8 and first[-2:] == ["registered", "registered"]
    assert set(again[:-2]) == {"exists"} and again[-2:] == ["unchanged", "unchanged"]
