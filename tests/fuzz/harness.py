"""Run one query text through ``situflow run`` in-process and check the CLI's contract.

The contract (issue #12, point 6): the query compiles and runs on the stream with exit code 0,
or it is refused with exit code 2 and standard error starting ``QUERY_FILE:line:col: message``
at a position inside the text. Anything else (an exception out of ``main``, another exit code,
a case slower than :data:`BUDGET_SECONDS`) fails the test.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from hypothesis import currently_in_test_context, event
from hypothesis import strategies as st

from situflow.cli import main
from situflow.languages import compile_query
from tests.fuzz.grammar import KEY, NUMERIC, TEXT, TYPES

BUDGET_SECONDS = 5.0
WORD = re.compile(r"[^\W\d]\w*")
# Words the stream must not carry as attributes: the event-time and event-type fields.
FIELDS = frozenset({"ts", "type", "id"})


class Overrun(Exception):
    """A case took longer than its budget: a hang, or work out of proportion to the input."""


@contextlib.contextmanager
def budget(seconds: float = BUDGET_SECONDS) -> Iterator[None]:
    def expire(signum: int, frame: FrameType | None) -> None:
        # An exception raised inside numba's compiler leaves its caches half built (later
        # compilations fail with llvmlite errors), and compiling is paid once per type
        # signature, not per case: the case gets its budget again after compiling.
        while frame is not None:
            if "/numba/" in frame.f_code.co_filename or "/llvmlite/" in frame.f_code.co_filename:
                signal.setitimer(signal.ITIMER_REAL, seconds)
                return
            frame = frame.f_back
        raise Overrun(f"the case took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@st.composite
def streams(draw: st.DrawFn, extra: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """A few tens of events in time order with integer ``ts``, carrying the attributes the
    generated queries use, plus ``extra`` numeric attributes (the words of a mutated query)."""
    events = []
    ts = 0
    for _ in range(draw(st.integers(0, 24))):
        ts += draw(st.sampled_from([0, 1, 1, 1, 2, 5]))
        e: dict[str, Any] = {"ts": ts, "type": draw(st.sampled_from(TYPES)),
                             KEY: draw(st.integers(0, 1)),
                             TEXT: draw(st.sampled_from(["a", "b"]))}
        for name in (*NUMERIC, *extra):
            e[name] = draw(st.integers(-3, 6))
        events.append(e)
    return events


def words(text: str) -> tuple[str, ...]:
    """The identifiers of a query text, to name the attributes of its stream (at most 8)."""
    found = dict.fromkeys(w for w in WORD.findall(text) if w not in FIELDS and len(w) < 64)
    return tuple(found)[:8]


def run(text: str, events: list[dict[str, Any]]) -> None:
    """Check the CLI contract for ``text`` on ``events``.

    A case that overruns its budget runs once more: the first run of a code path compiles its
    numba kernels, which can take longer than the budget on a busy machine; a second overrun
    is a failure.
    """
    with tempfile.TemporaryDirectory() as tmp:
        query = Path(tmp) / "query.txt"
        query.write_text(text, encoding="utf-8")
        source = Path(tmp) / "events.jsonl"
        source.write_text("".join(json.dumps(e) + "\n" for e in events))
        out = Path(tmp) / "out.jsonl"
        args = ["run", str(query), "--input", str(source), "--output", str(out), "--no-progress"]
        try:
            code, err = _main(args)
        except Overrun:
            code, err = _main(args)
        if currently_in_test_context():
            event(f"exit code {code}")
        check_exit(code, err, str(query), query.read_text(encoding="utf-8"))
        if code == 0:
            for line in out.read_text().splitlines():
                json.loads(line)
            check_canonical(text)


def _main(args: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with budget(), contextlib.redirect_stderr(err), contextlib.redirect_stdout(err):
        code = main(args)
    return code, err.getvalue()


def check_canonical(text: str) -> None:
    """The canonical text of a query compiles to itself (the query id hashes it)."""
    canonical = compile_query(text).canonical()
    assert compile_query(canonical).canonical() == canonical


def check_exit(code: int, err: str, filename: str, text: str) -> None:
    """Exit 0, or exit 2 with ``filename:line:col: message`` located inside ``text``."""
    assert code in (0, 2), f"exit code {code}: {err}"
    if code == 0:
        return
    m = re.match(re.escape(filename) + r":(\d+):(\d+): \S", err)
    assert m is not None, f"not a located error: {err!r}"
    line, col = int(m.group(1)), int(m.group(2))
    lines = text.split("\n")
    assert 1 <= line <= len(lines), f"line {line} outside the text: {err!r}"
    assert 1 <= col <= len(lines[line - 1]) + 1, f"column {col} outside line {line}: {err!r}"
