"""The deriver service: ``<stream>.ordered`` → the situations topic (distributed TPStream, thesis
§5.6.5).

For every registered TPStream query and every ordered partition, one
:class:`situflow.tpstream.situation_deriver.SituationDeriver` turns the partition's events into
situation records (:mod:`situflow.tpstream.records`: *started*, *running* and *finished*
situations with their aggregates), which the matcher service (:mod:`workers.matcher`) files and
matches. Queries come from the registry, followed while the service runs, or from
``SITUFLOW_QUERY_FILE``, as for every evaluating service (:mod:`workers.evaluation`); a query
must partition by the stream's key attributes ``SITUFLOW_KEY_FIELDS`` (over an unpartitioned
stream any TPStream query runs, see below).

Output: **one situations topic** for all queries of the stream (ARCHITECTURE.md's
``situations``; ``SITUFLOW_SITUATIONS_TOPIC`` names another), as the thesis writes every
deriver's situation batches "into a single result topic" and lets "multiple matchers with
shared situation definitions ... work with the same Kafka topic". Each ordered message gives,
per query that derives anything from it, **one situation message** (its records: a situation
batch of thesis §5.6.3 without head and tail; the format is
:class:`workers.situation_matching.SituationMessage`) keyed by the query name as a JSON string,
to the *same partition number* as the ordered message, so every record of a partition key
reaches one matcher partition, in order; the situations topic has the stream's partitions. A
message per record (keyed by partition key) would cost one produce batch per situation change:
the services send one record per produce batch (tansu, :mod:`workers.app`), which would bound
the deriver to a few hundred changes per second, where a message per ordered message keeps up
with K-slack's Arrow messages. Each message names the query's text (``query_id``) and its
registration (``registered_at``), so that the matcher, which follows the registry on its own,
neither matches it with another text nor misses it for having read the registry later.

State, checkpoints and delivery are the evaluating services': per ordered partition, each
query's deriver snapshot and, per key, the position (event time, input seq) of the last event
derived, in the ``derivers`` table (:mod:`workers.partitions`). Redelivered events at or before
their key's position are skipped. A restart re-derives the events after the last checkpoint
and sends their records again, identical (derivation is deterministic); the matcher recognises
them by position (each record's ``at`` and ``seq``) and skips them: at least once, with no
duplicate match. A message that does not decode goes to ``<stream>.dlq`` with the reason.

**Unpartitioned streams** (``SITUFLOW_UNPARTITIONED=1``; thesis §5.6.3/§5.6.5): each ordered
message is one numbered batch of the global event order, cut by K-slack, and the deriver group
derives the batches in parallel, "a Kafka Streams consumer group that writes the resulting
batches into a single result topic of unsorted runs". For every TPStream query (partitioned or
not) registered before K-slack cut the batch (its :data:`~topics.catalog.BATCH_REGISTRY_HEADER`;
the deriver first reads the registry that far), :class:`~workers.situation_matching.BatchDeriver`
derives the batch on its own into a situation batch, sent even when it holds no situation (the
merger needs every number), to the one partition of the situations topic that holds the query's
batches (:func:`topics.catalog.situations_partition`), where one matcher merges them. The message
says whether the query begins at this batch: the registration lies between what K-slack had read
at this batch and at the one before. Deriving a batch is stateless, so nothing is skipped: a
redelivered batch is derived again, identically, and the merger drops the duplicate. An ordered
batch a query cannot derive goes to ``<stream>.dlq``; that query's matcher then waits for it
(:mod:`workers.matcher`).

Metrics (``/metrics``): the common ones, and ``situflow_open_situations``, the situations open
in this worker's derivers. Run: ``python -m workers.deriver worker``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from situflow.errors import InputError
from situflow.events import EventBatch
from situflow.tpstream.situation_batches import SituationBatch
from topics.catalog import (
    BATCH_REGISTRY_BEFORE_HEADER,
    BATCH_REGISTRY_HEADER,
    BATCH_SEQ_HEADER,
    situations_partition,
)
from workers.app import ServiceConfig, run
from workers.evaluation import EvaluatingService, Evaluation, decode_ordered, ordered_events
from workers.situation_matching import (
    BatchDeriver,
    SituationMessage,
    derived_for,
    over_event_batches,
    over_events,
)

JSON_CONTENT_TYPE = [("content-type", b"application/json")]

config = ServiceConfig.from_env("deriver")
SITUATIONS = config.situations
UNPARTITIONED = config.stream.unpartitioned
service = EvaluatingService(config, ("tpstream",), "derivers",
                            prepare=over_event_batches if UNPARTITIONED else over_events)
app, queries, metrics = service.app, service.queries, service.metrics
situations = service.topic(SITUATIONS)


async def send(message: SituationMessage, partition: int, records: int) -> Any:
    delivery = await situations.send(key=json.dumps(message.query).encode(),
                                     value=message.encode(), partition=partition,
                                     headers=JSON_CONTENT_TYPE)
    metrics.messages_out(service.service, SITUATIONS).inc()
    metrics.events_out(service.service, SITUATIONS).inc(records)
    return delivery


async def derive(evaluation: Evaluation, event: Any) -> list[Any]:
    """Derive every query's situations from the message's new events; the deliveries."""
    partition = event.message.partition

    async def emit(name: str, query_id: str, records: Sequence[Any]) -> list[Any]:
        if not records:
            return []
        message = SituationMessage(name, query_id, queries.registered_at.get(name, -1),
                                   list(records))
        return [await send(message, partition, len(records))]

    return await service.evaluate_events(evaluation, event, list(evaluation.operators.items()),
                                         emit)


async def derive_batches(evaluation: Evaluation, event: Any) -> list[Any]:
    """Derive one batch of an unpartitioned stream for every query registered before it was
    cut; the deliveries."""
    try:
        seq, registry, before, events = batch_of(event)
    except InputError as exc:
        return [await service.dead_letter(event, exc.reason)]
    metrics.events_in(service.service, service.ordered).inc(len(events))
    if await queries.catch_up(registry - 1):
        evaluation.sync(queries)
    deliveries, errors = [], []
    for name, (query_id, operator) in list(evaluation.operators.items()):
        registered_at = queries.registered_at.get(name, -1)
        derived, starts = derived_for(registered_at, before, registry)
        if not derived or not isinstance(operator, BatchDeriver):
            continue
        accepted, rejected = await service.typed(name, event, events)
        deliveries += rejected

        def derive_one(op: BatchDeriver = operator, typed: EventBatch = accepted
                       ) -> list[SituationBatch]:
            return [op.derive(seq, typed)]

        output, error = await service.run(evaluation, name, event, derive_one)
        if error:
            errors.append(error)
            continue
        (batch,) = output
        message = SituationMessage(name, query_id, registered_at, batch=batch, starts=starts)
        deliveries.append(await send(message, situations_partition(name, config.stream.partitions),
                                     len(batch.records)))
    if errors:
        deliveries.append(await service.dead_letter(event, "; ".join(errors)))
    return deliveries


def batch_of(event: Any) -> tuple[int, int, int, EventBatch]:
    """An unpartitioned stream's ordered message: (batch number, registry records read at its
    cut, at the cut before, its events); ``InputError`` if it is not such a batch."""
    headers = {key: value for key, value in event.message.headers or ()}
    try:
        numbers = [int(headers[h]) for h in (BATCH_SEQ_HEADER, BATCH_REGISTRY_HEADER,
                                             BATCH_REGISTRY_BEFORE_HEADER)]
    except (KeyError, ValueError):
        raise InputError(f"an ordered batch of an unpartitioned stream needs the integer "
                         f"headers {BATCH_SEQ_HEADER}, {BATCH_REGISTRY_HEADER} and "
                         f"{BATCH_REGISTRY_BEFORE_HEADER}: not written by K-slack") from None
    events = ordered_events(decode_ordered(event, config.stream), config.stream)
    return numbers[0], numbers[1], numbers[2], events


service.evaluate_with(derive_batches if UNPARTITIONED else derive)
metrics.open_situations.set_function(
    lambda: sum(getattr(op, "open_situations", 0) for op in service.operators()))
metrics.health_details = lambda: {"queries": sorted(queries.compiled),
                                  "situations_topic": SITUATIONS}

if __name__ == "__main__":
    run(app, config)
