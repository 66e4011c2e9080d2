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

**The ordered events are fetched only while a SASE+ query is registered**: the TPStream
queries read the situations topic, and every ordered message would be fetched for nothing.
While none is, the ordered partitions are paused (:meth:`PartitionStates.idle
<workers.partitions.PartitionStates.idle>`; the service's ``inputs`` in ``/health`` and its
lag and stall gauges leave the topic out). When one is registered, they are fetched again from
where they stopped, and the messages written meanwhile are applied without a SASE+ query
reading them, up to the end offset each partition had then: a query begins with the next
message after its registration, as it did while the topic was read all along (from the next
message the matcher handles). This is in memory: a matcher that restarts and restores an older
checkpoint evaluates what it replays, as for any query registered after that checkpoint.

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

**Unpartitioned streams** (``SITUFLOW_UNPARTITIONED=1``; thesis §5.6.3/§5.6.5): the matcher
reads only the situations topic, where each TPStream query's situation batches are in one
partition, so one matcher consumer merges them ("matching is done by one Kafka consumer"): a
:class:`~workers.situation_matching.BatchMatcher` per query takes them in any order, waits for
each next sequence number (the "K-slack operation on the sequence numbers"), merges them (Alg.
5.5) into exactly the sequential deriver's records and matches those, giving ``situflow run``'s
results and result ids. It begins at the batch its query ``starts`` at (batch 0 for a query
registered before the stream). Its state (merger with the batches that wait, matcher buffers)
is checkpointed like every operator's; a redelivered batch is a duplicate of its number and
skipped, so delivery stays at least once with no duplicate match.

A missing batch is waited for, never skipped (skipping would silently give wrong results). A
deriver's crash or rebalance only delays it: its batches are redelivered and derived again.
While it is missing, later batches wait in the merger, at most
``SITUFLOW_MAX_PENDING_BATCHES`` (default 1024) per query; a batch beyond that (or one whose
events do not follow the last merged, a numbering error) raises ``SequenceError``: the matcher
logs it and sends the batch to ``<situations>.dlq`` with the error as the reason, which names
the missing batch. The query's merged results stop there (nothing wrong is emitted, nothing
is dropped silently: the batch is in the DLQ) until the query is deleted and submitted again,
which begins it afresh (:func:`~workers.situation_matching.match_batch`); the gauges below
show it waiting.

