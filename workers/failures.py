"""Poison messages: what a service does when handling one message fails (issue 12).

An exception while a message is handled restores the partition from its checkpoint and
replays without the message, which goes to its input's DLQ with :func:`error_headers`; a
failing query (:class:`QueryFailed`) is skipped alone on that message, its error goes to
``errors.<query>``, and it runs on a copy of its operator from then on. A message that crashes
the process is counted by :class:`CrashRecord` and quarantined after
``SITUFLOW_QUARANTINE_AFTER`` crashes. ``SITUFLOW_ON_ERROR=fail`` stops the service instead,
with :data:`EXIT_PROCESSING_ERROR`. Why it is done this way: ``docs/adr/002-poison-messages.md``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

CONTINUE, FAIL = "continue", "fail"
#: The exit code of a service stopped by ``SITUFLOW_ON_ERROR=fail`` (BSD's EX_SOFTWARE).
EXIT_PROCESSING_ERROR = 70

#: Headers of a record that a processing error sent to a DLQ or error topic, beside the DLQ
#: headers of :func:`workers.app.dlq_headers`.
ERROR_CLASS_HEADER = "situflow.error.class"
ERROR_MESSAGE_HEADER = "situflow.error.message"
ERROR_QUERY_HEADER = "situflow.error.query"

#: Only the integration tests set these. A message whose value holds the bytes of the first
#: kills the process that handles it (SIGKILL), as a segfault would, to test quarantine with a
#: real crash; K-slack raises while it pushes a JSON event holding the second's, as a bug in
#: work deferred past the message would.
TEST_CRASH_ENV = "SITUFLOW_TEST_CRASH_ON"
TEST_RAISE_ENV = "SITUFLOW_TEST_RAISE_ON"

_SLOT = 512  # bytes of the crash record: "partition offset topic", padded
_HISTORY = 100  # crashes kept in the history file


class QueryFailed(Exception):
    """Raised by a service's message handler: query ``query`` failed on the message with
    ``cause``; the message itself is fine (module doc)."""

    def __init__(self, query: str, cause: BaseException) -> None:
        super().__init__(f"query {query}: {describe(cause)}")
        self.query = query
        self.cause = cause


class Quarantined(Exception):
    """A message that crashed the worker process too often (module doc)."""


@dataclass(frozen=True)
class Failure:
    """Why a message is skipped: ``exception``, raised by query ``query`` (None: the message
    itself)."""

    exception: BaseException
    query: str | None = None


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def error_headers(exc: BaseException, query: str | None = None) -> list[tuple[str, bytes]]:
    """The exception's class and message (and the failing query) as record headers."""
    headers = [(ERROR_CLASS_HEADER, type(exc).__name__.encode()),
               (ERROR_MESSAGE_HEADER, str(exc).encode(errors="replace"))]
    if query is not None:
        headers.append((ERROR_QUERY_HEADER, query.encode()))
    return headers


def plain(value: Any) -> Any:
    """``json.dumps``'s ``default`` for state: numpy scalars and arrays as plain data. Arrow
    gives numpy values for nested attributes (a list-valued key, ``first(B.car_id)`` of it),
    which an operator keeps as they came."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


class CrashRecord:
    """What the worker is processing, kept in ``<data_dir>/processing``, and the crashes found
    at starts, in ``<data_dir>/crashes.json`` (module doc)."""

    def __init__(self, data_dir: str | Path, quarantine_after: int = 3,
                 window: float = 300.0) -> None:
        directory = Path(data_dir)
        directory.mkdir(parents=True, exist_ok=True)
        self.quarantine_after = quarantine_after
        self.window = window
        self._history_path = directory / "crashes.json"
        try:
            history = json.loads(self._history_path.read_text())["crashes"]
        except (OSError, ValueError, KeyError, TypeError):
            history = []
        #: [topic, partition, offset, epoch seconds] per crash, oldest first
        self.crashes: list[list[Any]] = history
        path = directory / "processing"
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        found = os.pread(self._fd, _SLOT, 0).decode(errors="replace").split()
        self.found: tuple[str, int, int] | None = None
        if len(found) == 3 and found[0].isdigit() and found[1].isdigit():
            self.found = (found[2], int(found[0]), int(found[1]))
            self.crashes = [*self.crashes, [found[2], int(found[0]), int(found[1]),
                                            time.time()]][-_HISTORY:]
            self._history_path.write_text(json.dumps({"crashes": self.crashes}))
        self._quarantine = {(t, p, o) for t, p, o, _ in self.crashes
                            if self.crashes_at(t, p, o) >= quarantine_after}
        self.end()

    def begin(self, topic: str, partition: int, offset: int) -> None:
        os.pwrite(self._fd, f"{partition} {offset} {topic}".encode().ljust(_SLOT), 0)

    def end(self) -> None:
        os.pwrite(self._fd, b" " * _SLOT, 0)

    def crashes_at(self, topic: str, partition: int, offset: int) -> int:
        return sum(1 for t, p, o, _ in self.crashes if (t, p, o) == (topic, partition, offset))

    def quarantined(self, topic: str, partition: int, offset: int) -> bool:
        """Whether the message crashed the worker too often (asked for every message)."""
        return bool(self._quarantine) and (topic, partition, offset) in self._quarantine

    def suspect(self, topic: str, partition: int, first: int, last: int,
                now: float | None = None) -> bool:
        """Whether a bundle of the records ``first..last`` of ``topic[partition]`` goes one
        record at a time (:mod:`workers.bundles`): it holds a quarantined message, or a crash
        within the window happened at or before ``last``. A crash while a bundle was handled
        is recorded at its first offset, so every later bundle that may hold the message that
        crashed goes one at a time, and the next crash is pinned to one message."""
        if not self.crashes:
            return False
        now = time.time() if now is None else now
        return any(t == topic and p == partition and (
            (first <= o <= last and (t, p, o) in self._quarantine)
            or (o <= last and now - at <= self.window)) for t, p, o, at in self.crashes)

    def recent(self, now: float | None = None) -> int:
        """Crashes within the window before ``now``."""
        now = time.time() if now is None else now
        return sum(1 for *_, at in self.crashes if now - at <= self.window)

    def crash_looping(self, now: float | None = None) -> bool:
        return self.recent(now) >= self.quarantine_after
