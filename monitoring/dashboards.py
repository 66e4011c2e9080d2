"""situflow's Grafana dashboards, as code (grafana-foundation-sdk): overview, queries, state and
checkpoints, archive and offline jobs. Writes ``charts/situflow/files/dashboards/<name>.json``,
which the chart ships as ConfigMaps for Grafana's dashboard sidecar.

    python -m monitoring.dashboards           write the JSON files
    python -m monitoring.dashboards --check   exit 1, naming them, if a file differs from the code

Every panel reads the Prometheus data source chosen in the ``datasource`` variable; ``service``
and ``query`` are multi-value variables whose "All" is the regex ``.*``, so every expression
selects with ``=~"$service"`` or ``=~"$query"``. The metrics are the services'
(:mod:`workers.metrics`) and the Spark commands' (:mod:`batch.report`, through a
Pushgateway); ``tests/ops/test_prometheus.py`` runs every panel's expression against a
Prometheus that scrapes a running pipeline, and checks that every metric named here is
exported.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import common as gc
from grafana_foundation_sdk.builders import dashboard as gd
from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import (
    BigValueGraphMode,
    LegendDisplayMode,
    LegendPlacement,
)
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DataSourceRef,
    VariableRefresh,
    VariableSort,
)

OUT_DIR = Path(__file__).resolve().parents[1] / "charts/situflow/files/dashboards"
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
RATE = "$__rate_interval"
SERVICE = 'service=~"$service"'
QUERY = 'query=~"$query"'
#: The result topics of the selected queries (``matches.<query>``, ``trends.<query>``).
RESULT_TOPICS = 'topic=~"(matches|trends)\\\\.($query)"'


@dataclass(frozen=True)
class Target:
    """One PromQL expression of a panel and the legend of its series."""

    expr: str
    legend: str


def series(title: str, unit: str, *targets: Target, description: str = "",
           width: int = 12) -> timeseries.Panel:
    """A time-series panel of ``targets``."""
    panel = (timeseries.Panel().title(title).description(description).unit(unit)
             .datasource(DATASOURCE).span(width).height(8).min(0).fill_opacity(10)
             .legend(gc.VizLegendOptions().display_mode(LegendDisplayMode.LIST)
                     .placement(LegendPlacement.BOTTOM).show_legend(True)))
    for ref, target in zip("ABCDEFGH", targets, strict=False):
        panel.with_target(prometheus.Dataquery().expr(target.expr)
                          .legend_format(target.legend).ref_id(ref).datasource(DATASOURCE))
    return panel


def single(title: str, unit: str, expr: str, description: str = "", width: int = 6
           ) -> stat.Panel:
    """A single-value panel of an instant expression."""
    return (stat.Panel().title(title).description(description).unit(unit)
            .datasource(DATASOURCE).span(width).height(4).graph_mode(BigValueGraphMode.NONE)
            .reduce_options(gc.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
            .with_target(prometheus.Dataquery().expr(expr).instant().ref_id("A")
                         .datasource(DATASOURCE)))


def board(uid: str, title: str, description: str, variables: Sequence[str]) -> gd.Dashboard:
    """A dashboard with the data source variable and ``variables`` (``service``, ``query``)."""
    dash = (gd.Dashboard(title).uid(uid).description(description).tags(["situflow"])
            .refresh("30s").time("now-1h", "now").timezone("browser").editable()
            .tooltip(DashboardCursorSync.CROSSHAIR)
            .with_variable(gd.DatasourceVariable("datasource").label("Data source")
                           .type("prometheus")))
    sources = {"service": ("Service", 'label_values(up{service!=""}, service)'),
               "query": ("Query", "label_values(situflow_query_partial_matches, query)")}
    for name in variables:
        label, query = sources[name]
        dash.with_variable(gd.QueryVariable(name).label(label).query(query)
                           .datasource(DATASOURCE).multi(True).include_all(True)
                           .all_value(".*").refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
                           .sort(VariableSort.ALPHABETICAL_ASC))
    return dash


def rate_by(metric: str, by: str, selector: str = SERVICE) -> str:
    return f"sum by ({by}) (rate({metric}{{{selector}}}[{RATE}]))"


def overview() -> gd.Dashboard:
    latency = "situflow_processing_latency_seconds_bucket"
    quantiles = [Target(f"histogram_quantile({q}, sum by (service, le) "
                        f"(rate({latency}{{{SERVICE}}}[{RATE}])))", f"{{{{service}}}} p{p}")
                 for q, p in (("0.5", "50"), ("0.95", "95"), ("0.99", "99"))]
    return (board("situflow-overview", "situflow / overview",
                  "Throughput, lag, latency, dead letters and late events of every service",
                  ["service"])
            .with_row(gd.Row("Health"))
            .with_panel(single("Workers up", "none", f'sum(up{{{SERVICE}}})',
                               "Workers Prometheus scrapes"))
            .with_panel(single("Workers recovering", "none",
                               f"sum(situflow_recovering{{{SERVICE}}})",
                               "Workers replaying their state changelogs"))
            .with_panel(single("Dead letters (1h)", "none",
                               f"sum(increase(situflow_dlq_messages_total{{{SERVICE}}}[1h]))"))
            .with_panel(single("Processing errors (1h)", "none",
                               f"sum(increase(situflow_processing_errors_total{{{SERVICE}}}"
                               "[1h]))"))
            .with_row(gd.Row("Throughput"))
            .with_panel(series("Messages in", "msg/s",
                               Target(rate_by("situflow_messages_in_total", "service"),
                                      "{{service}}"),
                               description="Kafka messages consumed per second"))
            .with_panel(series("Messages out", "msg/s",
                               Target(rate_by("situflow_messages_out_total", "service"),
                                      "{{service}}"),
                               description="Kafka messages produced per second"))
            .with_panel(series("Events in", "ops",
                               Target(rate_by("situflow_events_in_total", "service"),
                                      "{{service}}"),
                               description="Events consumed per second (an Arrow message "
                               "holds many)"))
            .with_panel(series("Events and results out", "ops",
                               Target(rate_by("situflow_events_out_total", "service"),
                                      "{{service}}")))
            .with_row(gd.Row("Lag and latency"))
            .with_panel(series("Consumer lag", "short",
                               Target(f"sum by (service, topic) "
                                      f"(situflow_consumer_lag{{{SERVICE}}})",
                                      "{{service}} {{topic}}"),
                               description="Messages not yet consumed (high watermark minus "
                               "position)"))
            .with_panel(series("Input lag (not yet applied)", "short",
                               Target(f"sum by (service, topic) "
                                      f"(situflow_input_lag{{{SERVICE}}})",
                                      "{{service}} {{topic}}"),
                               description="Messages not yet applied to the state"))
            .with_panel(series("Processing latency", "s", *quantiles, width=24,
                               description="From an input message's Kafka timestamp to its "
                               "output being sent"))
            .with_row(gd.Row("Dead letters, late events and errors"))
            .with_panel(series("Dead letters", "msg/s",
                               Target(rate_by("situflow_dlq_messages_total", "service, topic"),
                                      "{{service}} → {{topic}}"), width=8))
            .with_panel(series("Late events", "ops",
                               Target(rate_by("situflow_late_events_total", "topic"),
                                      "{{topic}}"), width=8,
                               description="Events later than the slack, to <stream>.late"))
            .with_panel(series("Processing errors", "ops",
                               Target(rate_by("situflow_processing_errors_total",
                                              "service, query"), "{{service}} {{query}}"),
                               width=8)))


def queries() -> gd.Dashboard:
    return (board("situflow-queries", "situflow / queries",
                  "Per query: results, partial matches, open situations, mergers, errors",
                  ["query"])
            .with_panel(series("Matches and trends out", "ops",
                               Target(f"sum by (topic) (rate(situflow_events_out_total"
                                      f"{{{RESULT_TOPICS}}}[{RATE}]))", "{{topic}}"),
                               description="Results per second in each query's output topic"))
            .with_panel(series("Partial matches", "short",
                               Target(f"sum by (query) "
                                      f"(situflow_query_partial_matches{{{QUERY}}})",
                                      "{{query}}"),
                               description="NFA runs in the operator states"))
            .with_panel(series("Open situations", "short",
                               Target(f"sum by (query) "
                                      f"(situflow_query_open_situations{{{QUERY}}})",
                                      "{{query}}")))
            .with_panel(series("Buffered situations", "short",
                               Target(f"sum by (query) "
                                      f"(situflow_query_buffered_situations{{{QUERY}}})",
                                      "{{query}}"),
                               description="Situations held in the TPStream matchers"))
            .with_panel(series("Merger pending batches", "short",
                               Target(f"max by (query) "
                                      f"(situflow_merge_pending_batches{{{QUERY}}})",
                                      "{{query}}"),
                               Target("max(situflow_merge_max_pending_batches)", "limit"),
                               description="Unpartitioned queries: situation batches waiting "
                               "behind a missing one, and SITUFLOW_MAX_PENDING_BATCHES"))
            .with_panel(series("Merger waits for batch", "none",
                               Target(f"max by (query) "
                                      f"(situflow_merge_waiting_for{{{QUERY}}})", "{{query}}"),
                               description="The batch number each merger waits for"))
            .with_panel(series("Query errors", "ops",
                               Target(f"sum by (query) (rate(situflow_processing_errors_total"
                                      f"{{{QUERY}}}[{RATE}]))", "{{query}}"),
                               description="Processing errors per query (empty: the message "
                               "itself failed)"))
            .with_panel(series("Attributes no event carried", "short",
                               Target(f"max by (query) "
                                      f"(situflow_unseen_attributes{{{QUERY}}})", "{{query}}"),
                               description="Attributes a query uses that no event carried "
                               "yet: a typo yields nothing, silently")))


def state() -> gd.Dashboard:
    return (board("situflow-state", "situflow / state and checkpoints",
                  "Operator state, checkpoints, recoveries and restarts", ["service"])
            .with_panel(series("State size", "bytes",
                               Target(f"sum by (service) (situflow_state_bytes{{{SERVICE}}})",
                                      "{{service}}"),
                               description="Size of the last checkpoint, summed over "
                               "partitions (a checkpoint may hold 64 MiB)"))
            .with_panel(series("Largest checkpoint", "bytes",
                               Target(f"max by (service) (situflow_state_bytes{{{SERVICE}}})",
                                      "{{service}}")))
            .with_panel(series("Checkpoints", "ops",
                               Target(rate_by("situflow_checkpoints_total", "service"),
                                      "{{service}}")))
            .with_panel(series("K-slack buffered events", "short",
                               Target(f"sum by (instance) "
                                      f"(situflow_kslack_buffered_events{{{SERVICE}}})",
                                      "{{instance}}"),
                               Target(f"sum by (instance) (situflow_kslack_slack_seconds"
                                      f"{{{SERVICE}}}) * sum by (instance) (rate("
                                      f"situflow_events_in_total{{service=\"kslack\"}}"
                                      f"[{RATE}]))", "{{instance}} slack's worth"),
                               description="Events in the reorder buffers, and K seconds of "
                               "input (what the buffer holds while event time keeps pace)"))
            .with_panel(series("Recovery", "s",
                               Target(f"max by (service) "
                                      f"(situflow_recovery_seconds{{{SERVICE}}})",
                                      "{{service}}"),
                               description="Seconds the table recovery under way has taken"))
            .with_panel(series("Restarts", "short",
                               Target(f"sum by (service) (increase(situflow_restarts_total"
                                      f"{{{SERVICE}}}[1h]))", "{{service}}"),
                               description="Crashes found at starts, over the last hour"))
            .with_panel(series("Open situations and partial matches", "short",
                               Target(f"sum by (service) "
                                      f"(situflow_open_situations{{{SERVICE}}})",
                                      "{{service}} open situations"),
                               Target(f"sum by (service) "
                                      f"(situflow_partial_matches{{{SERVICE}}})",
                                      "{{service}} partial matches"),
                               Target(f"sum by (service) "
                                      f"(situflow_buffered_situations{{{SERVICE}}})",
                                      "{{service}} buffered situations"), width=24)))


def archive() -> gd.Dashboard:
    archiver = 'service="archiver"'
    job = 'job="situflow-jobs"'
    return (board("situflow-archive", "situflow / archive and offline jobs",
                  "The archiver (segments written, backlog, open rows) and the last run of "
                  "each Spark command (pushed by batch/report.py)", [])
            .with_row(gd.Row("Archiver"))
            .with_panel(series("Segments written", "ops",
                               Target(rate_by("situflow_archive_segments_total", "topic",
                                              archiver), "{{topic}}")))
            .with_panel(series("Bytes written", "Bps",
                               Target(rate_by("situflow_archive_bytes_total", "topic",
                                              archiver), "{{topic}}")))
            .with_panel(series("Rows archived", "ops",
                               Target(rate_by("situflow_events_out_total", "topic", archiver),
                                      "{{topic}}")))
            .with_panel(series("Backlog (not yet archived)", "short",
                               Target(f"sum by (topic) (situflow_input_lag{{{archiver}}})",
                                      "{{topic}}"),
                               description="Messages not yet in a segment (alert: "
                               "SituflowArchiveFallingBehind)"))
            .with_panel(series("Open rows", "short",
                               Target(f"sum(situflow_archive_open_rows{{{archiver}}})",
                                      "open rows"),
                               description="Rows in open segments, written at the next roll"))
            .with_panel(series("Segments adopted", "short",
                               Target(f"sum by (topic) (increase("
                                      f"situflow_archive_adopted_segments_total{{{archiver}}}"
                                      "[1h]))", "{{topic}}"),
                               description="Segments found written beyond the checkpoint "
                               "(after a crash or a rebalance), over the last hour"))
            .with_row(gd.Row("Offline jobs (last run of each command)"))
            .with_panel(single("Last run succeeded", "bool",
                               f"min(situflow_job_succeeded{{{job}}})",
                               "0 if the last run of any command failed"))
            .with_panel(single("Since the last success", "s",
                               f"time() - min(situflow_job_last_success_timestamp_seconds"
                               f"{{{job}}})", "Of the command that succeeded longest ago"))
            .with_panel(single("Rows read", "short", f"sum(situflow_job_rows_read{{{job}}})",
                               "By the last successful run of each command"))
            .with_panel(single("Bytes read", "bytes", f"sum(situflow_job_bytes_read{{{job}}})",
                               "By the last successful run of each command"))
            .with_panel(series("Duration", "s",
                               Target(f"max by (command) (situflow_job_duration_seconds"
                                      f"{{{job}}})", "{{command}}"), width=8))
            .with_panel(series("Results and index rows written", "short",
                               Target(f"max by (command) (situflow_job_results{{{job}}})",
                                      "{{command}}"), width=8))
            .with_panel(series("Intervals replayed", "short",
                               Target(f"max by (command) (situflow_job_intervals{{{job}}})",
                                      "{{command}}"), width=8,
                               description="Time intervals of the offline replay plan")))


DASHBOARDS = {"overview": overview, "queries": queries, "state": state, "archive": archive}


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """The panels of a dashboard's JSON, those inside rows too (rows themselves excluded)."""
    found = []
    for panel in dashboard.get("panels", []):
        if panel.get("type") == "row":
            found += panel.get("panels", [])
        else:
            found.append(panel)
    return found


def expressions(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression of a dashboard's JSON: its panels' targets and its query
    variables."""
    exprs = [target["expr"] for panel in panels(dashboard) for target in panel["targets"]]
    return exprs + [variable["query"] for variable in dashboard["templating"]["list"]
                    if variable["type"] == "query"]


def render(name: str) -> str:
    """The JSON text of dashboard ``name``."""
    return json.dumps(DASHBOARDS[name]().build(), cls=JSONEncoder, indent=2,
                      sort_keys=True) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m monitoring.dashboards",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="fail if a JSON file differs from what the code writes")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="directory of the JSON files")
    args = parser.parse_args(argv)
    stale = []
    for name in DASHBOARDS:
        path, text = args.out / f"{name}.json", render(name)
        current = path.read_text() if path.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(str(path))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        print(f"stale: {', '.join(stale)}; run python -m monitoring.dashboards",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
