"""Backfill through a real broker (issue #14, item 5; batch/README.md, "Backfill").

``situflow backfill`` publishes the results of the archived events to the query's output topic
with the services' key, value, result id and header, so consumers de-duplicate across both.
``situflow query submit --backfill-from T``, submitted while events flow through the running
K-slack, matcher and archiver services, hands off where the services begin the query: the
output topic then holds every result of ``situflow run`` over the whole stream, each exactly
once after de-duplication by id, and no result twice under different ids.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from aiokafka.partitioner import DefaultPartitioner
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from situflow.archive import (
    ARCHIVE_OFFSET,
    ARCHIVE_SEQ,
    Archive,
    SegmentMeta,
    StreamSettings,
    open_archive,
    ordered_topic,
    partition_dir,
    write_segment,
)
from situflow.languages import compile_query
from situflow.operator import QueryOptions
from situflow.settings import KafkaSettings
from tests.integration.helpers import (
    car_events,
    deduplicated_results,
    id_of,
    keyed,
    produce,
    read_topic,
    run_cli,
    wait_until,
)
from tests.integration.test_languages import arrivals, stock_events
from tests.profiles import scaled
from topics.catalog import SEQ_FIELD, StreamSpec, stream_topics
from workers.evaluation import RESULT_ID_HEADER
from workers.handoff import archived_events, handoff_results, partition_results
from workers.up import REPO_ROOT, Pipeline

pytestmark = pytest.mark.integration

#: SASE+ over the stock quotes of test_languages.py (its Query 3, with a 5-minute window so
#: that the archive soon reaches a window past the hand-off).
RISING = """PATTERN SEQ(Stock+ a[ ], Stock b)
WHERE skip_till_next_match(a[ ], b) { [symbol] and a[1].volume > 1000
    and a[i].price > avg(a[..i-1].price) and b.volume < 80%*a[a.LEN].volume }
