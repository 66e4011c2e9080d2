"""The language registry: a query's first keyword picks its language (CLI contract).

``FROM`` → TPStream, ``PATTERN`` → SASE+, ``RETURN`` → COGRA. Each language package exposes
``compile(text, options) -> CompiledQuery``; they are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from situflow.errors import ParseError
from situflow.lang.tokens import T, tokenize
from situflow.operator import CompiledQuery, QueryOptions

LANGUAGES: dict[str, tuple[str, str]] = {
    "FROM": ("tpstream", "situflow.tpstream.query"),
    "PATTERN": ("sase", "situflow.nfa.query"),
    "RETURN": ("cogra", "situflow.trends.query"),
}


def detect_language(text: str) -> str:
    """The module path of the language ``text`` is written in."""
    first = tokenize(text)[0]
    entry = LANGUAGES.get(first.upper) if first.type is T.IDENT else None
    if entry is None:
        raise ParseError(
            "a query starts with FROM (TPStream), PATTERN (SASE+) or RETURN (COGRA), "
            f"found {first.describe()}",
            first.line, first.col, first.start, first.end,
        )
    return entry[1]


def compile_query(text: str, options: QueryOptions | None = None) -> CompiledQuery:
    """Parse, validate and compile ``text``; raises ``QueryError`` with its position."""
    module = importlib.import_module(detect_language(text))
    compiled: CompiledQuery = module.compile(text, options or QueryOptions())
    return compiled


def partition_attributes(query: CompiledQuery) -> tuple[str, ...]:
    """The attributes that split ``query``'s stream into independent parts: events that differ
    in one of them never meet in a result. TPStream's ``PARTITION BY``; SASE+'s ``[attr]``
    tests and ``PARTITION BY``; COGRA's ``GROUP-BY`` only, since a group's aggregate sums the
    trends of every equivalence partition in it."""
    compiled: Any = query
    if query.language == "tpstream":
        return tuple(compiled.partition_by)
    if query.language == "sase":
        return tuple(compiled.ast.partition_attrs())
    return tuple(compiled.plan.group_by)
