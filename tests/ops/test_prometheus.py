"""A real Prometheus against a running pipeline (issue 15's acceptance): the chart's scrape
settings and rules, rendered for local targets, make every dashboard panel return data, and
malformed input makes the dead-letter alert fire.

The pipeline (:class:`workers.up.Pipeline`, as ``situflow up`` runs it) is an unpartitioned
car stream with a TPStream query and the archiver: K-slack, deriver, matcher and archiver, so
that the mergers' series exist too (the trends service exports nothing the others do not).
Debian's ``prometheus`` runs on loopback with a temporary storage directory; its scrape job
is the chart's ServiceMonitor endpoint (path, ``honorLabels``) with one static target per
service carrying the ``service`` label, as the ServiceMonitor's relabeling gives it; its rules
are the chart's PrometheusRule groups (or ``files/alerts.yaml``, which the chart includes
verbatim, while the chart is not there). Scrapes and rule evaluations run every second.
Debian's ``prometheus-pushgateway`` takes what ``situflow backfill`` (run over the pipeline's
archive) pushes for the offline-jobs panels, and is scraped too.

Specified: every expression of every dashboard (``$service`` and ``$query`` as "All",
``$__rate_interval`` as one minute) returns data through ``/api/v1/query``; producing
malformed messages puts ``SituflowDeadLetters`` in ``/api/v1/alerts``; every metric a dashboard
or a rule names is among the scraped series (``up`` is Prometheus' own); every service's
``/ready`` answers 200.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiokafka import AIOKafkaProducer

from monitoring import dashboards
from situflow.datagen.cars import car_columns
from tests.ops.conftest import REPO, tool
from topics.catalog import StreamSpec
from workers.broker import free_port
from workers.up import Pipeline

pytestmark = pytest.mark.integration

CHART = REPO / "charts/situflow"
ALERTS = CHART / "files/alerts.yaml"
QUERY = REPO / "situflow/examples/aggressive_drivers.tps"
EVENTS, CARS, SEED, SLACK = 10_000, 100, 9, 5
MALFORMED = 5
#: Substitutions of the dashboards' template variables (Grafana's "All" is ``.*``).
VARIABLES = {"$__rate_interval": "1m", "$service": ".*", "$query": ".*"}
#: PromQL words that are no metric names.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
            "and", "or", "unless", "inf", "nan"}


@dataclass
class Monitored:
    """The running pipeline and the Prometheus that scrapes it."""

    pipeline: Pipeline
    url: str
    rules: list[dict[str, Any]]

    def get(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return list(self.get("/api/v1/query", query=expr)["result"])


def chart_settings(workdir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ServiceMonitor's endpoint and the PrometheusRule's groups the chart renders; while
    the chart is not there, the contract's endpoint and ``files/alerts.yaml``."""
    endpoint = {"port": "http", "path": "/metrics", "honorLabels": True}
    if not (CHART / "Chart.yaml").exists():
        return endpoint, yaml.safe_load(ALERTS.read_text())["groups"]
    rendered = subprocess.run(
        [tool("helm"), "template", "situflow", str(CHART), "--set", "serviceMonitor.enabled=true",
         "--set", "prometheusRule.enabled=true"], capture_output=True, text=True, check=True,
        cwd=workdir).stdout
    docs = {doc["kind"]: doc for doc in yaml.safe_load_all(rendered) if doc}
    monitor = (docs.get("ServiceMonitor") or docs["PodMonitor"])["spec"]
    endpoints = monitor.get("endpoints") or monitor["podMetricsEndpoints"]
    return endpoints[0], docs["PrometheusRule"]["spec"]["groups"]


def prometheus_config(pipeline: Pipeline, endpoint: dict[str, Any], pushgateway: int
                      ) -> dict[str, Any]:
    """The scrape job of the chart's endpoint, with the pipeline's services as static targets
    (each with its ``service`` label), and the Pushgateway's (keeping the pushed ``job``), every
    second."""
    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": ["rules.yaml"],
        "scrape_configs": [{
            "job_name": "situflow",
            "metrics_path": endpoint.get("path", "/metrics"),
            "honor_labels": bool(endpoint.get("honorLabels", False)),
            "static_configs": [{"targets": [f"127.0.0.1:{service.web_port}"],
                                "labels": {"service": service.kind}}
                               for service in pipeline.services.values()],
        }, {
            "job_name": "pushgateway",
            "honor_labels": True,
            "static_configs": [{"targets": [f"127.0.0.1:{pushgateway}"]}],
        }],
    }


