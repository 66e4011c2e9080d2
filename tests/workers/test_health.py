"""``/health`` and the lag gauge of a service (workers/app.py, issue 12), without a broker.

A partition whose applied offset stands still while input waits (high watermark past the
applied offset + 1) for ``SITUFLOW_STALL_TIMEOUT`` seconds makes the service not ready; the
lag gauge ``situflow_input_lag`` counts the messages not yet applied, not merely fetched, so
it shows a partition that is stuck although its consumer reads on; a crash loop known from the
crash record makes the service not ready too. The recovery gauges and the per-query operator
statistics are read when scraped; counters of known topics exist from the start, at zero.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import faust

from workers.failures import CrashRecord
from workers.metrics import QueryStats, ServiceMetrics


@dataclass(frozen=True)
class TP:
    topic: str
    partition: int


@dataclass
class Consumer:
    highwaters: dict[TP, int]

    def assignment(self) -> set[TP]:
        return set(self.highwaters)

    def highwater(self, tp: TP) -> int:
        return self.highwaters[tp]


@dataclass
class Recovery:
    in_recovery: bool = False
    _recovery_started_at: float | None = None


@dataclass
class Tables:
    recovery: Recovery = field(default_factory=Recovery)


@dataclass
class App:
    consumer: Consumer
    conf: Any = field(default_factory=lambda: faust.App("conf").conf)
    tables: Tables = field(default_factory=Tables)


def service(highwaters: dict[TP, int], applied: dict[TP, int],
            crashes: CrashRecord | None = None) -> ServiceMetrics:
    metrics = ServiceMetrics(faust.App("test-health"), "deriver", inputs=("cars.ordered",))
    metrics._app = App(Consumer(highwaters))  # type: ignore[assignment]
    metrics.follow(lambda topic, partition: applied[TP(topic, partition)], crashes)
    return metrics


def lag(metrics: ServiceMetrics, partition: int) -> float:
    value = metrics.registry.get_sample_value(
        "situflow_input_lag", {"service": "deriver", "topic": "cars.ordered",
                               "partition": str(partition)})
    assert value is not None
    return value


def test_a_partition_whose_applied_offset_stands_still_while_input_waits_is_stalled() -> None:
    stuck, done = TP("cars.ordered", 0), TP("cars.ordered", 1)
    applied = {stuck: 9, done: 41}
    metrics = service({stuck: 30, done: 42}, applied)
    assert metrics.stalled(now=0.0) == []
    assert metrics.stalled(now=59.0) == []
    assert metrics.stalled(now=61.0) == ["cars.ordered[0]"], "the caught-up partition is fine"
    assert (lag(metrics, 0), lag(metrics, 1)) == (20, 0)
    applied[stuck] = 10
    assert metrics.stalled(now=62.0) == [], "it moved"
    assert metrics.stalled(now=123.0) == ["cars.ordered[0]"]


def test_a_service_that_crash_loops_is_not_ready(tmp_path: Path) -> None:
    for _ in range(3):
        CrashRecord(tmp_path).begin("cars.ordered", 0, 5)
    metrics = service({}, {}, CrashRecord(tmp_path))
    assert metrics.crashes is not None and metrics.crashes.crash_looping()
    assert metrics.registry.get_sample_value("situflow_restarts_total",
                                             {"service": "deriver"}) == 1


def sample(metrics: ServiceMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, {"service": "deriver", **labels})


def test_the_recovery_gauges_say_since_when_the_tables_recover() -> None:
    metrics = service({}, {})
    assert (sample(metrics, "situflow_recovering"), sample(metrics, "situflow_recovery_seconds")) \
        == (0, 0)
    app: Any = metrics._app
    app.tables.recovery = Recovery(in_recovery=True, _recovery_started_at=time.monotonic() - 90)
    assert sample(metrics, "situflow_recovering") == 1
    seconds = sample(metrics, "situflow_recovery_seconds")
    assert seconds is not None and 90 <= seconds < 100


def test_counters_of_the_inputs_and_the_dead_letter_topics_exist_at_zero() -> None:
    metrics = service({}, {})
    metrics.outputs(dlq=["cars.dlq"], late=["cars.late"])
    assert sample(metrics, "situflow_messages_in_total", topic="cars.ordered") == 0
    assert sample(metrics, "situflow_processing_errors_total", topic="cars.ordered",
                  query="") == 0
    assert sample(metrics, "situflow_dlq_messages_total", topic="cars.dlq") == 0
    assert sample(metrics, "situflow_late_events_total", topic="cars.late") == 0


@dataclass
class Operator:
    counts: dict[str, int]

    def stats(self) -> dict[str, int]:
        return self.counts


def test_operator_statistics_are_summed_per_query_over_the_partitions() -> None:
    metrics = service({}, {})
    operators: list[tuple[str, Any]] = [
        ("speeding", Operator({"partial_matches": 2})),
        ("speeding", Operator({"partial_matches": 3, "open_situations": 1})),
        ("braking", Operator({"open_situations": 4}))]
    metrics.registry.register(QueryStats("deriver", lambda: operators))
    assert sample(metrics, "situflow_query_partial_matches", query="speeding") == 5
    assert sample(metrics, "situflow_query_open_situations", query="speeding") == 1
    assert sample(metrics, "situflow_query_open_situations", query="braking") == 4
    assert sample(metrics, "situflow_query_buffered_situations", query="braking") == 0
