"""Checkpoints are consistent pairs of state and input offsets (workers/partitions.py), without a
broker.

A service's state is the fold of its input in offset order. Whatever checkpoint a worker
restores, the latest or an older one, and wherever the group's committed offset points, ahead
of the checkpoint (Faust commits messages it skipped) or behind it, and however the consumer
misbehaves (stale messages still queued from before a seek, duplicates, messages out of
order), the worker applies every message after the checkpoint exactly once, in order, and
reaches the state of the whole input; it never acknowledges a message before a stored
checkpoint holds it. The consumer below is a model of Faust's: a log per topic partition,
a fetch position that ``seek_wait`` moves, a queue of messages fetched before, and Faust's
read offset, below which its fetch loop drops what it fetched; and, until the rebalance that
assigned the partition ends, Faust's seek of every partition to the committed offset, which
comes after messages were already delivered.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from workers.partitions import PartitionStates

TOPICS = ("cars", "situations")
PARTITION = 0


@dataclass(frozen=True)
class TP:
    topic: str
    partition: int


@dataclass
class Message:
    topic: str
    partition: int
    offset: int

    @property
    def tp(self) -> TP:
        return TP(self.topic, self.partition)


@dataclass
class Event:
    message: Message


class Signal:
    def connect(self, receiver: Any) -> None:
        pass


class Consumer:
    """Faust's consumer as far as the partition states see it (module doc).

    ``logs`` holds, per topic, the offsets that hold records (with holes where transactions put
    markers); fetching starts at ``committed``. ``queued`` messages come first, in that order,
    as messages an agent's queue still held (duplicates, out of order); after the first seek of
    a topic, its fetch loop still delivers the ``stale`` records that followed the last one it
    delivered (the rest of a batch fetched before), each moving its read offset, below which it
    drops what it fetches. ``start`` is where retention left each log. With ``rebalance``,
    the assigning rebalance is still on: it ends after that many more messages, with Faust's
    seek of every topic to ``committed``.
    """

    def __init__(self, logs: dict[str, list[int]], committed: dict[str, int],
                 queued: Sequence[tuple[str, int]] = (), stale: int = 0,
                 start: dict[str, int] | None = None, rebalance: int | None = None) -> None:
        self.logs = logs
        self.committed = committed
        self.rebalance = rebalance
        self.position_of = dict(committed)
        self.queue = deque(queued)
        self.stale = stale
        self.start = start or {}
        self.pending: deque[tuple[str, int]] = deque()  # the fetch loop's batch
        self.read_offset: dict[str, int] = {}
        self.delivered: dict[str, int] = {}
        self.seeks: list[tuple[str, int]] = []
        self.acked: list[tuple[str, int]] = []
        self.commits = 0

    def next_message(self) -> Message | None:
        if self.queue:
            return self.deliver(*self.queue.popleft())
        while self.pending:
            topic, offset = self.pending.popleft()
            if offset >= self.read_offset.get(topic, 0):
                self.read_offset[topic] = offset
                return self.deliver(topic, offset)
        for topic, records in self.logs.items():
            first = max(self.position_of[topic], self.start.get(topic, 0))
            for offset in (o for o in records if o >= first):
                self.position_of[topic] = offset + 1
                if offset >= self.read_offset.get(topic, 0):
                    self.read_offset[topic] = offset
                    return self.deliver(topic, offset)
        return None

    def deliver(self, topic: str, offset: int) -> Message:
        self.delivered[topic] = offset
        return Message(topic, PARTITION, offset)

    async def seek_wait(self, offsets: dict[TP, int]) -> None:
        for tp, offset in offsets.items():
            if not any(topic == tp.topic for topic, _ in self.seeks):
                last = self.delivered.get(tp.topic, self.position_of[tp.topic] - 1)
                later = [o for o in self.logs[tp.topic] if o > last][:self.stale]
                self.pending.extend((tp.topic, o) for o in later)
            self.seeks.append((tp.topic, offset))
            self.position_of[tp.topic] = offset
            self.read_offset[tp.topic] = offset

    def seek_to_committed(self) -> None:
        """Faust's ``perform_seek`` at the end of a rebalance: it clears the fetched batch, not
        an agent's queue."""
        self.pending.clear()
        self.position_of.update(self.committed)
        self.read_offset.update(self.committed)

    async def position(self, tp: TP) -> int:
        return self.position_of[tp.topic]

    async def earliest_offsets(self, *tps: TP) -> dict[TP, int]:
        return {tp: self.start.get(tp.topic, 0) for tp in tps}

    async def force_commit(self, tps: set[TP]) -> None:
        self.commits += 1


