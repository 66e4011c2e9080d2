"""Run the pipeline locally: broker, topics, and the services as processes (``situflow up``).

    situflow up --stream cars --key-fields car_id --slack 5 \\
        --query situflow/examples/aggressive_drivers.tps

starts the embedded tansu broker (unless ``KAFKA_BOOTSTRAP_SERVERS`` names a Kafka), creates
the catalog's topics *before* any service subscribes (tansu would otherwise auto-create them
with its own partition count, and Faust would stop with PartitionsMismatch), then runs the
services as child processes until Ctrl-C or SIGTERM: K-slack, then the deriver and the matcher
(TPStream: kslack → deriver → situations → matcher, thesis §5.6.5; SASE+: kslack → matcher) and
trends (COGRA), and with ``--archive`` the archiver. With
``--unpartitioned`` the stream has no key attributes and runs TPStream queries only, partitioned
or not (thesis §5.6.3: K-slack cuts the one global order into batches, derivers derive them in
parallel, one matcher per query merges them; :mod:`workers.kslack`), so there is no trends
service.

Each child gets its own data directory, a free web port on 127.0.0.1 (``/metrics``,
``/health``) and a log file, and dies with the launcher's thread (``setpriv --pdeathsig``)
so that a killed launcher leaves no service behind. :class:`Pipeline` is the same thing as a
context manager, for tests and the demo.

``situflow up`` supervises its services: one that exits, however it exits, starts again on its
data directory and web port after a :class:`Backoff` delay, and a line on standard error says
which service exited, how, where its log is and when it restarts; the broker and the other
services are left alone (their consumer groups rebalance, as when a worker fails over). The
children run in process groups of their own, so a Ctrl-C in the terminal reaches the launcher
alone, which stops the services first, all at once (SIGTERM, SIGKILL after a grace of
:data:`STOP_GRACE` seconds), and the broker last: a service stopping while the broker is gone
hangs on its last commit. A second Ctrl-C kills everything at once. :class:`Pipeline` restarts
nothing unless given ``restarts``: the tests that kill services on purpose restart them
themselves, at the moment they choose.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from situflow.languages import compile_query
from situflow.settings import ENV_BOOTSTRAP, KafkaSettings, ServiceSettings
from topics.catalog import (
    QUERIES,
    SERVICES,
    SITUATIONS,
    Catalog,
    QueryOutput,
    StreamSpec,
    TopicRole,
    query_topic,
)
from topics.create import create_topics
from topics.registry import QueryRecord, delete, registry_spec, submit
from workers.broker import EmbeddedBroker, free_port

REPO_ROOT = Path(__file__).resolve().parents[1]
#: The services evaluating each query language, and its output topics.
EVALUATORS = {"tpstream": (("deriver", "matcher"), TopicRole.MATCHES),
              "sase": (("matcher",), TopicRole.MATCHES),
              "cogra": (("trends",), TopicRole.TRENDS)}
#: Every evaluating service.
EVALUATING = tuple(sorted({name for services, _ in EVALUATORS.values() for name in services}))
#: Seconds a stopping service gets between SIGTERM and SIGKILL (a Faust worker needs 1-2).
STOP_GRACE = 5.0
#: How many lines of a service's log the line about its exit quotes.
LOG_TAIL_LINES = 10


class PipelineError(RuntimeError):
    """A service did not become ready or exited; the message ends with its log."""


@dataclass(frozen=True)
class Backoff:
    """When a supervised service that exited starts again: ``first`` seconds after its exit,
    doubling with every exit in a row up to ``ceiling``; an exit after ``healthy`` seconds of
    running starts the count again. A service that exits at once, again and again, thus costs a
    start every ``ceiling`` seconds, never a busy loop.

    >>> [Backoff(first=1, ceiling=30).delay(exits) for exits in range(1, 8)]
    [1, 2, 4, 8, 16, 30, 30]
    """

    first: float = 1.0
    ceiling: float = 30.0
    healthy: float = 60.0

    def delay(self, exits: int) -> float:
        """Seconds before the restart that follows the ``exits``-th exit in a row (from 1)."""
        return min(self.ceiling, self.first * 2 ** min(exits - 1, 32))


@dataclass
class ServiceProcess:
    """One running service: its process, web port and log file."""

    name: str
    process: subprocess.Popen[bytes]
    web_port: int
    log_path: Path
    kind: str = ""  # the service (module workers.<kind>); name tells replicas apart
    started: float = field(default_factory=time.monotonic)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def get(self, path: str, timeout: float = 10.0) -> bytes:
        with urllib.request.urlopen(self.url + path, timeout=timeout) as response:
            return bytes(response.read())

    def health(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.get("/health")))
        except (OSError, ValueError):
            return {"ready": False}

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def exit_status(self) -> str:
        """How the process ended: ``exited with code 1``, ``was killed by SIGKILL``."""
        code = self.process.returncode
        if code is not None and code < 0:
            try:
                return f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"was killed by signal {-code}"
        return f"exited with code {code}"


@dataclass
class Pipeline:
    """Broker + topics + services; ``with Pipeline(...) as p:`` waits until all are ready.

    The services follow the query registry ``registry_topic`` (default
    ``situflow.queries.<stream>``), pass situations through ``situations_topic`` (default
    ``situations.<stream>``) and announce themselves on ``services_topic`` (default
    ``situflow.services.<stream>``), so that pipelines sharing a broker, as tests do, keep their
    queries, situations and workers apart. ``query_file``, if given, is submitted to the registry before
    the services start. ``services`` defaults to K-slack plus the evaluating services of
    ``query_file``'s language, or every service when there is no query file (an unpartitioned
    stream's: the deriver and the matcher).
    Each service logs to ``<work_dir>/<service>.log`` at ``SITUFLOW_LOG_LEVEL`` (default
    ``warn``; ``info`` shows rebalances and the seeks of restored partitions).
    With ``restarts``, :meth:`supervise` restarts the services that exited (module docstring).
    """

    stream: StreamSpec
    query_file: Path | None = None
    slack: int = 0
    idle_timeout: float = 5.0
    kafka: KafkaSettings | None = None
    work_dir: Path | None = None
    ready_timeout: float = 60.0
    extra_env: dict[str, str] = field(default_factory=dict)
    #: Name of the query in results and in ``matches.<name>``; default: the file's stem.
    name: str | None = None
    registry_topic: str | None = None
    situations_topic: str | None = None
    services_topic: str | None = None
    service_names: tuple[str, ...] = ()
    #: Also run the archiver (Parquet segments under ``<work_dir>/archive``).
    archive: bool = False
    #: Workers per service, all in the service's consumer group (they share its partitions);
    #: a mapping gives some services other counts than 1.
    replicas: int | dict[str, int] = 1
    #: The embedded broker to start when ``kafka`` is None and the environment names none.
    broker: EmbeddedBroker | None = None
    #: Restart the services that exit (:meth:`supervise`); None: an exited service stays down.
    restarts: Backoff | None = None
    services: dict[str, ServiceProcess] = field(default_factory=dict, init=False)
    _broker: EmbeddedBroker | None = field(default=None, init=False)
    _own_dir: bool = field(default=False, init=False)
    #: Per supervised service: its exits in a row, each after less than ``restarts.healthy``.
    _exits: dict[str, int] = field(default_factory=dict, init=False)
    #: The exited services waiting for their restart, and when it is due (monotonic time).
    _restart_at: dict[str, float] = field(default_factory=dict, init=False)
    #: Set by :meth:`stop` and :meth:`kill`: nothing restarts any more.
    stopping: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if self.registry_topic is None:
            self.registry_topic = f"{QUERIES}.{self.stream.name}"
        if self.situations_topic is None:
            self.situations_topic = f"{SITUATIONS}.{self.stream.name}"
        if self.services_topic is None:
            self.services_topic = f"{SERVICES}.{self.stream.name}"
        if not self.service_names:
            evaluators = EVALUATORS[self.language][0] if self.query_file else \
                EVALUATORS["tpstream"][0] if self.stream.unpartitioned else EVALUATING
            self.service_names = ("kslack", *evaluators)
        if self.archive and "archiver" not in self.service_names:
            self.service_names = (*self.service_names, "archiver")

    @property
    def query_name(self) -> str:
        assert self.query_file is not None, "the pipeline has no query file"
        return self.name or self.query_file.stem

    @property
    def language(self) -> str:
        assert self.query_file is not None, "the pipeline has no query file"
        return compile_query(self.query_file.read_text()).language

    @property
    def output_topic(self) -> str:
        return query_topic(QueryOutput(self.query_name, role=EVALUATORS[self.language][1])).name

    @property
    def catalog(self) -> Catalog:
        assert self.situations_topic is not None and self.services_topic is not None
        return Catalog(streams=(self.stream,), situations=self.situations_topic,
                       situations_partitions=self.stream.partitions,
                       services=self.services_topic)

    def start(self) -> Self:
        try:
            if self.kafka is None:
                if os.environ.get(ENV_BOOTSTRAP):
                    self.kafka = KafkaSettings.from_env()
                else:
                    self._broker = (self.broker or EmbeddedBroker()).start()
                    self.kafka = KafkaSettings(self._broker.bootstrap_servers)
            if self.work_dir is None:
                self.work_dir = Path(tempfile.mkdtemp(prefix="situflow-up-"))
                self._own_dir = True
            self.work_dir.mkdir(parents=True, exist_ok=True)
            specs = [spec for spec in self.catalog.topics() if spec.name != QUERIES]
            asyncio.run(create_topics(self.kafka, [*specs, registry_spec(self.registry_topic)]))
            if self.query_file is not None:
                self.submit(self.query_file, self.query_name)
            for kind in self.service_names:
                replicas = self.replicas if isinstance(self.replicas, int) else \
                    self.replicas.get(kind, 1)
                for replica in range(1, replicas + 1):
                    self.start_service(kind, kind if replica == 1 else f"{kind}-{replica}")
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def submit(self, query_file: Path, name: str | None = None) -> QueryRecord:
        """Register a query (as ``situflow query submit``); running services pick it up."""
        assert self.kafka is not None
        return asyncio.run(submit(self.kafka, query_file.read_text(),
                                  name=name or query_file.stem, source_path=str(query_file),
                                  topic=self.registry_topic, stream=self.stream))

    def delete(self, name: str) -> None:
        """Unregister a query (as ``situflow query delete``); running services stop it."""
        assert self.kafka is not None
        asyncio.run(delete(self.kafka, name, topic=self.registry_topic))

    def start_service(self, kind: str, name: str | None = None,
                      port: int | None = None) -> ServiceProcess:
        """Start (or restart) one worker of service ``kind`` (``workers.<kind>``) with its own
        data dir and web port (default: a free one); ``name`` (default: ``kind``) tells
        replicas apart."""
        assert self.kafka is not None and self.work_dir is not None
        name = name or kind
        port = port or free_port()
        settings = ServiceSettings(
            stream=self.stream.name, time_field=self.stream.time_field,
            time_unit=self.stream.time_unit, key_fields=self.stream.key_fields,
            unpartitioned=self.stream.unpartitioned, partitions=self.stream.partitions,
            slack=self.slack, idle_timeout=self.idle_timeout, registry=True,
            queries_topic=str(self.registry_topic), situations_topic=str(self.situations_topic),
            services_topic=str(self.services_topic),
            data_dir=str(self.work_dir / name), web_port=port, web_bind="127.0.0.1",
            archive_dir=str(self.work_dir / "archive"), kafka=self.kafka,
        )
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p),
            **settings.to_env(),
            **self.extra_env,
        }
        command = self.service_command(kind)
        setpriv = shutil.which("setpriv") if sys.platform == "linux" else None
        if setpriv:
            command = [setpriv, "--pdeathsig", "TERM", *command]
        log_path = self.work_dir / f"{name}.log"
        log: IO[bytes]
        with log_path.open("ab") as log:
            # A process group of its own: a Ctrl-C in the terminal reaches only the launcher,
            # which stops the services before the broker.
            process = subprocess.Popen(command, env=env, cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
                                       stdout=log, stderr=subprocess.STDOUT, process_group=0)
        service = self.services[name] = ServiceProcess(name, process, port, log_path, kind)
        return service

    def service_command(self, kind: str) -> list[str]:
        """The command line of a worker of service ``kind``: ``situflow serve``, as in the
        image, so the pipelines of the tests start their services the way a deployment does."""
        return [sys.executable, "-m", "situflow.cli", "serve", kind]

    def wait_ready(self) -> None:
        """Until every service reports ready on ``/health``; raises if one exits, unless the
        pipeline restarts exited services (then only once ``ready_timeout`` has passed)."""
        deadline = time.monotonic() + self.ready_timeout
        waiting = list(self.services)
        while waiting:
            self.supervise()
            for name in list(waiting):
                service = self.services[name]
                if service.process.poll() is not None:
                    if self.restarts is None:
                        raise PipelineError(f"{name} {service.exit_status()}:"
                                            f"\n{service.log_tail()}")
                elif service.health().get("ready"):
                    waiting.remove(name)
            if waiting and time.monotonic() > deadline:
                name = waiting[0]
                raise PipelineError(f"{name} not ready after {self.ready_timeout}s:\n"
                                    f"{self.services[name].log_tail()}")
            time.sleep(0.2)

    def supervise(self) -> None:
        """Restart the services that exited, each after its :class:`Backoff` delay, and say so
        on standard error; nothing without ``restarts`` or once stopping. Call it every fraction
        of a second (``situflow up`` does)."""
        if self.restarts is None or self.stopping:
            return
        now = time.monotonic()
        for name, service in list(self.services.items()):
            due = self._restart_at.get(name)
            if due is not None:
                if now >= due:
                    del self._restart_at[name]
                    # The same web port if it is still free, so that its printed URL holds.
                    port = service.web_port if port_available(service.web_port) else None
                    restarted = self.start_service(service.kind, name, port)
                    say(f"{name} restarted as pid {restarted.process.pid}, {restarted.url}")
            elif service.process.poll() is not None:
                self._restart_at[name] = now + self._exited(service, now)

    def _exited(self, service: ServiceProcess, now: float) -> float:
        """Count the exit of ``service``, say so, and return the seconds until its restart."""
        assert self.restarts is not None
        ran = now - service.started
        exits = 1 if ran >= self.restarts.healthy else self._exits.get(service.name, 0) + 1
        self._exits[service.name] = exits
        delay = self.restarts.delay(exits)
        looping = (f", its exit {exits} in a row within {self.restarts.healthy:g} s of its start "
                   f"(restarts wait up to {self.restarts.ceiling:g} s while it keeps exiting)"
                   if exits > 1 else "")
        tail = "\n".join(f"    {line}" for line in
                         service.log_tail(LOG_TAIL_LINES).splitlines()) or "    (empty)"
        say(f"{service.name} (pid {service.process.pid}) {service.exit_status()} after {ran:.1f} s"
            f"{looping}; restarting it in {delay:g} s. The end of its log {service.log_path}:\n"
            f"{tail}")
        return delay

    def stop(self, timeout: float = STOP_GRACE) -> None:
        """SIGTERM every service at once (SIGKILL to those still running ``timeout`` seconds
        later), then stop the broker; idempotent."""
        self.stopping = True
        for service in self.services.values():
            if service.process.poll() is None:
                service.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for service in self.services.values():
            try:
                service.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                service.process.kill()
                service.process.wait()
                if self.restarts is not None:
                    say(f"{service.name} still ran {timeout:g} s after SIGTERM: killed")
        if self._broker is not None:
            self._broker.stop()
            self._broker = None
        if self._own_dir and self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            self.work_dir = None

    def kill(self) -> None:
        """SIGKILL every service and the embedded broker now, without waiting for them (safe in
        a signal handler while :meth:`stop` waits: its waits then return at once)."""
        self.stopping = True
        for service in self.services.values():
            if service.process.poll() is None:
                service.process.kill()
        pid = None if self._broker is None else self._broker.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def stream_of(args: argparse.Namespace) -> StreamSpec:
    if args.unpartitioned:
        return StreamSpec(args.stream, time_field=args.time_field, time_unit=args.time_unit,
                          partitions=args.partitions, unpartitioned=True)
    return StreamSpec(args.stream, time_field=args.time_field, time_unit=args.time_unit,
                      partitions=args.partitions,
                      key_fields=tuple(f for f in args.key_fields.split(",") if f))


def up(args: argparse.Namespace) -> int:
    """Run the pipeline, restarting the services that exit, until Ctrl-C or SIGTERM; a second
    Ctrl-C or SIGTERM kills everything at once. 1 if the pipeline does not start."""
    broker = None if os.environ.get(ENV_BOOTSTRAP) else EmbeddedBroker(port=args.port)
    pipeline = Pipeline(stream_of(args), slack=args.slack, idle_timeout=args.idle_timeout,
                        work_dir=args.work_dir, registry_topic=QUERIES,
                        situations_topic=SITUATIONS, services_topic=SERVICES, broker=broker,
                        archive=args.archive, restarts=Backoff())
    signals = 0

    def interrupt(signum: int, frame: object) -> None:
        nonlocal signals
        signals += 1
        if signals > 1 or pipeline.stopping:
            pipeline.kill()
            return
        say(f"{signal.Signals(signum).name}: stopping the services, then the broker "
            "(again to kill them at once)")
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    try:
        with pipeline:
            for query in args.query:
                pipeline.submit(query.resolve())
            assert pipeline.kafka is not None
            print(f"export KAFKA_BOOTSTRAP_SERVERS={pipeline.kafka.bootstrap_servers}\n"
                  f"produce events to {pipeline.stream.name!r}; register queries with "
                  "'situflow query submit FILE'; try 'situflow demo'; 'situflow status' shows "
                  "the services and queries", flush=True)
            for service in pipeline.services.values():
                print(f"{service.name}: pid {service.process.pid}, {service.url}/metrics, "
                      f"log {service.log_path}", flush=True)
            while True:
                pipeline.supervise()
                time.sleep(0.5)
    except KeyboardInterrupt:
        return 0
    except PipelineError as exc:
        say(str(exc))
        return 1


def say(message: str) -> None:
    """A line of ``situflow up`` on standard error, about its services."""
    print(f"situflow up: {message}", file=sys.stderr, flush=True)


def port_available(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on ``port`` now; with SO_REUSEADDR, as aiohttp binds, so
    that connections an exited service left in TIME_WAIT do not count."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True
