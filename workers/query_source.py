"""Where an evaluating service's queries come from: ``SITUFLOW_QUERY_FILE``, or the query
registry (:mod:`topics.registry`, ``SITUFLOW_REGISTRY=1``) followed while the service runs.

A submitted query is evaluated from the next message of each partition on, a deleted one stops,
a changed one starts afresh; a registered query the service cannot evaluate is logged, counted
(``situflow_query_errors``) and skipped. A query from a file is named by
``SITUFLOW_QUERY_NAME`` or else the file's stem, as ``situflow run`` names it, so both give the
same result ids. The query set itself is the core's (:class:`situflow.runtime.QuerySet`).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import faust

from situflow.errors import QueryError, SituflowError
from situflow.languages import compile_query
from situflow.operator import CompiledQuery
from situflow.runtime import QuerySet
from topics.catalog import StreamSpec
from topics.query_checks import check_query
from topics.registry import QueryRecord, RegistryWatcher
from workers.metrics import ServiceMetrics
from workers.settings import ServiceConfig

#: Seconds a service waits for the registry to reach a registration that its input names.
REGISTRY_WAIT = 10.0

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

    async def catch_up(self, offset: int) -> bool:
        """Whether the registration at registry ``offset`` was not read yet and now is: then
        the queries may have changed. False at once without a registry, when it was read, or
        when the registry holds no such record (a batch can name anything)."""
        registry = self.registry
        if registry is None or offset < registry.position:
            return False
        try:
            async with asyncio.timeout(REGISTRY_WAIT):
                return await registry.reached(offset)
        except TimeoutError:
            logger.warning("the registry has not reached offset %d after %gs", offset,
                           REGISTRY_WAIT)
            return False


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

    async def on_change(name: str, record: QueryRecord | None) -> None:
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
