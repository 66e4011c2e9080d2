"""The Kafka commands of ``situflow``: the pipeline, the demo, one service, the query registry,
the topics.

    situflow serve {kslack,deriver,matcher,trends,archiver}
    situflow up [--stream cars] [--key-fields car_id | --unpartitioned] [--slack K] [--query FILE ...]
    situflow demo [--events N] [--cars N] [--local]
    situflow query submit QUERY_FILE [--name NAME] [--stream NAME] [--key-fields a,b | --unpartitioned]
    situflow query list [--json]
    situflow query delete NAME
    situflow topics create [--stream NAME ...] [--partitions N] [--replication-factor N]
    situflow status [--json] [--stale SECONDS] [--interval SECONDS] [--prune]

``situflow/cli.py`` adds them with :func:`register`, the entry point ``kafka`` of the group
``situflow.commands`` (pyproject.toml): the core never imports this package. Each command
imports its Kafka modules when it runs, so ``situflow run`` does not load aiokafka or the
settings schema, and ``--help`` works without the kafka extra.

Every command reads :meth:`situflow.settings.ServiceSettings.from_env` when it runs, connects
with its ``kafka`` (``KAFKA_BOOTSTRAP_SERVERS`` and the SASL/TLS variables) and retries an
unreachable broker with backoff for ``--wait`` seconds, then fails with one line and exit
code 1. ``situflow serve`` runs one service's Faust worker in this process, settings from the
environment and its log level from ``SITUFLOW_LOG_LEVEL``: what the image's containers run, and
how ``situflow up`` starts its services (:mod:`workers.up`). A query error prints
``QUERY_FILE:line:col: message`` and exits 2, as ``situflow check`` does; so does a query the
stream does not allow (``query submit`` checks it as the services will:
:mod:`topics.query_checks`), as ``QUERY_FILE:1:1: message``. ``query list`` shows a query that
failed in the services (:mod:`workers.failures`) as ``failed`` with its last error and when.
``query submit`` of the query a name already holds (the same query id and stream) prints
``unchanged`` and writes nothing, so a deployment's registration job may run it at every
upgrade. The registry topic is ``situflow.queries`` unless ``SITUFLOW_QUERIES_TOPIC`` names another
(:mod:`topics.registry`). ``status`` (:mod:`workers.status`) finds the workers on the services
topic (``SITUFLOW_SERVICES_TOPIC``) and exits 1 unless everything is healthy.

To add a command: a handler ``_<command>(args) -> int`` wrapped in :func:`_kafka_command` if
it talks to Kafka, and its parser in :func:`register` (``parents=[_connection_options()]``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from situflow.errors import EXIT_INPUT, EXIT_QUERY, QueryError, SituflowError

if TYPE_CHECKING:
    from situflow.settings import KafkaSettings, ServiceSettings

T = TypeVar("T")
Handler = Callable[[argparse.Namespace], int]
EXIT_FAILURE = EXIT_INPUT
DEFAULT_WAIT = 10.0
#: Seconds after which ``situflow status`` calls a worker's announcement stale (3 missed).
DEFAULT_STALE = 30.0
#: The services ``situflow serve`` runs, each the module ``workers.<service>``.
SERVICES = ("kslack", "deriver", "matcher", "trends", "archiver")
#: (events, cars) of ``situflow demo --local`` and of ``situflow demo`` through the services.
LOCAL_DEMO_SIZE, PIPELINE_DEMO_SIZE = (1_000_000, 2_000), (20_000, 100)


class CommandError(SituflowError):
    """Ends a command with ``situflow: <message>`` on standard error and ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``serve``, ``up``, ``query`` and ``topics`` to the ``situflow`` command parser, and
    make ``demo`` run through the services (``demo --local``: the core's in-process demo)."""
    connection = _connection_options()

    serve = subparsers.add_parser(
        "serve", help="run one service's worker in this process, until it is stopped",
        description="Run the Faust worker of one situflow service in this process: settings "
                    "from SITUFLOW_* and KAFKA_* (docs/settings.md), log level from "
                    "SITUFLOW_LOG_LEVEL. Several workers of a service share its partitions.")
    serve.add_argument("service", choices=SERVICES,
                       help="kslack (orders the stream), deriver (TPStream situations), matcher "
                            "(TPStream and SASE+ matches), trends (COGRA), archiver (Parquet)")
    serve.set_defaults(command=_serve)

    up = subparsers.add_parser(
        "up", help="run a local broker (unless KAFKA_BOOTSTRAP_SERVERS names one), the topics "
                   "and every service, until Ctrl-C")
    up.add_argument("--stream", default="cars", help="input stream (topic) name")
    up.add_argument("--key-fields", default="car_id", help="partition attributes, comma-separated")
    up.add_argument("--unpartitioned", action="store_true",
                    help="a stream without key attributes: TPStream queries only, in batches "
                         "(thesis 5.6.3); its input topic has one partition")
    up.add_argument("--time-field", default="ts")
    up.add_argument("--time-unit", type=float, default=1.0, metavar="SECONDS",
                    help="seconds per event-time tick (default: 1; 0.001 for milliseconds): "
                         "ISO-8601 times and query durations are converted with it")
    up.add_argument("--partitions", type=int, default=4)
    up.add_argument("--slack", type=int, default=5, help="K, in event-time units")
    up.add_argument("--idle-timeout", type=float, default=5.0, help="seconds")
    up.add_argument("--port", type=int, default=9092,
                    help="port of the embedded broker on 127.0.0.1 (default: 9092)")
    up.add_argument("--query", type=Path, action="append", default=[],
                    help="a query file to register at start (repeatable)")
    up.add_argument("--work-dir", type=Path, help="data and logs (default: a temp dir)")
    up.add_argument("--archive", action="store_true",
                    help="also run the archiver (Parquet segments under WORK_DIR/archive)")
    up.set_defaults(command=_up)

    demo = subparsers.choices["demo"]
    demo.description = (
        "The aggressive-drivers query through the services: a local broker and every service "
        "(or the pipeline of 'situflow up' when KAFKA_BOOTSTRAP_SERVERS is set), a generated "
        "car stream produced to 'cars', the matches read from 'matches.aggressive_drivers'.")
    demo.add_argument("--local", action="store_true",
                      help="evaluate in this process instead, without Kafka")
    demo.add_argument("--slack", type=int, default=5,
                      help="K of the pipeline, and the most an event is delayed")
    demo.add_argument("--timeout", type=float, default=120.0,
                      help="seconds to wait for every match")
    local_demo: Handler = demo.get_default("command")

    def run_demo(args: argparse.Namespace) -> int:
        # The services take seconds to start; the in-process demo takes a larger stream.
        events, cars = (LOCAL_DEMO_SIZE if args.local else PIPELINE_DEMO_SIZE)
        args.events, args.cars = args.events or events, args.cars or cars
        return local_demo(args) if args.local else _demo(args)

    demo.set_defaults(command=run_demo, events=None, cars=None)

    query = subparsers.add_parser("query", help="submit, list or delete the queries services run")
    actions = query.add_subparsers(required=True, metavar="ACTION")
    submit = actions.add_parser("submit", parents=[connection],
                                help="validate a query file and register it (a no-op if "
                                     "the name already holds it)")
    submit.add_argument("query", type=Path, metavar="QUERY_FILE")
    submit.add_argument("--name", help="registered name, also in the output topic's name "
                                       "(default: the file name without extension)")
    # Defaults of the environment are read when the command runs (the schema costs an import).
    submit.add_argument("--stream", help="the stream the services evaluate it over (default: "
                                         "$SITUFLOW_STREAM, else events)")
    submit.add_argument("--key-fields",
                        help="the stream's key attributes, comma-separated, which the query "
                             "must partition by (default: $SITUFLOW_KEY_FIELDS)")
    submit.add_argument("--unpartitioned", action="store_true",
                        help="the stream has no key attributes: TPStream queries only "
                             "(default: $SITUFLOW_UNPARTITIONED=1)")
    submit.add_argument("--time-unit", type=float, metavar="SECONDS",
                        help="the stream's seconds per event-time tick, which converts the "
                             "query's durations (default: $SITUFLOW_TIME_UNIT, else 1)")
    submit.add_argument("--backfill-from", type=int, metavar="T",
                        help="also publish the results of the archived events from time T up "
                             "to where the services begin the query (batch/README.md, Backfill)")
    submit.add_argument("--archive", metavar="URI", help="the archive the backfill reads "
                                                         "(default: $SITUFLOW_ARCHIVE_DIR)")
    submit.set_defaults(command=_query_submit)
    listing = actions.add_parser("list", parents=[connection], help="print the registered queries")
    listing.add_argument("--json", action="store_true",
                         help="one JSON record per line, with the query text")
    listing.set_defaults(command=_query_list)
    delete = actions.add_parser("delete", parents=[connection], help="unregister a query")
    delete.add_argument("name", metavar="NAME")
    delete.set_defaults(command=_query_delete)

    topics = subparsers.add_parser("topics", help="the Kafka topics of a deployment")
    topic_actions = topics.add_subparsers(required=True, metavar="ACTION")
    create = topic_actions.add_parser(
        "create", parents=[connection],
        help="create the catalog's topics that do not exist yet (existing ones are left alone)",
    )
    create.add_argument("--stream", action="append", default=[], metavar="NAME",
                        help="an input stream: creates NAME, NAME.ordered, NAME.late, NAME.dlq "
                             "(repeatable)")
    create.add_argument("--partitions", type=int, default=4, metavar="N",
                        help="partitions of stream topics and 'situations' (default: 4)")
    create.add_argument("--situations", default="situations", metavar="NAME",
                        help="the situations topic (default: situations; one per stream, "
                             "as SITUFLOW_SITUATIONS_TOPIC names it)")
    create.add_argument("--time-field", default="ts", metavar="NAME", help="event-time field (default: ts)")
    create.add_argument("--unpartitioned", action="store_true",
                        help="the streams have no key attributes: NAME and NAME.late get one "
                             "partition, NAME.ordered --partitions (thesis 5.6.3)")
    create.add_argument("--replication-factor", type=int, default=1, metavar="N")
    create.set_defaults(command=_topics_create)

    status = subparsers.add_parser(
        "status", parents=[connection],
        help="one screen about a running deployment: each service's workers, partitions, lag, "
             "rates and health, and the queries; exit code 1 unless all is healthy")
    status.add_argument("--json", action="store_true", help="the report as one JSON object")
    status.add_argument("--stale", type=float, default=DEFAULT_STALE, metavar="SECONDS",
                        help=f"a worker whose last announcement is older is stale (default: "
                             f"{DEFAULT_STALE:g}; workers announce every 10 s)")
    status.add_argument("--interval", type=float, default=1.0, metavar="SECONDS",
                        help="seconds between the two reads of /metrics the rates come from "
                             "(default: 1)")
    status.add_argument("--prune", action="store_true",
                        help="then delete the announcements of the stale workers whose pages do "
                             "not answer (dead without a clean stop, not coming back where they "
                             "ran)")
    status.set_defaults(command=_status)


def _connection_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--wait", type=float, default=DEFAULT_WAIT, metavar="SECONDS",
                         help=f"keep retrying an unreachable broker this long "
                              f"(default: {DEFAULT_WAIT:g})")
    return options


