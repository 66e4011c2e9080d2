"""One query-id recipe for every language: a hash of the query's canonical text.

The same query written in other whitespace or case prints the same canonical text, so it has
the same id; snapshots, result records and the registry all name a query by it.

>>> query_id("RETURN COUNT(*) PATTERN A+")
'fdad3ea026fd72f2'
"""

from __future__ import annotations

import hashlib


def query_id(canonical: str) -> str:
    """The 16 hex digits of the 8-byte blake2b digest of ``canonical``."""
    return hashlib.blake2b(canonical.encode(), digest_size=8).hexdigest()
