"""The deriver service: ``<stream>.ordered`` → the situations topic (distributed TPStream, thesis
§5.6.5).

For every registered TPStream query and every ordered partition, one
:class:`situflow.tpstream.situation_deriver.SituationDeriver` turns the partition's events into
situation records (:mod:`situflow.tpstream.records`: *started*, *running* and *finished*
situations with their aggregates), which the matcher service (:mod:`workers.matcher`) files and
matches. Queries come from the registry, followed while the service runs, or from
``SITUFLOW_QUERY_FILE``, as for every evaluating service (:mod:`workers.evaluation`); a query
must partition by the stream's key attributes ``SITUFLOW_KEY_FIELDS``.

Output: **one situations topic** for all queries of the stream (ARCHITECTURE.md's
``situations``; ``SITUFLOW_SITUATIONS_TOPIC`` names another), as the thesis writes every
deriver's situation batches "into a single result topic" and lets "multiple matchers with
shared situation definitions ... work with the same Kafka topic". Each ordered message gives,
per query that derives anything from it, **one situation batch message** (thesis §5.6.3's
situation batch; the format is :class:`workers.situation_matching.SituationBatch`) keyed by the
query name as a JSON string, to the *same partition number* as the ordered message, so every
record of a partition key reaches one matcher partition, in order; the situations topic has the
stream's partitions. A message per record (keyed by partition key) would cost one produce batch
per situation change: the services send one record per produce batch (tansu,
:mod:`workers.app`), which would bound the deriver to a few hundred changes per second, where a
batch per message keeps up with K-slack's Arrow messages. Each batch names the query's text
(``query_id``) and its registration (``registered_at``), so that the matcher, which follows the
registry on its own, neither matches it with another text nor misses it for having read the
registry later.

State, checkpoints and delivery are the evaluating services': per ordered partition, each
query's deriver snapshot and, per key, the position (event time, input seq) of the last event
derived, in the ``derivers`` table (:mod:`workers.partitions`). Redelivered events at or before
their key's position are skipped. A restart re-derives the events after the last checkpoint
and sends their records again, identical (derivation is deterministic); the matcher recognises
them by position (each record's ``at`` and ``seq``) and skips them: at least once, with no
duplicate match. A message that does not decode goes to ``<stream>.dlq`` with the reason.

Metrics (``/metrics``): the common ones, and ``situflow_open_situations``, the situations open
in this worker's derivers. Run: ``python -m workers.deriver worker``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from workers.app import ServiceConfig, run
from workers.evaluation import EvaluatingService, Evaluation
from workers.situation_matching import SituationBatch, over_events

JSON_CONTENT_TYPE = [("content-type", b"application/json")]

config = ServiceConfig.from_env("deriver")
SITUATIONS = config.situations
service = EvaluatingService(config, ("tpstream",), "derivers", prepare=over_events)
app, queries, metrics = service.app, service.queries, service.metrics
situations = service.topic(SITUATIONS)


async def derive(evaluation: Evaluation, event: Any) -> list[Any]:
    """Derive every query's situations from the message's new events; the deliveries."""
    partition = event.message.partition

    async def send(name: str, query_id: str, records: Sequence[Any]) -> list[Any]:
        if not records:
            return []
        batch = SituationBatch(name, query_id, queries.registered_at.get(name, -1),
                               list(records))
        delivery = await situations.send(key=json.dumps(name).encode(), value=batch.encode(),
                                         partition=partition, headers=JSON_CONTENT_TYPE)
        metrics.messages_out(service.service, SITUATIONS).inc()
        metrics.events_out(service.service, SITUATIONS).inc(len(records))
        return [delivery]

    return await service.evaluate_events(evaluation, event, list(evaluation.operators.items()),
                                         send)


service.evaluate_with(derive)
metrics.open_situations.set_function(
    lambda: sum(getattr(op, "open_situations", 0) for op in service.operators()))
metrics.health_details = lambda: {"queries": sorted(queries.compiled),
                                  "situations_topic": SITUATIONS}

if __name__ == "__main__":
    run(app, config)
