"""Brokers for the integration tests.

By default every test session starts one embedded tansu broker on a free loopback port. To run
the same tests against a real Kafka, set ``KAFKA_BOOTSTRAP_SERVERS`` (and the other ``KAFKA_*``
variables of ``situflow/settings.py`` for SASL/TLS); tests then create uniquely named topics on
it and leave them behind. Tests of tansu's own behaviour use ``tansu`` and always start one.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from situflow.settings import ENV_BOOTSTRAP, KafkaSettings
from workers.broker import EmbeddedBroker


@pytest.fixture(scope="session")
def kafka() -> Iterator[KafkaSettings]:
    """Settings of the broker under test: the one in the environment, or an embedded one."""
    if os.environ.get(ENV_BOOTSTRAP):
        yield KafkaSettings.from_env()
        return
    with EmbeddedBroker() as broker:
        yield KafkaSettings(broker.bootstrap_servers)


@pytest.fixture
def tansu() -> Iterator[EmbeddedBroker]:
    """A fresh, empty tansu broker for this test alone (stopped even if the test fails)."""
    with EmbeddedBroker() as broker:
        yield broker


@pytest.fixture
def topic_prefix() -> str:
    """A prefix no other test run uses, so tests can share one broker, even a real cluster."""
    return f"it-{uuid.uuid4().hex[:10]}"
