"""The matcher service: a TPStream query over ``<stream>.ordered`` → ``matches.<query>``.

The query comes from a file for now (``SITUFLOW_QUERY_FILE``; ``SITUFLOW_QUERY_NAME`` names it
in results and in the output topic, default: the file name without extension, as ``situflow
run`` does, so both give the same result ids). Until the query registry lands, one process
evaluates one query.

Each partition key (the ordered topic's message key, which must be the query's ``PARTITION BY``
attributes) has its own operator; its snapshot lives in the ``operators`` table (RocksDB,
changelogged), so a restarted or a surviving worker resumes exactly where the last processed
event left it. Processing one event is: restore the key's operator, ``process`` the event,
send the results, store the new snapshot. An event the operator rejects goes to
``<stream>.dlq`` and leaves the state untouched.

Delivery is **at least once**: the snapshot is stored only once the broker has acknowledged
the event's results, so a crash in between sends those results again after the restart. Every
result carries its deterministic id (:attr:`situflow.results.Match.result_id`: query, key and
the situations' bindings) in the value (``id``) and in the ``situflow.result.id`` header:
consumers de-duplicate by it.
Replayed *input* is skipped: the K-slack service releases each key's events in strictly
increasing (event time, input offset) order, and the state records the last pair processed.

Run: ``python -m workers.matcher worker`` (settings: :mod:`workers.app`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, cast

import numpy as np

from situflow.errors import InputError, QueryError
from situflow.events import EventBatch
from situflow.operator import Operator, QueryOptions
from situflow.queries import compile_query
from topics.catalog import QueryOutput, query_topic, stream_topics
from workers.app import ServiceConfig, ServiceMetrics, dlq_headers, make_app, message_age

RESULT_ID_HEADER = "situflow.result.id"
SOURCE_OFFSET_HEADER = "situflow.source.offset"

config = ServiceConfig.from_env("matcher")
STREAM = config.stream
if not STREAM.key_fields:
    sys.exit(f"situflow {config.service}: set SITUFLOW_KEY_FIELDS to the partition attributes; "
             "unpartitioned streams (thesis 5.6.3) are not supported by the services yet")
QUERY_FILE = Path(os.environ.get("SITUFLOW_QUERY_FILE", "query.tps"))
QUERY_NAME = os.environ.get("SITUFLOW_QUERY_NAME") or QUERY_FILE.stem
try:
    query_text = QUERY_FILE.read_text()
    query = compile_query(query_text, QueryOptions(name=QUERY_NAME))
except OSError as exc:
    sys.exit(f"situflow matcher: cannot read SITUFLOW_QUERY_FILE={QUERY_FILE}: {exc.strerror}")
except QueryError as exc:
    sys.exit(exc.render(str(QUERY_FILE), query_text))
if tuple(getattr(query, "partition_by", ())) != STREAM.key_fields:
    sys.exit(f"situflow matcher: the query partitions by {getattr(query, 'partition_by', ())}, "
             f"the stream is keyed by SITUFLOW_KEY_FIELDS={','.join(STREAM.key_fields)!r}; "
             "they must be the same attributes")
_, ORDERED, _, DLQ = (spec.name for spec in stream_topics(STREAM))
MATCHES = query_topic(QueryOutput(QUERY_NAME)).name

app = make_app(f"situflow-matcher-{QUERY_NAME}", config)
metrics = ServiceMetrics(app, "matcher")

ordered = app.topic(ORDERED, key_serializer="raw", value_serializer="raw")
matches = app.topic(MATCHES, key_serializer="raw", value_serializer="raw")
dlq = app.topic(DLQ, key_serializer="raw", value_serializer="raw")

operators = app.Table("operators", default=None, partitions=STREAM.partitions,
                      help="per partition key: operator snapshot and last (ts, input offset)")

open_by_key: dict[str, int] = {}  # for the open-situations gauge
# The operators of keys this worker owns, as last stored in the table, with their position:
# restoring an operator from its snapshot for every event costs more than the event itself.
# Forgotten at every rebalance, after which the (recovered) table is the truth again.
live: dict[str, tuple[Operator, list[int]]] = {}
rebalances = [0]  # so that an event processed across a rebalance does not refill ``live``


def forget_live_operators(sender: Any, *args: Any, signal: Any, **kwargs: Any) -> None:
    rebalances[0] += 1
    live.clear()


# (mode's stubs type receivers as a union of callables, which mypy cannot match)
cast(Any, app.on_partitions_revoked).connect(forget_live_operators)
cast(Any, app.on_partitions_assigned).connect(forget_live_operators)


@app.agent(ordered)
async def match(stream: Any) -> None:
    async for event in stream.events():
        message = event.message
        metrics.messages_in("matcher", ORDERED).inc()
        key: bytes = event.key or b"null"
        state_key = key.decode(errors="replace")
        try:
            record = json.loads(event.value)
            position = [record[STREAM.time_field], source_offset(message)]
        except (TypeError, ValueError, KeyError) as exc:
            await dead_letter(event, f"not an ordered event: {exc!r}")
            continue
        generation = rebalances[0]
        last: list[int] | None
        if state_key in live:
            operator, last = live.pop(state_key)  # put back once the event is processed
        else:
            state = operators.get(state_key)
            last = state["position"] if state else None
            operator = query.restore(state["operator"]) if state \
                else query.operator()
        if last is not None and position <= last:
            live[state_key] = (operator, last)
            continue  # already processed: a redelivery after a crash

        try:
            batch = EventBatch.from_records([record], time_field=STREAM.time_field,
                                            seq=np.array([message.offset], dtype=np.int64))
            results = operator.process(batch)
        except InputError as exc:
            await dead_letter(event, exc.reason)
            continue  # the stored state is unchanged: the event is as if never seen
        except Exception as exc:  # an operator bug must not stop the partition: keep evidence
            app.log.exception("operator failed on %s[%s]@%s", message.topic,
                              message.partition, message.offset)
            await dead_letter(event, f"internal error: {exc!r}")
            continue

        # Results are rare: wait until the broker has them before the state moves past their
        # event, so a crash in between repeats them rather than losing them.
        deliveries = []
        for result in results:
            result_id = result.result_id
            value = json.dumps({**result.to_dict(), "id": result_id}).encode()
            deliveries.append(await matches.send(
                key=key, value=value, headers=[(RESULT_ID_HEADER, result_id.encode())]))
        for delivery in deliveries:
            await delivery
        if results:
            metrics.messages_out("matcher", MATCHES).inc(len(results))
        operators[state_key] = {"operator": operator.snapshot(),
                                "position": position}
        if generation == rebalances[0]:
            live[state_key] = (operator, position)
        set_open_situations(state_key, getattr(operator, "open_situations", 0))
        metrics.latency.observe(message_age(message, time.time()))


def source_offset(message: Any) -> int:
    """The input offset K-slack put in the headers (the ordered offset if there is none)."""
    headers = message.headers or ()
    for name, value in headers.items() if isinstance(headers, dict) else headers:
        if name == SOURCE_OFFSET_HEADER:
            return int(value)
    return int(message.offset)


async def dead_letter(event: Any, reason: str) -> None:
    metrics.dlq("matcher", DLQ).inc()
    await dlq.send(key=event.key, value=event.value, headers=dlq_headers(event.message, reason))


def set_open_situations(key: str, count: int) -> None:
    metrics.open_situations.inc(count - open_by_key.get(key, 0))
    open_by_key[key] = count


if __name__ == "__main__":
    app.main()
