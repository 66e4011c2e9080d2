"""When K-slack pushes its inbox, sends and flushes, as tables of cases
(situflow/kslack/pacing.py)."""

from __future__ import annotations

import pytest

from situflow.kslack import ColumnarKSlack
from situflow.kslack.batches import Batcher
from situflow.kslack.buffer import PartitionBuffer
from situflow.kslack.pacing import (
    INBOX_BATCH,
    LINGER,
    OUTPUT_BATCH,
    caught_up,
    idle,
    lingered,
    push_inbox_now,
    send_now,
)
from situflow.tpstream.split.batches import EventSlicer
from tests.kslack.test_batches import events


def buffer(inbox: int = 0, released: int = 0, batches: bool = False) -> PartitionBuffer:
    kslack = ColumnarKSlack(0)
    batcher = Batcher(EventSlicer(1, 100)) if batches else None
    made = PartitionBuffer(kslack, batcher=batcher, sent_at=10.0, last_input=10.0)
    if released:
        made.push(events(list(range(released + 1))))  # slack 0: all but the last are released
    made.inbox = [(None, {"ts": 0})] * inbox
    return made


def test_lingered_after_linger_seconds() -> None:
    assert not lingered(buffer(), 10.0 + LINGER / 2)
    assert lingered(buffer(), 10.0 + LINGER)


# (case, inbox entries, lingered, checkpoint due, careful replay, push it)
PUSH = [
    ("an empty inbox never", 0, True, True, True, False),
    ("a waiting event, nothing else", 1, False, False, False, False),
    ("lingered", 1, True, False, False, True),
    ("a checkpoint is due", 1, False, True, False, True),
    ("a careful replay", 1, False, False, True, True),
    ("a full inbox", INBOX_BATCH, False, False, False, True),
]


@pytest.mark.parametrize(("inbox", "waited", "due", "careful", "push"),
                         [c[1:] for c in PUSH], ids=[c[0] for c in PUSH])
def test_push_inbox_now(inbox: int, waited: bool, due: bool, careful: bool, push: bool) -> None:
    assert push_inbox_now(buffer(inbox), waited, due, careful) is push


# (case, released events, batches, lingered, send)
SEND = [
    ("an empty outbox that lingered: its clock restarts", 0, False, True, True),
    ("a few released events", 3, False, False, False),
    ("a full outbox", OUTPUT_BATCH, False, False, True),
    ("no ready batch, lingered", 0, True, True, False),
    ("a ready batch", 2, True, False, True),
]


@pytest.mark.parametrize(("released", "batches", "waited", "send"),
                         [c[1:] for c in SEND], ids=[c[0] for c in SEND])
def test_send_now(released: int, batches: bool, waited: bool, send: bool) -> None:
    assert send_now(buffer(released=released, batches=batches), waited) is send


def test_idle_when_events_wait_without_input() -> None:
    assert not idle(buffer(), 100.0, 5.0), "nothing waits"
    waiting = buffer()
    waiting.push(events([1]))
    assert not idle(waiting, 14.0, 5.0) and idle(waiting, 15.0, 5.0)


# (case, position, high watermark, last offset applied, caught up)
CAUGHT_UP = [
    ("all fetched and applied", 10, 10, 9, True),
    ("not all fetched", 10, 12, 9, False),
    ("fetched, not yet applied", 10, 10, 7, False),
    ("no position yet", None, 0, 0, False),
    ("no high watermark yet", 3, None, 2, True),
]


@pytest.mark.parametrize(("position", "highwater", "applied", "expected"),
                         [c[1:] for c in CAUGHT_UP], ids=[c[0] for c in CAUGHT_UP])
def test_caught_up(position: int | None, highwater: int | None, applied: int,
                   expected: bool) -> None:
    assert caught_up(position, highwater, applied) is expected
