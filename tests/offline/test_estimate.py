"""The plan's estimate of the bytes read tracks the bytes read (the benchmark's target: within
25%), for a selective and an unselective query of each language, on a generated archive with
keys, secondary indexes and duplicate timestamps.

The bytes read are counted as ``situflow offline`` counts them (``--explain``'s "actual"): the
driver's reads while it plans (widening TPStream's intervals to quiet events, probing for the
event after a SASE+ negation's deadline) plus the row groups of the plan, with the columns the
Spark job reads. The estimate includes the widening: TPStream's quiet events, a SASE+
negation's window, a COGRA interval's windows.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from batch.offline import event_columns
from situflow.archive import (
    ARCHIVE_OFFSET,
    ARCHIVE_SEQ,
    Archive,
    SegmentMeta,
    StreamSettings,
    open_archive,
    partition_dir,
    write_segment,
)
from situflow.archive.secondary import build_index
from situflow.kslack.positions import SEQ_FIELD
from situflow.languages import compile_query
from situflow.offline.planner import plan
from situflow.offline.queries import offline_query
from situflow.operator import QueryOptions

TOPIC = "cars.ordered"
SETTINGS = StreamSettings("cars", key_fields=("car_id",))
#: A selective and an unselective query per language, and a SASE+ trailing negation.
QUERIES = {
    "tpstream selective": "FROM cars PARTITION BY car_id DEFINE A AS speed > 200, "
                          "B AS accel < -2 PATTERN A before B WITHIN 2 minutes "
                          "RETURN first(A.car_id) AS id",
    "tpstream unselective": "FROM cars PARTITION BY car_id DEFINE A AS speed > 80, "
                            "B AS accel > 5 PATTERN A before B WITHIN 2 minutes "
                            "RETURN first(A.car_id) AS id",
    "sase selective": "PATTERN SEQ(Car a, Car b) WHERE skip_till_next_match(a, b) "
                      "{ [car_id] and a.speed > 200 and b.accel < -2 } WITHIN 2 minutes",
    "sase unselective": "PATTERN SEQ(Car a, Car b) WHERE skip_till_next_match(a, b) "
                        "{ [car_id] and a.speed > 70 and b.accel < -3 } WITHIN 2 minutes",
    "sase trailing negation": "PATTERN SEQ(Car a, Car b, ~(Alarm n)) WHERE "
                              "skip_till_next_match(a, b) { [car_id] and a.speed > 200 and "
                              "b.accel < -2 } WITHIN 2 minutes",
    "cogra selective": "RETURN car_id, COUNT(*) PATTERN Alarm S+ SEMANTICS skip-till-any-match "
                       "WHERE [car_id] GROUP-BY car_id WITHIN 2 minutes SLIDE 1 minutes",
    "cogra unselective": "RETURN COUNT(*) PATTERN Car S+ SEMANTICS skip-till-next-match "
                         "WHERE [car_id] AND S.speed > NEXT(S).speed WITHIN 2 minutes "
                         "SLIDE 2 minutes",
}


def generate(root: Path, *, partitions: int = 2, events: int = 60_000, cars: int = 60,
             block_rows: int = 600, rare: float = 0.001, seed: int = 1,
             indexed: bool = True) -> Archive:
    """Per partition ``events`` events about one per tick (0–2 ticks apart), two segments of
    blocks of ``block_rows`` rows, ``cars`` keys over the partitions; speeds around 60 with
    spikes in [200, 300] and ``Alarm`` events, each with probability ``rare``."""
    rng = np.random.default_rng(seed)
    for partition in range(partitions):
        ts = np.cumsum(rng.choice(np.array([0, 1, 2]), events, p=[0.2, 0.6, 0.2]))
        car = rng.choice(np.arange(partition, cars, partitions), events)
        speed = rng.normal(60.0, 10.0, events).round(2)
        spikes = rng.random(events) < rare
        speed[spikes] = rng.uniform(200.0, 300.0, int(spikes.sum())).round(2)
        accel = rng.normal(0.0, 3.0, events).round(2)
        kind = np.where(rng.random(events) < rare, "Alarm", "Car")
        seq = np.arange(events, dtype=np.int64)
        half = events // 2
        for first in (0, half):
            part = slice(first, first + half)
            table = pa.table({"ts": ts[part].astype(np.int64), "car_id": car[part],
                              "type": kind[part], "speed": speed[part], "accel": accel[part],
                              SEQ_FIELD: seq[part], ARCHIVE_SEQ: seq[part],
                              ARCHIVE_OFFSET: seq[part]})
            meta = SegmentMeta(TOPIC, partition, first, first + half, first, first + half - 1,
                               int(ts[first]), int(ts[first + half - 1]))
            write_segment(partition_dir(root, TOPIC, partition), table, meta,
                          block_rows=block_rows)
    archive = open_archive(f"file://{root}")
    archive.write_settings(TOPIC, SETTINGS)
    for attribute in ("speed", "accel", "type") if indexed else ():
        build_index(archive, TOPIC, attribute, key_fields=SETTINGS.key_fields)
    return archive


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cars")
    generate(path)
    return path


@pytest.fixture(scope="module")
def unindexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One partition (its car ids are dense) with fewer spikes, so that the coarse pattern map
    prunes, and no secondary index."""
    path = tmp_path_factory.mktemp("unindexed")
    generate(path, partitions=1, events=120_000, rare=0.0002, indexed=False)
    return path


