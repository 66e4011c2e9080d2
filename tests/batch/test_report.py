"""What the Spark commands push to a Pushgateway (batch/report.py): every run its duration and
outcome; a successful one also its numbers; nothing without ``SITUFLOW_PUSHGATEWAY_URL``; a
Pushgateway that does not answer is a warning, not a failed job."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from batch.report import JOB, JobReport, metrics, push, reported


def samples(report: JobReport, now: float) -> dict[str, float]:
    from prometheus_client import generate_latest

    text = generate_latest(metrics(report, now)).decode()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}


def test_a_successful_run_pushes_its_numbers_and_when_it_succeeded() -> None:
    report = JobReport("offline", rows_read=1200, bytes_read=65536, intervals=3, results=7,
                       started=100.0, succeeded=True)
    assert samples(report, now=112.5) == {
        "situflow_job_duration_seconds": 12.5, "situflow_job_last_run_timestamp_seconds": 112.5,
        "situflow_job_succeeded": 1, "situflow_job_last_success_timestamp_seconds": 112.5,
        "situflow_job_rows_read": 1200, "situflow_job_bytes_read": 65536,
        "situflow_job_intervals": 3, "situflow_job_results": 7}


def test_a_failed_run_pushes_only_its_duration_and_outcome() -> None:
    """pushadd keeps the last success's metrics, which a failed run does not push."""
    assert samples(JobReport("backfill", started=10.0), now=11.0) == {
        "situflow_job_duration_seconds": 1.0, "situflow_job_last_run_timestamp_seconds": 11.0,
        "situflow_job_succeeded": 0}


def test_the_push_groups_by_command_and_adds_to_the_group() -> None:
    calls: list[tuple[str, str]] = []

    def handler(url: str, method: str, timeout: Any, headers: Any, data: bytes) -> Any:
        return lambda: calls.append((method, url))

    push("http://gateway:9091", JobReport("index-build", succeeded=True), handler=handler)
    assert calls == [("POST", f"http://gateway:9091/metrics/job/{JOB}/command/index-build")]


def test_a_gateway_that_does_not_answer_is_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    with reported("backfill", "http://127.0.0.1:1") as report:
        report.succeeded = True
    assert "cannot push the backfill metrics" in capsys.readouterr().err


def test_without_a_url_nothing_is_pushed(capsys: pytest.CaptureFixture[str]) -> None:
    with reported("offline", None) as report:
        report.succeeded = True
    assert capsys.readouterr().err == ""