class Stream:
    """The agent's stream: first the tick sent to the partition when it was assigned, then
    what the consumer delivers; when the rebalance ends, the tick the service's timer sends
    while the partition is not positioned."""

    def __init__(self, app: App, table: dict[str, bytes]) -> None:
        self.app = app
        self.consumer = app.consumer
        self.table = table
        self.channel = type("Topic", (), {"topics": (*TOPICS, "ticks")})

    def noack(self) -> Stream:
        return self

    async def events(self) -> AsyncIterator[Event]:
        tick = Event(Message("ticks", PARTITION, 0))
        consumer = self.consumer
        yield tick
        while True:
            if self.app.rebalancing and consumer.rebalance == 0:
                consumer.seek_to_committed()
                self.app.rebalancing = False
                yield tick
            message = consumer.next_message()
            if message is None and not self.app.rebalancing:
                return
            if message is None:
                consumer.rebalance = 0
                continue
            if consumer.rebalance:
                consumer.rebalance -= 1
            yield Event(message)

    async def ack(self, event: Event) -> None:
        message = event.message
        if message.topic != "ticks":
            stored = json.loads(self.table[str(message.partition)])["offsets"]
            assert message.offset <= stored.get(message.topic, -1), "acked before it is stored"
        self.consumer.acked.append((message.topic, message.offset))


@dataclass
class App:
    consumer: Consumer
    exactly_once: bool = False
    conf: Any = None
    producer: Any = None
    on_partitions_revoked: Signal = field(default_factory=Signal)
    on_partitions_assigned: Signal = field(default_factory=Signal)
    rebalancing: bool = False

    def topic(self, name: str, **kwargs: Any) -> Any:
        return type("Topic", (), {"get_topic_name": staticmethod(lambda: name)})

    def __post_init__(self) -> None:
        guarantee = "exactly_once" if self.exactly_once else "at_least_once"
        from faust.types.enums import ProcessingGuarantee
        self.conf = type("Conf", (), {"processing_guarantee": ProcessingGuarantee(guarantee)})
        self.producer = type("Producer", (), {"flush": staticmethod(_nothing)})


async def _nothing() -> None:
    pass


def checkpoint(logs: dict[str, list[int]], upto: dict[str, int]) -> dict[str, bytes]:
    """A table holding the checkpoint of the records up to ``upto`` (per topic)."""
    state = [[t, o] for t in TOPICS for o in logs[t] if o <= upto.get(t, -1)]
    value = {"state": state, "offsets": {t: o for t, o in upto.items() if o >= 0}}
    return {str(PARTITION): json.dumps(value).encode()}


def run(consumer: Consumer, table: dict[str, bytes], exactly_once: bool = False
        ) -> list[list[Any]]:
    """Consume everything the consumer delivers, folding messages into a list; the state
    stored last."""
    app = App(consumer, exactly_once, rebalancing=consumer.rebalance is not None)
    states = PartitionStates(app, table, lambda v: [] if v is None else v, list, interval=0.0)

    async def on_message(event: Event) -> None:
        message = event.message
        state = states.get(message.partition)
        states.changed(message.partition, [*state, [message.topic, message.offset]], event)

    asyncio.run(states.consume(Stream(app, table), "ticks", on_message))
    return list(json.loads(table[str(PARTITION)])["state"])


def whole(logs: dict[str, list[int]]) -> list[list[Any]]:
    return sorted([t, o] for t in TOPICS for o in logs[t])


def test_a_checkpoint_older_than_the_committed_offset_is_resumed_from_its_own_offsets() -> None:
    """The reported failure: a deriver restored a checkpoint that held car events up to
    offset 6 while the group had committed up to 31; it must read 7..30 again."""
    logs = {"cars": list(range(40)), "situations": []}
    consumer = Consumer(logs, committed={"cars": 31, "situations": 0})
    state = run(consumer, checkpoint(logs, {"cars": 6}))
    assert sorted(state) == whole(logs)
    assert [o for _, o in state] == list(range(40)), "each offset once, in order"
    assert consumer.seeks == [("cars", 7)]


def test_input_before_a_checkpoint_is_not_applied_again() -> None:
    logs = {"cars": list(range(20)), "situations": list(range(5))}
    consumer = Consumer(logs, committed={"cars": 3, "situations": 0})
    state = run(consumer, checkpoint(logs, {"cars": 12, "situations": 2}))
    assert sorted(state) == whole(logs)
    assert consumer.seeks == []
    assert ("cars", 3) in consumer.acked, "repeats the checkpoint holds are acknowledged"