@pytest.mark.parametrize("indexes", ["all", "auto"])
@pytest.mark.parametrize("label", sorted(QUERIES))
def test_the_estimated_bytes_are_within_a_quarter_of_the_bytes_read(root: Path, label: str,
                                                                    indexes: str) -> None:
    assert_estimate_holds(root, label, indexes)


@pytest.mark.parametrize("label", ["tpstream selective", "sase trailing negation"])
def test_without_secondary_indexes_the_coarse_pattern_maps_estimate_holds_too(
    unindexed: Path, label: str
) -> None:
    """``all`` with no index is the coarse pattern map's pruning; no index counts the keys, so
    the value range of the key in the blocks bounds them (exactly, for dense car ids)."""
    assert_estimate_holds(unindexed, label, "all")


def assert_estimate_holds(root: Path, label: str, indexes: str) -> None:
    query = offline_query(compile_query(QUERIES[label], QueryOptions(name="q")), SETTINGS)
    archive = open_archive(f"file://{root}")
    columns = event_columns(query, archive.parquet_file(
        archive.segments(TOPIC, 0)[0].path).schema_arrow.names)
    replay_plan = plan(query, archive, TOPIC, indexes=indexes)
    driver = archive.bytes_read
    for partition, blocks in replay_plan.blocks.items():
        archive.read_blocks(TOPIC, partition, blocks, columns)
    read = archive.bytes_read
    assert read > 0
    assert replay_plan.estimate.bytes == pytest.approx(read, rel=0.25), replay_plan.explain()
    assert replay_plan.estimate.driver == pytest.approx(driver, rel=0.25, abs=0.05 * read)


def test_the_widening_reads_of_tpstream_are_in_the_estimate(root: Path) -> None:
    """Without them the estimate of a TPStream plan would miss the driver's reads, which are
    about as many bytes as the replay's."""
    query = offline_query(compile_query(QUERIES["tpstream selective"], QueryOptions(name="q")),
                          SETTINGS)
    archive = open_archive(f"file://{root}")
    replay_plan = plan(query, archive, TOPIC, indexes="all")
    assert archive.bytes_read > 0.5 * replay_plan.planned.bytes
    assert replay_plan.estimate.driver > 0.5 * replay_plan.planned.bytes
    assert "of them on the driver" in replay_plan.explain()
