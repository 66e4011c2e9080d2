"""Kafka connection settings, read from the environment in this one place.

Every service, the topic bootstrap and the tests connect through :class:`KafkaSettings`, so a
deployment sets SASL/TLS once (the Helm chart fills these variables from values and Secrets):

=============================  ====================================================
variable                       meaning
=============================  ====================================================
``KAFKA_BOOTSTRAP_SERVERS``    ``host:port[,host:port...]``; default ``localhost:9092``
``KAFKA_SECURITY_PROTOCOL``    PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL
``KAFKA_SASL_MECHANISM``       PLAIN (default with SASL), SCRAM-SHA-256 or SCRAM-SHA-512
``KAFKA_SASL_USERNAME``        required with SASL
``KAFKA_SASL_PASSWORD``        required with SASL
``KAFKA_SSL_CAFILE``           CA bundle to verify the brokers; default: system CAs
``KAFKA_SSL_CERTFILE``         client certificate for mutual TLS (optional)
``KAFKA_SSL_KEYFILE``          its private key (optional)
=============================  ====================================================

Settings are checked when built, so a typo fails at start with the variable's name rather than
as an opaque handshake error later.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiokafka.errors import KafkaConnectionError
from aiokafka.helpers import create_ssl_context

T = TypeVar("T")
FIRST_BACKOFF, MAX_BACKOFF = 0.25, 4.0

ENV_BOOTSTRAP = "KAFKA_BOOTSTRAP_SERVERS"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class KafkaSettingsError(ValueError):
    """A Kafka connection setting that cannot work; the message names the variable to fix."""


@dataclass(frozen=True)
class KafkaSettings:
    """How to reach the Kafka cluster. The password is left out of ``repr`` (it ends up in logs)."""

    bootstrap_servers: str = "localhost:9092"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None

    def __post_init__(self) -> None:
        if not self.bootstrap_servers.strip():
            raise KafkaSettingsError(f"{ENV_BOOTSTRAP} is empty: give host:port of a broker")
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise KafkaSettingsError(
                f"KAFKA_SECURITY_PROTOCOL={self.security_protocol!r}: "
                f"use one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        if self.sasl_mechanism not in SASL_MECHANISMS:
            raise KafkaSettingsError(
                f"KAFKA_SASL_MECHANISM={self.sasl_mechanism!r}: "
                f"use one of {', '.join(SASL_MECHANISMS)}"
            )
        if self.uses_sasl and not (self.sasl_username and self.sasl_password):
            raise KafkaSettingsError(
                f"KAFKA_SECURITY_PROTOCOL={self.security_protocol} needs "
                "KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD"
            )
        if bool(self.ssl_certfile) != bool(self.ssl_keyfile):
            raise KafkaSettingsError(
                "set both KAFKA_SSL_CERTFILE and KAFKA_SSL_KEYFILE, or neither"
            )

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> KafkaSettings:
        """Settings from ``KAFKA_*`` variables (of ``os.environ`` unless ``env`` is given)."""
        env = os.environ if env is None else env

        def get(name: str) -> str | None:
            value = env.get(f"KAFKA_{name}", "").strip()
            return value or None

        return cls(
            bootstrap_servers=get("BOOTSTRAP_SERVERS") or cls.bootstrap_servers,
            security_protocol=(get("SECURITY_PROTOCOL") or cls.security_protocol).upper(),
            sasl_mechanism=(get("SASL_MECHANISM") or cls.sasl_mechanism).upper(),
            sasl_username=get("SASL_USERNAME"),
            sasl_password=env.get("KAFKA_SASL_PASSWORD") or None,
            ssl_cafile=get("SSL_CAFILE"),
            ssl_certfile=get("SSL_CERTFILE"),
            ssl_keyfile=get("SSL_KEYFILE"),
        )

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for any aiokafka client (producer, consumer, admin)."""
        kwargs: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap_servers,
            "security_protocol": self.security_protocol,
        }
        if self.uses_ssl:
            kwargs["ssl_context"] = create_ssl_context(
                cafile=self.ssl_cafile, certfile=self.ssl_certfile, keyfile=self.ssl_keyfile
            )
        if self.uses_sasl:
            kwargs["sasl_mechanism"] = self.sasl_mechanism
            kwargs["sasl_plain_username"] = self.sasl_username
            kwargs["sasl_plain_password"] = self.sasl_password
        return kwargs


class BrokerUnreachable(ConnectionError):
    """No broker of ``KAFKA_BOOTSTRAP_SERVERS`` answered within the time given."""


async def retry_unreachable(
    settings: KafkaSettings,
    operation: Callable[[KafkaSettings], Awaitable[T]],
    wait: float,
    on_retry: Callable[[float], None] | None = None,
) -> T:
    """``operation``, retried with exponential backoff while the broker is unreachable, for at
    most ``wait`` seconds; ``on_retry(seconds)`` is told of each wait before it."""
    deadline = time.monotonic() + wait
    backoff = FIRST_BACKOFF
    while True:
        try:
            return await operation(settings)
        except KafkaConnectionError:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrokerUnreachable(
                    f"cannot reach Kafka at {settings.bootstrap_servers} (retried for {wait:g}s); "
                    f"is it running? {ENV_BOOTSTRAP} names the brokers") from None
            pause = min(backoff, left)
            if on_retry is not None:
                on_retry(pause)
            await asyncio.sleep(pause)
            backoff = min(backoff * 2, MAX_BACKOFF)
