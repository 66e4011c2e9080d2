"""JSON-lines event files read in large blocks with pyarrow's JSON reader.

The fast path parses a whole block in C++; a block with a bad line falls back to line-by-line
parsing, so every bad line is reported with its line number and the good ones are kept. The
0-based line number is each event's sequence number and, without an ``id`` field, its id.
"""

from __future__ import annotations

import io
import json
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.json as pajson

from situflow.errors import InputError
from situflow.events import EventBatch

BLOCK_BYTES = 8 << 20
# pyarrow parses the sub-blocks of a block in parallel.
PARSE_BLOCK = 1 << 20


@dataclass
class Block:
    """The events of one block of lines and the errors of its bad lines."""

    batch: EventBatch
    errors: list[InputError] = field(default_factory=list)
    bytes_read: int = 0


@dataclass(frozen=True)
class Fields:
    time: str = "ts"
    type: str = "type"
    id: str = "id"
    # Seconds per time tick, for ISO-8601 event times.
    time_unit: float = 1.0


def read_blocks(path: str | Path, fields: Fields = Fields(),
                block_bytes: int = BLOCK_BYTES, read_ahead: int = 2) -> Iterator[Block]:
    """Yield the file's events block by block, in file order.

    A thread parses up to ``read_ahead`` blocks ahead (pyarrow releases the GIL), so parsing
    overlaps with the operator consuming the previous block.
    """
    source = str(path)
    if read_ahead <= 0:
        with open(path, "rb") as f:
            yield from _blocks(f, source, fields, block_bytes)
        return
    done = object()
    ready: queue.Queue[Any] = queue.Queue(read_ahead)

    def produce() -> None:
        try:
            with open(path, "rb") as f:
                for block in _blocks(f, source, fields, block_bytes):
                    ready.put(block)
        except BaseException as e:  # handed to the consumer, which raises it
            ready.put(e)
        ready.put(done)

    threading.Thread(target=produce, name="jsonl-reader", daemon=True).start()
    while (item := ready.get()) is not done:
        if isinstance(item, BaseException):
            raise item
        yield item


def _blocks(f: BinaryIO, source: str, fields: Fields, block_bytes: int) -> Iterator[Block]:
    line_no, rest = 0, b""
    while True:
        chunk = f.read(block_bytes)
        data = rest + chunk
        if not chunk:
            if data.strip():
                yield _parse(data if data.endswith(b"\n") else data + b"\n", line_no, source,
                             fields)
            return
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            rest = data
            continue
        block, rest = data[:cut], data[cut:]
        parsed = _parse(block, line_no, source, fields)
        parsed.bytes_read = len(block)
        yield parsed
        line_no += block.count(b"\n")


def _parse(block: bytes, first_line: int, source: str, fields: Fields) -> Block:
    lines = block.count(b"\n")
    seq = np.arange(first_line, first_line + lines, dtype=np.int64)
    blank_line = block.startswith(b"\n") or b"\n\n" in block or b"\n\r\n" in block
    if not blank_line:
        try:
            table = pajson.read_json(io.BytesIO(block),
                                     read_options=pajson.ReadOptions(block_size=PARSE_BLOCK))
            if table.num_rows == lines:
                return Block(_to_batch(table, seq, fields), [], len(block))
        except (pa.ArrowInvalid, InputError):
            pass
    return _parse_lines(block, first_line, source, fields)


def _to_batch(table: pa.Table, seq: np.ndarray, fields: Fields) -> EventBatch:
    time = table.column(fields.time) if fields.time in table.schema.names else None
    if time is not None and (pa.types.is_timestamp(time.type) or pa.types.is_string(time.type)):
        table = table.set_column(table.schema.get_field_index(fields.time), fields.time,
                                 _iso_ticks(time, fields.time_unit))
    return EventBatch.from_arrow(table, time_field=fields.time, type_field=fields.type,
                                 id_field=fields.id, seq=seq)


def _iso_ticks(column: Any, time_unit: float) -> pa.Array:
    """ISO-8601 event times as integer ticks since the epoch."""
    try:
        stamps = column.cast(pa.timestamp("us", tz="UTC"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise InputError(f"event time is neither an integer nor ISO-8601: {e}") from e
    micros = np.asarray(stamps.cast(pa.int64()).to_numpy(zero_copy_only=False))
    return pa.array(np.floor_divide(micros, round(time_unit * 1e6)))


def _parse_lines(block: bytes, first_line: int, source: str, fields: Fields) -> Block:
    """The slow path: one line at a time, so each bad line gets its own error."""
    records: list[dict[str, Any]] = []
    seqs: list[int] = []
    errors: list[InputError] = []
    for offset, raw in enumerate(block.split(b"\n")[:-1]):
        line = first_line + offset
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
            if not isinstance(record, dict):
                raise InputError(f"an event is a JSON object, found {type(record).__name__}")
            _check_time(record, fields)
        except (ValueError, InputError) as e:
            reason = e.reason if isinstance(e, InputError) else f"invalid JSON: {e}"
            errors.append(InputError(reason, source, line + 1))
            continue
        records.append(record)
        seqs.append(line)
    seq = np.asarray(seqs, dtype=np.int64)
    return Block(_records_batch(records, seq, fields), errors, len(block))


def _check_time(record: dict[str, Any], fields: Fields) -> None:
    value = record.get(fields.time)
    if value is None:
        raise InputError(f"missing event time '{fields.time}'")
    if isinstance(value, bool) or not isinstance(value, int | str | float):
        raise InputError(f"event time '{fields.time}' must be an integer or ISO-8601")
    if isinstance(value, float) and not value.is_integer():
        raise InputError(f"event time '{fields.time}' must be a whole number, found {value}")
    if isinstance(value, str):
        _iso_ticks(pa.array([value]), fields.time_unit)


def _records_batch(records: list[dict[str, Any]], seq: np.ndarray, fields: Fields) -> EventBatch:
    """Records with possibly mixed attribute types (such a column becomes an object column)."""
    names = sorted({k for r in records for k in r})
    clean: dict[str, Any] = {}
    mixed: dict[str, np.ndarray] = {}
    for name in names:
        values = [r.get(name) for r in records]
        try:
            clean[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            mixed[name] = np.asarray(values, dtype=object)
    if not records:
        clean = {fields.time: pa.array([], pa.int64())}
    batch = _to_batch(pa.table(clean), seq, fields)
    if not mixed:
        return batch
    return EventBatch({**batch.columns, **mixed}, batch.ts, batch.seq, batch.ids, batch.types)