def _kafka_command(handler: Handler) -> Handler:
    """Turn the failures a user can fix into one line and an exit code, not a traceback."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except CommandError as exc:
            print(f"situflow: {exc}", file=sys.stderr)
            return exc.exit_code
        except ModuleNotFoundError as exc:
            print(f"situflow: this command needs the situflow repository or image with the "
                  f"kafka extra (pip install -e '.[kafka]'): {exc}", file=sys.stderr)
            return EXIT_FAILURE

    return run


def _with_broker(args: argparse.Namespace, operation: Callable[[KafkaSettings], Awaitable[T]]) -> T:
    """Run ``operation`` against the broker of the environment, retrying while it is unreachable."""
    from aiokafka.errors import KafkaError

    from topics.create import TopicCreationError

    settings = _settings().kafka
    # This command reports an unreachable broker itself, once; aiokafka would log every attempt.
    client_log = logging.getLogger("aiokafka")
    level = client_log.level
    client_log.setLevel(logging.CRITICAL)
    try:
        return asyncio.run(_retrying(settings, operation, args.wait))
    except (KafkaError, TopicCreationError) as exc:  # e.g. refused credentials: no use retrying
        raise CommandError(f"Kafka at {settings.bootstrap_servers}: {exc}") from None
    finally:
        client_log.setLevel(level)


def _settings() -> ServiceSettings:
    """The settings of the environment; a command stops on one that cannot work."""
    from situflow.settings import ServiceSettings, SettingsError

    try:
        return ServiceSettings.from_env()
    except SettingsError as exc:
        raise CommandError(str(exc)) from None


async def _retrying(
    settings: KafkaSettings, operation: Callable[[KafkaSettings], Awaitable[T]], wait: float
) -> T:
    from topics.connection import BrokerUnreachable, retry_unreachable

    try:
        return await retry_unreachable(settings, operation, wait)
    except BrokerUnreachable as exc:
        raise CommandError(str(exc)) from None


@_kafka_command
def _serve(args: argparse.Namespace) -> int:
    import importlib

    level = _settings().log_level  # a setting that cannot work stops here, by name
    service = importlib.import_module(f"workers.{args.service}")
    # Faust's command line, which the service's main() enters, reads the process's arguments:
    # these are what `python -m workers.<service> worker -l LEVEL` gives it.
    sys.argv[1:] = ["worker", "-l", level]
    service.main()  # the worker ends the process when it stops
    return 0


@_kafka_command
def _up(args: argparse.Namespace) -> int:
    from workers.up import up

    _settings()  # a setting that cannot work stops here, by name, before anything starts
    return up(args)


@_kafka_command
def _demo(args: argparse.Namespace) -> int:
    from workers.demo import demo

    _settings()
    return demo(args)


@_kafka_command
def _query_submit(args: argparse.Namespace) -> int:
    from topics.catalog import StreamSpec
    from topics.registry import InvalidQueryName, QueryRefused, submit

    try:
        text = args.query.read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"cannot read {args.query}: {exc.strerror}", EXIT_QUERY) from None
    except UnicodeDecodeError as exc:
        raise CommandError(f"{args.query}: not UTF-8 text (byte {exc.start})", EXIT_QUERY) from None
    name = args.name or args.query.stem
    env = _settings()
    keys = env.key_fields if args.key_fields is None else \
        tuple(f.strip() for f in args.key_fields.split(",") if f.strip())
    try:
        stream = StreamSpec(args.stream or env.stream, key_fields=keys,
                            unpartitioned=args.unpartitioned or env.unpartitioned,
                            time_unit=env.time_unit if args.time_unit is None else args.time_unit)
    except ValueError as exc:
        raise CommandError(str(exc), EXIT_QUERY) from None
    if args.backfill_from is not None:
        return _submit_with_backfill(args, stream, name, text)
    try:
        record = _with_broker(args, lambda kafka: submit(
            kafka, text, name=name, source_path=str(args.query), stream=stream))
    except QueryError as exc:
        print(exc.render(str(args.query), text), file=sys.stderr)
        return EXIT_QUERY
    except QueryRefused as exc:
        print(f"{args.query}:1:1: {exc}", file=sys.stderr)
        return EXIT_QUERY
    except InvalidQueryName as exc:
        raise CommandError(f"{exc}; choose another with --name", EXIT_QUERY) from None
    # submit returns the record already registered (read back, so with an offset) when the
    # name holds this query: nothing was written.
    state = "unchanged" if record.offset >= 0 else "registered"
    print(f"{state} {record.name}: {record.language} query {record.query_id}, "
          f"results in {record.output_topic}")
    return 0


def _submit_with_backfill(args: argparse.Namespace, stream: Any, name: str, text: str) -> int:
    """``query submit --backfill-from``: register, then hand off (batch/backfill.py)."""
    import dataclasses

    from situflow.archive import open_archive
    from workers.handoff import submit_with_backfill

    env = _settings()
    stream = dataclasses.replace(stream, time_field=env.time_field)
    try:
        record, published = submit_with_backfill(
            args.query, stream=stream, archive=open_archive(args.archive or env.archive_dir),
            lo=args.backfill_from, kafka=env.kafka, name=name)
    except QueryError as exc:
        print(exc.render(str(args.query), text), file=sys.stderr)
        return EXIT_QUERY
    except SituflowError as exc:  # refused, or the hand-off cannot complete: says why
        raise CommandError(str(exc)) from None
    print(f"registered {record.name}: {record.language} query {record.query_id}, results in "
          f"{record.output_topic}; backfilled {published} results from {args.backfill_from}")
    return 0


@_kafka_command
def _query_list(args: argparse.Namespace) -> int:
    import json
    from datetime import UTC, datetime

    from topics.registry import encode_record, list_queries, read_statuses

    async def read(kafka: KafkaSettings) -> tuple[dict[str, Any], dict[str, Any]]:
        return await list_queries(kafka), await read_statuses(kafka)

    queries, statuses = _with_broker(args, read)
    records = [queries[name] for name in sorted(queries)]
    # A status of an older text of the name is not this query's.
    failed = {name: status for name, status in statuses.items()
              if name in queries and status.query_id == queries[name].query_id}
    if args.json:
        for record in records:
            value = json.loads(encode_record(record)[1])
            status = failed.get(record.name)
            if status is not None:
                value["status"] = {"state": status.state, "error": status.error,
                                   "at": status.at, "service": status.service}
            print(json.dumps(value))
        return 0
    width = max((len(r.name) for r in records), default=0)
    for record in records:
        line = f"{record.name:<{width}}  {record.language:<8}  {record.query_id}"
        status = failed.get(record.name)
        if status is not None:
            at = datetime.fromtimestamp(status.at / 1000, UTC).isoformat(timespec="seconds")
            line += f"  failed at {at} in {status.service}: {status.error}"
        print(line)
    return 0


@_kafka_command
def _query_delete(args: argparse.Namespace) -> int:
    from topics.registry import QueryNotRegistered, delete

    try:
        record = _with_broker(args, lambda kafka: delete(kafka, args.name))
    except QueryNotRegistered as exc:
        raise CommandError(str(exc)) from None
    print(f"deleted {record.name}; {record.output_topic} keeps its results")
    return 0


@_kafka_command
def _topics_create(args: argparse.Namespace) -> int:
    from topics.catalog import Catalog, StreamSpec, TopicRole
    from topics.create import create_topics
    from topics.registry import registry_spec

    try:
        catalog = Catalog(
            streams=tuple(StreamSpec(name, time_field=args.time_field, partitions=args.partitions,
                                     unpartitioned=args.unpartitioned)
                          for name in args.stream),
            situations_partitions=args.partitions,
            replication_factor=args.replication_factor,
            situations=args.situations,
            services=_settings().services_topic,
        )
        specs = [registry_spec(replication_factor=args.replication_factor)
                 if spec.role is TopicRole.QUERIES else spec for spec in catalog.topics()]
    except ValueError as exc:
        raise CommandError(str(exc), EXIT_QUERY) from None
    created = set(_with_broker(args, lambda kafka: create_topics(kafka, specs)))
    for spec in specs:
        state = "created" if spec.name in created else "exists"
        plural = "" if spec.partitions == 1 else "s"
        print(f"{state:<8} {spec.name} ({spec.partitions} partition{plural})")
    return 0


@_kafka_command
def _status(args: argparse.Namespace) -> int:
    import json

    from topics.announcements import forget
    from workers.status import collect, render

    env = _settings()
    report = _with_broker(args, lambda kafka: collect(
        kafka, services_topic=env.services_topic, queries_topic=env.queries_topic,
        interval=args.interval, stale=args.stale))
    print(json.dumps(report.to_json(), indent=2) if args.json else render(report))
    if args.prune and report.gone:
        _with_broker(args, lambda kafka: forget(kafka, env.services_topic, report.gone))
        print(f"situflow: pruned {', '.join(report.gone)}", file=sys.stderr)
    return 0 if report.healthy else EXIT_FAILURE
