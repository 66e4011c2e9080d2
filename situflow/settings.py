"""Every setting situflow reads from the environment, declared once (pydantic-settings).

Each ``SITUFLOW_<NAME>`` variable is field ``<name>`` of :class:`ServiceSettings`; each ``KAFKA_<NAME>``
is field ``<name>`` of its nested :class:`KafkaSettings` (``settings.kafka``). A service, ``situflow
up`` and the Kafka commands read them with :meth:`ServiceSettings.from_env`; a value that cannot
work fails there with a :class:`SettingsError` naming the variable, not later as an opaque
handshake or type error. ``docs/settings.md`` is generated from the descriptions below
(``python -m situflow.settings --markdown``), and the Helm chart's ``values.schema.json`` from
:func:`json_schema`.

Only :meth:`~ServiceSettings.from_env` reads the environment: a model built from values (a test,
``situflow up`` for its children) holds those values and the defaults, nothing inherited by
accident. :meth:`~ServiceSettings.to_env` turns a model back into variables for a child process.

This module imports no Kafka client, and nothing of situflow imports it at start: ``situflow
run`` does not pay for pydantic.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import ssl
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from situflow.errors import SituflowError

ENV_BOOTSTRAP = "KAFKA_BOOTSTRAP_SERVERS"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
AT_LEAST_ONCE, EXACTLY_ONCE = "at_least_once", "exactly_once"
CONTINUE, FAIL = "continue", "fail"

#: The mapping :meth:`_Settings.from_env` reads while it builds a model (None: no environment).
_environment: ContextVar[Mapping[str, str] | None] = ContextVar("situflow_environment", default=None)


class SettingsError(SituflowError, ValueError):
    """A setting that cannot work; the message names the variable to fix."""


class KafkaSettingsError(SettingsError):
    """A ``KAFKA_*`` setting that cannot work."""


CommaList = Annotated[tuple[str, ...], NoDecode]


class _EnvironmentSource(PydanticBaseSettingsSource):
    """The variables of the mapping :meth:`_Settings.from_env` was given, by field. An empty
    one counts as unset: that is what an empty value in a manifest or shell script means."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        env = _environment.get() or {}
        variable = self.config.get("env_prefix", "") + field_name.upper()
        return env.get(variable), variable, False

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name, field in self.settings_cls.model_fields.items():
            raw, _, _ = self.get_field_value(field, name)
            if name == "kafka" or raw is None or not raw.strip():
                continue
            values[name] = raw if field.annotation in (SecretStr, SecretStr | None) else raw.strip()
        return values


class _Settings(BaseSettings):
    """What both schemas share: frozen, read only through :meth:`from_env`."""

    model_config = SettingsConfigDict(frozen=True, extra="forbid")
    #: The error class :meth:`from_env` raises.
    error: ClassVar[type[SettingsError]] = SettingsError

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Values given beat the environment; no .env or secrets directory: Kubernetes mounts
        # Secrets as variables (the chart), and one source keeps "where did this come from" short.
        return init_settings, _EnvironmentSource(settings_cls)

    @classmethod
    def variable(cls, field_name: str) -> str:
        """The environment variable of ``field_name``."""
        return cls.model_config.get("env_prefix", "") + field_name.upper()

    @classmethod
    def _read(cls, env: Mapping[str, str] | None, **values: Any) -> Any:
        token = _environment.set(os.environ if env is None else env)
        try:
            return cls(**values)
        except ValidationError as exc:
            raise cls.error("; ".join(cls._explain(error) for error in exc.errors())) from None
        finally:
            _environment.reset(token)

    @classmethod
    def _explain(cls, error: Any) -> str:
        message = str(error["msg"]).removeprefix("Value error, ")
        if not error["loc"]:  # a rule across fields names its variables itself
            return message
        return f"{cls.variable(str(error['loc'][0]))}={error['input']!r}: {message}"

    def to_env(self) -> dict[str, str]:
        """Variables that give this model back through :meth:`from_env`: those of the fields
        given or read (the others keep their defaults there), a nested model (the Kafka
        connection) whole, so that a child process does not mix it with its parent's."""
        return self._variables(self.model_fields_set)

    def _variables(self, names: Iterable[str]) -> dict[str, str]:
        variables: dict[str, str] = {}
        for name in sorted(names, key=list(type(self).model_fields).index):
            value = getattr(self, name)
            if isinstance(value, _Settings):
                variables.update(value._variables(type(value).model_fields))
            elif value is not None:
                variables[self.variable(name)] = _env_text(value)
        return variables


def _env_text(value: Any) -> str:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


