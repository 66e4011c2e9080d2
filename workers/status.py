"""``situflow status``: one screen about a running deployment, the first thing an operator runs.

Where the facts come from: the workers from the services topic (:mod:`topics.announcements`;
every worker announces itself there while it runs), the queries from the registry and its
status topic (:mod:`topics.registry`), and each worker's state from its own ``/health`` and
``/metrics`` pages (:mod:`workers.metrics`), fetched from every worker at once with short
timeouts. ``/metrics`` is read twice, ``interval`` seconds apart, and a rate is the growth of
a counter between the two reads divided by the time between them (a counter that went down
restarted from zero, so its growth is its new value, as Prometheus' ``rate`` takes it).

A worker is ``ready``, ``not ready`` (recovering, rebalancing, reading the registry),
``stalled`` (input waits on a partition that does not move), ``crash-looping``,
``unreachable`` (its pages do not answer) or ``stale`` (its last announcement is older than
``stale`` seconds: it died without stopping, or cannot reach Kafka). A query is ``running``,
``failed`` (a service reported an error for this text of it) or ``not evaluated`` (no worker
that answered evaluates it). The deployment is healthy when every worker is ready and every
query runs; :func:`render` ends with that verdict, or with what is wrong.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from situflow.settings import KafkaSettings
from topics.announcements import Announcement, read_announcements
from topics.registry import QueryRecord, QueryStatus, list_queries, read_statuses

#: Seconds a worker's page may take to answer.
PAGE_TIMEOUT = 2.0
#: A sample of a ``/metrics`` page: its name and its labels.
SampleKey = tuple[str, frozenset[tuple[str, str]]]
Samples = dict[SampleKey, float]

READY, NOT_READY, STALLED, CRASH_LOOPING, UNREACHABLE, STALE = (
    "ready", "not ready", "stalled", "crash-looping", "unreachable", "stale")
RUNNING, FAILED, NOT_EVALUATED = "running", "failed", "not evaluated"


def parse_metrics(text: str) -> Samples:
    """Every sample of a Prometheus text page, by name and labels."""
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples named ``name`` that carry ``labels``."""
    wanted = set(labels.items())
    return sum((value for (sample, have), value in samples.items()
                if sample == name and wanted <= have), 0.0)


def rate(first: Samples, second: Samples, seconds: float, name: str, **labels: str) -> float:
    """Per second, the growth of counter ``name`` (summed over the samples with ``labels``)
    from the read ``first`` to the read ``second``, ``seconds`` later (module doc)."""
    before, after = total(first, name, **labels), total(second, name, **labels)
    grown = after - before if after >= before else after
    return grown / seconds if seconds > 0 else 0.0


@dataclass(frozen=True)
class Scrape:
    """What one worker's pages said: ``/health``, and ``/metrics`` read twice, ``seconds``
    apart; ``error`` says why a page did not answer (then the others are empty)."""

    health: dict[str, Any] | None = None
    first: Samples = field(default_factory=dict)
    second: Samples = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None


@dataclass(frozen=True)
class WorkerStatus:
    """One worker's line of the screen (``None``: not known, its pages did not answer)."""

    worker: str
    service: str
    stream: str
    url: str
    host: str
    pid: int
    version: str
    #: When the worker started (epoch ms), and how long ago it last announced itself.
    started_at: int
    last_seen_seconds: float
    state: str
    problem: str | None
    #: Whether its pages answered (the fields below are None when not).
    answered: bool
    partitions: dict[str, list[int]]
    lag: float | None = None
    in_rate: float | None = None
    out_rate: float | None = None
    dlq: float | None = None
    late: float | None = None
    open_situations: float | None = None
    partial_matches: float | None = None
    queries: list[str] | None = None


@dataclass(frozen=True)
class QueryView:
    """One registered query's line of the screen."""

    name: str
    language: str
    stream: str | None
    query_id: str
    state: str
    out_rate: float
    error: str | None = None
    failed_at: int | None = None
    failed_in: str | None = None


@dataclass(frozen=True)
class Report:
    """The whole screen: the workers by service, the queries, and what is wrong."""

    workers: list[WorkerStatus]
    queries: list[QueryView]

    @property
    def problems(self) -> list[str]:
        """One line per worker that is not ready and per query that does not run."""
        found = [f"{w.worker} {w.state}" + (f" ({w.problem})" if w.problem else "")
                 for w in self.workers if w.state != READY]
        for query in self.queries:
            if query.state == FAILED:
                found.append(f"query {query.name} failed in {query.failed_in}: {query.error}")
            elif query.state != RUNNING:
                found.append(f"query {query.name} {query.state} (no worker that answered "
                             f"evaluates it)")
        if not self.workers:
            found.append("no worker has announced itself on the services topic")
        return found

    @property
    def healthy(self) -> bool:
        return not self.problems

    @property
    def gone(self) -> list[str]:
        """The stale workers whose pages do not answer: dead without a clean stop, their
        records left behind (``situflow status --prune`` deletes them)."""
        return [w.worker for w in self.workers if w.state == STALE and not w.answered]

    def to_json(self) -> dict[str, Any]:
        """``situflow status --json``: the workers grouped by service, the queries, the
        verdict."""
        services: dict[str, list[dict[str, Any]]] = {}
        for worker in self.workers:
            services.setdefault(worker.service, []).append(asdict(worker))
        return {"healthy": self.healthy, "problems": self.problems, "services": services,
                "queries": [asdict(query) for query in self.queries]}


