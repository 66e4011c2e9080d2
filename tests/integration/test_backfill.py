"""Backfill through a real broker (issue #14, item 5; batch/README.md, "Backfill").

``situflow backfill`` publishes the results of the archived events to the query's output topic
with the services' key, value, result id and header, so consumers de-duplicate across both.
``situflow query submit --backfill-from T``, submitted while events flow through the running
K-slack, evaluating (matcher, trends, or deriver and matcher) and archiver services, hands off
where the services begin the query: the output topic then holds every result of ``situflow
run`` over the whole stream, each exactly once after de-duplication by id, and no result twice
under different ids.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any, cast

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
from situflow.events import EventBatch
from situflow.languages import compile_query
from situflow.offline.queries import offline_query
from situflow.operator import QueryOptions
from situflow.results import Match
from situflow.runtime import PartitionOperators, QuerySet
from situflow.settings import KafkaSettings
from situflow.tpstream.query import TPStreamQuery, quiet_mask
from situflow.tpstream.split.halves import as_deriver, as_matcher, match_situations
from situflow.tpstream.split.messages import SituationMessage
from situflow.tpstream.split.records import SituationRecord
from tests.integration.helpers import (
    Message,
    arrival_order,
    car_events,
    deduplicated_results,
    evaluates,
    id_of,
    in_blocks,
    keyed,
    metrics,
    produce,
    read_topic,
    run_cli,
    total,
    wait_until,
)
from tests.integration.test_languages import arrivals, stock_events
from tests.profiles import scaled
from topics.catalog import SEQ_FIELD, StreamSpec, stream_topics
from workers.evaluation import RESULT_ID_HEADER
from workers.handoff import (
    archived_events,
    handoff_matches,
    handoff_results,
    handoff_windows,
    partition_results,
)
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
COGRA_QUERY = compile_query(COGRA.read_text(), QueryOptions(name="rising_trends"))
COGRA_WINDOW = 300.0  # ticks: rising_trends' 5-minute windows (every minute)
SEGMENT_ROWS = 400
#: Ticks per block of the stream sent while a query is handed off (:func:`in_blocks`): 12 cars
#: read each tick; quotes come every 10 ticks, in Arrow messages of 40 (test_languages.py).
CAR_BLOCK_TICKS = 20
STOCK_BLOCK_TICKS = 200


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


@settings(max_examples=scaled(0.5))
@given(steps=st.lists(st.sampled_from([0, 15, 30, 60]), min_size=30, max_size=160),
       prices=st.lists(st.integers(90, 110), min_size=160, max_size=160),
       cut=st.floats(0.0, 1.0))
def test_the_cogra_handoff_splits_the_windows_of_the_whole_stream_without_overlap(
    steps: list[int], prices: list[int], cut: float
) -> None:
    """The COGRA rule against brute force on one partition: the services' operator from the
    message at the cut sends the windows that begin after its first event's time (the trends
    service's rule), the backfill those that begin at or before it; disjoint, and together
    exactly the windows of the whole partition, value for value. Times are multiples of a
    quarter minute, so the services often begin at a window's start."""
    times = np.cumsum(steps)
    rows = [{"id": i, "type": "Stock", "ts": int(t), "symbol": f"S{i % 3}",
             "price": float(prices[i]), SEQ_FIELD: i, ARCHIVE_SEQ: i, ARCHIVE_OFFSET: i}
            for i, t in enumerate(times)]
    table = pa.Table.from_pylist(rows)
    start = int(cut * (len(rows) - 1))
    begun = rows[start]["ts"]
    settings = StreamSettings("stocks")
    with TemporaryDirectory() as root:
        archive = write_archive(Path(root), "stocks", rows, ("symbol",), partitions=1)
        backfilled = handoff_windows(COGRA_QUERY, archive, "stocks.ordered", 0, begun,
                                     COGRA_WINDOW, None, settings)
    assume(backfilled is not None)  # the stream reaches the end of the last window
    assert backfilled is not None
    online = [r for r in partition_results(COGRA_QUERY, archived_events(table.slice(start),
                                                                        settings), settings)
              if r.window_start > begun]
    whole = partition_results(COGRA_QUERY, archived_events(table, settings), settings)
    by_id = {r.result_id: r.to_dict() for r in [*backfilled, *online]}
    assert len(by_id) == len(backfilled) + len(online)
    assert by_id == {r.result_id: r.to_dict() for r in whole}


