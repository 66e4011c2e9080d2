"""Reaching the brokers of :class:`situflow.settings.KafkaSettings`: retries while none answers.

The one retry loop of situflow (the services at start, the Kafka commands), below ``workers/``
so that ``topics/`` and the CLI use it without importing a service.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from aiokafka.errors import KafkaConnectionError

from situflow.settings import ENV_BOOTSTRAP, KafkaSettings

T = TypeVar("T")
FIRST_BACKOFF, MAX_BACKOFF = 0.25, 4.0


class BrokerUnreachable(ConnectionError):
    """No broker of ``KAFKA_BOOTSTRAP_SERVERS`` answered within the time given."""


async def retry_unreachable(
    settings: KafkaSettings,
    operation: Callable[[KafkaSettings], Awaitable[T]],
    wait: float,
    on_retry: Callable[[float], None] | None = None,
) -> T:
    """``operation``, retried with exponential backoff while the broker is unreachable, for at
    most ``wait`` seconds; ``on_retry(seconds)`` is told of each wait before it."""
    deadline = time.monotonic() + wait
    backoff = FIRST_BACKOFF
    while True:
        try:
            return await operation(settings)
        except KafkaConnectionError:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrokerUnreachable(
                    f"cannot reach Kafka at {settings.bootstrap_servers} (retried for {wait:g}s); "
                    f"is it running? {ENV_BOOTSTRAP} names the brokers") from None
            pause = min(backoff, left)
            if on_retry is not None:
                on_retry(pause)
            await asyncio.sleep(pause)
            backoff = min(backoff * 2, MAX_BACKOFF)