class KafkaSettings(_Settings):
    """How to reach the Kafka cluster; the Helm chart fills these from values and Secrets."""

    model_config = SettingsConfigDict(env_prefix="KAFKA_")
    error: ClassVar[type[SettingsError]] = KafkaSettingsError

    bootstrap_servers: str = Field("localhost:9092", min_length=1, description=(
        "host:port[,host:port...] of the brokers"))
    security_protocol: str = Field("PLAINTEXT", description=(
        "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (any case)"))
    sasl_mechanism: str = Field("PLAIN", description=(
        "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (any case); used with SASL"))
    sasl_username: str | None = Field(None, description="user name; required with SASL")
    sasl_password: SecretStr | None = Field(None, description="password; required with SASL")
    ssl_cafile: str | None = Field(None, description=(
        "CA bundle that verifies the brokers (default: the system's CAs)"))
    ssl_certfile: str | None = Field(None, description=(
        "client certificate for mutual TLS, with KAFKA_SSL_KEYFILE"))
    ssl_keyfile: str | None = Field(None, description="private key of KAFKA_SSL_CERTFILE")

    def __init__(self, bootstrap_servers: str | None = None, /, **values: Any) -> None:
        """``KafkaSettings("host:port")``: a plaintext broker, as the tests and the embedded
        broker give it."""
        if bootstrap_servers is not None:
            values["bootstrap_servers"] = bootstrap_servers
        super().__init__(**values)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> KafkaSettings:
        """Settings from ``KAFKA_*`` variables (of ``os.environ`` unless ``env`` is given)."""
        settings: KafkaSettings = cls._read(env)
        return settings

    @field_validator("bootstrap_servers")
    @classmethod
    def _some_broker(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("give host:port of a broker")
        return value

    @field_validator("security_protocol", "sasl_mechanism", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("security_protocol")
    @classmethod
    def _known_protocol(cls, value: str) -> str:
        if value not in SECURITY_PROTOCOLS:
            raise ValueError(f"use one of {', '.join(SECURITY_PROTOCOLS)}")
        return value

    @field_validator("sasl_mechanism")
    @classmethod
    def _known_mechanism(cls, value: str) -> str:
        if value not in SASL_MECHANISMS:
            raise ValueError(f"use one of {', '.join(SASL_MECHANISMS)}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> KafkaSettings:
        if self.uses_sasl and not (self.sasl_username and self.sasl_password):
            raise ValueError(f"KAFKA_SECURITY_PROTOCOL={self.security_protocol} needs "
                             "KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD")
        if bool(self.ssl_certfile) != bool(self.ssl_keyfile):
            raise ValueError("set both KAFKA_SSL_CERTFILE and KAFKA_SSL_KEYFILE, or neither")
        return self

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for any aiokafka client (producer, consumer, admin)."""
        kwargs: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap_servers,
            "security_protocol": self.security_protocol,
        }
        if self.uses_ssl:
            # What aiokafka.helpers.create_ssl_context builds, without importing aiokafka here.
            context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.ssl_cafile)
            if self.ssl_certfile:
                context.load_cert_chain(self.ssl_certfile, self.ssl_keyfile)
            kwargs["ssl_context"] = context
        if self.uses_sasl:
            kwargs["sasl_mechanism"] = self.sasl_mechanism
            kwargs["sasl_plain_username"] = self.sasl_username
            kwargs["sasl_plain_password"] = self.sasl_password_text()
        return kwargs

    def sasl_password_text(self) -> str | None:
        """The password itself, for a client; the field stays masked in ``repr`` and logs."""
        return self.sasl_password.get_secret_value() if self.sasl_password else None


class ServiceSettings(_Settings):
    """The settings of the services, ``situflow up`` and the Kafka commands."""

    model_config = SettingsConfigDict(env_prefix="SITUFLOW_")

    # The stream (topics/catalog.py StreamSpec)
    stream: str = Field("events", min_length=1, description="input stream (topic) name")
    time_field: str = Field("ts", min_length=1, description="event-time attribute of the events")
    time_unit: float = Field(1.0, gt=0, description=(
        "seconds per event-time tick (0.001: milliseconds); converts ISO times and durations"))
    key_fields: CommaList = Field((), description=(
        "partition attributes of the stream, comma-separated; queries must partition by them"))
    unpartitioned: bool = Field(False, description=(
        "1: the stream has no key attributes (TPStream only, in batches, thesis 5.6.3)"))
    partitions: int = Field(4, ge=1, description="partitions of the stream's topics")
    # Topics
    situations_topic: str = Field("situations", min_length=1, description=(
        "topic of the situation records from the deriver to the matcher"))
    queries_topic: str = Field("situflow.queries", min_length=1, description=(
        "query registry topic (compacted)"))
    services_topic: str = Field("situflow.services", min_length=1, description=(
        "topic where each service worker announces itself for situflow status (compacted)"))
    archive_topics: CommaList = Field((), description=(
        "topics the archiver keeps besides the stream's, comma-separated"))
    # Where the queries come from
    registry: bool = Field(False, description="1: follow the query registry topic (situflow up)")
    query_file: str | None = Field(None, description="a query file to run from the start")
    query_name: str | None = Field(None, description=(
        "name of SITUFLOW_QUERY_FILE's query (default: the file name without extension)"))
    # A Faust worker
    data_dir: str | None = Field(None, description=(
        "local state (RocksDB, crash records); default: situflow-data/<service>"))
    web_port: int = Field(6066, ge=0, le=65535, description="port of /health and /metrics")
    web_bind: str = Field("127.0.0.1", description="address of /health and /metrics")
    web_advertise: str | None = Field(None, description=(
        "URL other processes reach this worker's /health and /metrics at, announced for "
        "situflow status (the chart: http://$(POD_IP):6066); default: http://<SITUFLOW_WEB_BIND, "
        "or the host name if that is 0.0.0.0>:<SITUFLOW_WEB_PORT>"))
    session_timeout: float = Field(10.0, gt=0, description=(
        "consumer group session timeout, in seconds"))
    processing_guarantee: str = Field(AT_LEAST_ONCE, description=(
        f"{AT_LEAST_ONCE} or {EXACTLY_ONCE} (Kafka transactions)"))
    fetch_max_wait_ms: int = Field(20, ge=0, description=(
        "longest a fetch waits for data at the broker, in milliseconds"))
    broker_wait: float = Field(300.0, ge=0, description=(
        "seconds a service retries an unreachable broker at start"))
    stall_timeout: float = Field(60.0, gt=0, description=(
        "seconds a partition's applied offset may stand still while input waits before "
        "/health says not ready"))
    gc_freeze: bool = Field(True, description=(
        "0: do not freeze long-lived objects out of the garbage collector"))
    checkpoint_interval: float = Field(1.0, gt=0, description=(
        "seconds between checkpoints of a partition's operator state"))
    # Bad input and failures (workers/failures.py)
    on_error: Literal["continue", "fail"] = Field("continue", description=(
        f"{CONTINUE}: a query's processing error goes to errors.<query>; {FAIL}: stop (exit 70)"))
    quarantine_after: int = Field(3, ge=1, description=(
        "crashes on one message within SITUFLOW_CRASH_WINDOW that send it to the DLQ"))
    crash_window: float = Field(300.0, gt=0, description="seconds over which crashes are counted")
    # K-slack (workers/kslack.py)
    slack: int = Field(0, ge=0, description="K: how late an event may be, in event-time units")
    idle_timeout: float = Field(5.0, gt=0, description=(
        "seconds without input after which K-slack releases what it holds"))
    batch_events: int = Field(8192, ge=1, description="most events in one ordered message")
    batch_span: int | None = Field(None, ge=0, description=(
        "most event time one batch of an unpartitioned stream spans (default: SITUFLOW_SLACK)"))
    # The matcher (workers/matcher.py)
    max_pending_batches: int = Field(1024, ge=1, description=(
        "situation batches the matcher holds ahead of a gap (unpartitioned streams)"))
    # The archiver (workers/archiver.py)
    archive_dir: str = Field("situflow-archive", description="root of the Parquet archive")
    archive_segment_rows: int = Field(100_000, ge=1, description="rows that close a segment")
    archive_segment_span: int = Field(3_600_000, ge=0, description=(
        "event time one segment spans (0: no limit by time)"))
    archive_segment_seconds: float = Field(60.0, gt=0, description=(
        "seconds a segment stays open at most"))
    archive_block_rows: int = Field(16_384, ge=1, description=(
        "rows per Parquet row group: a block of the lightweight index the offline path prunes "
        "and aggregates by"))
    # Processes and the CLI
    pushgateway_url: str | None = Field(None, description=(
        "Pushgateway the Spark commands push their run's metrics to (batch/report.py)"))
    log_level: str = Field("warn", description=(
        "log level of a service (situflow serve, and the services situflow up starts)"))
    device: Literal["cpu", "opencl", "auto"] = Field("cpu", description=(
        "where queries evaluate their event-local predicates, in situflow run and the services: "
        "cpu, opencl (fails without an OpenCL device) or auto (a GPU when present; results are "
        "identical on every device)"))
    # Test hooks: only the integration tests set these
    test_fail_query: str | None = Field(None, description=(
        "tests only: the named query raises on every message"))
    test_crash_on: str | None = Field(None, description=(
        "tests only: a message holding these bytes kills its worker (SIGKILL)"))
    test_raise_on: str | None = Field(None, description=(
        "tests only: K-slack raises on an event holding these bytes"))
    test_registry_delay: float = Field(0.0, ge=0, description=(
        "tests only: seconds an evaluating service's registry reader waits before it applies "
        "each record"))

    kafka: KafkaSettings = Field(default_factory=KafkaSettings, description=(
        "the KAFKA_* variables"))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ServiceSettings:
        """Settings from ``SITUFLOW_*`` and ``KAFKA_*`` variables (of ``os.environ`` unless
        ``env`` is given)."""
        settings: ServiceSettings = cls._read(env, kafka=KafkaSettings.from_env(env))
        return settings

    @field_validator("key_fields", "archive_topics", mode="before")
    @classmethod
    def _split_lists(cls, value: Any) -> Any:
        """``a, b,`` -> ``("a", "b")``: lists are comma-separated in the environment."""
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("web_advertise")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("give an http:// or https:// URL, e.g. http://10.0.0.7:6066")
        return None if value is None else value.rstrip("/")

    @property
    def web_url(self) -> str:
        """Where other processes reach this worker's web pages: ``SITUFLOW_WEB_ADVERTISE``, else
        the bind address and port, with the host name for an address that binds every
        interface (which no other process could connect to)."""
        if self.web_advertise is not None:
            return self.web_advertise
        host = socket.gethostname() if self.web_bind in ("0.0.0.0", "::", "") else self.web_bind
        if ":" in host:  # an IPv6 address
            host = f"[{host}]"
        return f"http://{host}:{self.web_port}"

    @field_validator("processing_guarantee")
    @classmethod
    def _known_guarantee(cls, value: str) -> str:
        if value not in (AT_LEAST_ONCE, EXACTLY_ONCE):
            raise ValueError(f"use {AT_LEAST_ONCE} or {EXACTLY_ONCE}")
        return value


def json_schema() -> dict[str, Any]:
    """The JSON schema of :class:`ServiceSettings` (source of the chart's ``values.schema.json``),
    each property with its variable as ``x-env``."""
    schema = ServiceSettings.model_json_schema()
    for model, properties in ((ServiceSettings, schema["properties"]),
                              (KafkaSettings, schema["$defs"]["KafkaSettings"]["properties"])):
        for name, prop in properties.items():
            if name != "kafka":
                prop["x-env"] = model.variable(name)
    return schema


def variables() -> Iterator[tuple[str, FieldInfo]]:
    """Every variable with its field, ``SITUFLOW_*`` first."""
    for name, field in ServiceSettings.model_fields.items():
        if name != "kafka":
            yield ServiceSettings.variable(name), field
    for name, field in KafkaSettings.model_fields.items():
        yield KafkaSettings.variable(name), field


def markdown() -> str:
    """``docs/settings.md``: one table row per variable."""
    lines = [
        "# Settings",
        "",
        "Generated from `situflow/settings.py` by `python -m situflow.settings --markdown`; "
        "do not edit. An empty variable counts as unset.",
        "",
        "| variable | type | default | meaning |",
        "|---|---|---|---|",
    ]
    for variable, field in variables():
        lines.append(f"| `{variable}` | {_type_name(field)} | {_default_text(field)} "
                     f"| {field.description} |")
    return "\n".join(lines) + "\n"


def _type_name(field: FieldInfo) -> str:
    annotation = field.annotation
    if annotation in (SecretStr, SecretStr | None):
        return "secret"
    if (field.metadata and any(isinstance(m, NoDecode) for m in field.metadata)) or \
            annotation == tuple[str, ...]:
        return "list"
    names = {bool: "bool (1/0)", int: "int", float: "float", str: "text"}
    for kind, name in names.items():
        if annotation in (kind, kind | None):
            return name
    return " / ".join(f"`{choice}`" for choice in getattr(annotation, "__args__", ()))


def _default_text(field: FieldInfo) -> str:
    if field.default is None or field.default == ():
        return ""
    return f"`{_env_text(field.default)}`"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m situflow.settings",
                                     description="Print the settings schema.")
    parser.add_argument("--markdown", action="store_true", help="docs/settings.md")
    parser.add_argument("--json-schema", action="store_true", help="the JSON schema")
    args = parser.parse_args(argv)
    if args.json_schema:
        json.dump(json_schema(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
