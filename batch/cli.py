"""The Spark commands of the ``situflow`` CLI (entry point group ``situflow.commands``).

    situflow offline QUERY --archive URI --stream NAME [--from T1] [--to T2] [--output FILE]
                     [--explain] [--master URL] [--indexes auto|none|all|a,b] [--allow-gaps]
                     [--name NAME] [--timeline FILE.html|FILE.svg]
    situflow index build --archive URI --topic T --attributes a,b [--master URL]
    situflow index list --archive URI
    situflow index calibrate --archive URI --topic T
    situflow index blocks --archive URI --topic T
    situflow archive import EVENTS --archive URI --stream NAME [--time-field ...] ...
    situflow archive check --archive URI --topic T [--allow-gaps]

Spark and the jobs load only when a command runs, so ``situflow run`` starts no JVM. Errors
print like ``situflow run``'s: query errors as ``QUERY_FILE:line:col: message`` (exit code 2),
archive errors naming the files and sequence ranges (exit code 1).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeAlias

from batch.report import reported
from situflow.errors import EXIT_INPUT, EXIT_QUERY, QueryError, SituflowError
from situflow.languages import compile_query
from situflow.operator import QueryOptions
from situflow.timeline import Timeline, result_of, timeline_for
from situflow.timeline.option import add_timeline_option, timeline_checked, write_timeline

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
#: What ``situflow offline --timeline`` draws: the events stay inside Spark.
OFFLINE_TIMELINE = ("The events stay inside Spark, so the picture is drawn from the results: "
                    "TPStream situations are the matches' bindings, SASE+ matches are points at "
                    "their result time.")


def register(sub: Subparsers) -> None:
    """Add the Spark commands to the ``situflow`` command line."""
    _add_offline(sub)
    _add_index(sub)
    _add_archive(sub)
    _add_backfill(sub)


def offline_parser() -> argparse.ArgumentParser:
    """A parser of the offline command alone (``batch/submit.py``, for spark-submit)."""
    parser = argparse.ArgumentParser(prog="batch.offline")
    _offline_arguments(parser)
    return parser


def _add_offline(sub: Subparsers) -> None:
    offline = sub.add_parser(
        "offline", help="evaluate a query over the archive on Spark (index-pruned replay)",
        description="Evaluate QUERY over the archived events of a stream on Spark: only the "
                    "replay intervals the indexes leave are read, each replayed with a fresh "
                    "operator. Results are those of 'situflow run' over the same events.")
    _offline_arguments(offline)


def _offline_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", type=Path, metavar="QUERY_FILE")
    p.add_argument("--archive", required=True, metavar="URI",
                   help="the archive root: a path, file:///..., s3://..., gs://..., hdfs://...")
    p.add_argument("--stream", required=True, help="the stream (its topic is STREAM.ordered)")
    p.add_argument("--from", dest="lo", type=int, metavar="T1",
                   help="first event time, in ticks of the stream (default: the archive's first)")
    p.add_argument("--to", dest="hi", type=int, metavar="T2",
                   help="last event time, inclusive (default: the archive's last)")
    p.add_argument("--output", "-o", type=Path, metavar="RESULTS.jsonl",
                   help="write results here instead of standard output")
    p.add_argument("--explain", action="store_true",
                   help="print the plan, then the rows and bytes read against the estimate")
    p.add_argument("--master", help="Spark master URL (default: local[*], or spark-submit's)")
    p.add_argument("--indexes", default="auto", metavar="auto|none|all|a,b",
                   help="which secondary indexes to use: chosen by cost, and possibly none "
                        "(auto); none: full replay of the range, the baseline; all; or the listed "
                        "attributes")
    p.add_argument("--driver-rows", type=int, metavar="N",
                   help="replay on the driver, without starting Spark, when the plan reads at "
                        "most N rows (default: 1,000,000; 0: always on Spark)")
    p.add_argument("--allow-gaps", action="store_true",
                   help="proceed past sequence gaps in the archive, with a warning listing them")
    p.add_argument("--name", help="query name in results (default: the file name)")
    add_timeline_option(p, OFFLINE_TIMELINE)
    p.set_defaults(command=_offline)


def _add_index(sub: Subparsers) -> None:
    index = sub.add_parser("index", help="the archive's indexes (secondary, lightweight)")
    actions = index.add_subparsers(required=True, metavar="ACTION")
    build = actions.add_parser(
        "build", help="build or extend secondary indexes on Spark (incremental)",
        description="Index the attributes of a topic: per attribute, Parquet of (value, seq, ts, "
                    "segment, row group) sorted by value, for the segments added since the "
                    "last build.")
    build.add_argument("--archive", required=True, metavar="URI")
    build.add_argument("--topic", required=True)
    build.add_argument("--attributes", required=True, metavar="a,b,...")
    build.add_argument("--master", help="Spark master URL (default: local[*])")
    build.set_defaults(command=_index_build)
    listing = actions.add_parser("list", help="the secondary indexes and how current they are")
    listing.add_argument("--archive", required=True, metavar="URI")
    listing.set_defaults(command=_index_list)
    calibrate = actions.add_parser(
        "calibrate", help="measure the planner's cost weights on this machine and archive",
        description="Time primary reads, index reads, sorting and the per-interval overhead on "
                    "the topic's own data and write the weights to _index/_calibration.json, "
                    "where 'situflow offline' finds them (thesis §3.5.3).")
    calibrate.add_argument("--archive", required=True, metavar="URI")
    calibrate.add_argument("--topic", required=True)
    calibrate.add_argument("--budget", type=float, default=3.0, metavar="SECONDS",
                           help="about how long to measure (default: 3)")
    calibrate.set_defaults(command=_index_calibrate)
    blocks = actions.add_parser(
        "blocks", help="write the lightweight index (block sidecars) of segments without one")
    blocks.add_argument("--archive", required=True, metavar="URI")
    blocks.add_argument("--topic", required=True)
    blocks.set_defaults(command=_index_blocks)


def _add_archive(sub: Subparsers) -> None:
    archive = sub.add_parser("archive", help="import history into the archive, check it")
    actions = archive.add_subparsers(required=True, metavar="ACTION")
    load = actions.add_parser(
        "import", help="write historical events (JSON lines or Parquet) into the archive",
        description="Write EVENTS into STREAM's archive in the order K-slack would have "
                    "released them, so 'situflow offline' answers queries over them.")
    load.add_argument("events", type=Path, metavar="EVENTS",
                      help="JSON lines (read as 'situflow run' reads them) or .parquet")
    load.add_argument("--archive", required=True, metavar="URI")
    load.add_argument("--stream", required=True)
    load.add_argument("--time-field", default="ts", help="event-time field (default: ts)")
    load.add_argument("--time-unit", type=float, default=1.0, metavar="SECONDS",
                      help="seconds per event-time tick (default: 1; 0.001 for milliseconds)")
    load.add_argument("--type-field", default="type", help="event-type field (default: type)")
    load.add_argument("--id-field", default="id", help="event-id field (default: id)")
    load.add_argument("--key-fields", default="", metavar="a,b",
                      help="partition attributes, comma-separated (default: none)")
    load.add_argument("--partitions", type=int, default=1,
                      help="archive partitions a keyed stream is spread over (default: 1)")
    load.add_argument("--strict", action="store_true", help="stop at the first bad event")
    load.set_defaults(command=_archive_import)
    check = actions.add_parser("check", help="check a topic's segments (gaps, corruption, drift)")
    check.add_argument("--archive", required=True, metavar="URI")
    check.add_argument("--topic", required=True)
    check.add_argument("--allow-gaps", action="store_true",
                       help="report sequence gaps as warnings instead of errors")
    check.set_defaults(command=_archive_check)


def _offline(args: argparse.Namespace) -> int:
    from batch.offline import OfflineRequest, offline

    if not timeline_checked(args.timeline):
        return EXIT_INPUT
    try:
        text = args.query.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        print(f"situflow: cannot read {args.query}: {e}", file=sys.stderr)
        return EXIT_QUERY
    request = OfflineRequest(uri=args.archive, stream=args.stream, query_text=text,
                             name=args.name or args.query.stem, lo=args.lo, hi=args.hi,
                             indexes=_indexes(args.indexes), allow_gaps=args.allow_gaps,
                             driver_rows=args.driver_rows)
    timeline: Timeline | None = None
    with reported("offline", _pushgateway()) as report:
        try:
            if args.timeline:
                timeline = timeline_for(compile_query(text, QueryOptions(name=request.name)),
                                        events=False)
            run = offline(request, master=args.master, output=args.output,
                          explain=args.explain, tap=_recorder(timeline))
        except QueryError as e:
            print(e.render(str(args.query), text), file=sys.stderr)
            return EXIT_QUERY
        except SituflowError as e:
            print(f"situflow: {e}", file=sys.stderr)
            return EXIT_INPUT
        report.rows_read, report.bytes_read = run.rows_read, run.bytes_read
        report.intervals = sum(len(ranges) for ranges in run.intervals.values())
        report.succeeded = True
    if timeline is not None:
        write_timeline(timeline, args.timeline, request.name)
    return 0


def _recorder(timeline: Timeline | None) -> Callable[[str], None] | None:
    """What records each offline result line into ``timeline``."""
    if timeline is None:
        return None
    return lambda line: timeline.add(None, [result_of(json.loads(line))])


def _pushgateway() -> str | None:
    """Where the Spark commands push their run's metrics (``SITUFLOW_PUSHGATEWAY_URL``)."""
    from situflow.settings import ServiceSettings

    return ServiceSettings.from_env().pushgateway_url


