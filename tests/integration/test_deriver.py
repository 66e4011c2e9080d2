"""The deriver service alone, through a real broker (issue 5, thesis §5.6.5).

Ordered Arrow batches of the car stream (as K-slack writes them: input positions in
``_situflow_seq``, each car in one partition) go into ``<stream>.ordered``; the deriver service,
following the query registry, writes situation batches to the situations topic, each naming
the query's registration. Per partition, its records equal the core :class:`SituationDeriver`
on the same events; and the matcher's side (:mod:`situflow.tpstream.split.halves`), fed those
batches twice as a redelivery would, reports exactly the fused operator's matches. (The whole
pipeline through the matcher service: ``test_pipeline.py``, ``test_failover.py``.)
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from aiokafka import AIOKafkaProducer

from situflow.codecs import arrow_events
from situflow.events import EventBatch
from situflow.operator import QueryOptions
from situflow.settings import KafkaSettings
from situflow.tpstream import compile
from situflow.tpstream.split.deriver import SituationDeriver
from situflow.tpstream.split.halves import match_situations
from situflow.tpstream.split.matcher import SituationMatcher
from situflow.tpstream.split.messages import SituationMessage
from tests.integration.helpers import car_events, metrics, read_topic, total, wait_until
from topics.catalog import SEQ_FIELD, StreamSpec, stream_topics
from workers.up import REPO_ROOT, Pipeline

pytestmark = pytest.mark.integration

EXAMPLES = REPO_ROOT / "situflow/examples"
# 400 s per car; seed 4 gives 4 matches of aggressive_drivers.tps (and more of speeding.tps, a
# single-situation pattern).
EVENTS, CARS, SEED = 4_000, 10, 4
PARTITIONS = 2
ROWS_PER_MESSAGE = 97  # not a divisor of anything: messages cut situations anywhere


def ordered_messages(events: list[dict[str, Any]]) -> dict[int, list[list[dict[str, Any]]]]:
    """Per partition (car_id mod partitions), its events with their input seq, in messages."""
    rows: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for seq, event in enumerate(events):
        rows[event["car_id"] % PARTITIONS].append({**event, SEQ_FIELD: seq})
    return {p: [r[i:i + ROWS_PER_MESSAGE] for i in range(0, len(r), ROWS_PER_MESSAGE)]
            for p, r in rows.items()}


async def produce_ordered(kafka: KafkaSettings, topic: str,
                          messages: dict[int, list[list[dict[str, Any]]]]) -> None:
    async with AIOKafkaProducer(**kafka.client_kwargs()) as producer:
        sent = [await producer.send(topic, arrow_events.encode_batch(
                    arrow_events.batch_from_events(rows)), partition=p,
                    headers=arrow_events.HEADERS)
                for p, batches in messages.items() for rows in batches]
        await asyncio.gather(*sent)


def as_batch(rows: list[dict[str, Any]]) -> EventBatch:
    seq = np.array([r[SEQ_FIELD] for r in rows], dtype=np.int64)
    return EventBatch.from_records([{k: v for k, v in r.items() if k != SEQ_FIELD}
                                    for r in rows], seq=seq)


@pytest.mark.parametrize("example", ["aggressive_drivers.tps", "speeding.tps"])
def test_the_deriver_service_writes_the_core_derivers_records_and_they_match_as_fused(
        example: str, kafka: KafkaSettings, topic_prefix: str, tmp_path: Path) -> None:
    name = f"{topic_prefix}-{example.split('_')[0].removesuffix('.tps')}"
    query_file = EXAMPLES / example
    query = compile(query_file.read_text(), QueryOptions(name=name))
    stream = StreamSpec(f"{topic_prefix}.cars", partitions=PARTITIONS, key_fields=("car_id",))
    events = car_events(EVENTS, CARS, SEED)
    messages = ordered_messages(events)
    expected_records = {p: [r.to_dict(name) for r in SituationDeriver(query).process(
        as_batch([row for rows in batches for row in rows]))] for p, batches in messages.items()}
    assert all(expected_records.values()), "every partition derives situations"

    with Pipeline(stream, query_file, kafka=kafka, work_dir=tmp_path / "pipeline", name=name,
                  service_names=("deriver",)) as pipeline:
        topic = pipeline.situations_topic
        assert topic is not None
        asyncio.run(produce_ordered(kafka, stream_topics(stream)[1].name, messages))
        expected_count = sum(map(len, expected_records.values()))

        def records_sent() -> int:
            return sum(len(SituationMessage.decode(r.value).records)
                       for r in asyncio.run(read_topic(kafka, topic)))

        wait_until(lambda: records_sent() >= expected_count, timeout=120,
                   what=f"{expected_count} situation records")
        sent = asyncio.run(read_topic(kafka, topic))
        page = metrics(pipeline.services["deriver"])
        assert total(page, "situflow_events_out_total", topic=topic) == expected_count
        assert "situflow_open_situations" in {k.split("{")[0] for k in page}

    got: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for record in sent:
        batch = SituationMessage.decode(record.value)
        # The query is the registry's first record: registered at offset 0.
        assert (json.loads(record.key), batch.query, batch.query_id, batch.registered_at) == \
            (name, name, query.query_id, 0)
        got[record.partition] += [r.to_dict(name) for r in batch.records]
    assert dict(got) == expected_records

    fused = query.operator().process(as_batch(
        [row for batches in messages.values() for rows in batches for row in rows]))
    assert fused, "the workload has matches"
    matched = []
    for p in sorted(got):
        operators = {name: (query.query_id, SituationMatcher(query))}
        positions: dict[str, list[int]] = {}
        for record in [r for r in sent if r.partition == p] * 2:  # the second time: repeats
            matched += match_situations(operators, positions,  # type: ignore[arg-type]
                                        SituationMessage.decode(record.value))
    assert sorted(m.result_id for m in matched) == sorted(m.result_id for m in fused)
    assert sorted(json.dumps(m.to_dict(), sort_keys=True) for m in matched) == \
        sorted(json.dumps(m.to_dict(), sort_keys=True) for m in fused)
