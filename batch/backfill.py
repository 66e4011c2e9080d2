"""``situflow backfill``: offline results of the archive published to a query's output topic
exactly as the services publish them (issue #14, item 5), with the services' key, value,
result id and header, so consumers de-duplicate across both. The evaluation and the publishing
are shared with the hand-off of ``situflow query submit --backfill-from``
(:mod:`workers.handoff`, batch/README.md "Backfill").

The evaluation is the services' own, not the index-pruned Spark job's (:mod:`batch.offline`):
one fresh operator per archive partition over its events, with no end of input. The Spark job
answers like ``situflow run``, which also emits what the end of its input closes (open
windows, open situations); a backfill must not publish those, since online they come later,
complete, under the same result id.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from aiokafka.errors import KafkaError

from batch.report import reported
from situflow.archive import open_archive, ordered_topic, stream_settings
from situflow.errors import EXIT_INPUT, EXIT_QUERY, QueryError, SituflowError
from situflow.settings import KafkaSettings
from workers.handoff import (
    archive_partitions,
    archived_events,
    compile_file,
    publish,
    stream_results,
)


def backfill(query_file: Path, *, archive: str, stream: str, lo: int | None, hi: int | None,
             kafka: KafkaSettings, name: str | None = None) -> int:
    """Evaluate the query on the archived ``<stream>.ordered`` events with ``lo <= time <= hi``
    (fresh state at ``lo``; the archive at URI ``archive``, its stream settings from its
    ``_stream.json``) and publish every result to the query's output topic; the number
    published."""
    source = open_archive(archive)
    topic = ordered_topic(stream)
    settings = stream_settings(source, topic)
    compiled = compile_file(query_file, name, settings)
    partitions = archive_partitions(source, topic, lo, hi)  # checked before anything is sent
    # One segment's events and results at a time: an archive's results need not fit in memory.
    results = (result for partition in partitions
               for result in stream_results(
                   compiled, (archived_events(rows, settings)
                              for rows in source.read_segments(topic, partition, lo=lo, hi=hi)
                              if rows.num_rows),
                   settings))
    return asyncio.run(publish(kafka, compiled, results))


def run(args: argparse.Namespace) -> int:
    """``situflow backfill``: one line saying how many results went where."""
    from situflow.settings import ServiceSettings

    try:
        settings = ServiceSettings.from_env()
    except SituflowError as exc:
        print(f"situflow backfill: {exc}", file=sys.stderr)
        return EXIT_INPUT
    with reported("backfill", settings.pushgateway_url) as report:
        try:
            count = backfill(args.query, archive=args.archive, stream=args.stream, lo=args.lo,
                             hi=args.hi, kafka=settings.kafka, name=args.name)
        except QueryError as exc:
            print(exc.render(str(args.query), args.query.read_text(encoding="utf-8")),
                  file=sys.stderr)
            return EXIT_QUERY
        except (OSError, SituflowError, KafkaError) as exc:
            print(f"situflow backfill: {exc}", file=sys.stderr)
            return EXIT_INPUT
        report.results = count
        report.succeeded = True
    print(f"published {count} results of {args.name or args.query.stem}")
    return 0
