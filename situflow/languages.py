"""The language registry: a query's first keyword picks its language (CLI contract).

A :class:`Language` bundles the front end of :mod:`situflow.lang.dialect` (parser, validation,
printer) with the engine that compiles it; the compiled query answers the rest about itself
(``query_id``, ``partition_attributes``, ``operator()``). ``FROM`` is TPStream, ``PATTERN``
SASE+ and ``RETURN`` COGRA.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from situflow.lang.dialect import COGRA, SASE, TPSTREAM, Dialect, dialect_of
from situflow.operator import CompiledQuery, QueryOptions


@dataclass(frozen=True)
class Language:
    dialect: Dialect
    # The module whose ``compile(text, options)`` parses, validates and compiles a query. It is
    # imported on first use: an engine's numba kernels take seconds to import.
    engine: str

    def compile(self, text: str, options: QueryOptions | None = None) -> CompiledQuery:
        compiled: CompiledQuery = importlib.import_module(self.engine).compile(
            text, options or QueryOptions())
        return compiled


LANGUAGES: Mapping[str, Language] = MappingProxyType({
    language.dialect.first_keyword: language for language in (
        Language(TPSTREAM, "situflow.tpstream"),
        Language(SASE, "situflow.sase"),
        Language(COGRA, "situflow.trends.query"),
    )
})


def language_of(text: str) -> Language:
    """The language ``text`` is written in; raises a located ``ParseError`` for no language."""
    return LANGUAGES[dialect_of(text).first_keyword]


def compile_query(text: str, options: QueryOptions | None = None) -> CompiledQuery:
    """Parse, validate and compile ``text``; raises ``QueryError`` with its position."""
    return language_of(text).compile(text, options)
