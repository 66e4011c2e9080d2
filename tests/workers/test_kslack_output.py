"""What K-slack writes to Kafka: topics, partitions, keys and headers of its ordered, late and
dead-letter messages (workers/kslack_output.py), over recording stand-ins for Faust."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any
from unittest.mock import MagicMock

import pyarrow as pa

from situflow.codecs import arrow_events
from situflow.kslack import ColumnarKSlack, arrow_table, input_seq, json_table
from situflow.kslack.batches import Batcher
from situflow.kslack.buffer import PartitionBuffer
from situflow.kslack.late import LateRows
from situflow.tpstream.split.batches import EventSlicer
from topics.catalog import StreamSpec
from workers.kslack_output import KSlackOutput


class Topic:
    def __init__(self, name: str) -> None:
        self.name, self.sent = name, []

    async def send(self, **message: Any) -> str:
        self.sent.append(message)
        return f"{self.name}#{len(self.sent)}"


def output(partitions: int = 3) -> KSlackOutput:
    app = SimpleNamespace(topic=lambda name, **_: Topic(name))
    return KSlackOutput(app, MagicMock(), StreamSpec("cars", partitions=partitions))  # type: ignore[arg-type]


def message(offset: int, value: bytes = b"{}") -> Any:
    return SimpleNamespace(key=b"k", value=value, message=SimpleNamespace(
        topic="cars", partition=1, offset=offset, headers=None))


def headers(sent: dict[str, Any]) -> dict[str, bytes]:
    return dict(sent["headers"])


def test_dead_letter_is_the_message_unchanged_with_why() -> None:
    out = output()
    assert asyncio.run(out.dead_letter(message(7, b"x"), "empty")) == "cars.dlq#1"
    (sent,) = out.dlq.sent
    assert (sent["key"], sent["value"]) == (b"k", b"x")
    assert headers(sent) == {"situflow.error.reason": b"empty", "situflow.source.topic": b"cars",
                             "situflow.source.partition": b"1", "situflow.source.offset": b"7"}


def late(table: pa.Table) -> LateRows:
    kslack = ColumnarKSlack(0)
    kslack.push(arrow_table(pa.RecordBatch.from_pylist([{"ts": 10}, {"ts": 11}]), 0))
    _, too_late = kslack.push(table)
    return LateRows(too_late, "ts", 10, 10, 0)


def test_late_json_events_go_unchanged_to_their_partition() -> None:
    out, sources = output(), {input_seq(4): message(4, b"a"), input_seq(5): message(5, b"b")}
    rows = late(json_table([{"ts": 1}, {"ts": 2}], [4, 5]))
    asyncio.run(out.late_events(rows, sources))
    assert [(s["value"], s["partition"]) for s in out.late.sent] == [(b"a", 1), (b"b", 1)]
    assert headers(out.late.sent[0])["situflow.error.reason"] == (
        b"event time 1 is 9 before the released time 10 (slack 0)")


def test_late_arrow_rows_are_one_arrow_message() -> None:
    out = output()
    rows = late(arrow_table(pa.RecordBatch.from_pylist([{"ts": 1}, {"ts": 2}]), 4))
    asyncio.run(out.late_events(rows, {}, message(4)))
    (sent,) = out.late.sent
    assert (sent["key"], sent["partition"]) == (b"k", 1)
    assert arrow_events.is_arrow(sent["headers"]) and headers(sent)["situflow.source.offset"] == b"4"
    assert arrow_events.decode_batch(sent["value"]).column("ts").to_pylist() == [1, 2]


def test_released_events_go_to_the_same_partition_number() -> None:
    out, buffer = output(), PartitionBuffer(ColumnarKSlack(0))
    buffer.push(arrow_table(pa.RecordBatch.from_pylist([{"ts": 1}, {"ts": 2}]), 0))
    assert asyncio.run(out.released(2, buffer, 5.0)) == ["cars.ordered#1"]
    (sent,) = out.ordered.sent
    assert sent["partition"] == 2 and sent["headers"] == arrow_events.HEADERS
    assert buffer.sent_at == 5.0 and not buffer.outbox
    assert asyncio.run(out.released(2, buffer, 6.0)) == [] and buffer.sent_at == 6.0


def test_batches_go_to_partition_seq_mod_partitions_with_their_numbers() -> None:
    out = output(partitions=3)
    buffer = PartitionBuffer(ColumnarKSlack(0), batcher=Batcher(EventSlicer(1, 100)))
    buffer.push(arrow_table(pa.RecordBatch.from_pylist([{"ts": t} for t in range(6)]), 0), 9)
    asyncio.run(out.released(0, buffer, 0.0))
    assert [s["partition"] for s in out.ordered.sent] == [0, 1, 2, 0]
    assert headers(out.ordered.sent[3])["situflow.batch.seq"] == b"3"
    assert headers(out.ordered.sent[3])["situflow.batch.registry"] == b"9"
    assert not buffer.batcher.ready  # type: ignore[union-attr]
