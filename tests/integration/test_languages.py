"""SASE+ and COGRA end to end through a real broker (issue 5): K-slack, matcher and trends
services as processes, both query languages registered with the running services.

The stream: 16 stocks quoted every 10 s (each with probability 0.6) for 5,000 s, more than the
SASE+ query's 1-hour window; every event has an ``id`` and a ``type`` (``Stock``), so results
bind the same event ids as ``situflow run``. The market then closes: one ``Close`` event per
stock at T = 5,000 s, without price and volume (event types have different attributes).
Producers key every message by ``symbol`` (the stream's key attribute, by which both queries
partition). The stocks with an even number are produced as Arrow IPC messages (up to four
quotes of one stock per message, sent when the last is due), the others as JSON messages, each
delayed by 0..K s; so no event arrives more than K behind the latest time seen before it, and
K-slack must restore the time order.

Specified: the services' results in ``matches.<q>`` and ``trends.<q>`` equal ``situflow run``
on the same events in time order, as multisets and after de-duplication by result id.

What is comparable for COGRA: a window's result is emitted when event time passes the window's
end. A service sees event time pass only through events (in the window's Kafka partition);
``situflow run`` also at end of input, where it closes every window still open. The ``Close``
events bring every partition to T, so both emit exactly the windows that end at or before T;
the windows ``situflow run`` emits at end of input (ending after T) are not comparable, and the
service must not have emitted them.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from aiokafka.structs import ConsumerRecord

from situflow.codecs.arrow_events import (
    HEADERS,
    batch_from_events,
    decode_batch,
    encode_batch,
    events_from_batch,
    is_arrow,
)
from situflow.settings import KafkaSettings
from tests.integration.helpers import (
    Message,
    Produced,
    assert_same_results,
    eventually,
    keyed,
    metrics,
    produce,
    read_topic,
    run_cli,
    total,
    unique_prefix,
    wait_until_evaluated,
)
from topics.catalog import SEQ_FIELD, StreamSpec, stream_topics
from workers.up import REPO_ROOT, Pipeline

pytestmark = pytest.mark.integration

SASE = REPO_ROOT / "situflow/examples/rising_stocks.sase"  # WITHIN 1 hour, [symbol]
COGRA = REPO_ROOT / "situflow/examples/rising_trends.cogra"  # 5-minute windows, GROUP-BY symbol
EVALUATORS = {SASE: "matcher", COGRA: "trends"}
KEY_FIELDS = ("symbol",)
SYMBOLS, TICKS, PERIOD, SEED = 16, 500, 10, 1
CLOSE = TICKS * PERIOD
SLACK = 30
ARROW_TICKS = 4  # quotes of one stock per Arrow message at most: they span (4 - 1) * 10 s <= K


def stock_events() -> list[dict[str, Any]]:
    """The quotes in time order (then by symbol), then the close; ids are the positions."""
    rng = np.random.default_rng(SEED)
    price = np.full(SYMBOLS, 100.0)
    events: list[dict[str, Any]] = []
    for tick in range(TICKS):
        price = np.maximum(1.0, price + rng.normal(0.05, 1.0, SYMBOLS))
        quoted = rng.random(SYMBOLS) < 0.6
        # Volumes above 1,000 start the SASE+ query's runs: rare, to keep the results few.
        volume = np.where(rng.random(SYMBOLS) < 0.02, rng.integers(1001, 3000, SYMBOLS),
                          rng.integers(100, 1000, SYMBOLS))
        for s in np.flatnonzero(quoted):
            events.append({"id": len(events), "type": "Stock", "ts": tick * PERIOD,
                           "symbol": symbol(int(s)), "price": round(float(price[s]), 2),
                           "volume": int(volume[s])})
    events += [{"id": len(events) + s, "type": "Close", "ts": CLOSE, "symbol": symbol(s)}
               for s in range(SYMBOLS)]
    return events


def symbol(number: int) -> str:
    return f"S{number:02d}"


def sent_as_arrow(event: dict[str, Any]) -> bool:
    return int(event["symbol"][1:]) % 2 == 0


def arrivals(events: list[dict[str, Any]]) -> list[Message]:
    """The producers' messages in the order they send them (see the module doc)."""
    delay = np.random.default_rng(SEED).integers(0, SLACK + 1, len(events))
    timed: list[tuple[int, int, Message]] = []
    blocks: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for i, event in enumerate(events):
        if sent_as_arrow(event):
            block = event["ts"] // (ARROW_TICKS * PERIOD)
            blocks[event["symbol"], event["type"], block].append(event)
        else:
            timed.append((event["ts"] + int(delay[i]), i, keyed(event, KEY_FIELDS)))
    for block_events in blocks.values():
        key, _ = keyed(block_events[0], KEY_FIELDS)
        value = encode_batch(batch_from_events(block_events))
        timed.append((block_events[-1]["ts"], block_events[0]["id"], (key, value, HEADERS)))
    return [message for _, _, message in sorted(timed, key=lambda item: item[:2])]


