"""A service's Prometheus ``/metrics`` page, its ``/health`` page (ready, stalled, crash
looping) and its ``/ready`` page (the same, answered 503 while not ready: a readiness probe),
served by its Faust app.

Every metric name starts ``situflow_`` and carries the ``service`` label, so one dashboard
covers all services; the lag, stall and recovery gauges are computed when the page is scraped.
Counters whose labels are known at the start (an input topic, a dead-letter topic) are created
at zero, so that a rate over them is 0 rather than missing before the first increment; the
alerts and dashboards (``charts/situflow/files/``) rely on that.
Design: ARCHITECTURE.md, "The services"; the alerts: ``docs/runbooks.md``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast

import faust
from faust.web import Request, Response, View
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from situflow.devices.counters import COUNTERS
from situflow.operator import Operator
from situflow.settings import EXACTLY_ONCE
from workers.app import owned_partitions
from workers.failures import CrashRecord

#: Prometheus' text format; aiohttp refuses a charset parameter in ``content_type``.
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4"
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
#: The operator statistics exported per query (:class:`QueryStats`), and their help texts.
QUERY_STATS = {
    "open_situations": "Situations open in this worker's operator states of the query",
    "partial_matches": "Partial matches (NFA runs) in this worker's operator states of the query",
    "buffered_situations": "Situations in the buffers of this worker's TPStream matchers of "
                           "the query",
}


class ServiceMetrics:
    """The Prometheus metrics of one service, served on the app's ``/metrics`` page.

    A registry of its own keeps the page to situflow's metrics (no process collectors of the
    default registry, which a test process would share). Every name starts ``situflow_`` and
    every metric carries the ``service`` label, so one dashboard covers all services.
    """

    def __init__(self, app: faust.App, service: str, inputs: tuple[str, ...] = (),
                 stall_timeout: float = 60.0) -> None:
        self.registry = CollectorRegistry()
        labels = ["service", "topic"]
        reg = self.registry
        self.messages_in = Counter("situflow_messages_in", "Messages consumed", labels,
                                   registry=reg).labels
        self.messages_out = Counter("situflow_messages_out", "Messages produced", labels,
                                    registry=reg).labels
        self.events_in = Counter("situflow_events_in", "Events consumed (an Arrow message holds "
                                 "many)", labels, registry=reg).labels
        self.events_out = Counter("situflow_events_out", "Events or results produced", labels,
                                  registry=reg).labels
        self.dlq = Counter("situflow_dlq_messages", "Messages sent to a dead-letter topic",
                           labels, registry=reg).labels
        self.late = Counter("situflow_late_events", "Events later than the K-slack bound",
                            labels, registry=reg).labels
        self._buffered: dict[int, int] = {}  # per partition, for set_buffered
        self.buffered = Gauge("situflow_kslack_buffered_events",
                              "Events waiting in the K-slack buffers of this worker",
                              ["service"], registry=reg).labels(service)
        self.open_situations = Gauge("situflow_open_situations",
                                     "Situations open in the operator states of this worker",
                                     ["service"], registry=reg).labels(service)
        self.partial_matches = Gauge("situflow_partial_matches",
                                     "Partial matches (NFA runs) in the operator states of this "
                                     "worker", ["service"], registry=reg).labels(service)
        self.buffered_situations = Gauge("situflow_buffered_situations",
                                         "Situations in the buffers of this worker's TPStream "
                                         "matchers", ["service"], registry=reg).labels(service)
        self.state_bytes = Gauge("situflow_state_bytes",
                                 "Size of the last checkpoint of each partition's state",
                                 ["service", "partition"], registry=reg).labels
        self.checkpoints = Counter("situflow_checkpoints", "State checkpoints written",
                                   ["service"], registry=reg).labels(service)
        self.lag = Gauge("situflow_consumer_lag", "Messages of an input partition not yet "
                         "consumed (high watermark minus position)",
                         ["service", "topic", "partition"], registry=reg)
        self.latency = Histogram("situflow_processing_latency_seconds",
                                 "From the input message's Kafka timestamp to its output being "
                                 "sent", ["service"], buckets=LATENCY_BUCKETS,
                                 registry=reg).labels(service)
        self.unseen_attributes = Gauge(
            "situflow_unseen_attributes", "Attributes a query uses that no event it evaluated "
            "has carried yet (a typo yields nothing, silently)", ["service", "query"],
            registry=reg).labels
        self.query_errors = Counter("situflow_query_errors", "Registered queries this service "
                                    "cannot evaluate", ["service"], registry=reg).labels(service)
        self.processing_errors = Counter(
            "situflow_processing_errors", "Messages whose processing raised (workers.failures); "
            "query is empty where the message itself failed", ["service", "topic", "query"],
            registry=reg).labels
        self.input_lag = Gauge("situflow_input_lag", "Messages of an input partition not yet "
                               "applied to its state (high watermark minus applied offset minus "
                               "one)", ["service", "topic", "partition"], registry=reg)
        self.restarts = Counter("situflow_restarts", "Crashes of this service's process found "
                                "at its starts (workers.failures.CrashRecord)", ["service"],
                                registry=reg).labels(service)
        self.recovering = Gauge("situflow_recovering", "1 while this worker recovers its tables "
                                "from their changelogs (after a start or a rebalance)",
                                ["service"], registry=reg).labels(service)
        self.recovering.set_function(lambda: float(self._recovery().in_recovery))
        self.recovery_seconds = Gauge("situflow_recovery_seconds", "Seconds the table recovery "
                                      "under way has taken (0: none under way)", ["service"],
                                      registry=reg).labels(service)
        self.recovery_seconds.set_function(self._recovery_seconds)
        reg.register(DeviceStats(service))
        #: The last offset applied of an input partition (set by :meth:`follow`).
        self.applied: Callable[[str, int], int] | None = None
        self.crashes: CrashRecord | None = None
        self.stall_timeout = stall_timeout
        self._progress: dict[tuple[str, int], tuple[int, float]] = {}  # (applied, since)
        self.service = service
        self.inputs = inputs
        #: Whether the query registry has been read to its end (True when not followed).
        self.registry_synced = True
        #: More fields of the health page (e.g. the queries a service evaluates).
        self.health_details: Callable[[], dict[str, Any]] = dict
        self._app = app
        for topic in inputs:
            self.messages_in(service, topic)
            self.events_in(service, topic)
            self.processing_errors(service, topic, "")

        # Faust makes a view class of a page function, so pages are plain functions.
        @app.page("/metrics")
        async def metrics_page(web: View, request: Request) -> Response:
            await self.update_lag()
            return web.bytes(generate_latest(self.registry), content_type=METRICS_CONTENT_TYPE)

        @app.page("/health")
        async def health_page(web: View, request: Request) -> Response:
            return web.json(self.health())

        @app.page("/ready")
        async def ready_page(web: View, request: Request) -> Response:
            health = self.health()
            return web.json(health, status=200 if health["ready"] else 503)

    def outputs(self, dlq: Iterable[str] = (), late: Iterable[str] = ()) -> None:
        """Create the dead-letter and late-event counters of these topics at zero (module
        doc)."""
        for topic in dlq:
            self.dlq(self.service, topic)
        for topic in late:
            self.late(self.service, topic)

    def _recovery(self) -> Any:
        return cast(Any, self._app).tables.recovery

    def _recovery_seconds(self) -> float:
        recovery = self._recovery()
        # Faust keeps when the recovery began only privately; it logs the same figure.
        started = getattr(recovery, "_recovery_started_at", None)
        if not recovery.in_recovery or started is None:
            return 0.0
        return max(0.0, time.monotonic() - started)

    def follow(self, applied: Callable[[str, int], int], crashes: CrashRecord | None) -> None:
        """Measure lag and stalls on ``applied(topic, partition)``, the last offset applied to a
        partition's state; count the crashes the record found at this start."""
        self.applied = applied
        self.crashes = crashes
        if crashes is not None and crashes.found is not None:
            self.restarts.inc()

    async def update_lag(self) -> None:
        """Set the lag gauges of each assigned partition of the input topics (at scrape time)."""
        consumer = self._app.consumer
        if consumer is None:
            return
        for tp in consumer.assignment():
            if tp.topic in self.inputs:
                position = await consumer.position(tp)
                highwater = consumer.highwater(tp)
                if position is not None and highwater is not None:
                    self.lag.labels(self.service, tp.topic, str(tp.partition)).set(
                        max(0, highwater - position))
        self.stalled()

    def stalled(self, now: float | None = None) -> list[str]:
        """The assigned input partitions whose applied offset has not moved for
        ``SITUFLOW_STALL_TIMEOUT`` seconds although input waits (``topic[partition]``); sets
        the applied-offset lag gauge on the way."""
        consumer, applied = self._app.consumer, self.applied
        if consumer is None or applied is None:
            return []
        now = time.monotonic() if now is None else now
        # A transaction's commit marker takes an offset after its last record.
        markers = 1 if self._app.conf.processing_guarantee.value == EXACTLY_ONCE else 0
        stalled = []
        for tp in consumer.assignment():
            if tp.topic not in self.inputs:
                continue
            highwater = consumer.highwater(tp)
            if highwater is None:
                continue
            last = applied(tp.topic, tp.partition)
            waiting = highwater - last - 1
            self.input_lag.labels(self.service, tp.topic, str(tp.partition)).set(max(0, waiting))
            key = (tp.topic, tp.partition)
            seen = self._progress.get(key)
            if seen is None or seen[0] != last or waiting <= markers:
                self._progress[key] = (last, now)
            elif now - seen[1] >= self.stall_timeout:
                stalled.append(f"{tp.topic}[{tp.partition}]")
        return stalled

    def set_buffered(self, partition: int, count: int) -> None:
        """``count`` events wait in ``partition``'s K-slack buffer (the gauge sums them)."""
        self.buffered.inc(count - self._buffered.get(partition, 0))
        self._buffered[partition] = count

    def checkpointed(self, partition: int, size: int) -> None:
        self.checkpoints.inc()
        self.state_bytes(self.service, str(partition)).set(size)

    def health(self) -> dict[str, Any]:
        """Served with 200 while the worker runs; ``ready`` once it has partitions and its
        tables are recovered (what a readiness probe and the tests wait for)."""
        app = self._app
        assigned = len(app.consumer.assignment()) if app.consumer else 0
        recovered = cast(Any, app.tables).recovery.completed.is_set()
        stalled = self.stalled() if recovered and not app.rebalancing else []
        crash_looping = self.crashes is not None and self.crashes.crash_looping()
        ready = assigned > 0 and recovered and not app.rebalancing and self.registry_synced \
            and not stalled and not crash_looping
        inputs = {topic: owned_partitions(app, topic) for topic in self.inputs}
        return {"service": self.service, "ready": ready, "assigned": assigned, "inputs": inputs,
                "rebalancing": app.rebalancing, "tables_recovered": recovered,
                "registry_synced": self.registry_synced, "stalled": stalled,
                "crash_looping": crash_looping,
                "recent_crashes": 0 if self.crashes is None else self.crashes.recent(),
                **self.health_details()}


