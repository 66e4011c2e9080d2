"""What a stream allows of a query: the checks ``situflow query submit`` and every evaluating
service run alike, so that a query the services would refuse is refused at submit
with a located error instead of in their logs.

A keyed stream's events of one key are in one Kafka partition, and each partition has one
operator over its keys (:mod:`situflow.runtime`): a query must partition by (at least) the
stream's key attributes, or a query partition would span Kafka partitions. An unpartitioned
stream's ordered partitions hold consecutive batches of one global order, which only TPStream
merges in sequence (thesis §5.6.3): SASE+ and COGRA queries need a keyed stream.
"""

from __future__ import annotations

from situflow.errors import SituflowError
from situflow.operator import CompiledQuery
from topics.catalog import StreamSpec


def check_query(query: CompiledQuery, stream: StreamSpec) -> None:
    """Raise ``SituflowError`` unless ``stream`` allows ``query`` (module doc)."""
    if stream.unpartitioned:
        if query.language != "tpstream":
            raise SituflowError(
                f"the {query.language} query {query.name!r} needs a keyed stream: "
                f"{stream.name!r} is unpartitioned, its events are spread over the ordered "
                "partitions in batches that only TPStream merges in sequence (thesis "
                "5.6.3); declare a stream with key attributes (SITUFLOW_KEY_FIELDS) and "
                "partition the query by them")
        return
    missing = [f for f in stream.key_fields if f not in query.partition_attributes]
    if missing:
        raise SituflowError(
            f"query {query.name!r} must partition by the stream's key attributes "
            f"{', '.join(stream.key_fields)} (missing: {', '.join(missing)}): a query "
            "partition may not span Kafka partitions (a TPStream query runs unpartitioned "
            "on a stream declared unpartitioned: SITUFLOW_UNPARTITIONED=1)")