def worker_status(announcement: Announcement, scrape: Scrape, stale: float,
                  now_ms: int) -> WorkerStatus:
    """What ``scrape`` says of the worker of ``announcement``, ``stale`` seconds being the
    oldest announcement of a live worker (module doc)."""
    age = max(0.0, (now_ms - announcement.last_seen) / 1000)
    common: dict[str, Any] = {
        "worker": announcement.worker, "service": announcement.service,
        "stream": announcement.stream, "url": announcement.url, "host": announcement.host,
        "pid": announcement.pid, "version": announcement.version,
        "started_at": announcement.started_at, "last_seen_seconds": round(age, 1)}
    seen = f"last seen {age:.0f} s ago"
    health = scrape.health
    if health is None:
        state = STALE if age > stale else UNREACHABLE
        return WorkerStatus(**common, state=state, problem=f"{scrape.error}; {seen}",
                            answered=False, partitions={})
    if age > stale:
        state, problem = STALE, f"{seen}, but its pages answer: can it reach Kafka?"
    elif health.get("crash_looping"):
        state, problem = CRASH_LOOPING, f"{health.get('recent_crashes', 0)} recent crashes"
    elif health.get("stalled"):
        state, problem = STALLED, "no progress on " + ", ".join(health["stalled"])
    elif not health.get("ready"):
        state, problem = NOT_READY, _not_ready_reason(health)
    else:
        state, problem = READY, None
    first, second, seconds = scrape.first, scrape.second, scrape.seconds
    return WorkerStatus(
        **common, state=state, problem=problem, answered=True,
        partitions={topic: list(partitions)
                    for topic, partitions in dict(health.get("inputs", {})).items()},
        lag=total(second, "situflow_consumer_lag"),
        in_rate=rate(first, second, seconds, "situflow_events_in_total"),
        out_rate=rate(first, second, seconds, "situflow_events_out_total"),
        dlq=total(second, "situflow_dlq_messages_total"),
        late=total(second, "situflow_late_events_total"),
        open_situations=total(second, "situflow_open_situations"),
        partial_matches=total(second, "situflow_partial_matches"),
        queries=list(health["queries"]) if "queries" in health else None)


def _not_ready_reason(health: Mapping[str, Any]) -> str:
    if not health.get("tables_recovered", True):
        return "recovering its state"
    if health.get("rebalancing"):
        return "rebalancing"
    if not health.get("registry_synced", True):
        return "reading the query registry"
    if not health.get("assigned"):
        return "no partitions assigned"
    return "see its /health"


def query_views(queries: Mapping[str, QueryRecord], statuses: Mapping[str, QueryStatus],
                workers: Sequence[WorkerStatus], scrapes: Mapping[str, Scrape]) -> list[QueryView]:
    """Each registered query: its state (module doc) and its results per second, summed over
    the workers that write its output topic."""
    evaluated = {name for worker in workers for name in worker.queries or ()}
    views = []
    for name in sorted(queries):
        record = queries[name]
        status = statuses.get(name)
        if status is not None and status.query_id != record.query_id:
            status = None  # a failure of an older text of the name
        out = sum(rate(s.first, s.second, s.seconds, "situflow_events_out_total",
                       topic=record.output_topic) for s in scrapes.values() if s.health)
        state = FAILED if status is not None else RUNNING if name in evaluated else NOT_EVALUATED
        views.append(QueryView(
            name, record.language, record.stream.name if record.stream else None,
            record.query_id, state, out, error=status.error if status else None,
            failed_at=status.at if status else None,
            failed_in=status.service if status else None))
    return views


async def scrape(announcements: Iterable[Announcement], interval: float,
                 timeout: float = PAGE_TIMEOUT) -> dict[str, Scrape]:
    """Every worker's pages by worker id, all workers at once: ``/health`` and ``/metrics``,
    and ``/metrics`` again ``interval`` seconds after the first read."""
    workers = list(announcements)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
        scrapes = await asyncio.gather(*(_scrape(session, a.url, interval) for a in workers))
    return {a.worker: found for a, found in zip(workers, scrapes, strict=True)}


