"""Event fuzzing (issue #12, point 6): dirty input never stops ``situflow run``, in any language.

A valid stream for a bundled example query is corrupted: fields of random events (never ``id``)
get random JSON values of every type or are dropped, and whole bad lines are inserted (blank,
truncated, not objects, ``NaN``, invalid UTF-8, 1 MB long). Then (SEMANTICS.md, "Event time and
types"):

* the run exits 0, and under ``--strict`` 1 when it rejects a line and 0 otherwise;
* every rejected line is written to ``--rejected`` with a reason, and every line that is no
  JSON object or has no event time is among them;
* its results equal, as parsed JSON, those of the same query on the accepted lines alone (the
  dirty file minus its rejected and blank lines), and those lines alone are all accepted.

Some cases read the file in small blocks, so that pyarrow's fast path and the line-by-line path
both run and results cannot depend on which bad line shared a block with good ones.

The default run is bounded (well under a minute); ``pytest -m slow tests/fuzz`` runs many more
examples.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from situflow import cli
from situflow.io.jsonl import read_blocks
from tests.fuzz.harness import budget
from tests.profiles import scaled

EXAMPLES = Path(cli.__file__).parent / "examples"
MB = 1 << 20
LATE = "the input must be ordered by time"


# --- valid streams ------------------------------------------------------------------------------

def cars(rng: random.Random, n: int) -> list[dict[str, Any]]:
    """Cars that cruise, then accelerate hard, drive fast and brake hard, for random lengths of
    time: the aggressive-drivers query finds some of them and misses others."""
    plans: dict[int, list[tuple[float, float]]] = {1: [], 2: [], 3: []}
    events: list[dict[str, Any]] = []
    ts = 0
    while len(events) < n:
        ts += rng.choice((1, 1, 1, 2))
        for car, plan in plans.items():
            if not plan:
                plan += drive(rng)
            speed, accel = plan.pop(0)
            if rng.random() < 0.9:
                events.append({"id": len(events), "ts": ts, "car_id": car, "speed": speed,
                               "accel": accel})
    return events


def drive(rng: random.Random) -> list[tuple[float, float]]:
    """(speed, acceleration) per second of one stretch of driving."""
    fast = rng.choice((75, 80.5, 90))
    return ([(rng.choice((50, 60)), round(rng.uniform(-2, 2), 1))] * rng.randint(1, 8)
            + [(60, 9.5)] + [(fast, rng.choice((8.5, 9, 12)))] * rng.randint(3, 8)
            + [(fast, 0)] * rng.randint(0, 6) + [(fast, rng.choice((-10, -12.5)))] * rng.randint(1, 5))


def stocks(rng: random.Random, n: int) -> list[dict[str, Any]]:
    """Stock ticks with rising and falling runs and an occasional low volume (SASE+ Query 3 and
    the COGRA trend examples find some)."""
    listed = {"IBM": ("IBM", "tech"), "SUN": ("Sun", "tech"), "XOM": ("Exxon", "energy")}
    price = {symbol: 100 for symbol in listed}
    events: list[dict[str, Any]] = []
    ts = 0
    while len(events) < n:
        ts += rng.choice((0, 5, 10, 30, 60))
        symbol = rng.choice(sorted(listed))
        price[symbol] = max(1, price[symbol] + rng.choice((-2, -1, 1, 2, 3)))
        company, sector = listed[symbol]
        events.append({"id": len(events), "ts": ts, "type": rng.choice(("Stock",) * 9 + ("Bond",)),
                       "symbol": symbol, "company": company, "sector": sector,
                       "price": price[symbol], "volume": rng.choice((50, 800, 1200, 2000, 5000))})
    return events


@dataclass(frozen=True)
class Example:
    query: str
    stream: Callable[[random.Random, int], list[dict[str, Any]]]

    @property
    def path(self) -> Path:
        return EXAMPLES / self.query


EXAMPLE_QUERIES = {
    "tpstream": Example("aggressive_drivers.tps", cars),
    "sase": Example("rising_stocks.sase", stocks),
    "cogra": Example("rising_trends.cogra", stocks),
    "cogra-groups": Example("downtrends.cogra", stocks),
}


# --- corruptions -------------------------------------------------------------------------------

EXTREME_NUMBERS = [2**63, -2**63 - 1, 2**70, -2**70, 2**63 - 1, -2**63, 2**53 + 1, 0, -1,
                   1e308, -1e308, -0.0, 1e-320, 0.5, 12.0]
TEXTS = ["NaN", "Infinity", "-Infinity", "", " ", "abc", "ünïcødé ✓ 🚗", "\u0000", "\ud800",
         "12", "2024-05-01T12:00:00Z", "1970-01-01T00:00:10", "x" * MB]
SCALARS = st.one_of(st.none(), st.booleans(), st.sampled_from(EXTREME_NUMBERS),
                    st.integers(-10**30, 10**30),
                    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(TEXTS),
                    st.text(max_size=12))
JSON_VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                         max_size=3),
    max_leaves=5)
# Lines no event survives (each is rejected, or skipped when blank).
BAD_LINES = [b"", b"   ", b"\t", b"\r", b"{", b"}", b'{"ts": 1', b"[1, 2]", b"[]", b'"text"',
             b"null", b"42", b"true", b"{}", b'{"ts": NaN}', b'{"ts": Infinity, "id": -1}',
             b'{"id": -2, "ts": 1, "speed": NaN, "price": -Infinity}', b"\xff\xfe\xfd",
             b'{"id": -3, "ts": 1, "symbol": "\xc3\x28"}', b"\x00", b"x" * MB,
             b'{"id": -4, "note": "' + b"y" * MB + b'"}', b'{"ts": 1}{"ts": 2}', b"[{\"ts\": 1}]"]


@dataclass(frozen=True)
class SetField:
    event: int
    name: str
    value: Any


@dataclass(frozen=True)
class Shift:
    """An event moved in time (late, or far ahead so that the next ones are late)."""

    event: int
    by: int


@dataclass(frozen=True)
class DropField:
    event: int
    name: str


@dataclass(frozen=True)
class Pad:
    """Whitespace around a good line (still a good line)."""

    event: int
    before: bytes
    after: bytes


@dataclass(frozen=True)
class InsertLine:
    before_event: int
    line: bytes


@dataclass(frozen=True)
class Truncate:
    """A good line cut short: no longer JSON."""

    event: int
    keep: float


Corruption = SetField | Shift | DropField | Pad | InsertLine | Truncate


def corruptions(n: int, names: list[str]) -> st.SearchStrategy[Corruption]:
    event = st.integers(0, max(n - 1, 0))
    field = st.sampled_from(names)
    return st.one_of(
        st.builds(SetField, event, st.one_of(field, st.just("extra")), JSON_VALUES),
        st.builds(Shift, event, st.sampled_from([-1, -60, -10**6, 1, 10**6])),
        st.builds(DropField, event, field),
        st.builds(Pad, event, st.sampled_from([b"", b" ", b"\t "]), st.sampled_from([b"", b" ", b"\r"])),
        st.builds(InsertLine, st.integers(0, n), st.sampled_from(BAD_LINES)),
        st.builds(Truncate, event, st.floats(0, 0.99)),
    )


def dirty_lines(events: list[dict[str, Any]], changes: list[Corruption],
                escaped: bool = False) -> list[bytes]:
    """The stream's lines with ``changes`` applied in order (inserted lines go before the
    event's line, after the lines inserted there earlier); text in UTF-8, or in ASCII with
    ``\\u`` escapes if ``escaped``."""
    records = [dict(e) for e in events]
    pads: dict[int, tuple[bytes, bytes]] = {}
    cut: dict[int, float] = {}
    inserted: dict[int, list[bytes]] = {}
    for change in changes:
        match change:
            case SetField(i, name, value):
                records[i][name] = value
            case Shift(i, by):
                records[i]["ts"] = events[i]["ts"] + by
            case DropField(i, name):
                records[i].pop(name, None)
            case Pad(i, before, after):
                pads[i] = (before, after)
            case Truncate(i, keep):
                cut[i] = keep
            case InsertLine(i, line):
                inserted.setdefault(i, []).append(line)
    lines: list[bytes] = []
    for i, record in enumerate(records):
        lines += inserted.get(i, [])
        line = json.dumps(record, ensure_ascii=escaped).encode("utf-8", "surrogatepass")
        if i in cut:
            line = line[:int(len(line) * cut[i])]
        before, after = pads.get(i, (b"", b""))
        lines.append(before + line + after)
    return lines + inserted.get(len(records), [])


@st.composite
def dirty_streams(draw: st.DrawFn, example: Example, most: int = 200) -> list[bytes]:
    seed, n = draw(st.integers(0, 2**32 - 1)), draw(st.integers(1, most))
    events = example.stream(random.Random(seed), n)
    names = sorted({k for e in events for k in e} - {"id"})
    changes = draw(st.lists(corruptions(len(events), names), max_size=max(4, n // 8)))
    return dirty_lines(events, changes, draw(st.booleans()))


# --- the property ------------------------------------------------------------------------------

def blank(line: bytes) -> bool:
    return not line.strip()


def surely_rejected(line: bytes) -> bool:
    """A line no reader may accept: not UTF-8, not one JSON object, or without an event time
    that is an integer or text."""
    try:
        record = json.loads(line.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return True
    if not isinstance(record, dict):
        return True
    ts = record.get("ts")
    return isinstance(ts, bool) or not isinstance(ts, int | float | str)


def _no_constant(name: str) -> Any:
    raise ValueError(name)


@contextlib.contextmanager
def blocks_of(block_bytes: int | None) -> Iterator[None]:
    """``situflow run`` reads its input in blocks of ``block_bytes`` (its default if None)."""
    if block_bytes is None:
        yield
        return
    with mock.patch.object(cli, "read_blocks", functools.partial(read_blocks, block_bytes=block_bytes)):
        yield


@dataclass
class Run:
    code: int
    results: list[Any]
    rejected: list[dict[str, Any]]
    err: str


def situflow_run(query: Path, events: Path, *extra: str) -> Run:
    out, rejected = events.with_suffix(".out"), events.with_suffix(".rejected")
    err = io.StringIO()
    with budget(30.0), contextlib.redirect_stderr(err):
        code = cli.main(["run", str(query), "--input", str(events), "--output", str(out),
                         "--rejected", str(rejected), "--no-progress", *extra])
    results = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    skipped = [json.loads(line) for line in rejected.read_text().splitlines()]
    return Run(code, results, skipped, err.getvalue())


def check(example: Example, lines: list[bytes], block_bytes: int | None, tmp: Path,
          newline_at_end: bool = True) -> None:
    dirty = tmp / "dirty.jsonl"
    dirty.write_bytes(b"\n".join(lines) + (b"\n" if newline_at_end else b""))
    with blocks_of(block_bytes):
        run = situflow_run(example.path, dirty)
        strict = situflow_run(example.path, dirty, "--strict")
    assert run.code == 0, run.err

    rejected = {r["line"]: r["reason"] for r in run.rejected}
    assert len(rejected) == len(run.rejected), "a line rejected twice"
    assert all(isinstance(r, str) and r for r in rejected.values())
    assert set(rejected) <= set(range(1, len(lines) + 1)), "a rejected line outside the file"
    assert not {i + 1 for i, line in enumerate(lines) if blank(line)} & set(rejected)
    missed = [i + 1 for i, line in enumerate(lines) if surely_rejected(line) and not blank(line)
              and i + 1 not in rejected]
    assert not missed, f"bad lines accepted: {missed}"

    if rejected:
        first = min(rejected)
        assert strict.code == 1 and f"dirty.jsonl:{first}: " in strict.err, strict.err
    else:
        assert strict.code == 0 and strict.results == run.results, strict.err

    accepted = [line for i, line in enumerate(lines) if i + 1 not in rejected and not blank(line)]
    clean = tmp / "clean.jsonl"
    clean.write_bytes(b"".join(line + b"\n" for line in accepted))
    alone = situflow_run(example.path, clean)
    assert alone.code == 0 and alone.rejected == [], alone.err
    assert run.results == alone.results

    # The events rejected for themselves are as if they had never been there: without them,
    # the same events go backwards in time (the input must be ordered) and nothing else changes.
    late = {line for line, reason in rejected.items() if reason.endswith(LATE)}
    kept = [i + 1 for i, line in enumerate(lines)
            if i + 1 in late or (i + 1 not in rejected and not blank(line))]
    unordered = tmp / "unordered.jsonl"
    unordered.write_bytes(b"".join(lines[i - 1] + b"\n" for i in kept))
    without = situflow_run(example.path, unordered)
    assert without.code == 0, without.err
    assert [kept[r["line"] - 1] for r in without.rejected] == sorted(late)
    assert without.results == run.results
    if currently_in_test_context():
        event(f"results: {'some' if run.results else 'none'}; "
              f"rejected: {len(rejected) and 'some'}; late: {len(late) and 'some'}")


def fuzz(examples: int, slow: bool = False
         ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Hypothesis settings of a fuzz test, ``examples`` in the ``ci`` profile (tests/profiles.py):
    the suite's runs draw the same examples every time (derandomized, so CI cannot fail on a
    new draw); the long runs (``-m slow``, or the ``deep`` profile) draw anew."""
    return settings(max_examples=scaled(examples / 100), database=None, derandomize=not slow,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.large_base_example])