def start(command: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=log.parent)


def backfill(pipeline: Pipeline, pushgateway: int) -> None:
    """``situflow backfill`` of the query over the pipeline's archive, pushing its metrics."""
    assert pipeline.kafka is not None and pipeline.work_dir is not None
    env = {**os.environ, **pipeline.kafka.to_env(), "PYTHONPATH": str(REPO),
           "SITUFLOW_PUSHGATEWAY_URL": f"http://127.0.0.1:{pushgateway}"}
    done = subprocess.run([sys.executable, "-m", "situflow.cli", "backfill", str(QUERY),
                           "--archive", str(pipeline.work_dir / "archive"),
                           "--stream", pipeline.stream.name, "--name", "drivers-backfill"],
                          env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def car_messages() -> list[tuple[bytes, bytes]]:
    """The car stream in time order, then events far behind it (late for K-slack)."""
    columns = car_columns(EVENTS, CARS, SEED)
    names = list(columns)
    rows = [dict(zip(names, row, strict=True))
            for row in zip(*(columns[n].tolist() for n in names), strict=True)]
    rows += [{**rows[i], "ts": 0} for i in range(3)]
    return [(b"", json.dumps(row).encode()) for row in rows]


def produce(pipeline: Pipeline, messages: list[tuple[bytes, bytes]]) -> None:
    async def send() -> None:
        assert pipeline.kafka is not None
        async with AIOKafkaProducer(**pipeline.kafka.client_kwargs(), linger_ms=5) as producer:
            await asyncio.gather(*[await producer.send(pipeline.stream.name, value, key=key)
                                   for key, value in messages])

    asyncio.run(send())


def wait_for(condition: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except (OSError, AssertionError):
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.5)


def scraped_total(monitored: Monitored, metric: str, service: str) -> float:
    result = monitored.query(f'sum({metric}{{service="{service}"}})')
    return float(result[0]["value"][1]) if result else -1.0


@pytest.fixture(scope="module")
def monitored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Monitored]:
    """The pipeline, with the stream and malformed messages produced, scraped by Prometheus."""
    workdir = tmp_path_factory.mktemp("prometheus")
    prometheus, pushgateway = tool("prometheus"), tool("prometheus-pushgateway")
    endpoint, rules = chart_settings(workdir)
    stream = StreamSpec(f"mon-{time.time_ns()}.cars", partitions=2, unpartitioned=True)
    with Pipeline(stream, QUERY, slack=SLACK, idle_timeout=2.0, work_dir=workdir / "pipeline",
                  archive=True, extra_env={"SITUFLOW_ARCHIVE_SEGMENT_SECONDS": "2"},
                  name="drivers") as pipeline:
        port, gateway_port = free_port(), free_port()
        (workdir / "rules.yaml").write_text(yaml.safe_dump({"groups": rules}))
        (workdir / "prometheus.yml").write_text(
            yaml.safe_dump(prometheus_config(pipeline, endpoint, gateway_port)))
        processes = []
        try:
            processes.append(start([pushgateway, f"--web.listen-address=127.0.0.1:{gateway_port}",
                                    "--log.level=warn"], workdir / "pushgateway.log"))
            processes.append(start([prometheus, f"--config.file={workdir / 'prometheus.yml'}",
                                    f"--storage.tsdb.path={workdir / 'data'}",
                                    f"--web.listen-address=127.0.0.1:{port}",
                                    "--log.level=warn"], workdir / "prometheus.log"))
            monitored = Monitored(pipeline, f"http://127.0.0.1:{port}", rules)
            wait_for(lambda: len(monitored.query("up == 1")) == len(pipeline.services) + 1, 30,
                     "Prometheus to scrape every service and the Pushgateway")
            # A dead letter must follow a scrape of the counter at zero to be an increase.
            wait_for(lambda: scraped_total(monitored, "situflow_dlq_messages_total",
                                           "kslack") == 0, 10, "the DLQ counter at zero")
            produce(pipeline, car_messages())
            produce(pipeline, [(b"", b"{not json %d" % i) for i in range(MALFORMED)])
            wait_for(lambda: scraped_total(monitored, "situflow_events_out_total",
                                           "matcher") > 0, 60, "the matcher's first matches")
            wait_for(lambda: scraped_total(monitored, "situflow_archive_segments_total",
                                           "archiver") > 0, 30, "the first archive segment")
            backfill(pipeline, gateway_port)
            wait_for(lambda: monitored.query('situflow_job_succeeded{command="backfill"} == 1'),
                     10, "the backfill's pushed metrics")
            yield monitored
        finally:
            for process in processes:
                process.terminate()
                process.wait(10)