WITHIN 5 minutes
"""
TPSTREAM = REPO_ROOT / "situflow/examples/aggressive_drivers.tps"
COGRA = REPO_ROOT / "situflow/examples/rising_trends.cogra"  # 5-minute windows, GROUP-BY symbol
PARTITIONS = 3
HANDOFF_QUERY = compile_query(RISING, QueryOptions(name="rising"))
WINDOW = 300.0  # ticks: RISING's 5 minutes
SEGMENT_ROWS = 400


def write_archive(root: Path, stream: str, events: Sequence[dict[str, Any]],
                  key_fields: Sequence[str], partitions: int = PARTITIONS) -> Archive:
    """``events`` (in time order) archived as the archiver writes ``<stream>.ordered``: split
    into partitions by key as producers do, each event one message, its input seq its place."""
    every = list(range(partitions))
    parts: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        key, _ = keyed(event, key_fields)
        parts[DefaultPartitioner()(key, every, every)].append(event)
    topic = ordered_topic(stream)
    for partition, rows in parts.items():
        for first in range(0, len(rows), SEGMENT_ROWS):
            chunk = rows[first:first + SEGMENT_ROWS]
            numbered = [{**row, SEQ_FIELD: first + i, ARCHIVE_SEQ: first + i,
                         ARCHIVE_OFFSET: first + i} for i, row in enumerate(chunk)]
            meta = SegmentMeta(topic, partition, first, first + len(chunk), first,
                               first + len(chunk) - 1, chunk[0]["ts"], chunk[-1]["ts"])
            write_segment(partition_dir(root, topic, partition), pa.Table.from_pylist(numbered),
                          meta, block_rows=64)
    archive = open_archive(root)
    archive.write_settings(topic, StreamSettings(stream, key_fields=tuple(key_fields)))
    return archive


def situflow(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "situflow.cli", *args], env=env, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)


def cli_env(kafka: KafkaSettings, **variables: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT), **kafka.to_env(), **variables}


def rising_query(tmp_path: Path) -> Path:
    query = tmp_path / "rising.sase"
    query.write_text(RISING)
    return query


@pytest.mark.parametrize("language", ["sase", "tpstream", "cogra"])
def test_backfill_publishes_situflow_run_results_with_the_services_ids_and_headers(
    kafka: KafkaSettings, topic_prefix: str, tmp_path: Path, language: str
) -> None:
    """The whole archive: exactly ``situflow run``'s results, but for what only the end of its
    input closes (COGRA windows ending after the last event): a backfill, like the services,
    never sees an end."""
    if language == "sase":
        query, events, key_fields = rising_query(tmp_path), stock_events(), ("symbol",)
    elif language == "tpstream":
        query, events, key_fields = TPSTREAM, car_events(10_000, 100, 9), ("car_id",)
    else:
        query, events, key_fields = COGRA, stock_events(), ("symbol",)
    name = f"{topic_prefix}-backfill"
    last = events[-1]["ts"]
    expected = {id_of(r): r for r in run_cli(query, events, name, tmp_path)
                if r.get("window_end", last) <= last}
    write_archive(tmp_path / "archive", topic_prefix, events, key_fields)

    done = situflow("backfill", str(query), "--archive", f"file://{tmp_path / 'archive'}",
                    "--stream", topic_prefix, "--name", name, env=cli_env(kafka))

    assert done.returncode == 0, done.stderr
    topic = f"{'trends' if language == 'cogra' else 'matches'}.{name}"
    records = asyncio.run(read_topic(kafka, topic))
    for record in records:
        value = json.loads(record.value)
        assert dict(record.headers) == {RESULT_ID_HEADER: value["id"].encode()}
        assert record.key == json.dumps(value.get("key", value.get("group"))).encode()
    assert len(records) == len(expected) > 0
    assert deduplicated_results(kafka, topic) == expected


def test_backfill_of_a_missing_archive_or_an_empty_range_says_what_is_missing(
    kafka: KafkaSettings, topic_prefix: str, tmp_path: Path
) -> None:
    """Never silently fewer results: no archive of the stream, or no event in the range, is
    an error naming the topic (and the range); nothing is published."""
    query = rising_query(tmp_path)
    missing = situflow("backfill", str(query), "--archive", str(tmp_path / "none"), "--stream",
                       topic_prefix, env=cli_env(kafka))
    assert missing.returncode == 1
    assert f"{topic_prefix}.ordered: no _stream.json" in missing.stderr
    write_archive(tmp_path / "archive", topic_prefix, stock_events(), ("symbol",))
    empty = situflow("backfill", str(query), "--archive", str(tmp_path / "archive"), "--stream",
                     topic_prefix, "--from", "100000", "--to", "100010", env=cli_env(kafka))
    assert empty.returncode == 1
    assert f"{topic_prefix}.ordered: no data in the range" in empty.stderr


@settings(max_examples=scaled(0.5))
@given(steps=st.lists(st.integers(0, 40), min_size=30, max_size=120),
       volumes=st.lists(st.integers(500, 2_000), min_size=120, max_size=120),
       prices=st.lists(st.integers(90, 110), min_size=120, max_size=120),
       cut=st.floats(0.0, 1.0))
def test_the_handoff_rule_splits_the_results_of_the_whole_stream_without_overlap(
    steps: list[int], volumes: list[int], prices: list[int], cut: float
) -> None:
    """The rule itself, against brute force on one partition: a fresh operator from offset X
    (the services) and the backfill's share at X are disjoint and together are exactly the
    results of the whole partition, value for value."""
    times = np.cumsum(steps)
    rows = [{"id": i, "type": "Stock", "ts": int(t), "symbol": f"S{i % 3}",
             "price": float(prices[i]), "volume": volumes[i], SEQ_FIELD: i, ARCHIVE_SEQ: i,
             ARCHIVE_OFFSET: i} for i, t in enumerate(times)]
    table = pa.Table.from_pylist(rows)
    start = int(cut * len(rows))
    settings = StreamSettings("stocks")
    with TemporaryDirectory() as root:
        archive = write_archive(Path(root), "stocks", rows, ("symbol",), partitions=1)
        backfilled = handoff_results(HANDOFF_QUERY, archive, "stocks.ordered", 0, start, WINDOW,
                                     None, settings)
    assume(backfilled is not None)  # the stream reaches a window past the hand-off
    assert backfilled is not None
    online = partition_results(HANDOFF_QUERY, archived_events(table.slice(start), settings),
                               settings) if start < len(rows) else []
    whole = partition_results(HANDOFF_QUERY, archived_events(table, settings), settings)
    by_id = {r.result_id: r.to_dict() for r in [*backfilled, *online]}
    assert len(by_id) == len(backfilled) + len(online)
    assert by_id == {r.result_id: r.to_dict() for r in whole}


@pytest.fixture
def pipeline(kafka: KafkaSettings, topic_prefix: str, tmp_path: Path) -> Iterator[Pipeline]:
    """K-slack, the matcher and the archiver over a stock stream, no query registered yet."""
    stream = StreamSpec(f"{topic_prefix}.stocks", partitions=PARTITIONS, key_fields=("symbol",))
    env = {"SITUFLOW_ARCHIVE_SEGMENT_ROWS": "200", "SITUFLOW_ARCHIVE_SEGMENT_SECONDS": "1"}
    with Pipeline(stream, slack=30, idle_timeout=2.0, kafka=kafka, work_dir=tmp_path / "pipeline",
                  service_names=("kslack", "matcher"), archive=True, extra_env=env) as running:
        yield running


@pytest.mark.slow
def test_submit_with_backfill_while_events_flow_gives_every_result_once(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    kafka = pipeline.kafka
    assert kafka is not None and pipeline.work_dir is not None
    query = rising_query(tmp_path)
    name = f"{pipeline.stream.name}-rising"
    events = stock_events()
    expected = {id_of(r): r for r in run_cli(query, events, name, tmp_path)}
    messages = arrivals(events)
    raw = stream_topics(pipeline.stream)[0].name
    third = len(messages) // 3
    asyncio.run(produce(kafka, raw, messages[:third]))

    submitting = subprocess.Popen(
        [sys.executable, "-m", "situflow.cli", "query", "submit", str(query), "--name", name,
         "--stream", pipeline.stream.name, "--key-fields", "symbol", "--backfill-from", "0",
         "--archive", str(pipeline.work_dir / "archive")],
        env=cli_env(kafka, SITUFLOW_QUERIES_TOPIC=str(pipeline.registry_topic)),
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # The rest flows while the query is registered, begun and backfilled.
        for start in range(third, len(messages), 200):
            asyncio.run(produce(kafka, raw, messages[start:start + 200]))
        out, err = submitting.communicate(timeout=300)
    finally:
        submitting.kill()
    assert submitting.returncode == 0, err
    backfilled = re.search(r"backfilled (\d+) results", out)
    assert backfilled is not None, out
    # Both sides have a share: the third produced before the submit is the backfill's alone.
    assert 0 < int(backfilled[1]) < len(expected)

    topic = f"matches.{name}"
    wait_until(lambda: expected.keys() <= deduplicated_results(kafka, topic).keys(), 120,
               "every result of situflow run, from the backfill or the services")
    records = [json.loads(r.value) for r in asyncio.run(read_topic(kafka, topic))]
    ids_of_content: dict[str, set[str]] = defaultdict(set)
    for record in records:
        ids_of_content[json.dumps({k: v for k, v in record.items() if k != "id"},
                                  sort_keys=True)].add(record["id"])
    assert all(len(ids) == 1 for ids in ids_of_content.values())
    assert deduplicated_results(kafka, topic) == expected


def test_submit_with_backfill_refuses_a_query_whose_start_would_cut_situations(
    kafka: KafkaSettings, topic_prefix: str
) -> None:
    """A TPStream query started online sees situations open at its start cut short: the
    hand-off would give results twice under different ids, so it is refused, nothing
    registered (batch/README.md, "Backfill")."""
    registry = f"{topic_prefix}.queries"
    done = situflow("query", "submit", str(TPSTREAM), "--stream", topic_prefix, "--key-fields",
                    "car_id", "--backfill-from", "0",
                    env=cli_env(kafka, SITUFLOW_QUERIES_TOPIC=registry))
    assert done.returncode == 1
    assert "--backfill-from hands off SASE+ queries only" in done.stderr
    listed = situflow("query", "list", env=cli_env(kafka, SITUFLOW_QUERIES_TOPIC=registry))
    assert listed.returncode == 0 and listed.stdout == ""
