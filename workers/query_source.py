"""Where an evaluating service's queries come from: ``SITUFLOW_QUERY_FILE``, or the query
registry (:mod:`topics.registry`, ``SITUFLOW_REGISTRY=1``) followed while the service runs.

A submitted query is evaluated from the next message of each partition on, a deleted one stops,
a changed one starts afresh; a registered query the service cannot evaluate is logged, counted
(``situflow_query_errors``) and skipped. A query from a file is named by
``SITUFLOW_QUERY_NAME`` or else the file's stem, as ``situflow run`` names it, so both give the
same result ids. The query set itself is the core's (:class:`situflow.runtime.QuerySet`).

**Catching up** (:meth:`ServiceQueries.catch_up`): the matcher's input names the registration
it was derived under, which the matcher's own registry reader may not have read yet (the
deriver's and the trends service's inputs name none). Nothing of such a message may be lost,
so the service waits for the reader, up to :data:`REGISTRY_TIMEOUT` (its other partitions'
messages wait too: they need the same registry). A warning every :data:`REGISTRY_WAIT`
seconds, the counter ``situflow_registry_waits`` (messages that waited) and the gauge
``situflow_registry_wait_seconds`` (how long the message in hand has waited) show it. A reader
that has not got there by then is stuck: the worker exits with :data:`EXIT_REGISTRY_BEHIND`
and its supervisor restarts it. That is the replay the checkpoints already give: the message
was never acknowledged, and a starting worker reads the registry to its end before it evaluates
anything (:attr:`ServiceQueries.known`), so the replayed message finds its registration.
Failing the message instead would not do: a replay follows at once and, failing again, sends
the message to the DLQ (:mod:`workers.failures`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import faust
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from situflow.errors import QueryError, SituflowError
from situflow.languages import compile_query
from situflow.operator import CompiledQuery
from situflow.runtime import QuerySet
from topics.catalog import StreamSpec
from topics.query_checks import check_query
from topics.registry import QueryRecord, RegistryWatcher
from workers.metrics import ServiceMetrics
from workers.settings import ServiceConfig

#: Seconds between the warnings of a service that waits for its registry reader (module doc).
REGISTRY_WAIT = 10.0
#: Seconds a service waits in all for its registry reader before it restarts (module doc);
#: well within Faust's ``broker_max_poll_interval`` (1000 s), so the group keeps the worker.
REGISTRY_TIMEOUT = 300.0
#: The exit code of a worker whose registry reader is stuck (BSD's EX_TEMPFAIL: try again).
EXIT_REGISTRY_BEHIND = 75

logger = logging.getLogger(__name__)


class ServiceQueries(QuerySet):
    """The query set of one service over ``stream``, from a file or followed in the registry.

    ``known`` is set once the queries are known: at once from a file, after reading the
    registry to its end when following it. No event is evaluated before (it would be lost to
    the queries, as its position is recorded as seen).
    """

    def __init__(self, service: str, languages: frozenset[str], stream: StreamSpec,
                 prepare: Callable[[CompiledQuery], CompiledQuery] = lambda query: query,
                 device: str = "cpu"):
        super().__init__(service, languages, time_field=stream.time_field,
                         time_unit=stream.time_unit, prepare=prepare,
                         stream_check=partial(check_query, stream=stream), device=device)
        self.stream = stream
        self.known = asyncio.Event()
        self.registry: RegistryWatcher | None = None  # while following the registry
        #: Messages that waited for the registry reader, and since when the one in hand waits
        #: (monotonic time; None: none waits): ``situflow_registry_wait*`` (:class:`RegistryWaits`).
        self.waits = 0
        self.waiting_since: float | None = None
        #: What a worker does whose registry reader is stuck (module doc).
        self.give_up: Callable[[int], None] = exit_registry_behind

    async def catch_up(self, offset: int) -> bool:
        """Whether the registration at registry ``offset`` was not read yet and now is: then
        the queries may have changed. False at once without a registry, when it was read, or
        when the registry holds no such record (a batch can name anything). Waits for the
        reader as the module doc says, and gives up (:attr:`give_up`) after
        :data:`REGISTRY_TIMEOUT` seconds."""
        registry = self.registry
        if registry is None or offset < registry.position:
            return False
        self.waiting_since = since = time.monotonic()
        try:
            while True:
                try:
                    async with asyncio.timeout(REGISTRY_WAIT):
                        reached = await registry.reached(offset)
                    break
                except TimeoutError:
                    waited = time.monotonic() - since
                    if waited >= REGISTRY_TIMEOUT:
                        self.waits += 1
                        self.give_up(offset)
                        return False
                    logger.warning("waiting %.0fs so far for the registry reader to reach the "
                                   "registration at offset %d (it has read %d records); the "
                                   "input waits, and the worker restarts after %gs",
                                   waited, offset, registry.position, REGISTRY_TIMEOUT)
        finally:
            self.waiting_since = None
        if reached:
            self.waits += 1
        return reached

    def waited(self) -> float:
        """Seconds the message in hand has waited for the registry reader (0: none waits)."""
        since = self.waiting_since
        return 0.0 if since is None else time.monotonic() - since


def exit_registry_behind(offset: int) -> None:
    """Exit the worker, whose registry reader has not reached ``offset`` in
    :data:`REGISTRY_TIMEOUT` seconds: its restart replays the message after reading the
    registry (module doc)."""
    logger.critical("the registry reader has not reached the registration at offset %d in %gs; "
                    "exiting (%d) so that the restarted worker reads the registry and replays "
                    "the input from its checkpoint", offset, REGISTRY_TIMEOUT,
                    EXIT_REGISTRY_BEHIND)
    logging.shutdown()
    sys.stderr.flush()
    os._exit(EXIT_REGISTRY_BEHIND)


class RegistryWaits:
    """A collector of a service's waits for its registry reader (module doc), read when
    scraped: ``situflow_registry_waits_total`` and ``situflow_registry_wait_seconds``."""

    def __init__(self, service: str, queries: ServiceQueries) -> None:
        self.service = service
        self.queries = queries

    def collect(self) -> Iterator[Metric]:
        waits = CounterMetricFamily("situflow_registry_waits", "Messages that waited for the "
                                    "registry reader to read the registration they name",
                                    labels=["service"])
        waits.add_metric([self.service], self.queries.waits)
        yield waits
        seconds = GaugeMetricFamily("situflow_registry_wait_seconds", "Seconds the message in "
                                    "hand has waited for the registry reader (0: none waits)",
                                    labels=["service"])
        seconds.add_metric([self.service], self.queries.waited())
        yield seconds


def read_query_file(queries: ServiceQueries, path: str | None, name: str | None) -> None:
    """The query of ``SITUFLOW_QUERY_FILE`` (``path``), if set, named ``name`` or else by the
    file's stem; exits with a located error if it is bad."""
    if not path:
        return
    file = Path(path)
    name = name or file.stem
    try:
        text = file.read_text()
        queries.add(compile_query(text, queries.options(name)))
    except OSError as exc:
        sys.exit(f"situflow {queries.service}: cannot read SITUFLOW_QUERY_FILE={file}: "
                 f"{exc.strerror}")
    except QueryError as exc:
        sys.exit(exc.render(str(file), text))
    except SituflowError as exc:
        sys.exit(f"situflow {queries.service}: {file}: {exc}")