def _indexes(value: str) -> str | list[str]:
    if value in ("auto", "none", "all"):
        return value
    return [a.strip() for a in value.split(",") if a.strip()]


def _index_build(args: argparse.Namespace) -> int:
    from batch.index_build import build_indexes
    from batch.session import spark_session

    attributes = [a.strip() for a in args.attributes.split(",") if a.strip()]
    with reported("index-build", _pushgateway()) as report:
        try:
            built = build_indexes(spark_session(args.master), args.archive, args.topic,
                                  attributes)
        except SituflowError as e:
            print(f"situflow: {e}", file=sys.stderr)
            return EXIT_INPUT
        report.results = sum(built.values())
        report.succeeded = True
    for attribute, rows in built.items():
        print(f"{args.topic}/{attribute}: {rows} new index rows")
    return 0


def _index_calibrate(args: argparse.Namespace) -> int:
    from situflow.archive import open_archive
    from situflow.offline.calibration import calibrate

    try:
        weights = calibrate(open_archive(args.archive), args.topic, budget=args.budget)
    except SituflowError as e:
        print(f"situflow: {e}", file=sys.stderr)
        return EXIT_INPUT
    print(f"cost weights: primary page {weights.pio:.4g}, index page {weights.sio:.4g}, "
          f"sort {weights.sort:.4g}, interval {weights.per_interval:.4g}")
    return 0


