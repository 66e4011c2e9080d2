"""The matcher service: TPStream over the situations topic and SASE+ over ``<stream>.ordered``
→ ``matches.<query>`` (distributed TPStream, thesis §5.6.5).

TPStream is split at the situation stream, as the thesis splits it: the deriver service
(:mod:`workers.deriver`) derives each query's situations from ``<stream>.ordered`` and writes
situation batches to the situations topic; here one
:class:`~situflow.tpstream.situation_matcher.SituationMatcher` per partition and query files
them and matches, "an independent process waiting for the input of the deriver" (§5.6.5). The
matches are the fused operator's, with the same result ids (``tests/tpstream/test_split.py``).
SASE+ queries run on the ordered events as before. The batch format, the skipping of repeated
steps and how a batch waits for the matcher to read its query's registration are in
:mod:`workers.situation_matching`.

One agent consumes both inputs: the deriver writes a partition's batches to the *same
partition number* of the situations topic, so a partition key's situations and events reach
the same worker, and both inputs share the partition's state (operators and positions), its
checkpoints and its at-least-once delivery (:mod:`workers.evaluation`,
:mod:`workers.partitions`). Faust co-partitions an agent's topics and its table only if they
have the same number of partitions: **the situations topic must have exactly the stream's
partitions**, so a deployment with several streams gives each its own situations topic
(``SITUFLOW_SITUATIONS_TOPIC``, the same for its deriver and matcher). A situation batch that
does not decode, or that a matcher rejects, goes to ``<situations>.dlq`` with the reason;
ordered messages as before to ``<stream>.dlq``. State is in the ``matchers`` table.

Metrics (``/metrics``): the common ones, ``situflow_buffered_situations`` (situations in the
TPStream matchers' buffers), ``situflow_open_situations`` (situations the matchers know to be
running; the deriver holds their events) and ``situflow_partial_matches`` (SASE+ runs).
Run: ``python -m workers.matcher worker``.
"""

from typing import Any

from situflow.errors import InputError
from situflow.tpstream.situation_matcher import SituationMatcher
from topics.catalog import dlq_topic, situations_topic
from workers.app import ServiceConfig, run
from workers.evaluation import EvaluatingService, Evaluation
from workers.situation_matching import (
    SituationBatch,
    buffered_situations,
    match_situations,
    over_situations,
    situation_matcher,
)

config = ServiceConfig.from_env("matcher")
SITUATIONS = config.situations
# The table is not the fused matcher's "operators": its TPStream snapshots are another kind.
service = EvaluatingService(config, ("tpstream", "sase"), "matchers", prepare=over_situations,
                            inputs=(SITUATIONS,))
app, queries, metrics = service.app, service.queries, service.metrics
situations_dlq = service.topic(dlq_topic(situations_topic(name=SITUATIONS)).name)


async def evaluate(evaluation: Evaluation, event: Any) -> list[Any]:
    if event.message.topic == SITUATIONS:
        return await match(evaluation, event)
    over_events = [(name, query) for name, query in evaluation.operators.items()
                   if not isinstance(query[1], SituationMatcher)]
    return await service.evaluate_events(evaluation, event, over_events, service.send_results)


async def match(evaluation: Evaluation, event: Any) -> list[Any]:
    """File one situation batch and send its matches; the deliveries."""
    try:
        batch = SituationBatch.decode(event.value)
    except InputError as exc:
        return [await service.dead_letter(event, exc.reason, situations_dlq)]
    metrics.events_in(service.service, SITUATIONS).inc(len(batch.records))
    if situation_matcher(evaluation.operators, batch) is None and \
            await queries.catch_up(batch.registered_at):
        evaluation.sync(queries)
    matches, error = service.run(batch.query, event, lambda: match_situations(
        evaluation.operators, evaluation.positions, batch))
    deliveries = await service.send_results(batch.query, batch.query_id, matches)
    if error:
        deliveries.append(await service.dead_letter(event, error, situations_dlq))
    return deliveries


service.evaluate_with(evaluate)
metrics.buffered_situations.set_function(
    lambda: sum(buffered_situations(op) for op in service.operators()))
metrics.open_situations.set_function(
    lambda: sum(getattr(op, "open_situations", 0) for op in service.operators()))
metrics.partial_matches.set_function(
    lambda: sum(op.live_partial_matches() for op in service.operators()
                if hasattr(op, "live_partial_matches")))

if __name__ == "__main__":
    run(app, config)
