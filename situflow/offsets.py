"""The offset ledger of a checkpointed state: which input message it applies next.

A checkpoint pairs a state with, per input topic, the offset of the last message whose effect
it holds (as a Flink snapshot pairs state with source offsets). Messages are applied to the
state strictly in offset order, per input topic of one partition, whatever the consumer
delivers; :meth:`OffsetLedger.admit` decides for each message:

- at or before the last offset applied: a :class:`Repeat`, not applied (acknowledged if the
  stored checkpoint holds it);
- the next offset: :class:`Apply`;
- a later offset: a :class:`Gap`, never applied; the input is rewound to the next offset;
- while the consumer is being repositioned: :class:`Drop`, it comes again.

Why the group's committed offset cannot be trusted, and what happened when it was:
docs/adr/001-checkpoints-pair-state-with-offsets.md.

>>> ledger = OffsetLedger.restored({"cars": 4})
>>> ledger.admit("cars", 5), ledger.admit("cars", 5), ledger.admit("cars", 9)
(Apply(), Repeat(stored=False), Gap(seek_to=6, again=False))
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Apply:
    """The next message: apply it (the ledger has recorded it as applied)."""


@dataclass(frozen=True)
class Repeat:
    """A message whose effect the state holds already; ``stored``: the stored checkpoint holds
    it too, so it may be acknowledged."""

    stored: bool


@dataclass(frozen=True)
class Drop:
    """Not now: the consumer is being repositioned (a rebalance, or a rewind's pause), and the
    message comes again after."""


@dataclass(frozen=True)
class Gap:
    """A later message than the next: rewind the input to ``seek_to``. ``again``: it came
    while a rewind of this topic was under way (the seek was undone, or retention deleted what
    it sought)."""

    seek_to: int
    again: bool


Admission = Apply | Repeat | Drop | Gap


@dataclass
class OffsetLedger:
    """Per input topic of one partition: the last offset the stored checkpoint holds
    (``stored``), applied to the state (``applied``), the next checkpoint will hold
    (``covered``), and that revealed a gap being rewound (``rewinding``); the topics applied
    from since the restore (``running``).

    ``exactly_once``: transactions put markers between records, so offsets skip; a later
    offset is then the next message where the consumer cannot be stale: within a run, and after
    a rewind at or before the offset that revealed the gap.
    """

    stored: dict[str, int] = field(default_factory=dict)
    applied: dict[str, int] = field(default_factory=dict)
    covered: dict[str, int] = field(default_factory=dict)
    rewinding: dict[str, int] = field(default_factory=dict)
    running: set[str] = field(default_factory=set)
    exactly_once: bool = False

    @classmethod
    def restored(cls, offsets: dict[str, int], exactly_once: bool = False) -> OffsetLedger:
        """The ledger of a state restored from a checkpoint holding ``offsets``."""
        return cls(dict(offsets), dict(offsets), dict(offsets), exactly_once=exactly_once)

    def last_applied(self, topic: str) -> int:
        """The last offset of ``topic`` whose effect is in the state (-1: none)."""
        return self.applied.get(topic, -1)

    def admit(self, topic: str, offset: int, *, repositioning: bool = False,
              seeking: bool = False) -> Admission:
        """Whether to apply the message at ``offset`` of ``topic`` (module doc).

        ``repositioning``: the consumer may still be sought to other offsets (a rebalance);
        ``seeking``: the topic partition is paused for a rewind, whose seek has not come yet.
        """
        applied = self.last_applied(topic)
        if offset <= applied:
            return Repeat(offset <= self.stored.get(topic, -1))
        if repositioning:
            return Drop()
        found = self.rewinding.get(topic)
        skipped = False  # over transaction markers: only where the consumer cannot be stale
        if self.exactly_once and not seeking:
            skipped = offset <= found if found is not None else topic in self.running
        if offset == applied + 1 or skipped:
            self._apply(topic, offset)
            return Apply()
        if seeking:
            return Drop()  # fetched before the pause: the seek comes with the rewind's tick
        # After a seek, the next message may come only at or before the latest offset seen.
        self.rewinding[topic] = offset if found is None else max(found, offset)
        return Gap(applied + 1, found is not None)

    def apply_run(self, topic: str, last: int) -> None:
        """The messages fetched together after an admitted one, up to ``last``, are applied
        with it (a service applies a fetched run of messages at once)."""
        self._apply(topic, last)

    def deleted_before(self, topic: str, first: int, offset: int) -> bool:
        """Retention deleted the offsets before ``first``, the earliest left, which were never
        applied: resume at ``first``. Returns whether the message at ``offset`` is now the next
        one, applied."""
        self.applied[topic] = first - 1
        if offset == first:
            self._apply(topic, offset)
            return True
        return False

    def resume_at(self, topic: str, position: int | None) -> bool:
        """After a restore, with the consumer of ``topic`` at ``position`` and nothing applied
        from it yet: whether to rewind it, being past the next offset to apply."""
        if topic in self.running or topic in self.rewinding:
            return False
        if position is None or position <= self.last_applied(topic) + 1:
            return False
        self.rewinding[topic] = position - 1  # fetched before the seek: every message before
        return True

    def hold(self, topic: str, offset: int) -> None:
        """The next checkpoint holds the effect of ``topic`` up to ``offset``."""
        self.covered[topic] = max(offset, self.covered.get(topic, -1))

    @property
    def unstored(self) -> bool:
        """Whether the next checkpoint holds offsets the stored one does not."""
        return self.covered != self.stored

    def checkpointed(self) -> None:
        """The next checkpoint was stored."""
        self.stored = dict(self.covered)

    def _apply(self, topic: str, offset: int) -> None:
        self.rewinding.pop(topic, None)
        self.running.add(topic)
        self.applied[topic] = offset
