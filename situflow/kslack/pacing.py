"""When one input partition's K-slack work is done: pushing the JSON events that wait in the
inbox, sending the released events, and flushing a partition whose input has stopped.

Released events go out as one Arrow message when :data:`OUTPUT_BATCH` wait, or when the oldest
has waited :data:`LINGER` seconds: few, large messages under load, low latency otherwise.
"""

from __future__ import annotations

from situflow.kslack.buffer import PartitionBuffer

OUTPUT_BATCH = 8192
LINGER = 0.005
#: JSON events pushed into the K-slack buffer together at most.
INBOX_BATCH = 1024


def lingered(buffer: PartitionBuffer, now: float) -> bool:
    """Whether the outbox was last sent :data:`LINGER` seconds or more before ``now``."""
    return now - buffer.sent_at >= LINGER


def push_inbox_now(buffer: PartitionBuffer, lingered: bool, due: bool, careful: bool) -> bool:
    """Whether to push the inbox after a message: it is full or has lingered, a checkpoint is
    ``due`` (it holds no inbox), or a ``careful`` replay pushes each event on its own."""
    return bool(buffer.inbox) and (due or lingered or len(buffer.inbox) >= INBOX_BATCH
                                   or careful)


def send_now(buffer: PartitionBuffer, lingered: bool) -> bool:
    """Whether to send after a message: an unpartitioned stream's ready batches, a partitioned
    one's outbox when it is full or has ``lingered`` (then even empty: its clock restarts)."""
    if buffer.batcher is not None:
        return bool(buffer.batcher.ready)
    return buffer.outgoing >= OUTPUT_BATCH or lingered


def idle(buffer: PartitionBuffer, now: float, idle_timeout: float) -> bool:
    """Whether events wait in a partition without input for ``idle_timeout`` seconds."""
    return buffer.waiting and now - buffer.last_input >= idle_timeout


def caught_up(position: int | None, highwater: int | None, applied: int) -> bool:
    """Whether no input of a partition waits, fetched or not: the consumer's ``position`` has
    reached the ``highwater`` mark and the state has ``applied`` the message before it. A
    lagging partition looks idle while the consumer spends seconds on another's fetch, and
    flushing it then would turn its next events late.

    >>> caught_up(10, 10, 9), caught_up(10, 12, 9), caught_up(10, 10, 7), caught_up(None, 0, 0)
    (True, False, False, False)
    """
    if position is None:
        return False
    return position >= (highwater or 0) and applied + 1 >= position