#: TPStream with enough matches on the generated cars to test the hand-off rule on.
SPEEDING_BRAKE_TEXT = """FROM CarSensors PARTITION BY car_id
DEFINE A AS speed > 80, B AS accel < -6
PATTERN A before;meets;overlaps B
WITHIN 1 minute
RETURN first(A.car_id) AS id, avg(A.speed) AS speed"""
SPEEDING_BRAKE = compile_query(SPEEDING_BRAKE_TEXT, QueryOptions(name="speeding_brake"))


@settings(max_examples=scaled(0.2), deadline=None)
@given(seed=st.integers(0, 1_000), cut=st.floats(0.0, 1.0))
def test_the_tpstream_handoff_rule_splits_the_matches_without_overlap(
    seed: int, cut: float
) -> None:
    """The TPStream rule (batch/README.md, "Backfill") against brute force on one partition:
    a fresh operator given, per key, the events from the key's first quiet event at or after
    the cut (no definition holds there, so no situation spans it), and the whole partition's
    matches whose earliest situation begins before that event (all of a key's without one) are
    disjoint, and together exactly the whole partition's, value for value. (Beginning every
    key at the cut itself instead fails this test.)"""
    rows = [{**event, SEQ_FIELD: i, ARCHIVE_SEQ: i, ARCHIVE_OFFSET: i}
            for i, event in enumerate(car_events(3_000, 4, seed))]
    table = pa.Table.from_pylist(rows)
    settings = StreamSettings("cars", key_fields=("car_id",))
    events = archived_events(table, settings)
    quiet = offline_query(SPEEDING_BRAKE, settings).quiet
    assert quiet is not None
    is_quiet = np.asarray(quiet(events), bool)
    start = int(cut * (len(rows) - 1))
    begins: dict[Any, int] = {}
    for i in range(start, len(rows)):
        if is_quiet[i]:
            begins.setdefault(rows[i]["car_id"], i)
    online_rows = [i for i in range(start, len(rows))
                   if rows[i]["car_id"] in begins and i >= begins[rows[i]["car_id"]]]
    online = partition_results(SPEEDING_BRAKE, archived_events(table.take(online_rows),
                                                               settings), settings)
    whole = partition_results(SPEEDING_BRAKE, events, settings)
    begun_at = {car: rows[i]["ts"] for car, i in begins.items()}
    backfilled = [r for r in whole if min(b["ts"] for b in r.bindings.values())
                  < begun_at.get(r.key, math.inf)]
    by_id = {r.result_id: r.to_dict() for r in [*backfilled, *online]}
    assert len(by_id) == len(backfilled) + len(online)
    assert by_id == {r.result_id: r.to_dict() for r in whole}


@settings(max_examples=scaled(0.2), deadline=None)
@given(seed=st.integers(0, 1_000), cut=st.floats(0.0, 1.0))
def test_the_tpstream_backfill_finds_each_keys_begin_in_the_archive_and_publishes_before_it(
    seed: int, cut: float
) -> None:
    """``handoff_matches`` over an archive, given only the offset where the deriver began:
    exactly the matches whose earliest situation begins before the key's first quiet event at
    or after it (the rule above), once the archive reaches past every such match."""
    rows = [{**event, SEQ_FIELD: i, ARCHIVE_SEQ: i, ARCHIVE_OFFSET: i}
            for i, event in enumerate(car_events(3_000, 4, seed))]
    settings = StreamSettings("cars", key_fields=("car_id",))
    events = archived_events(pa.Table.from_pylist(rows), settings)
    start = int(cut * (len(rows) - 1))
    with TemporaryDirectory() as root:
        archive = write_archive(Path(root), "cars", rows, ("car_id",), partitions=1)
        backfilled = handoff_matches(SPEEDING_BRAKE, archive, "cars.ordered", 0, start,
                                     60.0, None, settings)  # ticks: its 1 minute
    assume(backfilled is not None)
    assert backfilled is not None
    is_quiet = offline_query(SPEEDING_BRAKE, settings).quiet
    assert is_quiet is not None
    quiet = np.asarray(is_quiet(events), bool)
    begun_at: dict[Any, int] = {}
    for i in range(start, len(rows)):
        if quiet[i]:
            begun_at.setdefault(rows[i]["car_id"], rows[i]["ts"])
    expected = [r for r in partition_results(SPEEDING_BRAKE, events, settings)
                if min(b["ts"] for b in r.bindings.values()) < begun_at.get(r.key, math.inf)]
    assert [r.result_id for r in backfilled] == [r.result_id for r in expected]