def test_a_message_after_a_gap_is_never_applied_even_out_of_order() -> None:
    logs = {"cars": list(range(10)), "situations": []}
    # 7 comes before 5 and 6, as when two fetch loops interleave.
    consumer = Consumer(logs, committed={"cars": 8, "situations": 0},
                        queued=[("cars", 3), ("cars", 4), ("cars", 7), ("cars", 5)])
    state = run(consumer, checkpoint(logs, {"cars": 2}))
    assert [o for _, o in state] == list(range(10))


def test_stale_messages_after_the_seek_are_dropped_and_the_seek_repeated() -> None:
    """Faust's fetch loop may deliver messages fetched before the seek after it, moving its
    read offset past the offset sought; seeking again on each lets the fresh ones through."""
    logs = {"cars": list(range(30)), "situations": []}
    consumer = Consumer(logs, committed={"cars": 20, "situations": 0}, stale=2)
    state = run(consumer, checkpoint(logs, {"cars": 5}))
    assert [o for _, o in state] == list(range(30))
    assert consumer.seeks[0] == ("cars", 6) and len(consumer.seeks) > 1


def test_a_seek_to_the_committed_offset_at_the_end_of_the_rebalance_does_not_strand_input(
) -> None:
    """The reported stall: a restarted matcher restored a checkpoint older than the group's
    committed offset, which was the end of its input. Faust delivered the assignment's tick
    and messages before it ended the rebalance by seeking to the committed offset, which undid
    the seek back to the checkpoint; no later message came to reveal the gap."""
    logs = {"cars": list(range(20)), "situations": list(range(4))}
    consumer = Consumer(logs, committed={"cars": 20, "situations": 0}, rebalance=2,
                        queued=[("situations", 0), ("situations", 1)])
    state = run(consumer, checkpoint(logs, {"cars": 5}))
    assert sorted(state) == whole(logs)
    assert [o for t, o in state if t == "cars"] == list(range(20))
    assert consumer.seeks == [("cars", 6)], "positioned once, after the rebalance"


def test_input_deleted_by_retention_before_it_was_applied_is_skipped() -> None:
    logs = {"cars": list(range(50)), "situations": []}
    consumer = Consumer(logs, committed={"cars": 30, "situations": 0}, start={"cars": 20})
    state = run(consumer, checkpoint(logs, {"cars": 9}))
    assert [o for _, o in state] == list(range(10)) + list(range(20, 50))


def test_with_transactions_offsets_skip_markers_and_each_checkpoint_commits() -> None:
    logs = {"cars": [0, 1, 3, 4, 6, 7, 9], "situations": [0, 2, 4]}
    consumer = Consumer(logs, committed={"cars": 9, "situations": 0})
    state = run(consumer, checkpoint(logs, {"cars": 1}), exactly_once=True)
    assert sorted(state) == whole(logs)
    # Resumed at the checkpoint; 3, the first record after it (2 is a marker), could have been
    # fetched before that seek, so it is taken once a second seek delivers it again.
    assert consumer.seeks == [("cars", 2), ("cars", 2)]
    assert consumer.commits > 0


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Consumer, dict[str, bytes], bool]:
    """Logs, a checkpoint of any prefix of them, any committed offsets; without transactions
    any messages still queued; with them, where the consumer delivers in order within a
    generation, none; some stale ones after a seek; and maybe a rebalance still on."""
    exactly_once = draw(st.booleans())
    logs: dict[str, list[int]] = {}
    for topic in TOPICS:
        steps = draw(st.lists(st.integers(1, 3 if exactly_once else 1), max_size=25))
        logs[topic] = [sum(steps[:i]) for i in range(len(steps))]
    upto = {t: draw(st.sampled_from([-1, *logs[t]])) for t in TOPICS}
    committed = {t: draw(st.integers(0, logs[t][-1] + 1 if logs[t] else 0)) for t in TOPICS}
    records = [(t, o) for t in TOPICS for o in logs[t]]
    queued = [] if exactly_once or not records else \
        draw(st.lists(st.sampled_from(records), max_size=8))
    consumer = Consumer(logs, committed, queued, stale=draw(st.integers(0, 3)),
                        rebalance=draw(st.none() | st.integers(0, 10)))
    return consumer, checkpoint(logs, upto), exactly_once


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_any_checkpoint_and_any_delivery_give_the_state_of_the_whole_input(
        scenario: tuple[Consumer, dict[str, bytes], bool]) -> None:
    consumer, table, exactly_once = scenario
    state = run(consumer, table, exactly_once)
    for topic in TOPICS:
        assert [o for t, o in state if t == topic] == consumer.logs[topic], "each once, in order"
