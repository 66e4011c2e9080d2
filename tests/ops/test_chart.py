"""The Helm chart ``charts/situflow``: lint, schema-valid manifests, and one rendering per
behaviour with assertions on its fields (STYLE.md §15)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from situflow.settings import json_schema, variables
from tests.ops.chart import (
    CHART,
    CI,
    CRD_SCHEMAS,
    RenderError,
    containers,
    crd_violations,
    env,
    env_values,
    helm,
    kinds,
    named,
    notes,
    pod_specs,
    render,
    template_text,
)
from tests.ops.conftest import REPO

CI_FILES = sorted(path.name for path in CI.glob("*.yaml"))
SERVICES = ("kslack", "deriver", "matcher", "trends", "archiver")


def workload(objects, stream, service, kind="StatefulSet", release="rel-situflow"):
    return named(objects, kind, f"{release}-{stream}-{service}")


def container_of(statefulset):
    [container] = statefulset["spec"]["template"]["spec"]["containers"]
    return container


# -- lint and validation -------------------------------------------------------------------


@pytest.mark.parametrize("values", CI_FILES)
def test_helm_lint_strict_passes_with_every_ci_values_file(values: str) -> None:
    result = helm("lint", "--strict", str(CHART), "--values", str(CI / values))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("values", CI_FILES)
def test_every_rendered_object_passes_kubernetes_validate_strict_or_its_crd_schema(
        values: str) -> None:
    command = [str(Path(sys.executable).parent / "kubernetes-validate"), "--strict", "--quiet", "-"]
    result = subprocess.run(command, input=template_text(values), capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    # kubernetes-validate only warns about a kind it has no schema for: those must be the
    # custom resources checked below, never a built-in kind it silently skipped.
    skipped = [line for line in result.stdout.splitlines() if line.startswith("WARN")]
    assert all(any(kind in line for _, kind in CRD_SCHEMAS) for line in skipped), skipped
    for obj in render(values):
        if (obj["apiVersion"], obj["kind"]) in CRD_SCHEMAS:
            assert crd_violations(obj) == [], obj["metadata"]["name"]


def test_the_all_on_values_render_every_template_of_the_chart() -> None:
    rendered = {line.removeprefix("# Source: situflow/")
                for line in template_text("all-on-values.yaml").splitlines()
                if line.startswith("# Source: ")}
    templates = {str(path.relative_to(CHART)) for path in (CHART / "templates").rglob("*.yaml")}
    assert templates - rendered == set()


def test_the_crd_schemas_reject_an_unknown_field_and_a_bad_duration() -> None:
    [monitor] = kinds(render("all-on-values.yaml"), "ServiceMonitor")
    monitor["spec"]["endpoints"][0]["honourLabels"] = True
    monitor["spec"]["endpoints"][0]["interval"] = "30 seconds"
    assert len(crd_violations(monitor)) == 2


def test_the_generated_schema_part_and_readme_tables_are_up_to_date() -> None:
    result = subprocess.run([sys.executable, str(REPO / "charts" / "generate.py"), "--check"],
                            capture_output=True, text=True, check=False,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr


# -- names and labels ----------------------------------------------------------------------


def test_name_override_replaces_the_chart_name_in_resource_names_and_labels() -> None:
    objects = render(sets=("nameOverride=cep",))
    for obj in objects:
        assert "situflow" not in obj["metadata"]["name"], obj["metadata"]["name"]
        assert obj["metadata"]["labels"]["app.kubernetes.io/name"] == "cep"
    statefulset = named(objects, "StatefulSet", "rel-cep-events-kslack")
    assert statefulset["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == "cep"


def test_long_release_and_stream_names_keep_names_dns_labels_and_workloads_within_52() -> None:
    objects = render(release="a-long-release-name-of-a-platform-teams-deployment-x",
                     sets=("streams[0].name=factory.floor.temperature.sensors.hall.seven",
                           "streams[0].keyFields={machine}"))
    for obj in objects:
        assert len(obj["metadata"]["name"]) <= 63
    for statefulset in kinds(objects, "StatefulSet"):
        assert len(statefulset["metadata"]["name"]) <= 52


def test_workload_selectors_use_name_instance_component_and_stream_never_the_version() -> None:
    statefulset = workload(render(), "events", "matcher")
    assert statefulset["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "situflow",
        "app.kubernetes.io/instance": "rel",
        "app.kubernetes.io/component": "matcher",
        "situflow.io/stream": "events",
    }


# -- streams and services ------------------------------------------------------------------


def test_each_stream_gets_its_own_workloads_and_an_unpartitioned_one_no_trends() -> None:
    objects = render("unpartitioned-stream-values.yaml", sets=("archiver.enabled=true",))
    names = {obj["metadata"]["name"] for obj in kinds(objects, "StatefulSet")}
    assert names == {f"rel-situflow-cars-{service}" for service in SERVICES} | {
        f"rel-situflow-plant-sensors-{service}" for service in SERVICES if service != "trends"}
    services = {obj["metadata"]["name"] for obj in kinds(objects, "Service")}
    assert {f"{name}{suffix}" for name in names for suffix in ("", "-headless")} == services
    assert {obj["metadata"]["name"] for obj in kinds(objects, "PodDisruptionBudget")} == names


def test_each_container_runs_its_service_with_the_streams_settings() -> None:
    objects = render("unpartitioned-stream-values.yaml")
    cars = container_of(workload(objects, "cars", "kslack"))
    assert cars["args"] == ["serve", "kslack"]
    assert env_values(cars) | {
        "SITUFLOW_STREAM": "cars", "SITUFLOW_KEY_FIELDS": "car_id", "SITUFLOW_PARTITIONS": "8",
        "SITUFLOW_SLACK": "5"} == env_values(cars)
    sensors = env_values(container_of(workload(objects, "plant-sensors", "deriver")))
    assert sensors["SITUFLOW_STREAM"] == "plant.sensors"
    assert sensors["SITUFLOW_UNPARTITIONED"] == "1"
    assert sensors["SITUFLOW_TIME_UNIT"] == "0.001"
    assert sensors["SITUFLOW_SITUATIONS_TOPIC"] == "situations.sensors"
    assert sensors["SITUFLOW_BATCH_EVENTS"] == "4096"
    assert "SITUFLOW_KEY_FIELDS" not in sensors


def test_a_streams_settings_override_the_global_settings_for_that_stream_only() -> None:
    objects = render("unpartitioned-stream-values.yaml",
                     sets=("settings.batchEvents=100", "settings.onError=fail"))
    sensors = env_values(container_of(workload(objects, "plant-sensors", "kslack")))
    cars = env_values(container_of(workload(objects, "cars", "kslack")))
    assert (sensors["SITUFLOW_BATCH_EVENTS"], cars["SITUFLOW_BATCH_EVENTS"]) == ("4096", "100")
    assert sensors["SITUFLOW_ON_ERROR"] == cars["SITUFLOW_ON_ERROR"] == "fail"


def test_every_key_of_settings_becomes_its_own_variable_in_situflows_format(
        tmp_path: Path) -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    settings = schema["$defs"]["settings"]["properties"]
    samples = {"string": "x", "integer": 3600000, "number": 2.5, "boolean": True, "array": ["a", "b"]}
    values = {}
    for key, prop in settings.items():
        kind = prop["type"] if isinstance(prop["type"], str) else prop["type"][0]
        values[key] = prop["enum"][-1] if "enum" in prop else samples[kind]
    path = tmp_path / "every-setting.yaml"
    path.write_text(yaml.safe_dump({"settings": values}))
    container = container_of(workload(render(str(path)), "events", "deriver"))
    rendered = env_values(container)
    expected_text = {"x": "x", 3600000: "3600000", 2.5: "2.5", True: "1"}
    for key, prop in settings.items():
        value = values[key]
        text = ",".join(value) if isinstance(value, list) else expected_text.get(value, value)
        assert rendered[prop["x-env"]] == text, key


def test_every_variable_the_chart_sets_is_one_situflow_reads() -> None:
    known = {variable for variable, _ in variables()}
    for where, spec in pod_specs(render("all-on-values.yaml")):
        for container in containers(spec):
            ours = {name for name in env(container)
                    if name.startswith(("SITUFLOW_", "KAFKA_"))}
            assert ours - known == set(), where


def test_the_settings_schema_covers_every_setting_the_chart_does_not_set_itself() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())["$defs"]
    in_values = {prop["x-env"] for part in ("settings", "stream")
                 for prop in schema[part]["properties"].values() if "x-env" in prop}
    chart_set = {"SITUFLOW_DATA_DIR", "SITUFLOW_WEB_PORT", "SITUFLOW_WEB_BIND",
                 "SITUFLOW_WEB_ADVERTISE",
                 "SITUFLOW_REGISTRY", "SITUFLOW_QUERY_FILE", "SITUFLOW_QUERY_NAME",
                 "SITUFLOW_ARCHIVE_DIR", "SITUFLOW_DEVICE"}
    settings = {prop["x-env"] for name, prop in json_schema()["properties"].items()
                if name != "kafka" and not name.startswith("test_")}
    assert settings - chart_set == in_values


def test_every_service_container_serves_http_on_6066_and_announces_its_pod_address() -> None:
    for statefulset in kinds(render(), "StatefulSet"):
        container = container_of(statefulset)
        assert container["ports"] == [{"name": "http", "containerPort": 6066, "protocol": "TCP"}]
        variables_ = list(env(container))
        assert variables_[0] == "POD_IP"  # $(POD_IP) needs it defined first
        assert env(container)["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
        assert env_values(container) | {
            "SITUFLOW_WEB_BIND": "0.0.0.0", "SITUFLOW_WEB_PORT": "6066",
            "SITUFLOW_WEB_ADVERTISE": "http://$(POD_IP):6066", "SITUFLOW_REGISTRY": "1",
            "SITUFLOW_DATA_DIR": "/var/lib/situflow",
        } == env_values(container)


def test_probes_check_health_for_liveness_and_start_and_ready_for_readiness() -> None:
    container = container_of(workload(render(), "events", "deriver"))
    paths = {probe: (container[probe]["httpGet"]["path"], container[probe]["httpGet"]["port"])
             for probe in ("livenessProbe", "readinessProbe", "startupProbe")}
    assert paths == {"livenessProbe": ("/health", "http"), "readinessProbe": ("/ready", "http"),
                     "startupProbe": ("/health", "http")}
    startup = container["startupProbe"]
    # Changelog recovery of a large table takes minutes; liveness must not kill it meanwhile.
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 15 * 60


def test_state_lives_on_a_claim_per_pod_or_on_an_emptydir_without_persistence() -> None:
    statefulset = workload(render(), "events", "matcher")
    [claim] = statefulset["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert "helm.sh/chart" not in claim["metadata"]["labels"]  # immutable across upgrades
    mounts = {m["name"]: m["mountPath"] for m in container_of(statefulset)["volumeMounts"]}
    assert mounts == {"data": "/var/lib/situflow", "tmp": "/tmp"}
    ephemeral = workload(render(sets=("persistence.enabled=false",)), "events", "matcher")
    assert "volumeClaimTemplates" not in ephemeral["spec"]
    volumes = {v["name"]: v for v in ephemeral["spec"]["template"]["spec"]["volumes"]}
    assert volumes["data"] == {"name": "data", "emptyDir": {}}


def test_the_archiver_mounts_the_shared_archive_claim_and_writes_there() -> None:
    objects = render(sets=("archiver.enabled=true", "archive.existingClaim=shared"))
    statefulset = workload(objects, "events", "archiver")
    volumes = {v["name"]: v for v in statefulset["spec"]["template"]["spec"]["volumes"]}
    assert volumes["archive"]["persistentVolumeClaim"] == {"claimName": "shared"}
    container = container_of(statefulset)
    assert {"name": "archive", "mountPath": "/var/lib/situflow-archive"} in container["volumeMounts"]
    assert env_values(container)["SITUFLOW_ARCHIVE_DIR"] == "/var/lib/situflow-archive"
    own = workload(render(sets=("archiver.enabled=true",)), "events", "archiver")
    assert [c["metadata"]["name"] for c in own["spec"]["volumeClaimTemplates"]] == ["data", "archive"]


def test_autoscaling_adds_a_hpa_on_the_statefulset_and_leaves_replicas_to_it() -> None:
    objects = render(sets=("deriver.autoscaling.enabled=true", "deriver.autoscaling.maxReplicas=6"))
    hpa = named(objects, "HorizontalPodAutoscaler", "rel-situflow-events-deriver")
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "name": "rel-situflow-events-deriver"}
    assert hpa["spec"]["maxReplicas"] == 6
    assert "replicas" not in workload(objects, "events", "deriver")["spec"]
    assert workload(objects, "events", "matcher")["spec"]["replicas"] == 1


# -- security ------------------------------------------------------------------------------


@pytest.mark.parametrize("values", ["01-default-values.yaml", "all-on-values.yaml"])
def test_every_pod_and_container_runs_non_root_read_only_without_privileges(values: str) -> None:
    specs = list(pod_specs(render(values)))
    assert specs
    for where, spec in specs:
        pod = spec["securityContext"]
        assert (pod["runAsNonRoot"], pod["runAsUser"], pod["runAsGroup"], pod["fsGroup"]) == (
            True, 10001, 10001, 10001), where
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}, where
        if where.startswith(("StatefulSet/", "Pod/")):  # a Spark driver on k8s needs the API
            assert spec["automountServiceAccountToken"] is False, where
        for container in containers(spec):
            context = container["securityContext"]
            assert context["runAsNonRoot"] and context["readOnlyRootFilesystem"], where
            assert context["allowPrivilegeEscalation"] is False, where
            assert context["capabilities"]["drop"] == ["ALL"], where
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}, where
        volumes = {volume["name"]: volume for volume in spec["volumes"]}
        assert "emptyDir" in volumes["tmp"], where


@pytest.mark.parametrize("values", CI_FILES)
def test_no_rendered_manifest_holds_a_secret_value(values: str) -> None:
    objects = render(values)
    assert kinds(objects, "Secret") == []
    for where, spec in pod_specs(objects):
        for container in containers(spec):
            for name, item in env(container).items():
                if any(word in name for word in ("PASSWORD", "SECRET", "TOKEN")):
                    assert "value" not in item, f"{where}: {name} holds its value"


def test_sasl_credentials_come_from_the_existing_secret() -> None:
    container = container_of(workload(render("sasl-tls-values.yaml"), "events", "matcher"))
    variables_ = env(container)
    for name, key in (("KAFKA_SASL_USERNAME", "username"), ("KAFKA_SASL_PASSWORD", "password")):
        assert variables_[name]["valueFrom"] == {
            "secretKeyRef": {"name": "situflow-kafka-user", "key": key}}
    assert env_values(container) | {
        "KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
    } == env_values(container)


def test_tls_files_are_mounted_read_only_from_the_existing_secret() -> None:
    statefulset = workload(render("sasl-tls-values.yaml"), "events", "kslack")
    volumes = {v["name"]: v for v in statefulset["spec"]["template"]["spec"]["volumes"]}
    assert volumes["kafka-tls"]["secret"]["secretName"] == "situflow-kafka-tls"
    container = container_of(statefulset)
    assert {"name": "kafka-tls", "mountPath": "/etc/situflow/kafka-tls",
            "readOnly": True} in container["volumeMounts"]
    assert {name: value for name, value in env_values(container).items()
            if name.startswith("KAFKA_SSL_")} == {
        "KAFKA_SSL_CAFILE": "/etc/situflow/kafka-tls/ca.crt",
        "KAFKA_SSL_CERTFILE": "/etc/situflow/kafka-tls/tls.crt",
        "KAFKA_SSL_KEYFILE": "/etc/situflow/kafka-tls/tls.key",
    }


def test_ssl_without_a_tls_secret_verifies_the_brokers_with_the_system_cas() -> None:
    container = container_of(workload(render("external-kafka-values.yaml"), "events", "kslack"))
    assert env_values(container)["KAFKA_SECURITY_PROTOCOL"] == "SSL"
    assert not any(name.startswith("KAFKA_SSL_") for name in env(container))
    assert all(mount["name"] != "kafka-tls" for mount in container["volumeMounts"])


# -- placement -----------------------------------------------------------------------------


def test_igpu_placement_puts_only_the_chosen_services_on_gpu_nodes() -> None:
    objects = render("igpu-values.yaml")
    for service in ("deriver", "matcher"):
        statefulset = workload(objects, "events", service)
        pod = statefulset["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"intel.feature.node.kubernetes.io/gpu": "true"}
        assert pod["tolerations"][0]["key"] == "gpu.intel.com/i915"
        container = container_of(statefulset)
        assert container["resources"]["limits"] == {"gpu.intel.com/i915": 1}
        assert env_values(container)["SITUFLOW_DEVICE"] == "opencl"
        # The render group opens the device; the image carries pyopencl and the driver.
        assert pod["securityContext"]["supplementalGroups"] == [109]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert container["image"] == "registry.example.com/situflow-igpu:1.0"
    for service in ("kslack", "trends"):
        statefulset = workload(objects, "events", service)
        assert "nodeSelector" not in statefulset["spec"]["template"]["spec"]
        assert "supplementalGroups" not in statefulset["spec"]["template"]["spec"][
            "securityContext"]
        assert container_of(statefulset)["image"] != "registry.example.com/situflow-igpu:1.0"
        assert "SITUFLOW_DEVICE" not in env(container_of(statefulset))


def test_gpu_services_run_the_images_gpu_variant_unless_an_image_is_given() -> None:
    objects = render(sets=("devices.gpu.enabled=true", "image.tag=1.2.3"))
    assert container_of(workload(objects, "events", "deriver"))["image"].endswith(":1.2.3-gpu")
    assert container_of(workload(objects, "events", "kslack"))["image"].endswith(":1.2.3")


# -- monitoring and network ----------------------------------------------------------------


def test_the_service_monitor_scrapes_http_metrics_keeping_the_services_own_label() -> None:
    [monitor] = kinds(render(sets=("serviceMonitor.enabled=true",)), "ServiceMonitor")
    [endpoint] = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"], endpoint["interval"]) == ("http", "/metrics", "30s")
    assert endpoint["honorLabels"] is True
    assert {"sourceLabels": ["__meta_kubernetes_pod_label_app_kubernetes_io_component"],
            "targetLabel": "service", "action": "replace"} in endpoint["relabelings"]
    assert monitor["spec"]["selector"]["matchLabels"]["situflow.io/metrics"] == "true"


def test_the_prometheus_rule_holds_the_groups_of_the_alerts_file() -> None:
    [rule] = kinds(render(sets=("prometheusRule.enabled=true",)), "PrometheusRule")
    alerts = yaml.safe_load((CHART / "files" / "alerts.yaml").read_text())
    assert rule["spec"] == {"groups": alerts["groups"]}


def test_each_dashboard_is_a_config_map_with_the_sidecar_label() -> None:
    maps = kinds(render(sets=("dashboards.enabled=true",)), "ConfigMap")
    files = sorted((CHART / "files" / "dashboards").glob("*.json"))
    assert len(maps) == len(files)
    for config_map, path in zip(sorted(maps, key=lambda m: m["metadata"]["name"]), files,
                                strict=True):
        assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert json.loads(config_map["data"][path.name]) == json.loads(path.read_text())


def test_the_network_policy_opens_http_to_the_given_peers_and_egress_to_kafka_and_dns() -> None:
    [policy] = kinds(render("external-kafka-values.yaml"), "NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchExpressions"] == [{
        "key": "app.kubernetes.io/component", "operator": "In", "values": list(SERVICES)}]
    [ingress] = policy["spec"]["ingress"]
    assert ingress["ports"] == [{"port": "http", "protocol": "TCP"}]
    kafka, dns = policy["spec"]["egress"]
    assert kafka == {"to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}],
                     "ports": [{"port": 9094, "protocol": "TCP"}]}
    assert {port["protocol"] for port in dns["ports"]} == {"UDP", "TCP"}


def test_optional_integrations_are_off_by_default() -> None:
    present = {obj["kind"] for obj in render()}
    assert present.isdisjoint({"ServiceMonitor", "PrometheusRule", "ConfigMap", "NetworkPolicy",
                               "HorizontalPodAutoscaler"})
    assert not any(obj["metadata"]["name"].endswith("-archiver") for obj in render())


def test_the_helm_test_pod_lists_the_registry_with_the_kafka_settings() -> None:
    [pod] = kinds(render("sasl-tls-values.yaml"), "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    [container] = pod["spec"]["containers"]
    assert container["args"][:2] == ["query", "list"]
    assert env(container)["KAFKA_SASL_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == (
        "situflow-kafka-user")


def test_the_notes_name_the_topics_the_metrics_urls_and_the_query_commands() -> None:
    text = notes("unpartitioned-stream-values.yaml")
    for topic in ("cars.ordered", "cars.dlq", "situations.sensors", "plant.sensors.late",
                  "matches.<query>", "trends.<query>"):
        assert topic in text
    assert "http://rel-situflow-plant-sensors-matcher.default.svc:6066/metrics" in text
    assert "trends.default.svc" in text and "plant-sensors-trends" not in text
    assert "situflow query submit" in text and "situflow query list" in text


# -- the values schema ---------------------------------------------------------------------


@pytest.mark.parametrize(("sets", "message"), [
    (("kafkaa.bootstrapServers=x:9092",), "Additional property kafkaa is not allowed"),
    (("kafka.securityProtocol=TLS",), "kafka.securityProtocol must be one of"),
    (("settings.onError=ignore",), "settings.onError must be one of"),
    (("settings.noSuchSetting=1",), "Additional property noSuchSetting is not allowed"),
    (("devices.gpu.backend=cuda",), "devices.gpu.backend must be one of"),
    (("streams[0].name=cars", "streams[0].unpartitioned=true", "streams[0].keyFields={id}"),
     "streams.0"),
    (("kafka.securityProtocol=SASL_SSL",), "then"),
])
def test_the_values_schema_rejects_unknown_keys_bad_enums_and_contradictions(
        sets: tuple[str, ...], message: str) -> None:
    with pytest.raises(RenderError, match=message.replace(".", r"\.")):
        render(sets=sets)