@dataclass
class Run(Produced):
    """The produced stream, what `situflow run` gives, and what the pipeline wrote."""

    expected: dict[Path, list[dict[str, Any]]]  # situflow run's result lines per query
    refused: dict[Path, str]  # the log of the service that does not evaluate the query
    results: dict[Path, list[ConsumerRecord[bytes, bytes]]]  # the result topic per query


@pytest.fixture(scope="module")
def run(kafka: KafkaSettings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """One pipeline for the module: both queries registered, every message produced, and
    every message evaluated."""
    prefix = unique_prefix()
    tmp_path = tmp_path_factory.mktemp("languages")
    names = {SASE: f"{prefix}-rising-stocks", COGRA: f"{prefix}-rising-trends"}
    events = stock_events()
    expected = {query: run_cli(query, events, name, tmp_path) for query, name in names.items()}
    stream = StreamSpec(f"{prefix}.stocks", partitions=4, key_fields=KEY_FIELDS)
    with Pipeline(stream, slack=SLACK, idle_timeout=4.0, kafka=kafka,
                  work_dir=tmp_path / "pipeline",
                  service_names=("kslack", *EVALUATORS.values())) as pipeline:
        services = {query: pipeline.services[EVALUATORS[query]] for query in names}
        for query, name in names.items():
            pipeline.submit(query, name)

        def evaluated() -> dict[Path, bool]:
            return {q: names[q] in s.health().get("queries", ()) for q, s in services.items()}
        eventually(lambda: all(evaluated().values()), 20)  # the tests of a refused one say so
        refused = {q: services[q].log_tail() for q, ok in evaluated().items() if not ok}
        messages = arrivals(events)
        asyncio.run(produce(kafka, stream.name, messages))
        wait_until_evaluated(pipeline, len(events))
        results = {query: asyncio.run(read_topic(kafka, f"{topic}.{names[query]}"))
                   for query, topic in ((SASE, "matches"), (COGRA, "trends"))}
        yield Run(pipeline, kafka, events, messages, expected, refused, results)


def test_json_and_arrow_messages_reach_the_evaluators_in_each_partitions_time_order(run: Run) -> None:
    """Every event, from either transport, is in ``<stream>.ordered`` once, in its stock's
    time order, with its attributes (a missing one reads as null); none is late or dead."""
    _, ordered, late, dlq = (spec.name for spec in stream_topics(run.pipeline.stream))
    arrow = [m for m in run.messages if len(m) == 3]
    assert 0 < len(arrow) < len(run.messages), "both transports are exercised"
    kslack = metrics(run.pipeline.services["kslack"])
    assert total(kslack, "situflow_messages_in_total") == len(run.messages)
    assert total(kslack, "situflow_events_in_total") == len(run.events)

    by_symbol: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in asyncio.run(read_topic(run.kafka, ordered)):
        assert is_arrow(record.headers)
        for event in events_from_batch(decode_batch(record.value)):
            del event[SEQ_FIELD]
            by_symbol[event["symbol"]].append({k: v for k, v in event.items() if v is not None})
    want: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in run.events:
        want[event["symbol"]].append(event)
    assert {k: len(v) for k, v in by_symbol.items()} == {k: len(v) for k, v in want.items()}
    for stock, sent in want.items():
        wrong = [(a, b) for a, b in zip(by_symbol[stock], sent, strict=True) if a != b]
        assert not wrong, f"{stock}: {len(wrong)} events differ; first (ordered, sent): {wrong[0]}"
    assert asyncio.run(read_topic(run.kafka, late)) == []
    assert asyncio.run(read_topic(run.kafka, dlq)) == []


def test_sase_results_equal_situflow_run(run: Run) -> None:
    """``matches.<q>`` holds ``situflow run``'s results of the SASE+ query: the same event ids
    bound, the same emission times."""
    assert SASE not in run.refused, f"the matcher does not evaluate the query:\n{run.refused[SASE]}"
    expected = run.expected[SASE]
    assert len(expected) >= 1000, "the data set should exercise the query"
    assert_same_results(run.results[SASE], expected)


def test_cogra_results_equal_situflow_run_on_the_windows_that_end_before_end_of_input(
    run: Run
) -> None:
    """``trends.<q>`` holds ``situflow run``'s results of the COGRA query for every window
    that ends at or before the last event time, and no other (see the module doc)."""
    assert COGRA not in run.refused, f"trends does not evaluate the query:\n{run.refused[COGRA]}"
    comparable = [r for r in run.expected[COGRA] if r["window_end"] <= CLOSE]
    at_end_of_input = len(run.expected[COGRA]) - len(comparable)
    assert len(comparable) >= 1000 and at_end_of_input > 0, "the data set should exercise it"
    assert_same_results(run.results[COGRA], comparable)