def check_time_unit_of(record: QueryRecord, stream: StreamSpec) -> None:
    """Raise unless ``record`` was submitted for ``stream``'s time unit (if it names one): its
    durations would mean other times here than were checked at submit."""
    if record.stream is not None and record.stream.time_unit != stream.time_unit:
        raise SituflowError(
            f"it was submitted for a stream of {record.stream.time_unit:g} s per tick, and "
            f"{stream.name!r} has {stream.time_unit:g} (SITUFLOW_TIME_UNIT); submit it again "
            "with the stream's time unit")


def follow_registry(app: faust.App, config: ServiceConfig, queries: ServiceQueries,
                    metrics: ServiceMetrics) -> None:
    """Keep ``queries`` equal to the registry's queries of this service's languages; the
    service is not ready until it has read the registry to its end."""
    metrics.registry_synced = False
    metrics.registry.register(RegistryWaits(queries.service, queries))
    delay = config.settings.test_registry_delay  # integration tests only: a reader held back

    async def on_change(name: str, record: QueryRecord | None) -> None:
        if delay:
            await asyncio.sleep(delay)
        if record is None:
            queries.remove(name)
            app.log.info("query %s deleted", name)
            return
        if record.language not in queries.languages:
            queries.remove(name)  # the name may have held a query of ours before
            return
        try:
            check_time_unit_of(record, queries.stream)
            queries.add(compile_query(record.text, queries.options(name)), record.offset,
                        record.handoff)
        except (QueryError, SituflowError) as exc:
            queries.remove(name)
            metrics.query_errors.inc()
            app.log.error("query %s is not evaluated: %s", name, exc)
            return
        app.log.info("query %s (%s) is evaluated", name, record.query_id)

    @app.task
    async def registry() -> None:
        async with RegistryWatcher(config.kafka, on_change=on_change) as watcher:
            queries.registry = watcher
            await watcher.wait_synced()
            metrics.registry_synced = True
            queries.known.set()
            await asyncio.Event().wait()  # follow until the app stops (cancels this task)
