"""The two seeded workloads of issue 16 (item 7), shared by the CLI and peer benchmarks.

* *stock*: ticks of 10 symbols, one every 10 ms (``ts`` in milliseconds), price a ±1 random
  walk per symbol kept in 1..1000, volume uniform in 1..1000; queried by :data:`STOCK_SASE`,
  ``A B+ C`` per symbol, contiguous within the symbol, without overlapping matches (SASE+ §2,
  the ``CONSUME`` extension).
* *car*: readings of 1,000 cars, one per car and second (``ts`` in seconds), from
  :func:`situflow.datagen.cars.car_columns`; queried by :data:`CAR_TPSTREAM`, the situations of
  speed above 70 mph lasting 4–30 s, with their count, average and maximum speed.

Generators return numpy columns (``dict[str, np.ndarray]``, ordered by time); :func:`rows`
turns them into dicts, :func:`write_jsonl` into a JSON-lines file, :func:`write_parquet` and
:func:`write_arrow` into the columnar files ``situflow run`` also reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from situflow.datagen.cars import car_columns

Columns = dict[str, np.ndarray]

SYMBOLS = 10
#: Milliseconds between ticks: the stock stream's ``ts`` unit is the millisecond.
TICK_MS = 10
STOCK_TIME_UNIT = 0.001

#: ``A B+ C`` per symbol: A a price at a multiple of 100, B rising prices (the first above A's),
#: C a price at most the last B's with a volume under 150, within 50 s, no overlapping matches.
#: Partition contiguity makes the sequence contiguous within its symbol (SASE+ §2).
STOCK_SASE = """\
PATTERN SEQ(Stock a, Stock+ b[], Stock c)
WHERE partition_contiguity(a, b[], c) {
      [symbol]
  and a.price % 100 = 0
  and b[1].price > a.price
  and b[i].price > b[i-1].price
  and c.price <= b[b.LEN].price
  and c.volume < 150 }
WITHIN 50 seconds
PARTITION BY symbol
CONSUME
RETURN a.symbol AS symbol, a.price AS start, b[b.LEN].price AS top, b.LEN AS rises
"""

#: The situations of speed > 70 mph lasting 4–30 s, with their count, average and maximum
#: speed: a single-situation pattern (``PATTERN B``), as ``situflow/examples/speeding.tps``.
CAR_TPSTREAM = """\
FROM CarSensors PARTITION BY car_id
DEFINE B AS speed > 70 mph BETWEEN 4s AND 30s
PATTERN B
RETURN first(B.car_id) AS car_id, count(B.speed) AS readings,
       avg(B.speed) AS avg_speed, max(B.speed) AS max_speed
"""


def stock_ticks(n: int = 1_000_000, seed: int = 16) -> Columns:
    """``n`` ticks, symbols in turn (``ts`` = 10 ms × tick), each symbol's price a random walk."""
    rng = np.random.default_rng(seed)
    per_symbol = -(-n // SYMBOLS)
    steps = rng.choice(np.array([-1, 1], dtype=np.int64), size=(per_symbol, SYMBOLS))
    start = rng.integers(1, 1001, SYMBOLS)
    prices = np.empty((per_symbol, SYMBOLS), dtype=np.int64)
    price = start.astype(np.int64)
    # The walk reflects at the bounds, so every price stays in 1..1000.
    for t in range(per_symbol):
        price = price + steps[t]
        price = np.where(price < 1, 2, np.where(price > 1000, 999, price))
        prices[t] = price
    return {
        "ts": np.arange(n, dtype=np.int64) * TICK_MS,
        "type": np.full(n, "Stock", dtype=object),
        "symbol": np.array([f"S{i}" for i in range(SYMBOLS)], dtype=object)[np.arange(n) % SYMBOLS],
        "price": prices.ravel()[:n],
        "volume": rng.integers(1, 1001, n),
    }


def car_readings(n_cars: int = 1000, seconds: int = 1100, seed: int = 7) -> Columns:
    """One reading per car and second: ``ts`` (s), ``car_id``, ``speed`` (mph), ``accel``."""
    return car_columns(n_cars * seconds, n_cars, seed)


def rows(columns: Columns) -> Iterator[dict[str, object]]:
    """The events as dicts, in order."""
    names = list(columns)
    for values in zip(*(columns[k].tolist() for k in names), strict=True):
        yield dict(zip(names, values, strict=True))


def write_jsonl(events: Columns, path: str | Path) -> int:
    """Write the events as JSON lines (keys in column order); returns the bytes written."""
    names = list(events)
    n = len(events[names[0]])
    written = 0
    with open(path, "w", encoding="utf-8") as f:
        for start in range(0, n, 100_000):
            chunk = [events[k][start:start + 100_000].tolist() for k in names]
            text = "".join(
                "{" + ",".join(f'"{k}":{_json_value(v)}' for k, v in zip(names, row, strict=True))
                + "}\n" for row in zip(*chunk, strict=True))
            written += f.write(text)
    return written


#: Rows per Parquet row group and per Arrow record batch of the columnar files.
COLUMNAR_ROWS = 1 << 17


def arrow_table(events: Columns) -> pa.Table:
    """The events as an Arrow table, text columns as text (the generators hold them as objects)."""
    return pa.table({k: pa.array(v.tolist() if v.dtype == object else v)
                     for k, v in events.items()})


def write_parquet(events: Columns, path: str | Path) -> int:
    """Write the events as Parquet (pyarrow's defaults: dictionary-encoded, Snappy), in row
    groups of :data:`COLUMNAR_ROWS`; returns the file's bytes."""
    pq.write_table(arrow_table(events), path, row_group_size=COLUMNAR_ROWS)
    return Path(path).stat().st_size


def write_arrow(events: Columns, path: str | Path) -> int:
    """Write the events as an Arrow IPC file, uncompressed, in record batches of
    :data:`COLUMNAR_ROWS`; returns the file's bytes."""
    table = arrow_table(events)
    with pa.ipc.new_file(str(path), table.schema) as writer:
        writer.write_table(table, max_chunksize=COLUMNAR_ROWS)
    return Path(path).stat().st_size


def _json_value(v: object) -> str:
    # The generators hold ints, floats and plain ASCII names, so no escaping is needed.
    return f'"{v}"' if isinstance(v, str) else repr(v)
