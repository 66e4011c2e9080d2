"""Create the catalog's topics on a broker, idempotently (``situflow topics create``).

A topic that already exists counts as done and is left as it is: partitions and configs of a
live topic are never changed behind the operator's back (Kafka cannot lower partitions, and
raising them moves keys to other partitions, which breaks co-partitioned state). An existing
topic with another number of partitions than the catalog's is refused instead: the services
would read only some of its partitions (an unpartitioned stream's one ordering point) or
join state across misaligned keys.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from situflow.settings import KafkaSettings
from topics.catalog import TopicSpec


class TopicCreationError(RuntimeError):
    """The broker refused some topics; ``errors`` maps each name to the broker's message."""

    def __init__(self, errors: dict[str, str]) -> None:
        listed = "; ".join(f"{name}: {message}" for name, message in sorted(errors.items()))
        super().__init__(f"could not create topics: {listed}")
        self.errors = errors


async def create_topics(
    bootstrap: str | KafkaSettings,
    specs: Iterable[TopicSpec],
    *,
    timeout_ms: int = 30_000,
) -> list[str]:
    """Create every topic in ``specs`` that does not exist yet; return the names created.

    ``bootstrap`` is ``host:port`` of a plaintext broker, or full :class:`KafkaSettings` for
    SASL/TLS. Raises :class:`TopicCreationError` for any refusal other than "already exists",
    and for an existing topic whose partitions differ from its spec's.
    """
    settings = KafkaSettings(bootstrap) if isinstance(bootstrap, str) else bootstrap
    wanted = {spec.name: spec for spec in specs}
    if not wanted:
        return []
    admin = AIOKafkaAdminClient(**settings.client_kwargs(), request_timeout_ms=timeout_ms)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        present = [name for name in wanted if name in existing]
        if present:
            _check_partitions(wanted, await admin.describe_topics(present))
        missing = [spec for name, spec in wanted.items() if name not in existing]
        if not missing:
            return []
        response = await admin.create_topics(
            [
                NewTopic(s.name, s.partitions, s.replication_factor, topic_configs=s.configs())
                for s in missing
            ],
            timeout_ms=timeout_ms,
        )
    finally:
        await admin.close()
    created: list[str] = []
    errors: dict[str, str] = {}
    for entry in response.topic_errors:  # (name, code) before CreateTopics v1, then + message
        name, code, message = entry[0], entry[1], entry[2] if len(entry) > 2 else None
        if code == 0:
            created.append(name)
        elif code != TopicAlreadyExistsError.errno:  # created by someone else meanwhile
            errors[name] = message or f"error code {code}"
    if errors:
        raise TopicCreationError(errors)
    return created


def _check_partitions(wanted: dict[str, TopicSpec], described: list[dict[str, Any]]) -> None:
    errors = {}
    for topic in described:
        name, count = topic["topic"], len(topic["partitions"])
        spec = wanted[name]
        if count != spec.partitions:
            errors[name] = (f"exists with {count} partitions, not the {spec.partitions} of the "
                            f"catalog's {spec.role.value} topic (the services would miss or "
                            f"misalign partitions): recreate it")
    if errors:
        raise TopicCreationError(errors)
