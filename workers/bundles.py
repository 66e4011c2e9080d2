"""Bundles: every record one fetch brought of one topic partition, as one Faust message.

Faust hands an agent one message at a time through its conductor, stream and acknowledgement
machinery: an agent that does nothing ran 6,000–12,000 messages/s on this machine
(``bench/README.md``, "Services, one event per message"), so with one JSON event per message
that path, not situflow's work, bounded a service. So for the topics a service registers
(:func:`workers.faust_patches.bundle_topics`), the consumer turns the records of one topic
partition that one fetch returned into one :class:`Bundle`, whose offset is the last record's;
the agent decodes and applies them together, and one acknowledgement covers them all (the
offsets before the last are registered with Faust as a gap, which it counts as acknowledged
once the bundle is).

:class:`workers.partitions.PartitionStates` applies a bundle as one run of offsets; where a
message must be handled on its own (a replay looking for a failing message, a known poison
message, a message that crashed the process), it splits the bundle into :class:`BundledEvent`
views, which the per-message path takes as it takes Faust's events.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from faust.types import TP
from faust.types.tuples import ConsumerMessage

#: Records in a bundle at most (a fetch may bring more). With :data:`QUEUED` bundles waiting for
#: the agent at most, they bound the records a service holds beyond the consumer's prefetch
#: (Faust queues 4,096 messages, which as bundles could be a whole backlog).
RECORDS = 4096
QUEUED = 16


class BundleRecord:
    """What the consumer's fetch returns for a bundle, in the place of its records: the
    attributes Faust's message conversion reads (the last record's), and the records."""

    __slots__ = ("checksum", "headers", "key", "offset", "partition", "records",
                 "serialized_key_size", "serialized_value_size", "timestamp",
                 "timestamp_type", "topic", "value")

    def __init__(self, records: Sequence[Any]) -> None:
        last = records[-1]
        self.topic, self.partition, self.offset = last.topic, last.partition, last.offset
        self.timestamp, self.timestamp_type = last.timestamp, last.timestamp_type
        self.headers: list[tuple[str, bytes]] = []
        self.key: bytes | None = None
        self.value = b""
        self.checksum = None
        self.serialized_key_size = self.serialized_value_size = 0
        self.records = records


def bundled(fetched: Sequence[Any]) -> list[Any]:
    """The records one fetch brought of one partition, in order, as bundles of at most
    :data:`RECORDS` records (a last one of one record stays that record)."""
    runs = [fetched[at:at + RECORDS] for at in range(0, len(fetched), RECORDS)]
    return [BundleRecord(run) if len(run) > 1 else run[0] for run in runs]


class Bundle(ConsumerMessage):
    """A Faust message holding ``records`` (aiokafka's, in offset order); its offset is the
    last one's. :class:`workers.partitions.PartitionStates` narrows ``records`` to those to
    apply before the service sees it."""

    __slots__ = ("records",)
    records: Sequence[Any]


def bundle_message(tp: TP, record: BundleRecord, generation_id: int | None) -> Bundle:
    message = Bundle(record.topic, record.partition, record.offset,
                     record.timestamp / 1000.0, record.timestamp_type, [], None, b"", None,
                     0, 0, tp, generation_id=generation_id)
    message.records = record.records
    return message


def records_of(event: Any) -> Sequence[Any] | None:
    """The records of a bundle's event (None: the event is one message)."""
    message = event.message
    return message.records if isinstance(message, Bundle) else None


class BundledEvent:
    """One record of a bundle, in the shape of a Faust event (``key``, ``value``, ``message``)
    for the code that handles one message; ``bundle`` is the bundle's Faust event, which is
    acknowledged with the bundle's last record."""

    __slots__ = ("_message", "bundle", "record")

    def __init__(self, bundle: Any, record: Any) -> None:
        self.bundle = bundle
        self.record = record
        self._message: ConsumerMessage | None = None

    @property
    def key(self) -> bytes | None:
        return self.record.key

    @property
    def value(self) -> bytes | None:
        return self.record.value

    @property
    def offset(self) -> int:
        return self.record.offset

    @property
    def last(self) -> bool:
        """Whether this is the bundle's last record (whose acknowledgement is the bundle's)."""
        return self.record.offset == self.bundle.message.offset

    @property
    def message(self) -> ConsumerMessage:
        if self._message is None:
            r, bundle = self.record, self.bundle.message
            self._message = ConsumerMessage(
                r.topic, r.partition, r.offset,
                cast(float, None) if r.timestamp is None else r.timestamp / 1000.0,
                r.timestamp_type,
                r.headers, r.key, r.value, r.checksum, r.serialized_key_size,
                r.serialized_value_size, bundle.tp, generation_id=bundle.generation_id)
        return self._message


def split(event: Any) -> list[BundledEvent]:
    """A bundle's event as one view per record, in offset order."""
    return [BundledEvent(event, record) for record in event.message.records]
