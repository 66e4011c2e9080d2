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

import pytest
from faust.types import TP
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.profiles import scaled
from workers.partitions import PartitionStates, checkpoint_key, checkpoints

TOPICS = ("cars", "situations")
PARTITION = 0


@dataclass
class Message:
    topic: str
    partition: int
    offset: int
    value: bytes | None = None

    @property
    def tp(self) -> TP:
        return TP(self.topic, self.partition)


@dataclass
class Event:
    message: Message

    @property
    def value(self) -> bytes | None:
        return self.message.value


class Signal:
    def connect(self, receiver: Any) -> None:
        pass


class Consumer:
    """Faust's consumer as far as the partition states see it (module doc).

    ``logs`` holds, per topic, the offsets that hold records (with holes where transactions put
    markers); fetching starts at ``committed``. ``queued`` messages come first, in that order,
    as messages an agent's queue still held (duplicates, out of order). When a topic is first
    paused or sought, its fetch loop is amid a batch: it still holds the ``stale`` records that
    followed the last one it delivered, and delivers them, each moving its read offset, below
    which it drops what it fetches; unless the topic is paused, whose records the loop skips
    (Faust's ``getmany`` yields active partitions only), and fetches no more. With
    ``pausing=False``, pausing does nothing, as when Faust lets a paused partition through
    whose agent buffer was full: then the batch comes at the first seek, after it. Ticks sent
    come after that batch. ``start`` is where retention left each log. With ``rebalance``, the
    assigning rebalance is still on: it ends after that many more messages, with Faust's seek
    of every topic to ``committed``.
    """

    def __init__(self, logs: dict[str, list[int]], committed: dict[str, int],
                 queued: Sequence[tuple[str, int]] = (), stale: int = 0,
                 start: dict[str, int] | None = None, rebalance: int | None = None,
                 pausing: bool = True) -> None:
        self.logs = logs
        self.pausing = pausing
        self.paused: set[str] = set()
        self.amid: set[str] = set()  # topics whose batch in progress was taken into account
        self.ticks: deque[bytes] = deque()
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
            if topic not in self.paused and offset >= self.read_offset.get(topic, 0):
                self.read_offset[topic] = offset
                return self.deliver(topic, offset)
        if self.ticks:
            return Message("ticks", PARTITION, 0, self.ticks.popleft())
        for topic, records in self.logs.items():
            if topic in self.paused:
                continue
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

    def amid_batch(self, topic: str) -> None:
        if topic not in self.amid:
            self.amid.add(topic)
            last = self.delivered.get(topic, self.position_of[topic] - 1)
            later = [o for o in self.logs[topic] if o > last][:self.stale]
            self.pending.extend((topic, o) for o in later)

    async def seek_wait(self, offsets: dict[TP, int]) -> None:
        for tp, offset in offsets.items():
            self.amid_batch(tp.topic)
            self.seeks.append((tp.topic, offset))
            self.position_of[tp.topic] = offset
            self.read_offset[tp.topic] = offset

    def pause_partitions(self, tps: set[TP]) -> None:
        if self.pausing:
            for tp in tps:
                self.amid_batch(tp.topic)
                self.paused.add(tp.topic)

    def resume_partitions(self, tps: set[TP]) -> None:
        self.paused.difference_update(tp.topic for tp in tps)

    def assignment(self) -> set[TP]:
        return {TP(topic, PARTITION) for topic in self.logs}

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
            stored = latest(self.table)["offsets"]
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
    consumer_generation_id: int = 1

    def topic(self, name: str, **kwargs: Any) -> Any:
        consumer = self.consumer

        async def send(value: bytes, partition: int) -> None:
            consumer.ticks.append(value)

        return type("Topic", (), {"get_topic_name": staticmethod(lambda: name),
                                  "send": staticmethod(send)})

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
    return {checkpoint_key(PARTITION, (0, 0)): json.dumps(value).encode()}


def latest(table: dict[str, bytes]) -> Any:
    """The checkpoint the next owner restores."""
    return json.loads(table[checkpoints(table, PARTITION)[-1][1]])


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
    return list(latest(table)["state"])


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


@pytest.mark.parametrize("queued", [[], [("cars", 25), ("cars", 24), ("cars", 26)]])
def test_a_rewind_seeks_once_after_the_messages_fetched_before_it(
        queued: list[tuple[str, int]]) -> None:
    """Faust's fetch loop may deliver messages fetched before a seek after it, moving its read
    offset past the offset sought, so that it would drop the messages sought. A rewind pauses
    the input, drops what still comes from before, and seeks once, at a tick sent after the
    pause, when every record fetched before it has passed; a gap found then is the same
    rewind."""
    logs = {"cars": list(range(30)), "situations": []}
    consumer = Consumer(logs, committed={"cars": 20, "situations": 0}, stale=2, queued=queued)
    state = run(consumer, checkpoint(logs, {"cars": 5}))
    assert [o for _, o in state] == list(range(30))
    assert consumer.seeks == [("cars", 6)]


def test_a_gap_found_without_a_checkpoint_to_restore_also_seeks_once() -> None:
    logs = {"cars": list(range(12)), "situations": []}
    consumer = Consumer(logs, committed={"cars": 4, "situations": 0}, stale=3,
                        queued=[("cars", 4), ("cars", 9), ("cars", 5), ("cars", 10)])
    state = run(consumer, checkpoint(logs, {"cars": 3}))
    assert [o for _, o in state] == list(range(12))
    assert consumer.seeks == [("cars", 6)], "5 came from the queue before the seek"


