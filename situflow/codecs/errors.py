"""The error every codec raises for a bad message.

``InputError`` lives in :mod:`situflow.errors` (one hierarchy for the whole engine); it is
re-exported here so that codec callers, such as the services that route bad messages to
``<topic>.dlq``, import it next to the codecs. Its ``reason`` is what the DLQ headers carry.
"""

from situflow.errors import InputError

__all__ = ["InputError"]
