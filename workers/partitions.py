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
   acknowledged, so Faust may commit their offsets.

**A checkpoint is a consistent pair: the state and, per input topic, the offset of the last
message whose effect it holds.** The worker that restores a checkpoint resumes each input right
after those offsets, whatever the group's committed offset says: Faust commits messages it never
hands to the agent (why, and what it cost: docs/adr/001-checkpoints-pair-state-with-offsets.md).
Messages are applied strictly in offset order per input topic partition, as
:class:`situflow.offsets.OffsetLedger` decides: a repeat is not applied, the next offset is, a
later offset reveals a gap and *rewinds* the topic partition: it is paused (Faust's
``pause_partitions``), the partition is sent a tick of its own, and when that tick comes, after
every batch fetched before the pause, the consumer is sought back to the next offset it needs and
resumed. Nothing is applied while the app rebalances (Faust then seeks every partition to the
committed offset, under any seek of ours); each partition's inputs are rewound to its checkpoint
after, on a tick. A service may also pause input topics it has nothing to do with
(:meth:`PartitionStates.idle`); a rewind leaves them paused.

**Checkpoints are fenced by an epoch**, so that a worker that lost its partitions without knowing
it (a zombie) cannot undo the new owner's checkpoint: each owner writes ``p``'s checkpoints
under ``p@<counter>.<generation>`` (:func:`checkpoint_key`), restores the highest epoch stored,
writes with the next counter and deletes the older keys at its first checkpoint (ADR 001).

Table writes go to the changelog partition of the *current* Faust event, so a checkpoint of
``p`` runs only while handling a message or a tick of ``p``. Ticks come from an internal topic
co-partitioned with the input (``<app>-ticks``): a service's timer sends one to a partition of
its own with work waiting or inputs not yet positioned (:meth:`PartitionStates.want_tick`), so
idle partitions checkpoint, commit and resume too. :meth:`PartitionStates.consume` is the agent
loop all stateful services share.

With ``SITUFLOW_PROCESSING_GUARANTEE=exactly_once`` (:mod:`workers.app`) a partition's changelog
record, output and input offsets go into its Kafka transaction, which every checkpoint commits,
so they become visible together to ``read_committed`` consumers; ticks and repeats too are
acknowledged only at the next checkpoint, so that Faust's own commits hold exactly the
checkpoints' effects. Offsets then skip over transaction markers (the ledger's
``exactly_once``), a rewind's tick is sent in the transaction, and the transactional id, the
partition's, fences a zombie.

