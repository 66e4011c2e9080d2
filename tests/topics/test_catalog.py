"""The topic catalog: which topics exist for a deployment, and how each one is configured."""

from __future__ import annotations

import pytest

from topics.catalog import (
    BATCH_SEQ_HEADER,
    DLQ_RETENTION_MS,
    QUERIES,
    SERVICES,
    SITUATIONS,
    Catalog,
    CleanupPolicy,
    QueryOutput,
    StreamSpec,
    TopicRole,
    TopicSpec,
    situations_partition,
)

CATALOG = Catalog(
    streams=(StreamSpec("cars", time_field="time", partitions=6, key_fields=("car",)),),
    queries=(QueryOutput("aggressive"), QueryOutput("jams", TopicRole.TRENDS, partitions=2)),
)


def by_name(catalog: Catalog) -> dict[str, TopicSpec]:
    return {spec.name: spec for spec in catalog.topics()}


def test_a_deployment_has_these_topics() -> None:
    assert {name: spec.role for name, spec in by_name(CATALOG).items()} == {
        QUERIES: TopicRole.QUERIES,
        SERVICES: TopicRole.SERVICES,
        SITUATIONS: TopicRole.SITUATIONS,
        f"{SITUATIONS}.dlq": TopicRole.DLQ,
        "cars": TopicRole.INPUT,
        "cars.ordered": TopicRole.ORDERED,
        "cars.late": TopicRole.LATE,
        "cars.dlq": TopicRole.DLQ,
        "matches.aggressive": TopicRole.MATCHES,
        "trends.jams": TopicRole.TRENDS,
    }


def test_the_query_registry_is_one_compacted_partition_kept_forever() -> None:
    registry = by_name(Catalog())[QUERIES]
    assert (registry.partitions, registry.cleanup_policy, registry.configs()) == (
        1,
        CleanupPolicy.COMPACT,
        {"cleanup.policy": "compact", "retention.ms": "-1"},
    )


def test_the_services_topic_is_one_compacted_partition_under_the_name_given() -> None:
    services = by_name(Catalog(services="situflow.services.cars"))["situflow.services.cars"]
    assert (services.role, services.partitions, services.configs()) == (
        TopicRole.SERVICES, 1, {"cleanup.policy": "compact", "retention.ms": "-1"})


def test_a_stream_s_situations_topic_has_its_partitions_and_a_dead_letter_topic() -> None:
    """The matcher reads situations in one agent with ``<stream>.ordered`` (co-partitioned)."""
    catalog = Catalog(streams=CATALOG.streams, situations="situations.cars",
                      situations_partitions=6)
    topics = by_name(catalog)
    assert (topics["situations.cars"].role, topics["situations.cars"].partitions) == (
        TopicRole.SITUATIONS, 6)
    assert topics["situations.cars.dlq"].role is TopicRole.DLQ
    assert SITUATIONS not in topics


def test_stream_topics_share_partitions_key_and_time_field() -> None:
    """K-slack reorders per partition, so its outputs are co-partitioned with its input."""
    topics = by_name(CATALOG)
    shape = {(t.partitions, t.key, t.time_field) for n, t in topics.items() if n != "cars.dlq"
             and t.role in (TopicRole.INPUT, TopicRole.ORDERED, TopicRole.LATE)}
    assert len(shape) == 1
    partitions, key, time_field = shape.pop()
    assert (partitions, time_field) == (6, "time")
    assert "car" in key.description


def test_the_event_time_field_defaults_to_ts() -> None:
    assert by_name(Catalog(streams=(StreamSpec("s"),)))["s"].time_field == "ts"


def test_event_topics_accept_json_and_arrow() -> None:
    assert by_name(CATALOG)["cars"].value.content_types == (
        "application/json",
        "application/vnd.apache.arrow.stream",
    )


def test_dead_letters_are_kept_longer_and_name_their_headers() -> None:
    dlq = by_name(CATALOG)["cars.dlq"]
    assert dlq.configs() == {"cleanup.policy": "delete", "retention.ms": str(DLQ_RETENTION_MS)}
    assert "situflow.error.reason" in dlq.value.description


def test_query_outputs_take_their_partitions_from_the_query() -> None:
    topics = by_name(CATALOG)
    assert (topics["matches.aggressive"].partitions, topics["trends.jams"].partitions) == (4, 2)


def test_replication_applies_to_every_topic() -> None:
    catalog = Catalog(streams=CATALOG.streams, queries=CATALOG.queries, replication_factor=3)
    assert {spec.replication_factor for spec in catalog.topics()} == {3}


def test_retention_none_leaves_the_broker_default() -> None:
    raw = by_name(Catalog(streams=(StreamSpec("s", retention_ms=None),)))["s"]
    assert raw.configs() == {"cleanup.policy": "delete"}


@pytest.mark.parametrize("name", ["", "cars/eu", "café", ".", "..", "x" * 250])
def test_an_illegal_topic_name_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="illegal topic name"):
        StreamSpec(name)


def test_a_query_output_must_be_matches_or_trends() -> None:
    with pytest.raises(ValueError, match="matches or trends"):
        QueryOutput("q", TopicRole.LATE)


def test_streams_are_found_by_name() -> None:
    assert CATALOG.stream("cars").time_field == "time"
    with pytest.raises(KeyError, match="no stream 'bikes'"):
        CATALOG.stream("bikes")


def test_an_unpartitioned_stream_has_one_input_partition_and_spreads_its_batches() -> None:
    """Its one global order needs one ordering point; the batches cut from it are spread over
    the ordered partitions for the derivers (thesis §5.6.3/§5.6.5)."""
    stream = StreamSpec("sensors", partitions=6, unpartitioned=True)
    topics = by_name(Catalog(streams=(stream,)))
    assert {name: topics[name].partitions for name in
            ("sensors", "sensors.ordered", "sensors.late", "sensors.dlq")} == {
        "sensors": 1, "sensors.ordered": 6, "sensors.late": 1, "sensors.dlq": 1}
    assert topics["sensors.ordered"].value.content_types == ("application/vnd.apache.arrow.stream",)
    assert BATCH_SEQ_HEADER in topics["sensors.ordered"].value.description
    assert "one global order" in topics["sensors"].key.description


def test_an_unpartitioned_stream_has_no_key_attributes() -> None:
    with pytest.raises(ValueError, match="an unpartitioned stream has no key attributes"):
        StreamSpec("sensors", key_fields=("car",), unpartitioned=True)


def test_each_unpartitioned_query_s_situation_batches_go_to_one_partition() -> None:
    """The same in every process (not Python's salted hash), spread over the partitions."""
    assert situations_partition("aggressive", 4) == situations_partition("aggressive", 4) < 4
    assert len({situations_partition(f"q{i}", 4) for i in range(20)}) == 4
