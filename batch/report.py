"""What a Spark command tells Prometheus about its run, through a Pushgateway: a batch job ends
before any scrape could reach it, so it pushes its numbers when it ends.

``situflow offline``, ``situflow index build`` and ``situflow backfill`` push, when
``SITUFLOW_PUSHGATEWAY_URL`` is set, under the grouping key ``job="situflow-jobs"`` and
``command`` (``offline``, ``index-build``, ``backfill``): one group per command, whose last run
stays until the next. The metrics:

- ``situflow_job_duration_seconds``, ``situflow_job_last_run_timestamp_seconds`` and
  ``situflow_job_succeeded`` (1 or 0), after every run;
- after a successful run only, ``situflow_job_last_success_timestamp_seconds`` and what the
  command measured: ``situflow_job_rows_read``, ``situflow_job_bytes_read``,
  ``situflow_job_intervals`` (the replay plan's time intervals) and ``situflow_job_results``
  (results published, index rows written).

A failed run replaces only the metrics it pushes (``pushadd``), so the last success and its
numbers stay visible. A Pushgateway that does not answer costs a warning on standard error,
never the job. The dashboard "situflow / archive" shows them.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, pushadd_to_gateway

#: The ``job`` label of every pushed group.
JOB = "situflow-jobs"
#: Seconds a push may take before the job gives up on it.
PUSH_TIMEOUT = 10.0


@dataclass
class JobReport:
    """The numbers of one run of ``command``; the command fills in what it measured and sets
    ``succeeded`` when it is done."""

    command: str
    succeeded: bool = False
    rows_read: int = 0
    bytes_read: int = 0
    intervals: int = 0
    results: int = 0
    started: float = field(default_factory=time.time)


def metrics(report: JobReport, now: float) -> CollectorRegistry:
    """The registry pushed for ``report`` (module doc)."""
    succeeded = report.succeeded
    registry = CollectorRegistry()

    def gauge(name: str, help: str, value: float) -> None:
        Gauge(name, help, registry=registry).set(value)

    gauge("situflow_job_duration_seconds", "Seconds the last run took", now - report.started)
    gauge("situflow_job_last_run_timestamp_seconds", "When the last run ended", now)
    gauge("situflow_job_succeeded", "1 if the last run succeeded, else 0", float(succeeded))
    if succeeded:
        gauge("situflow_job_last_success_timestamp_seconds", "When the last successful run "
              "ended", now)
        gauge("situflow_job_rows_read", "Archive rows the last successful run read",
              report.rows_read)
        gauge("situflow_job_bytes_read", "Archive bytes the last successful run read",
              report.bytes_read)
        gauge("situflow_job_intervals", "Time intervals the last successful run replayed",
              report.intervals)
        gauge("situflow_job_results", "Results (or index rows) the last successful run "
              "wrote", report.results)
    return registry


def push(url: str, report: JobReport, now: float | None = None, handler: Any = None) -> None:
    """Push ``report`` to the Pushgateway at ``url`` (``handler``: prometheus-client's, for
    tests)."""
    registry = metrics(report, time.time() if now is None else now)
    options = {} if handler is None else {"handler": handler}
    pushadd_to_gateway(url, job=JOB, registry=registry, grouping_key={"command": report.command},
                       timeout=PUSH_TIMEOUT, **options)


@contextmanager
def reported(command: str, url: str | None) -> Iterator[JobReport]:
    """A report of the run of ``command`` in the ``with`` block, pushed to ``url`` when it ends
    (nothing without a URL); a run that does not set ``succeeded`` (an exception, an error
    exit) counts as failed."""
    report = JobReport(command)
    try:
        yield report
    finally:
        if url:
            try:
                push(url, report)
            except OSError as exc:
                print(f"situflow: warning: cannot push the {command} metrics to {url}: {exc}",
                      file=sys.stderr)