#: The device layer's counters (:mod:`situflow.devices.counters`) as ``situflow_device_<name>``.
DEVICE_COUNTERS = {
    "kernel_seconds": "Seconds from kernel launch to completion on the configured device",
    "kernels": "Kernels run on the configured device",
    "batches": "Batches evaluated on the device (batch_events / batches: the mean batch size)",
    "batch_events": "Events in the batches evaluated on the device",
    "bytes_to_device": "Bytes copied to the device (zero-copy buffers count nothing)",
    "bytes_from_device": "Bytes copied from the device (zero-copy buffers count nothing)",
    "cpu_fallbacks": "Evaluations that ran on the CPU although a device is configured "
                     "(expressions or column types the device does not take)",
}


class DeviceStats:
    """A collector of the device counters of this process (all zero on ``SITUFLOW_DEVICE=cpu``),
    read when scraped: ``situflow_device_<counter>_total{service}``."""

    def __init__(self, service: str) -> None:
        self.service = service

    def collect(self) -> Iterator[Metric]:
        values = COUNTERS.snapshot()
        for name, text in DEVICE_COUNTERS.items():
            family = CounterMetricFamily(f"situflow_device_{name}", text, labels=["service"])
            family.add_metric([self.service], values[name])
            yield family


class QueryStats:
    """A collector of the operators' statistics per query (:data:`QUERY_STATS`), summed over
    this worker's partitions when scraped: ``situflow_query_<stat>{service, query}``.

    ``operators()`` gives (query name, operator) for every operator of the worker.
    """

    def __init__(self, service: str,
                 operators: Callable[[], Iterable[tuple[str, Operator]]]) -> None:
        self.service = service
        self.operators = operators

    def collect(self) -> Iterator[Metric]:
        totals: dict[str, dict[str, int]] = {stat: {} for stat in QUERY_STATS}
        for name, operator in self.operators():
            stats = operator.stats()
            for stat, per_query in totals.items():
                per_query[name] = per_query.get(name, 0) + stats.get(stat, 0)
        for stat, per_query in totals.items():
            family = GaugeMetricFamily(f"situflow_query_{stat}", QUERY_STATS[stat],
                                       labels=["service", "query"])
            for name, value in sorted(per_query.items()):
                family.add_metric([self.service, name], value)
            yield family
