"""The matcher service: TPStream over the situations topic and SASE+ over ``<stream>.ordered``
→ ``matches.<query>`` (distributed TPStream, thesis §5.6.5).

Reads the situation messages of the deriver (:mod:`workers.deriver`; the format and the
skipping of repeated steps are in :mod:`situflow.tpstream.split.halves`) and, only while a SASE+
query is registered, the ordered events (paused otherwise, then read from the end each
partition had). Both inputs share one agent, so the situations topic must have exactly the
stream's partitions. Writes each query's matches with their result ids (the fused operator's)
and undecodable or rejected input to ``<situations>.dlq`` or ``<stream>.dlq``. Over an
unpartitioned stream one consumer per query merges the situation batches in sequence (Alg.
5.5); a missing batch is waited for, at most ``SITUFLOW_MAX_PENDING_BATCHES`` batches, beyond
which the batch goes to the DLQ and the query stops until submitted again.
State: per partition the matchers, mergers and positions, in the ``matchers`` table. Metrics:
the common ones, buffered and open situations, SASE+ partial matches, merge gauges and their
limit (``situflow_merge_max_pending_batches``), and the waits for the registry reader
(``situflow_registry_wait*``, :mod:`workers.query_source`).
Design: ARCHITECTURE.md, "The services". Run: ``situflow serve matcher``.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import faust
from faust.types import TP
from prometheus_client.core import GaugeMetricFamily, Metric

from situflow.errors import InputError
from situflow.runtime import PartitionOperators
from situflow.tpstream.split.halves import (
    as_batch_matcher,
    as_matcher,
    match_batch,
    match_situations,
    situation_matcher,
)
from situflow.tpstream.split.merger import BatchMatcher
from situflow.tpstream.split.messages import SituationMessage
from topics.catalog import dlq_topic, situations_topic
from workers.app import owned_partitions, run
from workers.evaluation import EvaluatingService
from workers.settings import ServiceConfig


class Matcher:
    """The matcher's wiring over one :class:`EvaluatingService` (module doc)."""

    def __init__(self, config: ServiceConfig) -> None:
        unpartitioned = config.stream.unpartitioned
        max_pending = config.settings.max_pending_batches
        self.situations = config.situations
        # The table is not the fused matcher's "operators": its TPStream snapshots differ.
        self.service = service = EvaluatingService(
            config, ("tpstream", "sase"), "matchers", inputs=(self.situations,),
            events=not unpartitioned,
            prepare=partial(as_batch_matcher, max_pending=max_pending) if unpartitioned
            else as_matcher)
        self.situations_dlq = service.topic(dlq_topic(situations_topic(name=self.situations)).name)
        self.max_pending = max_pending
        #: Per ordered partition, the offset from which SASE+ queries read it (module doc).
        self.events_from: dict[int, int] = {}
        service.evaluate_with(self.evaluate)
        if not unpartitioned:
            service.app.timer(interval=0.5)(self.fetch_events)
        metrics = service.metrics
        metrics.outputs(dlq=[self.situations_dlq.get_topic_name()])
        metrics.registry.register(self)
        for gauge, stat in ((metrics.buffered_situations, "buffered_situations"),
                            (metrics.open_situations, "open_situations"),
                            (metrics.partial_matches, "partial_matches")):
            gauge.set_function(partial(service.stat, stat))

    async def evaluate(self, state: PartitionOperators, event: Any) -> list[Any]:
        message = event.message
        if message.topic == self.situations:
            return await self.match(state, event)
        if message.offset < self.events_from.get(message.partition, 0):
            return []
        compiled = self.service.queries.compiled
        over_events = [(name, query) for name, query in state.operators.items()
                       if name in compiled and compiled[name].language == "sase"]
        return await self.service.evaluate_events(state, event, over_events,
                                                  self.service.send_results)

    async def fetch_events(self) -> None:
        """Pause the ordered partitions while no SASE+ query is registered; fetch them again
        when one is, SASE+ queries reading from the end each had then (module doc)."""
        service = self.service
        app, queries, metrics, ordered = service.app, service.queries, service.metrics, \
            service.ordered
        if not queries.known.is_set() or app.rebalancing:
            return  # (after a rebalance, every partition the worker owns gets its end offset)
        wanted = any(query.language == "sase" for query in queries.compiled.values())
        if wanted == (ordered in metrics.inputs):
            return
        if wanted:
            tps = [TP(ordered, p) for p in owned_partitions(app, ordered)]
            ends = await app.consumer.highwaters(*tps) if tps else {}
            self.events_from.update({tp.partition: end for tp, end in ends.items()})
            metrics.inputs = service.inputs
            service.states.idle(())
        else:
            metrics.inputs = tuple(topic for topic in service.inputs if topic != ordered)
            service.states.idle((ordered,))

    async def match(self, state: PartitionOperators, event: Any) -> list[Any]:
        """File one situation message and send its matches; the deliveries."""
        service = self.service
        try:
            message = SituationMessage.decode(event.value)
        except InputError as exc:
            return [await service.dead_letter(event, exc.reason, self.situations_dlq)]
        records = len(message.records) if message.batch is None else len(message.batch.records)
        service.metrics.events_in(service.service, self.situations).inc(records)
        if situation_matcher(state.operators, message) is None and \
                await service.queries.catch_up(message.registered_at):
            state.sync(service.queries)
        if message.batch is None:
            matched = partial(match_situations, state.operators, state.positions,
                              message)
        else:
            matched = partial(match_batch, state.operators, message)
        matches, error = await service.run(state, message.query, event, matched)
        deliveries = await service.send_results(message.query, message.query_id, matches)
        if error:
            deliveries.append(await service.dead_letter(event, error, self.situations_dlq))
        return deliveries

    def collect(self) -> Iterator[Metric]:
        """Per unpartitioned query: the batch its merger waits for and how many batches wait
        (only where batches arrived: every partition has a merger per query, one is used);
        and the most that may wait, ``SITUFLOW_MAX_PENDING_BATCHES``, for the alert that
        compares them (docs/runbooks.md)."""
        limit = GaugeMetricFamily("situflow_merge_max_pending_batches", "Situation batches a "
                                  "merger holds at most ahead of a gap "
                                  "(SITUFLOW_MAX_PENDING_BATCHES)", labels=["service"])
        limit.add_metric([self.service.service], self.max_pending)
        yield limit
        waiting = GaugeMetricFamily("situflow_merge_waiting_for", "The situation batch number "
                                    "the merger of an unpartitioned query waits for",
                                    labels=["service", "query"])
        pending = GaugeMetricFamily("situflow_merge_pending_batches", "Situation batches "
                                    "waiting in the merger of an unpartitioned query",
                                    labels=["service", "query"])
        service = self.service.service
        for _, state in self.service.states.items():
            for name, (_, operator) in state.operators.items():
                if isinstance(operator, BatchMatcher) and \
                        (operator.started or operator.merger.pending):
                    waiting.add_metric([service, name], operator.merger.waiting_for)
                    pending.add_metric([service, name], len(operator.merger.pending))
        yield waiting
        yield pending


def build_app(config: ServiceConfig) -> faust.App:
    """The matcher's Faust app over ``config`` (nothing happens at import)."""
    return Matcher(config).service.app


def main() -> None:
    config = ServiceConfig.from_env("matcher")
    run(build_app(config), config)


if __name__ == "__main__":
    main()