def metric_names(expr: str) -> set[str]:
    """The metric names of a PromQL expression: what is left once strings, label matchers,
    ranges, label lists and function names are taken out."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", expr)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    names = re.findall(r"\b([a-zA-Z_:][\w:]*)\b(?!\s*\()", expr)
    return {name for name in names if name.lower() not in KEYWORDS}


def runnable(expr: str) -> str:
    """A dashboard expression as Prometheus takes it: the variables substituted, a variable's
    ``label_values(EXPR, LABEL)`` as ``EXPR``."""
    for variable, value in VARIABLES.items():
        expr = expr.replace(variable, value)
    values = re.fullmatch(r"label_values\((.*),\s*\w+\)", expr)
    return values.group(1) if values else expr


def all_expressions() -> list[tuple[str, str]]:
    """(dashboard, expression) of every panel and variable."""
    return [(name, expr) for name in dashboards.DASHBOARDS
            for expr in dashboards.expressions(json.loads(dashboards.render(name)))]


def rule_expressions(monitored: Monitored) -> list[str]:
    return [rule["expr"] for group in monitored.rules for rule in group["rules"]]


def test_every_dashboard_query_returns_data(monitored: Monitored) -> None:
    def empty() -> list[str]:
        return [f"{name}: {expr}" for name, expr in all_expressions()
                if not monitored.query(runnable(expr))]

    missing = empty()
    if missing:  # rates need two scrapes after the last series appeared
        time.sleep(3)
        missing = empty()
    assert missing == []


def test_malformed_messages_fire_the_dead_letter_alert(monitored: Monitored) -> None:
    def firing() -> list[dict[str, Any]]:
        return [alert for alert in monitored.get("/api/v1/alerts")["alerts"]
                if alert["labels"]["alertname"] == "SituflowDeadLetters"
                and alert["state"] == "firing"]

    alerts = wait_for(firing, 30, "SituflowDeadLetters to fire")
    assert {(a["labels"]["service"], a["labels"]["topic"]) for a in alerts} == \
        {("kslack", f"{monitored.pipeline.stream.name}.dlq")}


def test_every_metric_a_dashboard_or_rule_names_is_exported(monitored: Monitored) -> None:
    named = {name for _, expr in all_expressions() for name in metric_names(runnable(expr))}
    named |= {name for expr in rule_expressions(monitored) for name in metric_names(expr)}
    scraped = set(monitored.get("/api/v1/label/__name__/values"))
    assert "situflow_dlq_messages_total" in named and "up" in named
    assert named - scraped == set()


def test_every_service_is_ready(monitored: Monitored) -> None:
    for service in monitored.pipeline.services.values():
        health = json.loads(service.get("/ready"))
        assert health["ready"] is True and health["service"] == service.kind


def test_metric_names_are_read_out_of_promql() -> None:
    expr = ('histogram_quantile(0.99, sum by (service, le) (rate('
            'situflow_processing_latency_seconds_bucket{service=~"a|b"}[1m]))) '
            '> on (instance) group_left () 2 * up offset 5m')
    assert metric_names(expr) == {"situflow_processing_latency_seconds_bucket", "up"}