**Bundles** (:mod:`workers.bundles`): a bundle of input records is applied as one run of
offsets (the records up to the last applied are dropped as repeats, the first after it is
admitted as a message is, and the run's last offset is then the last applied); it is held, and
acknowledged, as one message. Where messages must be told apart (a replay looking for a failing
message, a known poison message in the bundle, a recent crash of the process at or before it),
the bundle is split and each record goes the way of one message; a rebalance while its records
are handled drops those left, as Faust drops a message taken before a rebalance.

**Processing errors** (:mod:`workers.failures`): an exception while a message or tick of a
partition is handled drops that partition's memory: its next message restores the checkpoint
and reveals a gap, and the input is replayed with the failing message skipped
(:meth:`PartitionStates.failures`, ``on_poison``) once it is known, or one message at a time
(:meth:`PartitionStates.careful`) until it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import time
from bisect import bisect_right
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, TypeVar, cast

import faust
from aiokafka.errors import IllegalStateError
from faust.transport.consumer import Consumer
from faust.types import TP
from faust.types.enums import ProcessingGuarantee

from situflow.kslack.pacing import caught_up
from situflow.offsets import Apply, Gap, OffsetLedger, Repeat
from workers.bundles import BundledEvent, records_of, split
from workers.failures import (
    CONTINUE,
    EXIT_PROCESSING_ERROR,
    FAIL,
    CrashRecord,
    Failure,
    Quarantined,
    QueryFailed,
    describe,
    plain,
)

S = TypeVar("S")

logger = logging.getLogger(__name__)


def checkpoint_key(partition: int, epoch: tuple[int, int]) -> str:
    """The table key of ``partition``'s checkpoints written in ``epoch`` (module doc)."""
    return f"{partition}@{epoch[0]}.{epoch[1]}"


def checkpoints(table: Any, partition: int) -> list[tuple[tuple[int, int], str]]:
    """The epochs and keys of ``partition``'s checkpoints in ``table``, the highest epoch last:
    the one to restore."""
    prefix = f"{partition}@"
    found = []
    for key in list(table.keys()):
        if key.startswith(prefix):
            counter, generation = key[len(prefix):].split(".")
            found.append(((int(counter), int(generation)), key))
    return sorted(found)


@dataclass
class _PartitionState(Generic[S]):
    state: S
    offsets: OffsetLedger  # which input messages ``state`` holds, and which it applies next
    positioned: bool = False  # whether the inputs were sought to the checkpoint's offsets
    held: list[Any] = field(default_factory=list)  # processed, not yet acknowledged events
    deliveries: list[Awaitable[Any]] = field(default_factory=list)  # sent, not yet awaited
    dirty: bool = False
    checkpointed_at: float = field(default_factory=time.monotonic)
    epoch: tuple[int, int] = (0, 0)  # of this owner's checkpoints (module doc, fencing)
    superseded: list[str] = field(default_factory=list)  # keys of older epochs, to delete


class PartitionStates(Generic[S]):
    """The in-memory state of each assigned partition, checkpointed to one Faust table.

    ``load`` turns a table value into a state (``None``: the partition has none yet) and
    ``store`` a state into a table value; ``interval`` is ``SITUFLOW_CHECKPOINT_INTERVAL``,
    the seconds between checkpoints of a partition, which bound the work redone after a crash.
    Everything is forgotten at a rebalance: held messages are then never acknowledged, so the
    next owner redoes them from the last checkpoint, which is the state it recovers.
    """

    def __init__(
        self,
        app: faust.App,
        table: Any,
        load: Callable[[Any], S],
        store: Callable[[S], Any],
        interval: float = 1.0,
        observe: Callable[[int, int], None] | None = None,
        crashes: CrashRecord | None = None,
        on_error: str = CONTINUE,
    ) -> None:
        self.app = app
        self.table = table
        self.load = load
        self.store = store
        self.interval = interval
        self.observe = observe  # told (partition, bytes) of every checkpoint written
        # Transactions put markers between records: offsets skip (module doc).
        self.exactly_once = app.conf.processing_guarantee is ProcessingGuarantee.EXACTLY_ONCE
        self._parts: dict[int, _PartitionState[S]] = {}
        self._tick_sent: dict[int, float] = {}  # monotonic time, per partition
        self._stream: Any = None  # the agent's stream, once consume() runs
        self._inputs: list[str] = []  # its topics but the ticks
        self._ticks: Any = None  # the ticks topic, once consume() runs
        self._generation = 0
        # Rewinds (module doc): the inputs paused until the tick with this value comes, to be
        # sought back then; the inputs this worker paused; the topics not to fetch at all.
        self._seeking: dict[TP, bytes] = {}
        self._rewinds = 0
        self._paused: set[TP] = set()
        self._idle: frozenset[str] = frozenset()
        # Poison messages (workers.failures): what to skip on a replay, per (topic, partition)
        # and offset; per partition, the offsets up to which a replay goes one message at a
        # time; per partition, the last message handled.
        self.crashes = crashes
        self.on_error = on_error
        self._poison: dict[tuple[str, int], dict[int, list[Failure]]] = {}
        self._careful: dict[int, dict[str, int]] = {}
        self._last: dict[int, Any] = {}
        # (mode's stubs type receivers as a union of callables, which mypy cannot match)
        cast(Any, app.on_partitions_revoked).connect(self._forget)
        cast(Any, app.on_partitions_assigned).connect(self._assigned)

    def _forget(self, *args: Any, **kwargs: Any) -> None:
        self._generation += 1
        self._parts.clear()
        self._seeking.clear()

    async def _assigned(self, sender: Any, assigned: set[TP], **kwargs: Any) -> None:
        """Forget everything, and send each assigned partition a tick: the first one it
        handles after the rebalance seeks its inputs to its checkpoint (:meth:`_position`),
        also when no input comes after the group's committed offset to reveal that it passed
        the checkpoint (the timer sends more until one does)."""
        self._forget()
        self._repause(set(assigned))
        if self._ticks is None:
            return
        now = time.monotonic()
        for tp in assigned:
            if tp.topic == self._ticks.get_topic_name():
                self._tick_sent[tp.partition] = now
                await self._ticks.send(value=b"", partition=tp.partition)

    @property
    def generation(self) -> int:
        """Changes at every rebalance: work begun in an older generation must not be kept."""
        return self._generation

    def _part(self, partition: int) -> _PartitionState[S]:
        part = self._parts.get(partition)
        if part is None:
            stored = checkpoints(self.table, partition)
            value = json.loads(self.table[stored[-1][1]]) if stored else None
            state = self.load(None if value is None else value["state"])
            offsets = {} if value is None else value["offsets"]
            counter = stored[-1][0][0] + 1 if stored else 0
            part = self._parts[partition] = _PartitionState(
                state, OffsetLedger.restored(offsets, self.exactly_once),
                epoch=(counter, self.app.consumer_generation_id),
                superseded=[key for _, key in stored])
        return part

    def get(self, partition: int) -> S:
        """The partition's state: in memory, or else restored from the table's checkpoint."""
        return self._part(partition).state

    def items(self) -> list[tuple[int, S]]:
        return [(p, part.state) for p, part in self._parts.items()]

    def changed(self, partition: int, state: S, event: Any | None = None,
                deliveries: list[Awaitable[Any]] | None = None) -> None:
        """Record processing of ``partition``: its new state, the event to acknowledge at the
        next checkpoint (its effect is in ``state``) and the deliveries of the output sent
        for it."""
        part = self._parts.get(partition)
        if part is None:  # revoked while the event was processed: drop the work
            return
        part.state = state
        part.dirty = True
        if event is not None:
            self._hold(part, event)
        if deliveries:
            part.deliveries.extend(deliveries)

    def hold(self, partition: int, event: Any) -> None:
        """An event of ``partition`` whose effect is in the state without changing it: the
        next checkpoint holds it, and acknowledges it after the events before it."""
        part = self._parts.get(partition)
        if part is not None:
            self._hold(part, event)

    @staticmethod
    def _hold(part: _PartitionState[S], event: Any) -> None:
        message = event.message
        acknowledged = _acknowledged_with(event)
        if acknowledged is not None:
            part.held.append(acknowledged)
        part.offsets.hold(message.topic, message.offset)

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

    def applied(self, partition: int, topic: str) -> int:
        """The last offset of ``topic`` whose effect is in the partition's state (-1: none)."""
        return self._part(partition).offsets.last_applied(topic)

    async def fetched_all(self, partition: int, topic: str) -> bool:
        """:func:`situflow.kslack.pacing.caught_up` for ``partition`` of ``topic`` (tansu's high
        watermark can lag by one record batch; see :mod:`workers.broker`)."""
        tp = TP(topic, partition)
        position = await self.app.consumer.position(tp)
        return caught_up(position, self.app.consumer.highwater(tp), self.applied(partition, topic))

    def positioned(self, partition: int) -> bool:
        """Whether the partition's inputs were sought to its checkpoint since the last
        rebalance (:meth:`_position`). Until then a service's timer sends the partition ticks:
        the one sent at the assignment may come while Faust still positions the consumer."""
        part = self._parts.get(partition)
        return part is not None and part.positioned

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
        on_poison: Callable[[Any, Failure], Awaitable[None]] | None = None,
    ) -> None:
        """The loop of a stateful service's agent over its input and ``ticks`` topics:
        ``on_message`` handles each input message to apply, in offset order (and reports its
        effect through :meth:`changed` or :meth:`hold`), ``on_tick`` a tick of a partition;
        a partition checkpoints after either when it is due. An exception while handling
        either restores the partition from its checkpoint and replays; ``on_poison`` is
        given the message found to fail, in place of ``on_message`` (:mod:`workers.failures`).
        """
        # A restarted agent (Faust restarts one that raised) starts from the checkpoints: the
        # message that failed may have changed the state halfway.
        self._forget()
        self._repause(set(self.app.consumer.assignment()))
        self._stream = stream.noack()  # acknowledged at checkpoints
        self._inputs = [topic for topic in stream.channel.topics if topic != ticks]
        self._ticks = self.app.topic(ticks, key_serializer="raw", value_serializer="raw")
        async for event in self._stream.events():
            records = records_of(event)
            if records is not None and self._one_by_one(event.message, records):
                generation = self._generation
                for record in split(event):
                    # Faust drops a message taken before a rebalance (its generation's): so
                    # are the records left, which the rebalance's seek or a rewind bring again.
                    if generation != self._generation:
                        break
                    await self._dispatch(record, ticks, on_message, on_tick, on_poison)
            else:
                await self._dispatch(event, ticks, on_message, on_tick, on_poison)

    async def _dispatch(
        self,
        event: Any,
        ticks: str,
        on_message: Callable[[Any], Awaitable[None]],
        on_tick: Callable[[int], Awaitable[None]] | None,
        on_poison: Callable[[Any, Failure], Awaitable[None]] | None,
    ) -> None:
        """Handle one message, bundle or tick (:meth:`consume`), then checkpoint if due."""
        partition = event.message.partition
        handle: Callable[[], Awaitable[None]] | None = None
        if event.message.topic == ticks:
            self.tick_arrived(partition)
            await self._position(partition)
            await self._seek_back(partition, event.value)
            await self._acknowledge(self._part(partition), event)
            if on_tick is not None:
                handle = partial(on_tick, partition)
        elif await self._admit(event):
            handle = partial(self._handle, event, on_message, on_poison)
        try:
            if handle is not None:
                await handle()
            if self.due(partition):
                await self.checkpoint(partition)
        except Exception as exc:  # workers.failures: no message may stop the service
            self._failed(event, exc, tick=event.message.topic == ticks)

    def _one_by_one(self, message: Any, records: Sequence[Any]) -> bool:
        """Whether a bundle's records go one at a time (module doc): its partition replays
        carefully, a poison message or a recent crash lies in or before its offsets, or they
        are no run of consecutive offsets (only transactions skip offsets)."""
        topic, partition = message.topic, message.partition
        first, last = records[0].offset, records[-1].offset
        if partition in self._careful:
            return True
        poison = self._poison.get((topic, partition))
        if poison and any(first <= offset <= last for offset in poison):
            return True
        if self.crashes is not None and self.crashes.suspect(topic, partition, first, last):
            return True
        return not self.exactly_once and last - first + 1 != len(records)

    def failures(self, event: Any) -> list[Failure]:
        """The failures found earlier at this message (empty but on a replay after one): the
        queries to skip on it (:mod:`workers.failures`)."""
        if not self._poison:
            return []
        message = event.message
        return self._poison.get((message.topic, message.partition), {}).get(message.offset, [])

    def careful(self, partition: int) -> bool:
        """Whether the partition replays one message at a time to find the one that failed:
        a service then does nothing of a message's work later (K-slack pushes at once)."""
        return partition in self._careful

    async def _handle(self, event: Any, on_message: Callable[[Any], Awaitable[None]],
                      on_poison: Callable[[Any, Failure], Awaitable[None]] | None) -> None:
        message = event.message
        topic, partition, offset = message.topic, message.partition, message.offset
        records = records_of(event)
        self._last[partition] = event
        skip = [f for f in self.failures(event) if f.query is None]
        crashes = self.crashes
        if not skip and crashes is not None and crashes.quarantined(topic, partition, offset):
            skip = [Failure(Quarantined(
                f"{topic}[{partition}]@{offset} crashed the worker process "
                f"{crashes.crashes_at(topic, partition, offset)} times"))]
        if skip:
            logger.error("%s[%d]@%d: skipped, to the dead-letter topic: %s", topic, partition,
                         offset, describe(skip[0].exception))
            if on_poison is not None:
                await on_poison(event, skip[0])
            self.hold(partition, event)
            self._settle(partition)
            return
        if crashes is not None:
            # A bundle's first offset: a crash splits the bundles from there (_one_by_one).
            crashes.begin(topic, partition, offset if records is None else records[0].offset)
        try:
            await on_message(event)
            careful = self._careful.get(partition)
            if careful is not None:
                part = self._part(partition)
                json.dumps(self.store(part.state), default=plain)  # raises here, not later
                if all(part.offsets.last_applied(t) >= o for t, o in careful.items()):
                    del self._careful[partition]
        finally:
            if crashes is not None:
                crashes.end()
        if any(f.query is not None for f in self.failures(event)):
            self._settle(partition)

    def _settle(self, partition: int) -> None:
        """Checkpoint after this message: a failure after it replays from here."""
        part = self._parts.get(partition)
        if part is not None:
            part.checkpointed_at = float("-inf")

    def _failed(self, event: Any, exc: Exception, tick: bool) -> None:
        """Restore the partition from its checkpoint and mark what to skip or how to replay
        (:mod:`workers.failures`)."""
        message = event.message
        partition = message.partition
        where = f"{message.topic}[{partition}]" + ("" if tick else f"@{message.offset}")
        if self.on_error == FAIL:
            logger.critical("%s: %s; stopping (SITUFLOW_ON_ERROR=fail)", where, describe(exc),
                            exc_info=exc)
            logging.shutdown()
            sys.stderr.flush()
            os._exit(EXIT_PROCESSING_ERROR)
        part = self._parts.get(partition)
        if part is None:
            return  # revoked meanwhile: its next owner restores the checkpoint anyway
        careful = self._careful.pop(partition, None)
        # A bundle is not one message to blame: it is replayed one message at a time.
        query = isinstance(exc, QueryFailed) and not tick and records_of(event) is None
        # At a tick of a careful replay, the last message handled is the one to blame.
        blamed = event if not tick else self._last.get(partition) if careful is not None else None
        if blamed is None or not (query or careful is not None):
            # Not known to be this message's fault: replay one message at a time up to here.
            self._careful[partition] = dict(part.offsets.applied)
            logger.warning("%s: %s; replaying partition %d from its checkpoint to find the "
                           "message", where, describe(exc), partition, exc_info=exc)
            self._restart(partition)
            return
        failure = Failure(exc.cause, exc.query) if isinstance(exc, QueryFailed) else Failure(exc)
        target = blamed.message
        logger.warning("%s[%d]@%d: %s; replaying from the checkpoint without it",
                       target.topic, partition, target.offset, describe(exc), exc_info=exc)
        poison = self._poison.setdefault((target.topic, partition), {})
        poison.setdefault(target.offset, []).append(failure)
        # What a checkpoint holds is never replayed: forget its failures.
        for offset in [o for o in poison if o <= part.offsets.stored.get(target.topic, -1)]:
            del poison[offset]
        self._restart(partition)

    def _restart(self, partition: int) -> None:
        """Drop the partition's memory: its next message restores the checkpoint and reveals
        a gap, which rewinds the input to the checkpoint (or a tick positions it)."""
        self._parts.pop(partition, None)
        self._last.pop(partition, None)

    async def _admit(self, event: Any) -> bool:
        """Whether ``event`` is the next message of its topic partition, or a bundle holding
        it, to apply (a bundle's records are narrowed to those); rewinds the partition at a
        gap (:mod:`situflow.offsets`)."""
        records = records_of(event)
        if records is None:
            return await self._admit_message(event)
        message = event.message
        part = self._part(message.partition)
        fresh = bisect_right(records, part.offsets.last_applied(message.topic),
                             key=_offset)
        if fresh == len(records):  # all repeats: as the last one
            return await self._admit_message(event)
        if not await self._admit_message(BundledEvent(event, records[fresh])):
            return False
        message.records = records[fresh:]
        part.offsets.apply_run(message.topic, message.offset)
        return True

    async def _admit_message(self, event: Any) -> bool:
        message = event.message
        part = self._part(message.partition)
        topic, offset = message.topic, message.offset
        # Faust seeks every partition to its committed offset before a rebalance ends, under
        # any seek of ours: nothing is applied until then, and the partition is positioned
        # after (_position), which brings this message again.
        admission = part.offsets.admit(topic, offset, repositioning=self.app.rebalancing,
                                       seeking=message.tp in self._seeking)
        if isinstance(admission, Repeat):
            if admission.stored:
                await self._acknowledge(part, event)
            return False
        if not isinstance(admission, Gap):
            return isinstance(admission, Apply)
        if admission.again:
            # Retention deleted what was sought, or the consumer was not paused (Faust lets a
            # partition whose agent buffer was full through).
            logger.info("%s[%d]: offset %d came after the seek to %d", topic,
                        message.partition, offset, admission.seek_to)
        else:
            logger.warning("%s[%d]: offset %d comes after %d, the last in the state; "
                           "rewinding to %d", topic, message.partition, offset,
                           admission.seek_to - 1, admission.seek_to)
        generation = self._generation
        first = (await self.app.consumer.earliest_offsets(message.tp))[message.tp]
        if generation != self._generation:
            return False
        if first > admission.seek_to:
            logger.warning("%s[%d]: offsets %d..%d were deleted before they were applied; "
                           "resuming at %d", topic, message.partition, admission.seek_to,
                           first - 1, first)
            if part.offsets.deleted_before(topic, first, offset):
                return True
        # Faust's message.tp is aiokafka's TopicPartition, which resume_partitions would put
        # among Faust's active partitions, where its fetcher asserts TP.
        await self._rewind(TP(topic, message.partition), generation)
        return False

    async def _acknowledge(self, part: _PartitionState[S], event: Any) -> None:
        """Acknowledge an event whose effect is stored (or that has none); with transactions
        only at the next checkpoint, so that no commit takes the output of later input."""
        acknowledged = _acknowledged_with(event)
        if acknowledged is None:
            return
        if self.exactly_once:
            part.held.append(acknowledged)
        else:
            await self._stream.ack(acknowledged)

    async def _position(self, partition: int) -> None:
        """Once after a restore, when the rebalance has ended: rewind each input that no message
        has come from yet, and whose consumer is past the checkpoint, to the checkpoint's
        offset. The first message from it is then checked as any (:meth:`_admit`)."""
        part = self._part(partition)
        if part.positioned or self.app.rebalancing:
            return
        part.positioned = True
        generation = self._generation
        for topic in self._inputs:
            tp = TP(topic, partition)
            if tp in self._seeking:
                continue
            position = await self.app.consumer.position(tp)
            if generation != self._generation:
                return
            if part.offsets.resume_at(topic, position):
                logger.info("%s[%d]: resuming at %d after the checkpoint, not at %d",
                            topic, partition, part.offsets.last_applied(topic) + 1, position)
                await self._rewind(tp, generation)

    async def _rewind(self, tp: TP, generation: int) -> None:
        """Pause ``tp`` and send its partition a tick of its own: the seek back waits for it
        (:meth:`_seek_back`), unless the partition was revoked meanwhile."""
        if generation != self._generation:
            return
        self._rewinds += 1
        tag = f"rewind {self._rewinds}".encode()
        self._seeking[tp] = tag
        self._paused.add(tp)
        self.app.consumer.pause_partitions({tp})
        await self._ticks.send(value=tag, partition=tp.partition)

    async def _seek_back(self, partition: int, tag: bytes | None) -> None:
        """The tick of a rewind came after every record fetched before its pause, which the
        pause kept from the agent: seek the input back to the next offset the partition needs,
        once, and fetch it again (unless it is idle)."""
        for tp in [tp for tp, sent in self._seeking.items() if sent == tag]:
            del self._seeking[tp]
            generation = self._generation
            # IllegalStateError: no longer assigned; its next owner restores the checkpoint
            with contextlib.suppress(IllegalStateError):
                await self.app.consumer.seek_wait({tp: self.applied(partition, tp.topic) + 1})
            if generation == self._generation and tp.topic not in self._idle:
                self._paused.discard(tp)
                self.app.consumer.resume_partitions({tp})

    def _repause(self, assigned: set[TP]) -> None:
        """Of the ``assigned`` inputs, pause those of idle topics and those a rewind waits on,
        and fetch the others this worker paused again (after a rebalance or a restart of the
        agent, which forget rewinds, or a change of the idle topics)."""
        paused = {tp for tp in assigned if tp.topic in self._idle or tp in self._seeking}
        self.app.consumer.resume_partitions((self._paused & assigned) - paused)
        self.app.consumer.pause_partitions(paused)
        self._paused = paused

    def idle(self, topics: Iterable[str]) -> None:
        """Fetch none of the input ``topics`` (Faust's pause): the service has nothing to do
        with their messages now (:mod:`workers.matcher`). Topics idle before and not now are
        fetched again from where they stopped."""
        idle = frozenset(topics)
        if idle != self._idle:
            self._idle = idle
            self._repause(set(self.app.consumer.assignment()))

    async def checkpoint(self, partition: int) -> None:
        """Await the partition's output, store its state with the offsets it holds,
        acknowledge its held events (and commit them at once with transactions).

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
        if part.dirty or part.offsets.unstored:
            value = json.dumps({"state": self.store(part.state), "offsets": part.offsets.covered},
                               default=plain, separators=(",", ":")).encode()
            self.table[checkpoint_key(partition, part.epoch)] = value
            # Only after: a crash between keeps a checkpoint to restore.
            for key in part.superseded:
                self.table.pop(key, None)
            part.superseded = []
            part.offsets.checkpointed()
            part.dirty = False
            if self.observe is not None:
                self.observe(partition, len(value))
        held, part.held = part.held, []
        if self.exactly_once and held:
            # The changelog record into the transaction before any commit can take the acks.
            await self.app.producer.flush()
        for event in held:
            await self._stream.ack(event)
        if self.exactly_once and held:
            # Not commit(): it returns without committing while the timer's commit runs.
            consumer = cast(Consumer, self.app.consumer)
            await consumer.force_commit({event.message.tp for event in held})
        part.checkpointed_at = time.monotonic()


def _acknowledged_with(event: Any) -> Any:
    """The Faust event whose acknowledgement is ``event``'s: itself, or for a bundle's record
    the bundle's, with its last record (None for the others)."""
    if isinstance(event, BundledEvent):
        return event.bundle if event.last else None
    return event


def _offset(record: Any) -> int:
    return record.offset