def derive_and_match(state: PartitionOperators, queries: QuerySet, messages: Sequence[EventBatch],
                     matcher: dict[str, tuple[str, Any]], positions: dict[str, list[int]]
                     ) -> list[Match]:
    """The deriver service on ``messages`` for a handed-off query (each key from its first
    quiet event, :meth:`workers.deriver.Deriver.begun_keys`), its situations matched per
    message as the matcher service does (steps at or before their key's position skipped)."""
    matches: list[Match] = []
    for events in messages:
        state.sync(queries)
        for name, (query_id, operator) in state.operators.items():
            query = queries.compiled[name]
            assert isinstance(query, TPStreamQuery)
            begun = state.begin_keys(name, events, quiet_mask(query, events), query.partition_by)
            records = operator.process(begun) if len(begun) else []
            message = SituationMessage(name, query_id, 0,
                                       cast(list[SituationRecord], list(records)))
            matches += match_situations(matcher, positions, message)
    return matches


def checkpoint(state: PartitionOperators) -> PartitionOperators:
    """``state`` as a restarted worker restores it from its checkpoint (JSON in the table)."""
    return PartitionOperators.decode(json.loads(json.dumps(state.encode())))


@settings(max_examples=scaled(0.2), deadline=None)
@given(seed=st.integers(0, 1_000), begin=st.floats(0.0, 0.6), restart=st.floats(0.0, 1.0),
       stored=st.floats(0.0, 1.0))
def test_a_deriver_restarted_from_any_checkpoint_keeps_the_tpstream_handoff_exact(
    seed: int, begin: float, restart: float, stored: float
) -> None:
    """The deriver begins the query at message X, and its process restarts at message R from
    its checkpoint of message C <= R (C < X: one stored before the query, without it); the
    new process records a second start, C. Whichever start the backfill takes, the latest
    (batch/README.md, "Backfill") or X when it read the status topic before the restart, the
    matcher's matches (one matcher across both derivers, skipping the repeated steps) and the
    backfill's are together every match of the whole partition, each once, value for value."""
    per_message = 5  # events; the archive gives each its own offset (write_archive)
    rows = [{**event, SEQ_FIELD: i, ARCHIVE_SEQ: i, ARCHIVE_OFFSET: i}
            for i, event in enumerate(car_events(1_500, 4, seed))]
    settings = StreamSettings("cars", key_fields=("car_id",))
    table = pa.Table.from_pylist(rows)
    messages = [archived_events(table.slice(first, per_message), settings)
                for first in range(0, len(rows), per_message)]
    start = int(begin * len(messages))
    restarted = start + int(restart * (len(messages) - start))
    resumed = int(stored * restarted)
    deriver = as_deriver(SPEEDING_BRAKE)
    queries = QuerySet("deriver", frozenset({"tpstream"}), time_field="ts")
    queries.add(deriver, 0, handoff=True)
    matcher = {deriver.name: (deriver.query_id, as_matcher(SPEEDING_BRAKE).operator())}
    positions: dict[str, list[int]] = {}

    state = PartitionOperators({}, {})
    online = derive_and_match(state, queries, messages[start:max(resumed, start)], matcher,
                              positions)
    restored = checkpoint(state) if resumed >= start else PartitionOperators.decode(None)
    online += derive_and_match(state, queries, messages[max(resumed, start):restarted], matcher,
                               positions)
    online += derive_and_match(restored, queries, messages[resumed:], matcher, positions)

    whole = {r.result_id: r.to_dict() for r in partition_results(
        SPEEDING_BRAKE, archived_events(table, settings), settings)}
    with TemporaryDirectory() as root:
        archive = write_archive(Path(root), "cars", rows, ("car_id",), partitions=1)
        for taken in {max(start, resumed), start}:
            backfilled = handoff_matches(SPEEDING_BRAKE, archive, "cars.ordered", 0,
                                         taken * per_message, 60.0, None, settings)  # 1 min
            assume(backfilled is not None)
            assert backfilled is not None
            assert {r.result_id: r.to_dict() for r in [*backfilled, *online]} == whole


