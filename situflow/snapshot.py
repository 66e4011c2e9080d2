"""One envelope for every operator's snapshot (the ``snapshot``/``restore`` pair of
:mod:`situflow.operator`).

A snapshot names the operator kind, its state format version and the id of the compiled query
it belongs to, so state made by another query, another engine or another format is refused
with one message instead of being misread.

>>> state = wrap("nfa", 1, "3f2a", {"runs": []})
>>> unwrap("nfa", 1, "3f2a", state)
{'runs': []}
>>> unwrap("nfa", 1, "9e0c", state)
Traceback (most recent call last):
...
situflow.errors.StateError: the state belongs to another query or format (nfa v1 of query 3f2a, \
expected nfa v1 of query 9e0c); delete the state directory and restart
"""

from __future__ import annotations

from typing import Any

from situflow.errors import StateError


def wrap(kind: str, version: int, query_id: str, state: dict[str, Any]) -> dict[str, Any]:
    """``state`` in the envelope that :func:`unwrap` checks."""
    return {"kind": kind, "version": version, "query_id": query_id, "state": state}


def unwrap(kind: str, version: int, query_id: str, snapshot: Any) -> dict[str, Any]:
    """The state inside ``snapshot``; ``StateError`` unless it is ``kind`` v``version`` of
    the query ``query_id``."""
    found = snapshot if isinstance(snapshot, dict) else {}
    expected = (kind, version, query_id)
    if (found.get("kind"), found.get("version"), found.get("query_id")) != expected \
            or not isinstance(found.get("state"), dict):
        what = (f"{found.get('kind')} v{found.get('version')} of query {found.get('query_id')}"
                if found else f"a {type(snapshot).__name__}")
        raise StateError(f"the state belongs to another query or format ({what}, expected "
                         f"{kind} v{version} of query {query_id}); delete the state directory "
                         "and restart")
    return found["state"]