Metrics (``/metrics``): the common ones, ``situflow_buffered_situations`` (situations in the
TPStream matchers' buffers), ``situflow_open_situations`` (situations the matchers know to be
running; the deriver holds their events, or the merger over an unpartitioned stream),
``situflow_partial_matches`` (SASE+ runs), and per unpartitioned query
``situflow_merge_waiting_for`` (the batch number its merger waits for) and
``situflow_merge_pending_batches`` (batches waiting for it). Run:
``python -m workers.matcher worker``.
"""

import os
from collections.abc import Iterator
from functools import partial
from typing import Any

from faust.types import TP
from prometheus_client.core import GaugeMetricFamily, Metric

from situflow.errors import InputError
from situflow.tpstream.batch_merger import MAX_PENDING
from situflow.tpstream.situation_matcher import SituationMatcher
from topics.catalog import dlq_topic, situations_topic
from workers.app import ServiceConfig, owned_partitions, run
from workers.evaluation import EvaluatingService, Evaluation
from workers.situation_matching import (
    BatchMatcher,
    SituationMessage,
    buffered_situations,
    match_batch,
    match_situations,
    over_situation_batches,
    over_situations,
    situation_matcher,
)

config = ServiceConfig.from_env("matcher")
SITUATIONS = config.situations
UNPARTITIONED = config.stream.unpartitioned
MAX_PENDING_BATCHES = int(os.environ.get("SITUFLOW_MAX_PENDING_BATCHES", MAX_PENDING))
# The table is not the fused matcher's "operators": its TPStream snapshots are another kind.
service = EvaluatingService(
    config, ("tpstream", "sase"), "matchers", inputs=(SITUATIONS,), events=not UNPARTITIONED,
    prepare=partial(over_situation_batches, max_pending=MAX_PENDING_BATCHES) if UNPARTITIONED
    else over_situations)
app, queries, metrics = service.app, service.queries, service.metrics
situations_dlq = service.topic(dlq_topic(situations_topic(name=SITUATIONS)).name)


ORDERED = service.ordered
#: Per ordered partition, the offset from which SASE+ queries read its messages (module doc).
events_from: dict[int, int] = {}


async def evaluate(evaluation: Evaluation, event: Any) -> list[Any]:
    message = event.message
    if message.topic == SITUATIONS:
        return await match(evaluation, event)
    if message.offset < events_from.get(message.partition, 0):
        return []
    over_events = [(name, query) for name, query in evaluation.operators.items()
                   if not isinstance(query[1], SituationMatcher)]
    return await service.evaluate_events(evaluation, event, over_events, service.send_results)


async def fetch_events() -> None:
    """Pause the ordered partitions while no SASE+ query is registered; fetch them again when
    one is, SASE+ queries reading from the end each had then (module doc)."""
    if not queries.known.is_set() or app.rebalancing:
        return  # (after a rebalance, every partition the worker owns gets its end offset)
    wanted = any(query.language == "sase" for query in queries.compiled.values())
    if wanted == (ORDERED in metrics.inputs):
        return
    if wanted:
        tps = [TP(ORDERED, p) for p in owned_partitions(app, ORDERED)]
        ends = await app.consumer.highwaters(*tps) if tps else {}
        events_from.update({tp.partition: end for tp, end in ends.items()})
        metrics.inputs = service.inputs
        service.states.idle(())
    else:
        metrics.inputs = tuple(topic for topic in service.inputs if topic != ORDERED)
        service.states.idle((ORDERED,))


async def match(evaluation: Evaluation, event: Any) -> list[Any]:
    """File one situation message and send its matches; the deliveries."""
    try:
        message = SituationMessage.decode(event.value)
    except InputError as exc:
        return [await service.dead_letter(event, exc.reason, situations_dlq)]
    records = len(message.records) if message.batch is None else len(message.batch.records)
    metrics.events_in(service.service, SITUATIONS).inc(records)
    if situation_matcher(evaluation.operators, message) is None and \
            await queries.catch_up(message.registered_at):
        evaluation.sync(queries)
    if message.batch is None:
        matches, error = await service.run(evaluation, message.query, event,
                                           lambda: match_situations(evaluation.operators,
                                                                    evaluation.positions, message))
    else:
        matches, error = await service.run(evaluation, message.query, event,
                                           lambda: match_batch(evaluation.operators, message))
    deliveries = await service.send_results(message.query, message.query_id, matches)
    if error:
        deliveries.append(await service.dead_letter(event, error, situations_dlq))
    return deliveries


def merge_gauges() -> Iterator[Metric]:
    """Per unpartitioned query: the batch its merger waits for and how many batches wait
    (only where batches arrived: every partition has a merger per query, one is used)."""
    waiting = GaugeMetricFamily("situflow_merge_waiting_for", "The situation batch number the "
                                "merger of an unpartitioned query waits for",
                                labels=["service", "query"])
    pending = GaugeMetricFamily("situflow_merge_pending_batches", "Situation batches waiting in "
                                "the merger of an unpartitioned query", labels=["service", "query"])
    for _, evaluation in service.states.items():
        for name, (_, operator) in evaluation.operators.items():
            if isinstance(operator, BatchMatcher) and \
                    (operator.started or operator.merger.pending):
                waiting.add_metric([service.service, name], operator.merger.waiting_for)
                pending.add_metric([service.service, name], len(operator.merger.pending))
    yield waiting
    yield pending


class MergeCollector:
    def collect(self) -> Iterator[Metric]:
        return merge_gauges()


service.evaluate_with(evaluate)
if not UNPARTITIONED:
    app.timer(interval=0.5)(fetch_events)
metrics.registry.register(MergeCollector())
metrics.buffered_situations.set_function(
    lambda: sum(buffered_situations(op) for op in service.operators()))
metrics.open_situations.set_function(
    lambda: sum(getattr(op, "open_situations", 0) for op in service.operators()))
metrics.partial_matches.set_function(
    lambda: sum(op.live_partial_matches() for op in service.operators()
                if hasattr(op, "live_partial_matches")))

if __name__ == "__main__":
    run(app, config)