@pytest.fixture
def pipeline(kafka: KafkaSettings, topic_prefix: str, tmp_path: Path,
             request: pytest.FixtureRequest) -> Iterator[Pipeline]:
    """K-slack, the services that evaluate the language ``request.param`` and the archiver,
    over a stock stream (a car stream for TPStream), no query registered yet."""
    cars = request.param == "tpstream"
    stream = StreamSpec(f"{topic_prefix}.{'cars' if cars else 'stocks'}", partitions=PARTITIONS,
                        key_fields=("car_id",) if cars else ("symbol",))
    env = {"SITUFLOW_ARCHIVE_SEGMENT_ROWS": "200", "SITUFLOW_ARCHIVE_SEGMENT_SECONDS": "1"}
    services = {"sase": ("matcher",), "cogra": ("trends",), "tpstream": ("deriver", "matcher")}
    with Pipeline(stream, slack=30, idle_timeout=2.0, kafka=kafka, work_dir=tmp_path / "pipeline",
                  service_names=("kslack", *services[request.param]), archive=True,
                  extra_env=env) as running:
        yield running


def handed_off_cars() -> list[dict[str, Any]]:
    """Cars for SPEEDING_BRAKE (a few hundred matches over 20 minutes), and a last reading of
    each car two minutes later that no definition holds on: it ends every situation, so the
    services, which never see an end of input, decide every match of ``situflow run``."""
    events = car_events(12_000, 12, 9)
    end = events[-1]["ts"] + 120
    return events + [{"ts": end, "car_id": car, "speed": 0.0, "accel": 0.0}
                     for car in sorted({e["car_id"] for e in events})]


def first_third(blocks: Sequence[Sequence[Any]]) -> int:
    """How many of ``blocks`` hold the first third of their items (at least one block)."""
    total, count = sum(len(block) for block in blocks), 0
    for taken, block in enumerate(blocks, start=1):
        count += len(block)
        if 3 * count >= total:
            return taken
    return len(blocks)


