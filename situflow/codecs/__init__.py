"""Message codecs for the transport formats of ARCHITECTURE.md (a **contract**).

JSON carries one event per message (:mod:`.json_events`); an Arrow IPC stream carries many
(:mod:`.arrow_events`). Both normalise the event-time field to an integer and raise
:class:`InputError` with a ``reason`` for anything a producer got wrong, so that a service can
route the message to its dead-letter topic instead of stopping.

This package is core: it imports neither Faust nor a Kafka client. Kafka headers are handled as
plain ``(str, bytes)`` pairs.
"""

from situflow.codecs.errors import InputError

__all__ = ["InputError"]
