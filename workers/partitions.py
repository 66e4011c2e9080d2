"""Per-partition state with periodic checkpoints: how every stateful service keeps up with Kafka.

A service owns, for each input partition it is assigned, one piece of operator state (a K-slack
buffer, a query's operator over every key of the partition). Storing that state in the Faust
table after every message costs one changelog record per message, which bounds a service to a
few hundred events per second on a broker that takes one record per produce batch (tansu, see
:mod:`workers.app`). So, as Kafka Streams does with its record cache and commit interval, the
state lives in memory and goes to the table at *checkpoints*:

1. a message is processed against the in-memory state and its output is sent at once;
2. the message is *held*, not acknowledged, so Faust cannot commit its offset yet;
3. at a checkpoint of partition ``p`` (every ``SITUFLOW_CHECKPOINT_INTERVAL`` seconds, on a
   message or a tick of ``p``): every output of ``p`` is awaited until the broker has it, the
   state is written to the table (one changelog record), and only then are the held messages
   acknowledged, so Faust may commit their offsets (it flushes the producer first).

After a crash the new owner restores the last checkpoint and the input is redelivered from the
committed offset, which is never past the checkpoint: nothing is lost. Input between the commit
and the checkpoint is already in the state; the service recognises it by the position the state
records and skips it. Output sent after the checkpoint is sent again: consumers drop it by its
deterministic id (at-least-once, ARCHITECTURE.md).

Table writes go to the changelog partition of the *current* Faust event, so a checkpoint of
``p`` runs only while handling a message or a tick of partition ``p``. Ticks come from an
internal topic co-partitioned with the input (``<app>-ticks``): a service's timer sends one to
a partition of its own with work waiting (:meth:`PartitionStates.want_tick` keeps one on its
way at a time), so idle partitions checkpoint and commit too. :meth:`PartitionStates.consume`
is the agent loop all stateful services share.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

import faust

S = TypeVar("S")

#: Seconds between checkpoints of a partition; the bound on work redone after a crash.
CHECKPOINT_INTERVAL = float(os.environ.get("SITUFLOW_CHECKPOINT_INTERVAL", "1.0"))


@dataclass
class _Partition(Generic[S]):
    state: S
    held: list[Any] = field(default_factory=list)  # processed, not yet acknowledged events
    deliveries: list[Awaitable[Any]] = field(default_factory=list)  # sent, not yet awaited
    dirty: bool = False
    checkpointed_at: float = field(default_factory=time.monotonic)


class PartitionStates(Generic[S]):
    """The in-memory state of each assigned partition, checkpointed to one Faust table.

    ``load`` turns a table value into a state (``None``: the partition has none yet) and
    ``store`` a state into a table value. Everything is forgotten at a rebalance: held
    messages are then never acknowledged, so the next owner redoes them from the last
    checkpoint, which is the state it recovers.
    """

    def __init__(
        self,
        app: faust.App,
        table: Any,
        load: Callable[[Any], S],
        store: Callable[[S], Any],
        interval: float = CHECKPOINT_INTERVAL,
        observe: Callable[[int, int], None] | None = None,
    ) -> None:
        self.table = table
        self.load = load
        self.store = store
        self.interval = interval
        self.observe = observe  # told (partition, bytes) of every checkpoint written
        self._parts: dict[int, _Partition[S]] = {}
        self._tick_sent: dict[int, float] = {}  # monotonic time, per partition
        self._stream: Any = None  # the agent's stream, once consume() runs
        self._generation = 0
        # (mode's stubs type receivers as a union of callables, which mypy cannot match)
        cast(Any, app.on_partitions_revoked).connect(self._forget)
        cast(Any, app.on_partitions_assigned).connect(self._forget)

    def _forget(self, sender: Any, *args: Any, signal: Any, **kwargs: Any) -> None:
        self._generation += 1
        self._parts.clear()

    @property
    def generation(self) -> int:
        """Changes at every rebalance: work begun in an older generation must not be kept."""
        return self._generation

    def get(self, partition: int) -> S:
        """The partition's state: in memory, or else restored from the table's checkpoint."""
        part = self._parts.get(partition)
        if part is None:
            stored = self.table.get(str(partition))
            state = self.load(None if stored is None else json.loads(stored))
            part = self._parts[partition] = _Partition(state)
        return part.state

    def items(self) -> list[tuple[int, S]]:
        return [(p, part.state) for p, part in self._parts.items()]

    def changed(self, partition: int, state: S, event: Any | None = None,
                deliveries: list[Awaitable[Any]] | None = None) -> None:
        """Record processing of ``partition``: its new state, the event to acknowledge at the
        next checkpoint and the deliveries of the output sent for it."""
        part = self._parts.get(partition)
        if part is None:  # revoked while the event was processed: drop the work
            return
        part.state = state
        part.dirty = True
        if event is not None:
            part.held.append(event)
        if deliveries:
            part.deliveries.extend(deliveries)

    def hold(self, partition: int, event: Any) -> None:
        """An event of ``partition`` that changed nothing (a repeat): acknowledge it with the
        next checkpoint, after the events before it."""
        part = self._parts.get(partition)
        if part is not None:
            part.held.append(event)

    def want_tick(self, partition: int, now: float) -> bool:
        """Whether to send the partition a tick: none is on its way (or the last was sent a
        second ago and may be lost to a rebalance). A tick waits behind the partition's
        backlog, so without this the timer would queue many."""
        sent = self._tick_sent.get(partition)
        if sent is not None and now - sent < 1.0:
            return False
        self._tick_sent[partition] = now
        return True

    def tick_arrived(self, partition: int) -> None:
        self._tick_sent.pop(partition, None)

    def loaded(self, partition: int) -> bool:
        """Whether the partition's state is in memory (it is not after a rebalance until a
        message or a tick of the partition loads it)."""
        return partition in self._parts

    def due(self, partition: int) -> bool:
        part = self._parts.get(partition)
        return part is not None and bool(part.held or part.dirty) and \
            time.monotonic() - part.checkpointed_at >= self.interval

    async def consume(
        self,
        stream: Any,
        ticks: str,
        on_message: Callable[[Any], Awaitable[None]],
        on_tick: Callable[[int], Awaitable[None]] | None = None,
    ) -> None:
        """The loop of a stateful service's agent over its input and ``ticks`` topics:
        ``on_message`` handles an input message (and reports its effect through
        :meth:`changed` or :meth:`hold`), ``on_tick`` a tick of a partition; a partition
        checkpoints after either when it is due."""
        self._stream = stream.noack()  # acknowledged at checkpoints
        async for event in self._stream.events():
            partition = event.message.partition
            if event.message.topic == ticks:
                self.tick_arrived(partition)
                await self._stream.ack(event)
                if on_tick is not None:
                    await on_tick(partition)
            else:
                await on_message(event)
            if self.due(partition):
                await self.checkpoint(partition)

    async def checkpoint(self, partition: int) -> None:
        """Await the partition's output, store its state, acknowledge its held events.

        Must run while Faust handles a message or tick *of this partition* (in :meth:`consume`).
        """
        part = self._parts.get(partition)
        if part is None:
            return
        generation = self._generation
        deliveries, part.deliveries = part.deliveries, []
        if deliveries:
            await asyncio.gather(*deliveries)
        if generation != self._generation:
            return  # revoked meanwhile: the next owner redoes the work from the checkpoint
        if part.dirty:
            value = json.dumps(self.store(part.state), separators=(",", ":")).encode()
            self.table[str(partition)] = value
            part.dirty = False
            if self.observe is not None:
                self.observe(partition, len(value))
        held, part.held = part.held, []
        for event in held:
            await self._stream.ack(event)
        part.checkpointed_at = time.monotonic()
