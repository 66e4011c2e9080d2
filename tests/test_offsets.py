"""The offset ledger's decisions, as tables of cases (situflow/offsets.py; ADR 001)."""

from __future__ import annotations

from typing import Any

import pytest

from situflow.offsets import Admission, Apply, Drop, Gap, OffsetLedger, Repeat

T = "cars"


def ledger(applied: int | None = None, stored: int | None = None, rewinding: int | None = None,
           running: bool = False, exactly_once: bool = False) -> OffsetLedger:
    """A ledger of topic ``T``: ``stored`` defaults to ``applied``."""
    offsets = {} if applied is None else {T: applied}
    book = OffsetLedger.restored(offsets, exactly_once)
    if stored is not None:
        book.stored = {T: stored}
    if rewinding is not None:
        book.rewinding[T] = rewinding
    if running:
        book.running.add(T)
    return book


# (case, ledger, offset, admit's flags, admission, last applied after, rewinding after)
ADMIT: list[tuple[str, OffsetLedger, int, dict[str, Any], Admission, int, int | None]] = [
    ("the first message of a fresh state is applied", ledger(), 0, {}, Apply(), 0, None),
    ("the next offset is applied", ledger(4), 5, {}, Apply(), 5, None),
    ("a repeat the checkpoint holds is acknowledged", ledger(4), 3, {}, Repeat(True), 4, None),
    ("the last applied offset again is a repeat", ledger(4), 4, {}, Repeat(True), 4, None),
    ("a repeat past the stored checkpoint waits for the next", ledger(4, stored=2), 3, {},
     Repeat(False), 4, None),
    ("a repeat is one during a rebalance too", ledger(4), 4, {"repositioning": True},
     Repeat(True), 4, None),
    ("nothing is applied during a rebalance", ledger(4), 5, {"repositioning": True}, Drop(), 4,
     None),
    ("a later offset is a gap: rewind to the next", ledger(4), 9, {}, Gap(5, False), 4, 9),
    ("a gap without a checkpoint rewinds to 0", ledger(), 3, {}, Gap(0, False), -1, 3),
    ("a later offset after the seek is a gap again", ledger(4, rewinding=9), 12, {},
     Gap(5, True), 4, 12),
    ("an earlier one keeps the highest offset seen", ledger(4, rewinding=9), 7, {},
     Gap(5, True), 4, 9),
    ("the next offset ends a rewind", ledger(4, rewinding=9), 5, {}, Apply(), 5, None),
    ("fetched before a rewind's pause: dropped", ledger(4, rewinding=9), 11, {"seeking": True},
     Drop(), 4, 9),
    ("the next offset is applied while seeking", ledger(4), 5, {"seeking": True}, Apply(), 5,
     None),
    ("exactly once: offsets skip markers within a run", ledger(4, running=True,
                                                               exactly_once=True), 7, {},
     Apply(), 7, None),
    ("exactly once: not the first message after a restore", ledger(4, exactly_once=True), 7, {},
     Gap(5, False), 4, 7),
    ("exactly once: after a rewind, at or before the offset that found the gap",
     ledger(4, rewinding=9, exactly_once=True), 7, {}, Apply(), 7, None),
    ("exactly once: after a rewind, beyond it", ledger(4, rewinding=9, exactly_once=True), 10,
     {}, Gap(5, True), 4, 10),
    ("exactly once: nothing skips while seeking", ledger(4, running=True, exactly_once=True), 7,
     {"seeking": True}, Drop(), 4, None),
]


@pytest.mark.parametrize(("book", "offset", "flags", "admission", "applied", "rewinding"),
                         [case[1:] for case in ADMIT], ids=[case[0] for case in ADMIT])
def test_admit(book: OffsetLedger, offset: int, flags: dict[str, Any], admission: Admission,
               applied: int, rewinding: int | None) -> None:
    assert book.admit(T, offset, **flags) == admission
    assert (book.last_applied(T), book.rewinding.get(T)) == (applied, rewinding)
    if isinstance(admission, Apply):
        assert T in book.running


def test_topics_are_apart() -> None:
    book = OffsetLedger.restored({"a": 4})
    assert (book.admit("b", 0), book.admit("a", 7)) == (Apply(), Gap(5, False))


# (case, last applied, earliest offset left, offset delivered, applied now, last applied after)
DELETED = [
    ("the message is the earliest left: applied", 4, 8, 8, True, 8),
    ("a later one: rewind to the earliest", 4, 8, 10, False, 7),
]


@pytest.mark.parametrize(("applied", "first", "offset", "now", "after"),
                         [case[1:] for case in DELETED], ids=[case[0] for case in DELETED])
def test_deleted_before(applied: int, first: int, offset: int, now: bool, after: int) -> None:
    book = ledger(applied)
    assert book.admit(T, offset) == Gap(applied + 1, False)
    assert book.deleted_before(T, first, offset) is now
    assert book.last_applied(T) == after


# (case, ledger, consumer position, rewind, rewinding after)
RESUME = [
    ("at the next offset: resume there", ledger(4), 5, False, None),
    ("before it: the repeats are dropped as they come", ledger(4), 3, False, None),
    ("past it: rewind", ledger(4), 9, True, 8),
    ("a fresh state past 0: rewind", ledger(), 3, True, 2),
    ("no position yet", ledger(4), None, False, None),
    ("a message came already", ledger(4, running=True), 9, False, None),
    ("a rewind is under way", ledger(4, rewinding=6), 9, False, 6),
]


@pytest.mark.parametrize(("book", "position", "rewind", "rewinding"),
                         [case[1:] for case in RESUME], ids=[case[0] for case in RESUME])
def test_resume_at(book: OffsetLedger, position: int | None, rewind: bool,
                   rewinding: int | None) -> None:
    assert book.resume_at(T, position) is rewind
    assert book.rewinding.get(T) == rewinding


def test_a_checkpoint_stores_what_was_held() -> None:
    book = ledger(4)
    assert not book.unstored
    assert book.admit(T, 5) == Apply()
    book.hold(T, 5)
    book.hold(T, 3)  # held late: never moves the covered offset back
    assert (book.unstored, book.covered) == (True, {T: 5})
    book.checkpointed()
    assert (book.unstored, book.stored) == (False, {T: 5})
    assert book.admit(T, 5) == Repeat(True)
