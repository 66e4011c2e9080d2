"""A seeded car-sensor stream shaped like the Linear Road trips of the TPStream experiments.

Every car reports once per second: ``car_id``, ``speed`` (mph) and ``accel`` (m/s²). Speed
and acceleration are smooth autoregressive processes, so the aggressive-drivers conditions
(``accel > 8``, ``speed > 70``, ``accel < -9``) hold in runs of a few seconds, as in the
thesis' thresholds at high percentiles (§5.7.2).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from situflow.events import EventBatch


def car_columns(events: int, cars: int, seed: int = 7) -> dict[str, np.ndarray]:
    """``events`` readings of ``cars`` cars, ordered by time, then car id."""
    rng = np.random.default_rng(seed)
    ticks = -(-events // cars)
    accel = np.empty((ticks, cars))
    speed = np.empty((ticks, cars))
    a = rng.normal(0, 5, cars)
    v = rng.normal(55, 8, cars)
    for t in range(ticks):
        a = 0.8 * a + rng.normal(0, 3.6, cars)
        v = np.clip(0.97 * v + 0.03 * 58 + 0.35 * a + rng.normal(0, 0.8, cars), 0, 120)
        accel[t], speed[t] = a, v
    ts = np.repeat(np.arange(ticks, dtype=np.int64), cars)[:events]
    car_id = np.tile(np.arange(cars, dtype=np.int64), ticks)[:events]
    return {
        "ts": ts,
        "car_id": car_id,
        "speed": np.round(speed.ravel()[:events], 1),
        "accel": np.round(accel.ravel()[:events], 1),
    }


def car_batches(events: int, cars: int, batch_size: int, seed: int = 7) -> Iterator[EventBatch]:
    columns = car_columns(events, cars, seed)
    ts = columns.pop("ts")
    seq = np.arange(len(ts), dtype=np.int64)
    for start in range(0, len(ts), batch_size):
        stop = start + batch_size
        yield EventBatch({k: v[start:stop] for k, v in columns.items()}, ts[start:stop],
                         seq[start:stop], seq[start:stop])


def write_jsonl(path: str | Path, events: int, cars: int, seed: int = 7) -> None:
    """Write the stream as JSON lines (one event per line)."""
    c = car_columns(events, cars, seed)
    with open(path, "w") as f:
        for start in range(0, events, 100_000):
            rows = zip(*(c[k][start:start + 100_000].tolist()
                         for k in ("ts", "car_id", "speed", "accel")), strict=True)
            f.write("".join(f'{{"ts":{t},"car_id":{i},"speed":{s},"accel":{a}}}\n'
                            for t, i, s, a in rows))
