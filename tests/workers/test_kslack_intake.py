"""How K-slack takes messages in (workers/kslack_intake.py): JSON events wait in the inbox, an
Arrow batch is pushed after it, late rows and undecodable messages go out, over recording
stand-ins for Faust (and the buffer helpers it uses, situflow/kslack/buffer.py)."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any
from unittest.mock import MagicMock

import pytest

from situflow.kslack.buffer import PartitionBuffer
from topics.catalog import StreamSpec
from topics.registry import RegistryProgress
from workers.failures import Failure
from workers.kslack_intake import KSlackIntake
from workers.kslack_output import KSlackOutput


class Topic:
    def __init__(self, name: str) -> None:
        self.name, self.sent = name, []

    async def send(self, **message: Any) -> str:
        self.sent.append(message)
        return f"{self.name}#{len(self.sent)}"


def intake(raise_on: bytes | None = None) -> KSlackIntake:
    app = SimpleNamespace(topic=lambda name, **_: Topic(name))
    stream = StreamSpec("cars")
    output = KSlackOutput(app, MagicMock(), stream)  # type: ignore[arg-type]
    return KSlackIntake(output, MagicMock(), stream, 0, RegistryProgress("k", False), raise_on)


def message(offset: int, value: bytes) -> Any:
    return SimpleNamespace(key=b"k", value=value, message=SimpleNamespace(
        topic="cars", partition=1, offset=offset, headers=None))


def event(offset: int, ts: int) -> Any:
    return message(offset, json.dumps({"ts": ts}).encode())


def test_json_events_wait_in_the_inbox_and_a_late_one_goes_out_unchanged() -> None:
    take = intake()
    buffer = PartitionBuffer.of(None, 0, "ts")
    assert asyncio.run(take.take_in(buffer, event(0, 10))) == []
    assert len(buffer.inbox) == 1 and buffer.kslack.released is None
    asyncio.run(take.take_in(buffer, event(1, 11)))
    assert asyncio.run(take.push_inbox(buffer)) == [] and not buffer.inbox
    asyncio.run(take.take_in(buffer, event(2, 5)))
    assert asyncio.run(take.push_inbox(buffer)) == ["cars.late#1"]
    (sent,) = take.output.late.sent
    assert sent["value"] == event(2, 5).value and sent["partition"] == 1


def test_a_message_that_does_not_decode_goes_to_the_dlq() -> None:
    take = intake()
    buffer = PartitionBuffer.of(None, 0, "ts")
    assert asyncio.run(take.take_in(buffer, message(3, b"not json"))) == ["cars.dlq#1"]
    assert not buffer.inbox


def test_the_test_hook_raises_while_pushing_the_inbox() -> None:
    take = intake(raise_on=b"boom")
    buffer = PartitionBuffer.of(None, 0, "ts")
    asyncio.run(take.take_in(buffer, message(0, b'{"ts": 1, "x": "boom"}')))
    with pytest.raises(RuntimeError, match="a bug while pushing the inbox"):
        asyncio.run(take.push_inbox(buffer))


def test_a_poisoned_message_goes_to_the_dlq_with_why() -> None:
    out = intake().output
    asyncio.run(out.poisoned(message(4, b"x"), Failure(ValueError("bad"))))  # type: ignore[call-arg]
    (sent,) = out.dlq.sent
    assert sent["value"] == b"x"
    assert dict(sent["headers"])["situflow.error.reason"].startswith(b"processing failed")


def test_a_buffer_is_restored_from_its_snapshot_or_fresh() -> None:
    fresh = PartitionBuffer.of(None, 2, "ts", batch_events=4)
    assert fresh.batcher is not None and fresh.kslack.buffered == 0
    restored = PartitionBuffer.of(fresh.snapshot(), 9, "other")
    assert restored.batcher is not None and restored.snapshot() == fresh.snapshot()
