"""How to read a stream's archived events: ``<root>/<topic>/_stream.json``.

Written by the archiver (from its settings) for ``<stream>.ordered`` and by ``situflow archive
import``; the offline jobs read the time field, unit, type, key and id attributes from it, so a
query runs offline exactly as the services ran it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

STREAM_FILE = "_stream.json"


@dataclass(frozen=True)
class StreamSettings:
    """The stream ``stream``'s event layout (topics/catalog.py StreamSpec, situflow.io.jsonl
    Fields)."""

    stream: str
    time_field: str = "ts"
    time_unit: float = 1.0
    type_field: str = "type"
    key_fields: tuple[str, ...] = ()
    id_field: str = "id"

    def to_bytes(self) -> bytes:
        return json.dumps({**asdict(self), "key_fields": list(self.key_fields)},
                          indent=1).encode()

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> StreamSettings:
        return cls(**{**document, "key_fields": tuple(document.get("key_fields", ()))})


def ordered_topic(stream: str) -> str:
    """The topic of a stream's ordered events (the one the offline path reads).

    >>> ordered_topic("cars")
    'cars.ordered'
    """
    return f"{stream}.ordered"
