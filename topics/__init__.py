"""The topic catalog (:mod:`topics.catalog`) and its creation on a broker (:mod:`topics.create`)."""

from topics.catalog import (
    QUERIES,
    SITUATIONS,
    Catalog,
    CleanupPolicy,
    MessageSchema,
    QueryOutput,
    StreamSpec,
    TopicRole,
    TopicSpec,
)

__all__ = [
    "QUERIES",
    "SITUATIONS",
    "Catalog",
    "CleanupPolicy",
    "MessageSchema",
    "QueryOutput",
    "StreamSpec",
    "TopicRole",
    "TopicSpec",
]