BLOCK_SIZES = st.sampled_from([None, None, 64, 512, 4096])


@pytest.fixture(scope="module", autouse=True)
def compiled_kernels(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Run each example once, so that compiling the engines' numba kernels does not count
    against the first cases' budgets."""
    tmp = tmp_path_factory.mktemp("warm")
    for example in EXAMPLE_QUERIES.values():
        events = example.stream(random.Random(0), 100)
        check(example, [json.dumps(e).encode() for e in events], None, tmp)


def fuzz_case(name: str, data: st.DataObject, tmp: Path) -> None:
    example = EXAMPLE_QUERIES[name]
    lines = data.draw(dirty_streams(example))
    check(example, lines, data.draw(BLOCK_SIZES), tmp, data.draw(st.booleans()))


@pytest.mark.parametrize("name", EXAMPLE_QUERIES)
@fuzz(25)
@given(data=st.data())
def test_dirty_events_are_rejected_alone(name: str, data: st.DataObject,
                                         tmp_path_factory: pytest.TempPathFactory) -> None:
    fuzz_case(name, data, tmp_path_factory.mktemp(name))


@pytest.mark.slow
@pytest.mark.parametrize("name", EXAMPLE_QUERIES)
@fuzz(400, slow=True)
@given(data=st.data())
def test_dirty_events_are_rejected_alone_long(name: str, data: st.DataObject,
                                              tmp_path_factory: pytest.TempPathFactory) -> None:
    fuzz_case(name, data, tmp_path_factory.mktemp(name))


# --- what the fuzzer found, each kept as a plain example ----------------------------------------

def stream_file(path: Path, events: list[dict[str, Any]], at: int, bad: bytes) -> Path:
    lines = [json.dumps(e).encode() for e in events]
    path.write_bytes(b"".join(line + b"\n" for line in [*lines[:at], bad, *lines[at:]]))
    return path


def good_cars() -> list[dict[str, Any]]:
    return cars(random.Random(3), 150)


@pytest.mark.parametrize("bad", [
    # pyarrow's reader takes any bytes in a string; decoding its column raised
    # UnicodeDecodeError out of `situflow run`.
    b'{"id": -1, "ts": 0, "car_id": 1, "speed": 50, "accel": 0, "note": "\xed\xa0\x80"}',
    b'{"id": -1, "ts": 0, "car_id": 1, "speed": 50, "accel": 0, "note": "\xff"}',
    # Python's json module reads an unpaired surrogate escape, which Arrow cannot hold:
    # UnicodeEncodeError out of `situflow run`.
    b'{"id": -1, "ts": 0, "car_id": 1, "speed": 50, "accel": 0, "note": "\\ud800"}',
], ids=["encoded surrogate", "invalid byte", "unpaired surrogate escape"])
def test_text_that_is_no_unicode_rejects_its_line(bad: bytes, tmp_path: Path) -> None:
    query = EXAMPLE_QUERIES["tpstream"].path
    dirty = situflow_run(query, stream_file(tmp_path / "dirty.jsonl", good_cars(), 5, bad))
    assert dirty.code == 0
    assert [r["line"] for r in dirty.rejected] == [6]
    assert dirty.rejected[0]["reason"].startswith("invalid JSON: ")
    clean = situflow_run(query, stream_file(tmp_path / "clean.jsonl", good_cars(), 5, b""))
    assert dirty.results == clean.results and clean.results


def test_an_event_rejected_by_its_types_does_not_set_the_time_order(tmp_path: Path) -> None:
    """A rejected event is as if it had never been there: its time, far ahead, must not make
    the good events after it go backwards in time."""
    query = EXAMPLE_QUERIES["tpstream"].path
    bad = b'{"id": -1, "ts": 1000000, "car_id": 1, "speed": "fast", "accel": 0}'
    dirty = situflow_run(query, stream_file(tmp_path / "dirty.jsonl", good_cars(), 5, bad))
    assert dirty.code == 0
    assert dirty.rejected == [{"line": 6, "reason": "attribute 'speed' must be a number, "
                                                    "found text 'fast'"}]
    clean = situflow_run(query, stream_file(tmp_path / "clean.jsonl", good_cars(), 5, b""))
    assert dirty.results == clean.results and clean.results


@pytest.mark.parametrize("value", [2**53 + 1, 2**63 - 1], ids=["beyond 2^53", "int64 max"])
def test_an_integer_beyond_2_53_in_a_column_with_missing_values_is_read(value: int,
                                                                        tmp_path: Path) -> None:
    """An integer column with a missing value is read as floats; pyarrow's checked cast refused
    integers beyond 2^53 (ArrowInvalid out of `situflow run`)."""
    query = EXAMPLE_QUERIES["tpstream"].path
    bad = json.dumps({"id": -1, "ts": 0, "car_id": 1, "speed": 50, "accel": 0,
                      "note": value}).encode()
    dirty = situflow_run(query, stream_file(tmp_path / "dirty.jsonl", good_cars(), 0, bad))
    assert dirty.code == 0 and dirty.rejected == []
    clean = situflow_run(query, stream_file(tmp_path / "clean.jsonl", good_cars(), 0, b""))
    assert dirty.results == clean.results and clean.results


@pytest.mark.parametrize("value", [[None, None], [[None], [None, None]], {"a": [None, None]},
                                   [None, " "]],
                         ids=["list of nulls", "nested", "in an object", "null then text"])
def test_a_list_of_nulls_is_read(value: Any, tmp_path: Path) -> None:
    """pyarrow's JSON reader builds a list that starts with null with offsets past the end of
    its values: ArrowIndexError, or a SystemError from ``[null, " "]``, out of `situflow run`
    (the last found on a fresh clone by the fuzzer)."""
    query = EXAMPLE_QUERIES["tpstream"].path
    bad = json.dumps({"id": -1, "ts": 0, "car_id": 1, "speed": 50, "accel": 0,
                      "note": value}).encode()
    dirty = situflow_run(query, stream_file(tmp_path / "dirty.jsonl", good_cars(), 0, bad))
    assert dirty.code == 0 and dirty.rejected == []
    clean = situflow_run(query, stream_file(tmp_path / "clean.jsonl", good_cars(), 0, b""))
    assert dirty.results == clean.results and clean.results


def test_keys_beyond_2_53_stay_apart_when_a_key_is_missing(tmp_path: Path) -> None:
    """An integer column with a missing value was read as floats, which merged the keys
    2^53 and 2^53 + 1 into one partition, in the blocks that had a missing key only."""
    query = EXAMPLE_QUERIES["tpstream"].path
    events = [dict(e, car_id=2**53 + 1) if e["car_id"] == 1 else
              dict(e, car_id=2**53) if e["car_id"] == 2 else e for e in good_cars()]
    nameless = json.dumps({"id": -1, "ts": 0, "speed": 1, "accel": 0}).encode()
    dirty = situflow_run(query, stream_file(tmp_path / "dirty.jsonl", events, 0, nameless))
    with blocks_of(64):
        apart = situflow_run(query, stream_file(tmp_path / "apart.jsonl", events, 0, nameless))
    keys = {r["key"] for r in dirty.results}
    assert dirty.results == apart.results and keys == {2**53 + 1, 2**53, 3}


def test_a_run_that_stops_early_leaves_no_reader_behind(tmp_path: Path) -> None:
    """`--strict` stops at the first bad line; the reader thread, a block ahead, waited forever
    to hand over its next block (one thread and open file per run, found as hundreds of
    threads in a long fuzz run)."""
    query = EXAMPLE_QUERIES["tpstream"].path
    dirty = stream_file(tmp_path / "dirty.jsonl", good_cars() * 4, 1, b"{")
    before = threading.active_count()
    with blocks_of(256):
        assert situflow_run(query, dirty, "--strict").code == 1
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() == before


@pytest.mark.parametrize("block_bytes", [None, 64], ids=["one block", "small blocks"])
@pytest.mark.parametrize("lines", [[b"null"], [b" null", b'{"id": -1, "ts": 0}'],
                                   [b'{"id": -1, "ts": 0}', b"null", b"\tnull"]],
                         ids=["alone", "first", "after an event"])
def test_a_null_line_is_rejected(lines: list[bytes], block_bytes: int | None,
                                 tmp_path: Path) -> None:
    """pyarrow's JSON reader crashes the process (segmentation fault) on a block that starts
    with a ``null`` line; the last block of a file is often a single line."""
    query = EXAMPLE_QUERIES["tpstream"].path
    dirty = tmp_path / "dirty.jsonl"
    dirty.write_bytes(b"".join(line + b"\n" for line in lines))
    with blocks_of(block_bytes):
        run = situflow_run(query, dirty)
    assert run.code == 0
    assert [r["line"] for r in run.rejected] == [i + 1 for i, line in enumerate(lines)
                                                 if line.strip() == b"null"]