def _index_blocks(args: argparse.Namespace) -> int:
    from situflow.archive import build_blocks, open_archive

    try:
        written = build_blocks(open_archive(args.archive), args.topic)
    except SituflowError as e:
        print(f"situflow: {e}", file=sys.stderr)
        return EXIT_INPUT
    for path in written:
        print(path)
    print(f"{len(written)} block sidecar(s) written", file=sys.stderr)
    return 0


def _archive_import(args: argparse.Namespace) -> int:
    from situflow.archive.importer import import_events

    keys = [k.strip() for k in args.key_fields.split(",") if k.strip()]
    try:
        report = import_events(args.events, args.archive, args.stream, time_field=args.time_field,
                               time_unit=args.time_unit, key_fields=keys,
                               type_field=args.type_field, id_field=args.id_field,
                               partitions=args.partitions, strict=args.strict)
    except SituflowError as e:
        print(f"situflow: {e}", file=sys.stderr)
        return EXIT_INPUT
    for error in report.rejected[:10]:
        print(f"situflow: skipped {error}", file=sys.stderr)
    if report.rejected:
        print(f"situflow: {len(report.rejected)} bad event(s) skipped", file=sys.stderr)
    spans = ", ".join(f"partition {p}: seq {a}..{b - 1}"
                      for p, (a, b) in sorted(report.partitions.items()))
    print(f"{report.rows} events of {report.stream} imported into {report.topic} ({spans})")
    return 0


def _archive_check(args: argparse.Namespace) -> int:
    from situflow.archive import check_topic, open_archive

    try:
        warnings = check_topic(open_archive(args.archive), args.topic, allow_gaps=args.allow_gaps)
    except SituflowError as e:
        print(f"situflow: {e}", file=sys.stderr)
        return EXIT_INPUT
    for warning in warnings:
        print(f"situflow: warning: {warning}", file=sys.stderr)
    print(f"{args.topic}: ok" + (f" ({len(warnings)} warning(s))" if warnings else ""))
    return 0


def _index_list(args: argparse.Namespace) -> int:
    from batch.index_build import index_listing

    try:
        print(index_listing(args.archive))
    except SituflowError as e:
        print(f"situflow: {e}", file=sys.stderr)
        return EXIT_INPUT
    return 0


def _add_backfill(sub: Subparsers) -> None:
    backfill = sub.add_parser(
        "backfill", help="publish a query's results over the archive to its output topic",
        description="Evaluate QUERY over the archived events of a stream as the services do "
                    "and publish the results to its output topic with the services' ids and "
                    "headers (batch/README.md, Backfill).")
    backfill.add_argument("query", type=Path, metavar="QUERY_FILE")
    backfill.add_argument("--from", dest="lo", type=int, metavar="T1",
                          help="first event time, in ticks (default: the archive's first)")
    backfill.add_argument("--to", dest="hi", type=int, metavar="T2",
                          help="last event time, inclusive (default: the archive's last)")
    backfill.add_argument("--archive", required=True, metavar="URI",
                          help="the archive root: a path, file:///..., s3://..., gs://...")
    backfill.add_argument("--stream", required=True, help="the stream (its topic is "
                                                          "STREAM.ordered)")
    backfill.add_argument("--name", help="query name in results and its output topic (default: "
                                         "the file name, as `situflow query submit`)")
    backfill.set_defaults(command=_backfill)


def _backfill(args: argparse.Namespace) -> int:
    from batch.backfill import run  # Kafka and Arrow load only when the command runs

    return run(args)