def test_where_a_pause_does_not_hold_the_rewind_seeks_again_until_it_has_the_next_message(
) -> None:
    """Faust lets a paused partition through while its agent's buffer is full: the stale
    messages come after the seek, and the rewind takes another round."""
    logs = {"cars": list(range(30)), "situations": []}
    consumer = Consumer(logs, committed={"cars": 20, "situations": 0}, stale=2, pausing=False)
    state = run(consumer, checkpoint(logs, {"cars": 5}))
    assert [o for _, o in state] == list(range(30))
    assert consumer.seeks == [("cars", 6), ("cars", 6)]


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


def test_an_idle_topic_is_not_fetched_and_is_fetched_again_from_where_it_stopped() -> None:
    """The matcher's ordered events while no SASE+ query is registered (workers.matcher)."""
    logs = {"cars": list(range(10)), "situations": list(range(6))}
    consumer = Consumer(logs, committed={"cars": 0, "situations": 0})
    app = App(consumer)
    table: dict[str, bytes] = {}
    states = PartitionStates(app, table, lambda v: [] if v is None else v, list, interval=0.0)
    states.idle(["cars"])

    async def on_message(event: Event) -> None:
        message = event.message
        state = states.get(message.partition)
        states.changed(message.partition, [*state, [message.topic, message.offset]], event)
        if message.topic == "situations" and message.offset == 3:
            states.idle([])

    asyncio.run(states.consume(Stream(app, table), "ticks", on_message))
    state = latest(table)["state"]
    assert state[:4] == [["situations", o] for o in range(4)]
    assert [o for t, o in state if t == "cars"] == list(range(10))
    assert consumer.seeks == []


def owner(table: dict[str, bytes], generation: int) -> PartitionStates[list[Any]]:
    """A worker that is assigned the partition in consumer-group ``generation``."""
    consumer = Consumer({t: [] for t in TOPICS}, {t: 0 for t in TOPICS})
    app = App(consumer, consumer_generation_id=generation)
    return PartitionStates(app, table, lambda v: [] if v is None else v, list, interval=0.0)


async def step(worker: PartitionStates[list[Any]], what: str, checkpoint: bool = True) -> None:
    worker.changed(PARTITION, [*worker.get(PARTITION), what])
    if checkpoint:
        await worker.checkpoint(PARTITION)


@pytest.mark.parametrize("generations", [(1, 2, 3), (1, 1, 1)], ids=["kafka", "repeated"])
def test_a_zombies_last_checkpoint_does_not_undo_the_new_owners_idle_flush(
        generations: tuple[int, int, int]) -> None:
    """W1 owns the partition and stalls past its session timeout; W2 takes it over, restores
    W1's checkpoint, flushes the idle K-slack buffer and checkpoints before it sends the flushed
    events; then W1, a zombie that does not know yet, writes its own last checkpoint. The next
    owner restores W2's, also where the broker repeats the generation (tansu)."""
    table: dict[str, bytes] = {}
    first, second, third = generations

    async def interleaving() -> None:
        w1 = owner(table, first)
        await step(w1, "input 0")
        await step(w1, "input 1", checkpoint=False)  # W1 stalls here
        w2 = owner(table, second)
        await step(w2, "idle flush")
        assert len(table) == 1, "the older epoch's checkpoint is deleted"
        await w1.checkpoint(PARTITION)  # the zombie's
        assert owner(table, third).get(PARTITION) == ["input 0", "idle flush"]

    asyncio.run(interleaving())


def test_of_two_owners_of_one_checkpoint_the_later_generation_is_restored() -> None:
    """W1 restored the checkpoint and stalled before it wrote one of its own; W2, assigned the
    partition in a later generation, restored the same checkpoint and flushed."""
    table = checkpoint({"cars": [0], "situations": []}, {"cars": 0})

    async def interleaving() -> None:
        w1 = owner(table, 1)
        w1.get(PARTITION)
        w2 = owner(table, 2)
        await step(w2, "idle flush")
        await step(w1, "input 1")  # the zombie's
        assert owner(table, 3).get(PARTITION) == [["cars", 0], "idle flush"]

    asyncio.run(interleaving())


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
    # Resumed at the checkpoint: 3, the first record after it (2 is a marker), is at or before
    # the position the consumer had, so it is the next one.
    assert consumer.seeks == [("cars", 2)]
    assert consumer.commits > 0


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Consumer, dict[str, bytes], bool]:
    """Logs, a checkpoint of any prefix of them, any committed offsets; without transactions
    any messages still queued; with them, where the consumer delivers in order within a
    generation, none; some stale ones after a pause or a seek, which a pause may not hold;
    and maybe a rebalance still on."""
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
                        rebalance=draw(st.none() | st.integers(0, 10)),
                        pausing=draw(st.booleans()))
    return consumer, checkpoint(logs, upto), exactly_once


@settings(max_examples=scaled(3))
@given(scenarios())
def test_any_checkpoint_and_any_delivery_give_the_state_of_the_whole_input(
        scenario: tuple[Consumer, dict[str, bytes], bool]) -> None:
    consumer, table, exactly_once = scenario
    state = run(consumer, table, exactly_once)
    for topic in TOPICS:
        assert [o for t, o in state if t == topic] == consumer.logs[topic], "each once, in order"