@pytest.mark.slow
@pytest.mark.parametrize("pipeline", ["sase", "cogra", "tpstream"], indirect=True)
def test_submit_with_backfill_while_events_flow_gives_every_result_once(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    """SASE+ through the matcher, COGRA through the trends service, TPStream through the
    deriver and the matcher. The services, like a backfill, never see an end of input: COGRA
    windows that end after the last event are not expected. The stream pauses after its first
    third, while the query is submitted, long enough for K-slack's idle flush (always, not only
    on a loaded machine): the stream is produced in blocks (:func:`in_blocks`), so no event
    becomes late there."""
    kafka = pipeline.kafka
    assert kafka is not None and pipeline.work_dir is not None
    trends = "trends" in pipeline.service_names
    situations = "deriver" in pipeline.service_names
    if situations:
        query = tmp_path / "speeding_brake.tps"
        query.write_text(SPEEDING_BRAKE_TEXT)
        events = handed_off_cars()
        blocks = in_blocks(events, CAR_BLOCK_TICKS)
        sent: list[list[Message]] = [
            [keyed(e, pipeline.stream.key_fields) for e in arrival_order(block, 30, 9)]
            for block in blocks]
    else:
        query = COGRA if trends else rising_query(tmp_path)
        events = stock_events()
        blocks = in_blocks(events, STOCK_BLOCK_TICKS)
        sent = [arrivals(block) for block in blocks]
    name = f"{pipeline.stream.name}-{query.stem}"
    last = events[-1]["ts"]
    expected = {id_of(r): r for r in run_cli(query, events, name, tmp_path)
                if r.get("window_end", last) <= last}
    raw = stream_topics(pipeline.stream)[0].name
    third = first_third(blocks)
    asyncio.run(produce(kafka, raw, [message for block in sent[:third] for message in block]))

    submitting = subprocess.Popen(
        [sys.executable, "-m", "situflow.cli", "query", "submit", str(query), "--name", name,
         "--stream", pipeline.stream.name, "--key-fields", ",".join(pipeline.stream.key_fields),
         "--backfill-from", "0",
         "--archive", str(pipeline.work_dir / "archive")],
        env=cli_env(kafka, SITUFLOW_QUERIES_TOPIC=str(pipeline.registry_topic)),
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # The rest flows once the services evaluate the query, begin it and the backfill runs:
        # the hand-off needs events a window past where each partition began, and a loaded
        # machine may read the registration after a stream produced at once has ended.
        evaluators = [s for s in pipeline.services.values() if s.kind != "kslack"
                      and s.kind != "archiver"]
        wait_until(lambda: all(evaluates(s, name) for s in evaluators), 120,
                   "the services to read the registration")
        # K-slack releases the last slack of the first third only when it flushes, idle.
        wait_until(lambda: total(metrics(pipeline.services["kslack"]),
                                 "situflow_events_out_total") >= sum(map(len, blocks[:third])),
                   120, "K-slack's idle flush of the first third")
        for block in sent[third:]:
            asyncio.run(produce(kafka, raw, block))
        out, err = submitting.communicate(timeout=300)
    finally:
        submitting.kill()
    assert submitting.returncode == 0, err
    backfilled = re.search(r"backfilled (\d+) results", out)
    assert backfilled is not None, out
    # Both sides have a share: the third produced before the submit is the backfill's alone.
    assert 0 < int(backfilled[1]) < len(expected)

    topic = f"{'trends' if trends else 'matches'}.{name}"
    wait_until(lambda: expected.keys() <= deduplicated_results(kafka, topic).keys(), 120,
               "every result of situflow run, from the backfill or the services")
    records = [json.loads(r.value) for r in asyncio.run(read_topic(kafka, topic))]
    ids_of_content: dict[str, set[str]] = defaultdict(set)
    for record in records:
        ids_of_content[json.dumps({k: v for k, v in record.items() if k != "id"},
                                  sort_keys=True)].add(record["id"])
    assert all(len(ids) == 1 for ids in ids_of_content.values())
    assert deduplicated_results(kafka, topic) == expected


def test_submit_with_backfill_refuses_a_query_whose_start_would_change_its_results(
    kafka: KafkaSettings, topic_prefix: str, tmp_path: Path
) -> None:
    """A SASE+ query without a window has no point after which the backfill is complete: the
    hand-off is refused, nothing registered (batch/README.md, "Backfill")."""
    registry = f"{topic_prefix}.queries"
    unbounded = tmp_path / "unbounded.sase"
    unbounded.write_text("PATTERN SEQ(Stock a, Stock b) WHERE [symbol]\n")
    done = situflow("query", "submit", str(unbounded), "--stream", topic_prefix, "--key-fields",
                    "symbol", "--backfill-from", "0",
                    env=cli_env(kafka, SITUFLOW_QUERIES_TOPIC=registry))
    assert done.returncode == 1
    assert "--backfill-from needs a WITHIN window and no CONSUME" in done.stderr
    listed = situflow("query", "list", env=cli_env(kafka, SITUFLOW_QUERIES_TOPIC=registry))
    assert listed.returncode == 0 and listed.stdout == ""
