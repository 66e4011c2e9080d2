"""JSON-lines event files read in large blocks with pyarrow's JSON reader.

The fast path parses a whole block in C++; a block with a bad line falls back to line-by-line
parsing, so every bad line is reported with its line number and the good ones are kept. The
0-based line number is each event's sequence number and, without an ``id`` field, its id.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.json as pajson

from situflow.codecs.arrow_events import BUILD_ERRORS, array_of, has_struct
from situflow.codecs.event_time import json_kind, values_ticks
from situflow.errors import InputError
from situflow.events import EventBatch, numpy_column, object_array
from situflow.io.ahead import read_ahead as read_ahead_blocks
from situflow.io.blocks import DEFAULT_FIELDS, Block, Fields, table_block

BLOCK_BYTES = 8 << 20
#: The path that reads standard input, and the name its errors carry.
STDIN, STDIN_NAME = "-", "<stdin>"
# pyarrow parses the sub-blocks of a block in parallel.
PARSE_BLOCK = 1 << 20
# A line of JSON null: pyarrow's reader crashes the process (a segmentation fault, pyarrow 26) on
# a block that starts with one.
_NULL_LINE = re.compile(rb"\n[ \t\r]*null")
# Beyond this, a float pyarrow read may have been an integer beyond int64 in the text.
_BEYOND_INT64 = 2.0**63
# A \u escape of a UTF-16 surrogate: paired, or text that is no Unicode.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")




def read_blocks(path: str | Path, fields: Fields = DEFAULT_FIELDS,
                block_bytes: int = BLOCK_BYTES, read_ahead: int = 2) -> Iterator[Block]:
    """Yield the file's events block by block, in file order.

    A thread parses up to ``read_ahead`` blocks ahead (pyarrow releases the GIL), so parsing
    overlaps with the operator consuming the previous block.
    """
    source = STDIN_NAME if str(path) == STDIN else str(path)

    def blocks() -> Iterator[Block]:
        with _opened(path) as f:
            yield from _blocks(f, source, fields, block_bytes)

    if read_ahead <= 0:
        yield from blocks()
        return

    yield from read_ahead_blocks(blocks, read_ahead, "jsonl-reader")


def _opened(path: str | Path) -> contextlib.AbstractContextManager[BinaryIO]:
    if str(path) == STDIN:
        return contextlib.nullcontext(sys.stdin.buffer)  # not closed: it is not ours
    return open(path, "rb")


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
    if _whole(block) and not blank_line:
        try:
            table = pajson.read_json(io.BytesIO(block),
                                     read_options=pajson.ReadOptions(block_size=PARSE_BLOCK))
            if (table.num_rows == lines and fields.time in table.schema.names
                    and _read_right(table, fields.time)):
                return table_block(table, seq, source, fields, len(block))
        except pa.ArrowInvalid:
            pass
    return _parse_lines(block, first_line, source, fields)


def _whole(block: bytes) -> bool:
    """Whether pyarrow's reader may read ``block`` whole: it crashes on a line of JSON null
    that starts a block, accepts NaN and Infinity (no JSON), and does not check that strings
    are UTF-8 (decoding them later would raise). Such blocks, rare, are read line by line."""
    return not (block[:64].lstrip(b" \t\r").startswith(b"null") or _NULL_LINE.search(block)
                or b"NaN" in block or b"Infinity" in block) and _utf8(block)


def _read_right(table: pa.Table, time_field: str) -> bool:
    """Whether pyarrow read every value as the line reader would: objects keep their own keys
    (:func:`has_struct`), text stays text (pyarrow reads ISO-8601 text as timestamps, which
    only the event time may be), lists are valid arrays (pyarrow 26 builds a list that starts with
    null, ``[null, null]`` or ``[null, "a"]``, with offsets past its values), and an integer
    beyond 64 bits, which the reader makes a float and with it its whole column, is one value
    of its own (the typing rule, SEMANTICS.md)."""
    for column in table.schema:
        if has_struct(column.type):
            return False
        if pa.types.is_timestamp(column.type) and column.name != time_field:
            return False
        if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
            try:
                table.column(column.name).validate(full=True)
            except pa.ArrowInvalid:
                return False
        if pa.types.is_floating(column.type):
            # Missing values read as NaN, which no comparison holds for, as pyarrow skips them.
            values = np.abs(table.column(column.name).to_numpy())
            if (values >= _BEYOND_INT64).any():
                return False
    return True


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
            record = _loads(raw)
        except (ValueError, RecursionError) as e:
            errors.append(InputError(f"invalid JSON: {e}", source, line + 1))
            continue
        if not isinstance(record, dict):
            errors.append(InputError(f"an event is a JSON object, found {json_kind(record)}",
                                     source, line + 1))
            continue
        records.append(record)
        seqs.append(line)
    ticks, bad = values_ticks([r.get(fields.time) for r in records], fields.time_unit,
                              fields.time)
    for i, reason in bad.items():
        errors.append(InputError(reason, source, seqs[i] + 1))
    errors.sort(key=lambda e: e.position or 0)
    keep = [i for i in range(len(records)) if i not in bad]
    records = [records[i] for i in keep]
    seq = np.asarray([seqs[i] for i in keep], dtype=np.int64)
    return Block(_records_batch(records, seq, ticks[keep], fields), errors, len(block))


def _utf8(block: bytes) -> bool:
    if block.isascii():
        return True
    try:
        block.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _loads(raw: bytes) -> Any:
    """One line's JSON value; ValueError unless it is JSON text in UTF-8 (a byte-order mark
    allowed, as pyarrow allows it) with no unpaired surrogate escape (as pyarrow refuses
    ``"\\ud800"``; such text has no UTF-8 form, which Arrow columns need)."""
    value = json.loads(raw.decode("utf-8-sig"), parse_constant=_not_json)
    if _SURROGATE_ESCAPE.search(raw):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("an unpaired UTF-16 surrogate escape is no Unicode text") from None
    return value


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _records_batch(records: list[dict[str, Any]], seq: np.ndarray, ticks: np.ndarray,
                   fields: Fields) -> EventBatch:
    """Records read one by one, typed column by column as the columnar path types them; a
    column whose values share no Arrow type holds them as Python objects."""
    names = sorted({k for r in records for k in r} - {fields.time})
    values = {name: [r.get(name) for r in records] for name in names}
    columns = {name: _column(v) for name, v in values.items()
               if name not in (fields.id, fields.type)}
    ids = _column(values[fields.id]) if fields.id in values else seq
    types = object_array(values[fields.type]) if fields.type in values else None
    return EventBatch(columns, ticks, seq, ids, types)


def _column(values: list[Any]) -> np.ndarray:
    try:
        return numpy_column(array_of(values))
    except BUILD_ERRORS:
        return object_array(values)
