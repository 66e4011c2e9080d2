"""One service's settings: :class:`ServiceConfig`, read through the schema of
:mod:`situflow.settings` (every ``SITUFLOW_*`` and ``KAFKA_*`` variable, documented in
``docs/settings.md``), with the stream as a :class:`topics.catalog.StreamSpec`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from situflow.settings import KafkaSettings, ServiceSettings
from topics.catalog import StreamSpec


@dataclass(frozen=True)
class ServiceConfig:
    """What every service needs of :class:`ServiceSettings`; ``settings`` has the rest."""

    service: str
    stream: StreamSpec
    kafka: KafkaSettings
    data_dir: str
    web_port: int
    web_bind: str
    session_timeout: float
    situations: str
    processing_guarantee: str
    settings: ServiceSettings

    @classmethod
    def from_env(cls, service: str, env: Mapping[str, str] | None = None) -> ServiceConfig:
        """The settings of ``service`` from the environment (``os.environ`` unless ``env``);
        raises :class:`situflow.settings.SettingsError` naming a variable that cannot work."""
        return cls.from_settings(service, ServiceSettings.from_env(env))

    @classmethod
    def from_settings(cls, service: str, settings: ServiceSettings) -> ServiceConfig:
        stream = StreamSpec(settings.stream, time_field=settings.time_field,
                            partitions=settings.partitions, key_fields=settings.key_fields,
                            unpartitioned=settings.unpartitioned, time_unit=settings.time_unit)
        return cls(
            service=service,
            stream=stream,
            kafka=settings.kafka,
            data_dir=settings.data_dir or f"situflow-data/{service}",
            web_port=settings.web_port,
            web_bind=settings.web_bind,
            session_timeout=settings.session_timeout,
            situations=settings.situations_topic,
            processing_guarantee=settings.processing_guarantee,
            settings=settings,
        )
