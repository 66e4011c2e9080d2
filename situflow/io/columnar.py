"""Parquet and Arrow IPC event files: events that arrive as columns go to the operators as
columns, with no Python object per row.

A Parquet file is read a batch of :data:`BLOCK_ROWS` rows at a time, row group by row group,
so memory stays bounded whatever the file's size (8M car readings: 172 MiB at the peak, against
452 MiB for reading the file whole); an
Arrow IPC file (``ARROW1`` magic) or stream is memory-mapped and its record batches sliced to
the same size. Each batch becomes a :class:`~situflow.io.blocks.Block` exactly as a block of JSON
lines does (:func:`situflow.io.blocks.table_block`): the one event-time rule, the row's 0-based
number as its sequence number (the line it would have in JSON lines) and, without an ``id``
column, its id. The typing rule and the time order are the CLI's, as for JSON lines.

Columns are made the types the JSON-lines reader gives the same values:

* text attributes (and the type field) are dictionary-encoded, as in every block
  (:func:`situflow.io.blocks.encode_texts`); Parquet's own dictionaries are read as they are
  (``read_dictionary``);
* integers are int64 and floats float64 (zero-copy when they already are), decimals float64;
* timestamps, dates and times that are attributes (not the event time) are ISO-8601 text, as
  JSON carries them; binary that is UTF-8 is text.

What JSON lines cannot say, a column cannot either, and the reverse: a struct column gives
each row every field of the struct (null where the row had none), where a JSON object keeps
its own keys.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from situflow.errors import InputError
from situflow.io.ahead import read_ahead as read_ahead_blocks
from situflow.io.blocks import DEFAULT_FIELDS, Block, Fields, encodable, table_block

#: Rows per block: a 65,536-event block of JSON lines is about 4 MB, half of its block.
BLOCK_ROWS = 1 << 17
#: The input formats of ``situflow run --input-format``, and the suffixes that choose them.
FORMATS = ("jsonl", "parquet", "arrow")
SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".arrow": "arrow", ".arrows": "arrow",
            ".ipc": "arrow", ".feather": "arrow"}
# The first bytes of an Arrow IPC file; a stream starts with its schema message instead.
_FILE_MAGIC = b"ARROW1"


def input_format(path: str | Path, given: str | None = None) -> str:
    """The format of the events at ``path``: ``given`` if any, else by the file's suffix
    (JSON lines for any other suffix and for standard input, ``-``)."""
    if given is not None:
        return given
    return SUFFIXES.get(Path(path).suffix.lower(), "jsonl")


@dataclass(frozen=True)
class ColumnarFile:
    """A Parquet or Arrow IPC file opened for reading: its ``rows`` (None for an Arrow
    stream, which says only at its end) and ``size`` in bytes."""

    path: Path
    format: str
    rows: int | None
    size: int


def open_columnar(path: str | Path, format: str) -> ColumnarFile:
    """``path`` checked to be a readable file of ``format``; :class:`InputError` if it is not
    (OSError if it cannot be read at all)."""
    path = Path(path)
    size = path.stat().st_size
    try:
        if format == "parquet":
            import pyarrow.parquet as pq  # here: only Parquet input needs it

            rows: int | None = pq.ParquetFile(path).metadata.num_rows
        else:
            with pa.memory_map(str(path)) as source:
                if _is_ipc_file(path):
                    rows = pa.ipc.open_file(source).count_rows()
                else:  # a stream says its row count only at its end
                    pa.ipc.open_stream(source)
                    rows = None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise InputError(f"{path}: not a readable {_NAMES[format]} file ({e})") from None
    return ColumnarFile(path, format, rows, size)


_NAMES = {"parquet": "Parquet", "arrow": "Arrow IPC"}


def read_columnar(file: ColumnarFile, fields: Fields = DEFAULT_FIELDS,
                  block_rows: int = BLOCK_ROWS, read_ahead: int = 2) -> Iterator[Block]:
    """Yield the file's events block by block, in row order; a thread reads up to
    ``read_ahead`` blocks ahead (pyarrow decodes without the GIL)."""
    def blocks() -> Iterator[Block]:
        first = 0
        source = str(file.path)
        try:
            for batch, size in _batches(file, fields, block_rows):
                seq = np.arange(first, first + batch.num_rows, dtype=np.int64)
                yield table_block(_engine_columns(batch, fields), seq, source, fields, size)
                first += batch.num_rows
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as e:
            raise InputError(f"unreadable {_NAMES[file.format]} data from this row on ({e})",
                             source, first + 1) from None

    if read_ahead <= 0:
        return blocks()
    return read_ahead_blocks(blocks, read_ahead, f"{file.format}-reader")


def _batches(file: ColumnarFile, fields: Fields, block_rows: int
             ) -> Iterator[tuple[pa.RecordBatch, int]]:
    """The file's record batches of at most ``block_rows`` rows, each with the bytes of the file
    it stands for (for the progress bar)."""
    if file.format == "parquet":
        import pyarrow.parquet as pq

        schema = pq.ParquetFile(file.path).schema_arrow
        texts = [f.name for f in schema if encodable(f, fields)]
        parquet = pq.ParquetFile(file.path, read_dictionary=texts)
        rows = max(parquet.metadata.num_rows, 1)
        for batch in parquet.iter_batches(batch_size=block_rows):
            yield batch, file.size * batch.num_rows // rows
        return
    with pa.memory_map(str(file.path)) as source:
        if _is_ipc_file(file.path):
            reader = pa.ipc.open_file(source)
            rows = max(reader.count_rows(), 1)
            for i in range(reader.num_record_batches):
                for part in _sliced(reader.get_batch(i), block_rows):
                    yield part, file.size * part.num_rows // rows
            return
        stream = pa.ipc.open_stream(source)
        done = source.tell()
        for batch in stream:
            parts = list(_sliced(batch, block_rows))
            read, done = source.tell() - done, source.tell()
            for part in parts:
                yield part, read * part.num_rows // max(batch.num_rows, 1)


def _sliced(batch: pa.RecordBatch, rows: int) -> Iterator[pa.RecordBatch]:
    for start in range(0, max(batch.num_rows, 1), rows):
        yield batch.slice(start, rows)


def _engine_columns(batch: pa.RecordBatch, fields: Fields) -> pa.Table:
    """``batch`` with its columns of the types the JSON-lines reader gives (module doc); a file
    without the event-time column has it, missing in every row (each row is then rejected, as
    a JSON line without it is)."""
    table = pa.Table.from_batches([batch])
    for i, field in enumerate(table.schema):
        column = _engine_column(table.column(i), field, fields)
        if column is not None:
            table = table.set_column(i, pa.field(field.name, column.type), column)
    if fields.time not in table.schema.names:
        table = table.append_column(fields.time, pa.nulls(table.num_rows, pa.int64()))
    return table


def _engine_column(column: pa.ChunkedArray, field: pa.Field, fields: Fields
                   ) -> pa.ChunkedArray | None:
    """The column converted (module doc), or None where it stays as it is."""
    kind = field.type
    if pa.types.is_dictionary(kind) and not _is_text(kind.value_type):
        decoded = pa.chunked_array([c.dictionary_decode() for c in column.chunks], kind.value_type)
        return _engine_column(decoded, pa.field(field.name, kind.value_type), fields) or decoded
    if field.name == fields.time:
        return column.cast(pa.timestamp("s")) if pa.types.is_date(kind) else None
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        try:
            return column.cast(pa.string())
        except pa.ArrowInvalid:  # no UTF-8: left as bytes
            return None
    if pa.types.is_integer(kind) and kind != pa.int64():
        try:
            return column.cast(pa.int64())
        except pa.ArrowInvalid:  # uint64 beyond int64
            return None
    if (pa.types.is_floating(kind) and kind != pa.float64()) or pa.types.is_decimal(kind):
        return column.cast(pa.float64())
    if pa.types.is_temporal(kind) and not pa.types.is_duration(kind):
        return pa.chunked_array([pa.array([None if v is None else v.isoformat()
                                           for v in column.to_pylist()], pa.string())])
    return None


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _is_ipc_file(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(len(_FILE_MAGIC)) == _FILE_MAGIC

