"""The deriver service: ``<stream>.ordered`` → the situations topic (distributed TPStream,
thesis §5.6.5).

Reads the ordered events and the TPStream queries (registry or ``SITUFLOW_QUERY_FILE``, as
every evaluating service: :mod:`workers.evaluation`). Writes, per ordered message and query
that derives anything, one :class:`~situflow.tpstream.split.messages.SituationMessage` to the one
situations topic of the stream (``SITUFLOW_SITUATIONS_TOPIC``), keyed by the query name, to
the ordered message's partition number, for the matcher (:mod:`workers.matcher`). Over an
unpartitioned stream (``SITUFLOW_UNPARTITIONED=1``) it derives each numbered batch on its own
(thesis §5.6.3) for the queries registered before K-slack cut it, and sends the batch, empty
or not, to the query's one situations partition.
A query submitted with a backfill (``query submit --backfill-from``, batch/README.md,
"Backfill") begins on each key at the key's first quiet event (no definition holds), so its
situations are whole; the backfill publishes the matches before (:mod:`workers.handoff`).
State: per ordered partition each query's deriver snapshot, its begun keys and each key's
position, in the ``derivers`` table; derivation is deterministic, so a replay re-sends identical records that
the matcher skips. Metrics: the common ones and ``situflow_open_situations``.
Design: ARCHITECTURE.md, "The services". Run: ``situflow serve deriver``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import faust

from situflow.errors import InputError
from situflow.events import EventBatch
from situflow.runtime import PartitionOperators, decode_ordered, ordered_events
from situflow.tpstream.query import TPStreamQuery, quiet_mask
from situflow.tpstream.split.batches import BatchDeriver, SituationBatch
from situflow.tpstream.split.halves import as_batch_deriver, as_deriver, derived_for
from situflow.tpstream.split.messages import SituationMessage
from topics.catalog import (
    BATCH_REGISTRY_BEFORE_HEADER,
    BATCH_REGISTRY_HEADER,
    BATCH_SEQ_HEADER,
    situations_partition,
)
from workers.app import run
from workers.evaluation import EvaluatingService
from workers.settings import ServiceConfig

JSON_CONTENT_TYPE = [("content-type", b"application/json")]


class Deriver:
    """The deriver's wiring over one :class:`EvaluatingService` (module doc)."""

    def __init__(self, config: ServiceConfig) -> None:
        unpartitioned = config.stream.unpartitioned
        self.service = service = EvaluatingService(
            config, ("tpstream",), "derivers",
            prepare=as_batch_deriver if unpartitioned else as_deriver)
        self.situations = service.topic(config.situations)
        service.evaluate_with(self.derive_batches if unpartitioned else self.derive)
        metrics = service.metrics
        metrics.open_situations.set_function(lambda: service.stat("open_situations"))
        metrics.health_details = lambda: {"queries": sorted(service.queries.compiled),
                                          "situations_topic": config.situations}

    async def send(self, message: SituationMessage, partition: int, records: int) -> Any:
        delivery = await self.situations.send(key=json.dumps(message.query).encode(),
                                              value=message.encode(), partition=partition,
                                              headers=JSON_CONTENT_TYPE)
        topic, metrics, name = self.situations.get_topic_name(), self.service.metrics, \
            self.service.service
        metrics.messages_out(name, topic).inc()
        metrics.events_out(name, topic).inc(records)
        return delivery

    async def derive(self, state: PartitionOperators, event: Any) -> list[Any]:
        """Derive every query's situations from the message's new events; the deliveries."""
        partition = event.message.partition
        registered_at = self.service.queries.registered_at

        async def emit(name: str, query_id: str, records: Sequence[Any]) -> list[Any]:
            if not records:
                return []
            message = SituationMessage(name, query_id, registered_at.get(name, -1), list(records))
            return [await self.send(message, partition, len(records))]

        return await self.service.evaluate_events(
            state, event, list(state.operators.items()), emit, self.begun_keys)

    def begun_keys(self, state: PartitionOperators, name: str, events: EventBatch
                   ) -> EventBatch:
        """The events query ``name`` derives: all, or for a query submitted with a backfill
        those of each key from its first quiet event on (module doc)."""
        query = self.service.queries.compiled.get(name)
        if name not in self.service.queries.handoffs or not isinstance(query, TPStreamQuery):
            return events
        return state.begin_keys(name, events, quiet_mask(query, events), query.partition_by)

    async def derive_batches(self, state: PartitionOperators, event: Any) -> list[Any]:
        """Derive one batch of an unpartitioned stream for every query registered before it
        was cut; the deliveries."""
        service, queries = self.service, self.service.queries
        try:
            seq, registry, before, events = self.batch_of(event)
        except InputError as exc:
            return [await service.dead_letter(event, exc.reason)]
        service.metrics.events_in(service.service, service.ordered).inc(len(events))
        if await queries.catch_up(registry - 1):
            state.sync(queries)
        deliveries, errors = [], []
        for name, (query_id, operator) in list(state.operators.items()):
            registered_at = queries.registered_at.get(name, -1)
            derived, starts = derived_for(registered_at, before, registry)
            if not derived or not isinstance(operator, BatchDeriver):
                continue
            accepted, rejected = await service.typed(name, event, events)
            deliveries += rejected

            def derive_one(op: BatchDeriver = operator, typed: EventBatch = accepted
                           ) -> list[SituationBatch]:
                return [op.derive(seq, typed)]

            output, error = await service.run(state, name, event, derive_one)
            if error:
                errors.append(error)
                continue
            (batch,) = output
            message = SituationMessage(name, query_id, registered_at, batch=batch, starts=starts)
            partition = situations_partition(name, service.stream.partitions)
            deliveries.append(await self.send(message, partition, len(batch.records)))
        if errors:
            deliveries.append(await service.dead_letter(event, "; ".join(errors)))
        return deliveries

    def batch_of(self, event: Any) -> tuple[int, int, int, EventBatch]:
        """An unpartitioned stream's ordered message: (batch number, registry records read at
        its cut, at the cut before, its events); ``InputError`` if it is not such a batch."""
        headers = {key: value for key, value in event.message.headers or ()}
        try:
            numbers = [int(headers[h]) for h in (BATCH_SEQ_HEADER, BATCH_REGISTRY_HEADER,
                                                 BATCH_REGISTRY_BEFORE_HEADER)]
        except (KeyError, ValueError):
            raise InputError(f"an ordered batch of an unpartitioned stream needs the integer "
                             f"headers {BATCH_SEQ_HEADER}, {BATCH_REGISTRY_HEADER} and "
                             f"{BATCH_REGISTRY_BEFORE_HEADER}: not written by K-slack") from None
        layout = self.service.layout
        events = ordered_events(decode_ordered(event.value, event.message.headers, layout),
                                layout)
        return numbers[0], numbers[1], numbers[2], events


def build_app(config: ServiceConfig) -> faust.App:
    """The deriver's Faust app over ``config`` (nothing happens at import)."""
    return Deriver(config).service.app


def main() -> None:
    config = ServiceConfig.from_env("deriver")
    run(build_app(config), config)


if __name__ == "__main__":
    main()
