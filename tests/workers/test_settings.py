"""Settings come from SITUFLOW_* and KAFKA_* variables, declared once in situflow/settings.py,
and fail early with the variable's name."""

from __future__ import annotations

import re
import ssl
from pathlib import Path

import pytest

from situflow.cli import main
from situflow.settings import (
    KafkaSettings,
    KafkaSettingsError,
    ServiceSettings,
    SettingsError,
    json_schema,
    markdown,
    variables,
)
from topics.catalog import DEFAULT_PARTITIONS, QUERIES, SITUATIONS
from workers.settings import ServiceConfig

REPO = Path(__file__).parents[2]


def test_without_variables_it_is_plaintext_to_localhost() -> None:
    settings = KafkaSettings.from_env({})
    assert settings.client_kwargs() == {
        "bootstrap_servers": "localhost:9092",
        "security_protocol": "PLAINTEXT",
    }


def test_sasl_ssl_gives_aiokafka_credentials_and_a_tls_context() -> None:
    settings = KafkaSettings.from_env({
        "KAFKA_BOOTSTRAP_SERVERS": "k1:9093,k2:9093",
        "KAFKA_SECURITY_PROTOCOL": "sasl_ssl",
        "KAFKA_SASL_MECHANISM": "scram-sha-512",
        "KAFKA_SASL_USERNAME": "situflow",
        "KAFKA_SASL_PASSWORD": "s3cret",
    })
    kwargs = settings.client_kwargs()
    assert isinstance(kwargs.pop("ssl_context"), ssl.SSLContext)
    assert kwargs == {
        "bootstrap_servers": "k1:9093,k2:9093",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "situflow",
        "sasl_plain_password": "s3cret",
    }
    assert "s3cret" not in repr(settings)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KAFKA_SECURITY_PROTOCOL": "TLS"}, "KAFKA_SECURITY_PROTOCOL='TLS': use one of"),
        ({"KAFKA_SASL_MECHANISM": "GSSAPI"}, "KAFKA_SASL_MECHANISM='GSSAPI': use one of"),
        ({"KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT"}, "needs KAFKA_SASL_USERNAME and"),
        ({"KAFKA_SSL_CERTFILE": "client.pem"}, "set both KAFKA_SSL_CERTFILE and"),
    ],
)
def test_a_setting_that_cannot_work_names_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(KafkaSettingsError, match=message):
        KafkaSettings.from_env(env)


def test_the_password_is_a_secret_that_only_the_client_sees() -> None:
    settings = KafkaSettings.from_env({
        "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "KAFKA_SASL_USERNAME": "situflow",
        "KAFKA_SASL_PASSWORD": "s3cret",
    })
    assert "s3cret" not in repr(settings) and "s3cret" not in str(ServiceSettings(kafka=settings))
    assert settings.client_kwargs()["sasl_plain_password"] == "s3cret"


def test_values_given_ignore_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_SECURITY_PROTOCOL", "SSL")
    monkeypatch.setenv("SITUFLOW_SLACK", "9")
    assert KafkaSettings("broker:9092").security_protocol == "PLAINTEXT"
    assert ServiceSettings().slack == 0
    assert ServiceSettings.from_env().slack == 9


def test_service_settings_come_typed_from_situflow_variables() -> None:
    settings = ServiceSettings.from_env({
        "SITUFLOW_KEY_FIELDS": " car_id, lane ,",
        "SITUFLOW_SLACK": "5",
        "SITUFLOW_UNPARTITIONED": "",  # empty: unset
        "SITUFLOW_TIME_UNIT": "0.001",
        "SITUFLOW_GC_FREEZE": "0",
        "KAFKA_BOOTSTRAP_SERVERS": "k1:9092",
    })
    assert settings.key_fields == ("car_id", "lane")
    assert (settings.slack, settings.unpartitioned, settings.time_unit) == (5, False, 0.001)
    assert settings.gc_freeze is False
    assert settings.kafka.bootstrap_servers == "k1:9092"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SITUFLOW_SLACK": "five"}, "SITUFLOW_SLACK='five': Input should be a valid integer"),
        ({"SITUFLOW_PARTITIONS": "0"}, "SITUFLOW_PARTITIONS='0': Input should be greater than"),
        ({"SITUFLOW_ON_ERROR": "stop"}, "SITUFLOW_ON_ERROR='stop': Input should be 'continue' or"),
        ({"SITUFLOW_UNPARTITIONED": "yes please"}, "SITUFLOW_UNPARTITIONED='yes please': "),
        ({"KAFKA_SASL_MECHANISM": "GSSAPI"}, "KAFKA_SASL_MECHANISM='GSSAPI': use one of"),
    ],
)
def test_a_service_setting_that_cannot_work_names_the_variable(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError, match=message):
        ServiceSettings.from_env(env)


def test_to_env_gives_the_settings_back_to_a_child_process() -> None:
    kafka = KafkaSettings("k1:9093", security_protocol="SASL_SSL", sasl_username="u",
                          sasl_password="p")
    settings = ServiceSettings(stream="cars", key_fields=("car_id",), slack=5, registry=True,
                               kafka=kafka)
    env = settings.to_env()
    assert env["SITUFLOW_KEY_FIELDS"] == "car_id" and env["SITUFLOW_REGISTRY"] == "1"
    assert env["KAFKA_SASL_PASSWORD"] == "p" and env["KAFKA_SASL_MECHANISM"] == "PLAIN"
    assert "SITUFLOW_ON_ERROR" not in env  # not given: the child's default, or its parent's
    assert ServiceSettings.from_env(env) == settings


def test_a_service_config_is_a_view_of_the_settings() -> None:
    config = ServiceConfig.from_env("matcher", {"SITUFLOW_STREAM": "cars",
                                                "SITUFLOW_UNPARTITIONED": "1"})
    assert config.stream.name == "cars" and config.stream.unpartitioned
    assert config.data_dir == "situflow-data/matcher"
    assert config.settings.stream == "cars"


SOURCES = ("situflow", "workers", "topics", "batch")
CONSTANTS = {"KAFKA_COMMANDS"}  # Python names that look like variables


def test_every_variable_the_code_names_is_declared() -> None:
    named = set()
    for package in SOURCES:
        for path in (REPO / package).rglob("*.py"):
            named |= set(re.findall(r"\b(?:SITUFLOW|KAFKA)_[A-Z][A-Z0-9_]*[A-Z0-9]\b",
                                    path.read_text()))
    assert named - CONSTANTS <= {variable for variable, _ in variables()}


def test_docs_settings_md_is_generated_from_the_schema() -> None:
    assert (REPO / "docs" / "settings.md").read_text() == markdown(), (
        "regenerate: python -m situflow.settings --markdown > docs/settings.md")
    schema = json_schema()
    assert schema["properties"]["slack"]["x-env"] == "SITUFLOW_SLACK"
    assert schema["$defs"]["KafkaSettings"]["properties"]["sasl_password"]["x-env"] == \
        "KAFKA_SASL_PASSWORD"


def test_the_schema_defaults_are_the_catalogs() -> None:
    defaults = ServiceSettings()
    assert (defaults.partitions, defaults.situations_topic, defaults.queries_topic) == \
        (DEFAULT_PARTITIONS, SITUATIONS, QUERIES)


def test_a_kafka_command_stops_on_a_setting_that_cannot_work(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SITUFLOW_SLACK", "x")
    assert main(["query", "list"]) == 1
    assert "situflow: SITUFLOW_SLACK='x': " in capsys.readouterr().err
