"""Poison messages (issue 12): what a service does when handling one message fails.

**An exception while a service handles a message** (decoding it, evaluating it, or storing the
state it led to) never stops the service and never crash-loops it. The state is *restored from
the partition's last checkpoint and the input after it replayed* (:mod:`workers.partitions`):
the service does no extra work per message on the hot path, which copying the state before
every message would cost, while an exception, rare, costs one replay of at most
``SITUFLOW_CHECKPOINT_INTERVAL`` seconds of input. The replay skips the message that failed,
so the state is exactly the fold of every other message, whatever the failure had changed
halfway. Where the failing message is not certain (K-slack pushes JSON events in batches, a
checkpoint stores the effect of many messages), the first replay is *careful*: one message at
a time, each state checked to encode, until the offset of the failure; the message that fails
again is the poison one (none: the fault was transient, nothing is dropped). The poison
message goes to the DLQ of its input with :func:`error_headers` (the exception's class and
message beside the usual reason and source headers), ``situflow_processing_errors_total``
counts it, and the partition checkpoints at once so that a next failure replays little.

**A failing query** (an exception in one query's operator; the message itself decoded) is the
query's fault, not the input's: the input message does not go to the input DLQ. The partition
replays as above, skipping that query alone on that message; the error goes to the query's own
error topic ``errors.<query>`` (created with its output topic at submit, or at the first error)
once per message, and the query is marked failed in the registry's status topic, which
``situflow query list`` shows. A query that failed is evaluated on a copy of its operator from
then on (a snapshot round trip before each message), so that its next failures need no replay:
the copy's cost falls on the failing queries only. It is still evaluated on every message: a
transient fault recovers.

**A message that crashes the worker process** (a segfault, an exception that escapes the agent,
a kill by the kernel) cannot be caught. :class:`CrashRecord` writes "processing offset X of
topic/partition" to a small file of the service's data directory before each message and
clears it after (two ``pwrite`` calls, no ``fsync``: a process crash keeps the page cache). A
start that finds the record set counts a crash at that message; a message that has crashed the
worker ``SITUFLOW_QUARANTINE_AFTER`` times (default 3) is *quarantined*: sent to the DLQ on the
next start instead of being processed. The same record tells ``/health`` that the service
crash-loops (that many crashes within ``SITUFLOW_CRASH_WINDOW`` seconds, default 300).

``SITUFLOW_ON_ERROR=fail`` (default ``continue``) stops the service on the first processing
error instead, with a log line naming the message and exit code :data:`EXIT_PROCESSING_ERROR`
(Kafka Streams' LogAndFail, Flink's default). Messages that fail to decode as events are bad
input, not processing errors: they go to the DLQ with their reason in both modes.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ON_ERROR_ENV = "SITUFLOW_ON_ERROR"
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


def on_error_setting(env: Mapping[str, str] | None = None) -> str:
    """``SITUFLOW_ON_ERROR``: ``continue`` (default) or ``fail``."""
    value = (os.environ if env is None else env).get(ON_ERROR_ENV, CONTINUE).strip() or CONTINUE
    if value not in (CONTINUE, FAIL):
        raise ValueError(f"{ON_ERROR_ENV}={value!r}: use {CONTINUE} or {FAIL}")
    return value


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


def crash_test_marker(variable: str = TEST_CRASH_ENV) -> bytes | None:
    marker = os.environ.get(variable)
    return marker.encode() if marker else None


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

    @classmethod
    def from_env(cls, data_dir: str | Path, env: Mapping[str, str] | None = None) -> CrashRecord:
        env = os.environ if env is None else env
        return cls(data_dir, int(env.get("SITUFLOW_QUARANTINE_AFTER", "3")),
                   float(env.get("SITUFLOW_CRASH_WINDOW", "300")))

    def begin(self, topic: str, partition: int, offset: int) -> None:
        os.pwrite(self._fd, f"{partition} {offset} {topic}".encode().ljust(_SLOT), 0)

    def end(self) -> None:
        os.pwrite(self._fd, b" " * _SLOT, 0)

    def crashes_at(self, topic: str, partition: int, offset: int) -> int:
        return sum(1 for t, p, o, _ in self.crashes if (t, p, o) == (topic, partition, offset))

    def quarantined(self, topic: str, partition: int, offset: int) -> bool:
        """Whether the message crashed the worker too often (asked for every message)."""
        return bool(self._quarantine) and (topic, partition, offset) in self._quarantine

    def recent(self, now: float | None = None) -> int:
        """Crashes within the window before ``now``."""
        now = time.time() if now is None else now
        return sum(1 for *_, at in self.crashes if now - at <= self.window)

    def crash_looping(self, now: float | None = None) -> bool:
        return self.recent(now) >= self.quarantine_after
