"""Reading ahead: a thread that produces a reader's blocks while the caller consumes the
previous ones (the parsers of pyarrow release the GIL, so parsing overlaps with evaluating)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def read_ahead(blocks: Callable[[], Iterator[T]], depth: int, name: str) -> Iterator[T]:
    """The items of ``blocks()``, in order, produced by a thread up to ``depth`` items ahead;
    an exception of the producer is raised where its item would have been."""
    done = object()
    ready: queue.Queue[Any] = queue.Queue(depth)
    # Set when the consumer stops early (``--strict``): the reader ends instead of waiting
    # forever to hand over a block. After it is set, at most one put is under way, and the
    # consumer empties the queue for it.
    stopped = threading.Event()

    def offer(item: Any) -> None:
        if not stopped.is_set():
            ready.put(item)

    def produce() -> None:
        try:
            for block in blocks():
                if stopped.is_set():
                    return
                ready.put(block)
        except BaseException as e:  # handed to the consumer, which raises it
            offer(e)
        offer(done)

    threading.Thread(target=produce, name=name, daemon=True).start()
    try:
        while (item := ready.get()) is not done:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stopped.set()
        while not ready.empty():
            ready.get_nowait()