async def _scrape(session: aiohttp.ClientSession, url: str, interval: float) -> Scrape:
    try:
        async with session.get(f"{url}/health") as response:
            health = dict(json.loads(await response.read()))
        first, first_at = await _read_metrics(session, url)
        await asyncio.sleep(interval)
        second, second_at = await _read_metrics(session, url)
    except (aiohttp.ClientError, TimeoutError, ValueError, TypeError) as exc:
        return Scrape(error=f"{url}: {_reason(exc)}")
    return Scrape(health, first, second, second_at - first_at)


async def _read_metrics(session: aiohttp.ClientSession, url: str) -> tuple[Samples, float]:
    """The samples of ``url``'s ``/metrics`` page, and when they were read (monotonic)."""
    async with session.get(f"{url}/metrics") as response:
        response.raise_for_status()
        text = await response.text()
    return parse_metrics(text), time.monotonic()


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if isinstance(exc, aiohttp.ClientConnectorError):
        refused = isinstance(exc.os_error, ConnectionRefusedError)
        return f"cannot connect: {'connection refused' if refused else exc.os_error}"
    return f"{type(exc).__name__}: {exc}"


async def collect(kafka: KafkaSettings, *, services_topic: str, queries_topic: str,
                  interval: float, stale: float) -> Report:
    """The report of the deployment whose workers announce on ``services_topic`` and whose
    queries are in the registry ``queries_topic``."""
    announcements = await read_announcements(kafka, services_topic)
    queries = await list_queries(kafka, topic=queries_topic)
    statuses = await read_statuses(kafka, topic=queries_topic)
    scrapes = await scrape(announcements.values(), interval)
    now_ms = time.time_ns() // 1_000_000
    workers = sorted((worker_status(a, scrapes[a.worker], stale, now_ms)
                      for a in announcements.values()), key=lambda w: (w.service, w.worker))
    return Report(workers, query_views(queries, statuses, workers, scrapes))


def render(report: Report) -> str:
    """The screen: a table per service, the queries, then the verdict line."""
    lines: list[str] = []
    services: dict[str, list[WorkerStatus]] = {}
    for worker in report.workers:
        services.setdefault(worker.service, []).append(worker)
    for service, workers in services.items():
        streams = ", ".join(sorted({w.stream for w in workers}))
        ready = sum(w.state == READY for w in workers)
        lines.append(f"{service} (stream {streams}): {ready} of {len(workers)} "
                     f"worker{'s' if len(workers) != 1 else ''} ready")
        lines.extend(_table(
            ("WORKER", "STATE", "PARTITIONS", "LAG", "IN/S", "OUT/S", "DLQ", "LATE", "OPEN",
             "PARTIAL"),
            [(w.worker, w.state, _partitions(w.partitions), _count(w.lag), _rate(w.in_rate),
              _rate(w.out_rate), _count(w.dlq), _count(w.late), _count(w.open_situations),
              _count(w.partial_matches)) for w in workers]))
        lines.extend(f"  {w.worker}: {w.problem}" for w in workers if w.problem)
        lines.append("")
    lines.append(f"queries: {len(report.queries)}")
    lines.extend(_table(
        ("NAME", "LANGUAGE", "STREAM", "STATE", "OUT/S"),
        [(q.name, q.language, q.stream or "-", q.state, _rate(q.out_rate))
         for q in report.queries]))
    lines.extend(f"  {q.name}: failed at {_time(q.failed_at)} in {q.failed_in}: {q.error}"
                 for q in report.queries if q.state == FAILED and q.failed_at is not None)
    lines.append("")
    lines.append(_verdict(report))
    return "\n".join(lines)


def _verdict(report: Report) -> str:
    problems = report.problems
    if problems:
        return "unhealthy: " + "; ".join(problems)
    services = len({w.service for w in report.workers})
    queries = len(report.queries)
    return (f"healthy: {len(report.workers)} workers of {services} services ready, {queries} "
            f"quer{'y' if queries == 1 else 'ies'} running")


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    if not rows:
        return []
    widths = [max(len(row[i]) for row in (headers, *rows)) for i in range(len(headers))]
    return ["  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
            .rstrip() for row in (headers, *rows)]


def _partitions(inputs: Mapping[str, Sequence[int]]) -> str:
    """``cars.ordered 0-3, situations.cars 0,2``; ``-`` when there are none."""
    listed = [f"{topic} {_ranges(partitions)}" for topic, partitions in inputs.items()
              if partitions]
    return ", ".join(listed) or "-"


def _ranges(numbers: Sequence[int]) -> str:
    """``0-3,5``: consecutive numbers as ranges.

    >>> _ranges([0, 1, 2, 3, 5, 7, 8])
    '0-3,5,7-8'
    """
    parts: list[str] = []
    ordered = sorted(numbers)
    start = previous = ordered[0]
    for number in [*ordered[1:], None]:
        if number is not None and number == previous + 1:
            previous = number
            continue
        parts.append(str(start) if start == previous else f"{start}-{previous}")
        if number is not None:
            start = previous = number
    return ",".join(parts)


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _time(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).isoformat(timespec="seconds")
