"""``situflow backfill`` evaluates the archive one segment at a time and hands the publisher a
stream: the results are those of one operator over each whole partition (no Kafka here: the
publisher is replaced; tests/integration/test_backfill.py publishes)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import batch.backfill
from situflow.archive import open_archive, stream_settings
from situflow.settings import KafkaSettings
from tests.batch.test_offline import EXAMPLES, archive, stocks
from workers.handoff import archived_events, compile_file, partition_results


def test_backfill_streams_the_results_of_each_whole_partition(tmp_path, monkeypatch):
    archive(tmp_path, "stocks", stocks(1_000, spacing=20, volume=1_500), key_fields=("symbol",),
            segment_rows=100)
    query = EXAMPLES / "rising_stocks.sase"
    source = open_archive(str(tmp_path))
    settings = stream_settings(source, "stocks.ordered")
    assert len(source.segments("stocks.ordered", 0)) == 10
    compiled = compile_file(query, None, settings)
    lo, hi = 2_000, 15_000
    expected = [r.result_id for p in source.partitions("stocks.ordered") for r in partition_results(
        compiled, archived_events(source.read("stocks.ordered", p, lo=lo, hi=hi), settings),
        settings)]
    assert expected
    published: list[str] = []

    async def publish(kafka: KafkaSettings, compiled: Any, results: Iterable[Any]) -> int:
        assert isinstance(results, Iterator)
        published.extend(r.result_id for r in results)
        return len(published)

    monkeypatch.setattr(batch.backfill, "publish", publish)
    assert batch.backfill.backfill(query, archive=str(tmp_path), stream="stocks", lo=lo, hi=hi,
                                   kafka=KafkaSettings()) == len(expected)
    assert published == expected
