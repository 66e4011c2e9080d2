"""Kafka connection settings come from KAFKA_* variables and fail early with the variable's name."""

from __future__ import annotations

import ssl

import pytest

from workers.settings import KafkaSettings, KafkaSettingsError


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
