"""The deriver service: ``<stream>.ordered`` → ``situations`` (distributed TPStream, thesis §5.6.5).

For every registered TPStream query and every ordered partition, one
:class:`situflow.tpstream.situation_deriver.SituationDeriver` turns the partition's events into
situation records (:mod:`situflow.tpstream.records`: *started*, *running* and *finished*
situations with their aggregates), which the matcher files and matches
(:mod:`workers.situation_matching`). Queries come from the registry, followed while the
service runs, or from ``SITUFLOW_QUERY_FILE``, exactly as for the matcher
(:mod:`workers.evaluation`: ``Queries``, ``read_query_file``, ``follow_registry``); a query must
partition by the stream's key attributes ``SITUFLOW_KEY_FIELDS``.

Output: **one ``situations`` topic** for all queries (ARCHITECTURE.md; ``SITUFLOW_SITUATIONS_TOPIC``
names another, e.g. per deployment or test), as the thesis writes every deriver's situation
batches "into a single result topic" and lets "multiple matchers with shared situation
definitions ... work with the same Kafka topic". Each ordered message gives, per query that
derives anything from it, **one situation batch message** (thesis §5.6.3's situation batch):
a JSON object ``{"query", "query_id", "records": [record, ...]}`` whose records
(:meth:`SituationRecord.to_dict`: ``query, key, situation, kind, ts, te, at, seq, values, id``)
are in stream order; its message key is the query name as a JSON string; it goes to the
*same partition number* as the ordered message, so every record of a partition key reaches one
matcher partition, in order, and ``situations`` needs at least the stream's partitions. A
message per record (keyed by partition key) would cost one produce batch per situation change:
the services send one record per produce batch (tansu, :mod:`workers.app`), which would bound
the deriver to a few hundred changes per second, where a batch per message keeps up with
K-slack's Arrow messages. ``query_id`` lets the matcher ignore batches derived by an older text
of a query that was changed under the same name.

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
import os
import sys
import time
from typing import Any, cast

import numpy as np

from situflow.errors import InputError
from situflow.events import EventBatch
from situflow.operator import CompiledQuery
from situflow.tpstream.query import TPStreamQuery
from situflow.tpstream.situation_deriver import SituationDeriver
from topics.catalog import SEQ_FIELD, SITUATIONS, stream_topics
from workers.app import (
    ServiceConfig,
    ServiceMetrics,
    dlq_headers,
    make_app,
    message_age,
    owned_partitions,
    state_table,
)
from workers.evaluation import (
    Evaluation,
    Queries,
    decode_ordered,
    follow_registry,
    fresh_rows,
    load,
    read_query_file,
    store,
)
from workers.partitions import PartitionStates
from workers.situation_matching import SplitQuery

SERVICE = "deriver"
JSON_CONTENT_TYPE = [("content-type", b"application/json")]


class DeriverQueries(Queries):
    """The registered TPStream queries, each evaluated by its situation deriver."""

    def add(self, query: CompiledQuery) -> None:
        self.check(query)
        self.compiled[query.name] = SplitQuery(cast(TPStreamQuery, query), SituationDeriver)
        self.version += 1


config = ServiceConfig.from_env(SERVICE)
STREAM = config.stream
if not STREAM.key_fields:
    sys.exit(f"situflow {SERVICE}: set SITUFLOW_KEY_FIELDS to the partition attributes; "
             "unpartitioned streams (thesis 5.6.3) are not supported by the services yet")
SITUATIONS_TOPIC = os.environ.get("SITUFLOW_SITUATIONS_TOPIC", SITUATIONS)
_, ORDERED, _, DLQ = (spec.name for spec in stream_topics(STREAM))
queries = DeriverQueries(SERVICE, frozenset({"tpstream"}), STREAM.key_fields)
read_query_file(queries, os.environ)

app = make_app(f"situflow-{SERVICE}-{STREAM.name}", config)
metrics = ServiceMetrics(app, SERVICE, inputs=(ORDERED,))
TICKS = f"{app.conf.id}-ticks"
source = app.topic(ORDERED, TICKS, internal=True, partitions=STREAM.partitions,
                   key_serializer="raw", value_serializer="raw", retention=3600.0)
ticks = app.topic(TICKS, key_serializer="raw", value_serializer="raw")
dlq = app.topic(DLQ, key_serializer="raw", value_serializer="raw")
situations = app.topic(SITUATIONS_TOPIC, key_serializer="raw", value_serializer="raw")
table = state_table(app, "derivers", config,
                    "per ordered partition: situation derivers and key positions")
states = PartitionStates(app, table, load, store, observe=metrics.checkpointed)
open_gauges: dict[int, int] = {}  # per partition: open situations


@app.agent(source)
async def derive(stream_: Any) -> None:
    await states.consume(stream_, TICKS, on_message)


async def on_message(event: Any) -> None:
    await queries.known.wait()
    partition = event.message.partition
    metrics.messages_in(SERVICE, ORDERED).inc()
    derivation = states.get(partition)
    derivation.sync(queries)
    deliveries = await derive_message(derivation, event)
    states.changed(partition, derivation, event, deliveries)
    set_open_situations(partition, derivation)
    metrics.latency.observe(message_age(event.message, time.time()))


async def derive_message(derivation: Evaluation, event: Any) -> list[Any]:
    """Derive every query's situations from the message's new events; the deliveries."""
    try:
        batch = decode_ordered(event, STREAM)
        metrics.events_in(SERVICE, ORDERED).inc(batch.num_rows)
        batch = fresh_rows(derivation.positions, batch, STREAM)
        if not batch.num_rows:
            return []
        seq = np.asarray(batch.column(SEQ_FIELD).to_numpy(), dtype=np.int64)
        events = EventBatch.from_arrow(batch.drop_columns([SEQ_FIELD]),
                                       time_field=STREAM.time_field, seq=seq)
    except InputError as exc:
        return [await dead_letter(event, exc.reason)]
    deliveries, errors = [], []
    for name, (query_id, deriver) in derivation.operators.items():
        try:
            records = cast(SituationDeriver, deriver).process(events)
        except InputError as exc:
            errors.append(f"query {name}: {exc.reason}")
            continue
        except Exception as exc:  # a deriver bug must not stop the partition
            app.log.exception("query %s failed on %s[%s]@%s", name, event.message.topic,
                              event.message.partition, event.message.offset)
            errors.append(f"query {name}: internal error: {exc!r}")
            continue
        if not records:
            continue
        value = {"query": name, "query_id": query_id,
                 "records": [r.to_dict(name) for r in records]}
        deliveries.append(await situations.send(
            key=json.dumps(name).encode(), value=json.dumps(value).encode(),
            partition=event.message.partition, headers=JSON_CONTENT_TYPE))
        metrics.messages_out(SERVICE, SITUATIONS_TOPIC).inc()
        metrics.events_out(SERVICE, SITUATIONS_TOPIC).inc(len(records))
    if errors:
        deliveries.append(await dead_letter(event, "; ".join(errors)))
    return deliveries


async def dead_letter(event: Any, reason: str) -> Any:
    metrics.dlq(SERVICE, DLQ).inc()
    return await dlq.send(key=event.key, value=event.value,
                          headers=dlq_headers(event.message, reason))


def set_open_situations(partition: int, derivation: Evaluation) -> None:
    opened = sum(cast(SituationDeriver, d).open_situations
                 for _, d in derivation.operators.values())
    metrics.open_situations.inc(opened - open_gauges.get(partition, 0))
    open_gauges[partition] = opened


if os.environ.get("SITUFLOW_REGISTRY") == "1":
    follow_registry(app, config, queries, metrics)
else:
    queries.known.set()
metrics.health_details = lambda: {"queries": sorted(queries.compiled),
                                  "situations_topic": SITUATIONS_TOPIC}


@app.timer(interval=max(states.interval / 2, 0.25))
async def tick() -> None:
    """A tick to each partition of this worker with work to checkpoint (idle ones too)."""
    now = time.monotonic()
    for partition in owned_partitions(app, ORDERED):
        if states.due(partition) and states.want_tick(partition, now):
            await ticks.send(value=b"", partition=partition)


if __name__ == "__main__":
    app.main()
