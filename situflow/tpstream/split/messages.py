"""The messages of the situations topic (thesis §5.6.5): what one query derived from one
ordered message, as the deriver service writes it and the matcher service reads it. The split
design: :mod:`situflow.tpstream.split`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from situflow.errors import InputError
from situflow.tpstream.split.batches import SituationBatch
from situflow.tpstream.split.records import SituationRecord


@dataclass(frozen=True)
class SituationMessage:
    """One message of the situations topic: what one query derived from one ordered message.

    Over a partitioned stream, its situation records in stream order (``records``); the value
    is ``{"query", "query_id", "registered_at", "rows"}``, a record as the positional row of
    :meth:`SituationRecord.to_row` (named fields and a record id per record made encoding and
    decoding cost more than deriving and matching). Over an unpartitioned stream, the batch's
    situation batch (``batch``) and whether the query begins at it (``starts``); the value is
    ``{"query", "query_id", "registered_at", "starts", "batch"}`` with
    :meth:`SituationBatch.to_dict`.
    """

    query: str
    query_id: str
    registered_at: int
    records: list[SituationRecord] = field(default_factory=list)
    batch: SituationBatch | None = None
    starts: bool = False

    def encode(self) -> bytes:
        value: dict[str, Any] = {"query": self.query, "query_id": self.query_id,
                                 "registered_at": self.registered_at}
        if self.batch is None:
            value["rows"] = [r.to_row() for r in self.records]
        else:
            value["starts"] = self.starts
            value["batch"] = self.batch.to_dict()
        return json.dumps(value).encode()

    @classmethod
    def decode(cls, value: bytes | None) -> SituationMessage:
        """The message of a Kafka message value; ``InputError`` says what is wrong with it."""
        if value is None:
            raise InputError("empty message (null value)")
        try:
            message = json.loads(value)
        except (UnicodeDecodeError, ValueError) as exc:
            raise InputError(f"invalid JSON: {exc}") from None
        if not isinstance(message, dict) or not isinstance(message.get("query"), str) or \
                not isinstance(message.get("query_id"), str) or \
                type(message.get("registered_at")) is not int or \
                not (isinstance(message.get("rows"), list) or
                     (isinstance(message.get("batch"), dict) and
                      type(message.get("starts")) is bool)):
            raise InputError("a situation message is a JSON object {query, query_id, "
                             "registered_at (integer), rows: [...]} or {query, query_id, "
                             "registered_at, starts (boolean), batch: {...}}")
        head = message["query"], message["query_id"], message["registered_at"]
        if "batch" in message:
            return cls(*head, batch=SituationBatch.from_dict(message["batch"]),
                       starts=message["starts"])
        return cls(*head, [SituationRecord.from_row(r) for r in message["rows"]])
