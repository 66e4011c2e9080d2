"""One :class:`Dialect` per language, as sqlglot bundles a dialect: the front end of a query.

A dialect carries its first keyword (the CLI contract: ``FROM`` is TPStream, ``PATTERN`` is
SASE+, ``RETURN`` is COGRA), its parser, its validation pass and its canonical printer. The
three are declared here rather than at the bottom of each ``lang/<language>.py`` because each
validation module imports its language module; the engines' half of a language (its compiler
and operators) is bundled above the engines, in :mod:`situflow.languages`. A dialect names its
modules and imports them at first use: a query needs one language, and each costs start-up.

>>> dialect_of("return count(*) pattern A+ semantics contiguous within 5").name
'cogra'
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from situflow.errors import ParseError
from situflow.lang.tokens import T, tokenize


@dataclass(frozen=True)
class Dialect:
    # The name compiled queries, registry records and metrics carry: "tpstream", "sase", "cogra".
    name: str
    # How people write the name, for messages.
    title: str
    # The keyword every query of the language starts with.
    first_keyword: str
    # The language module (its ``parse``) and its validation module (its ``validate``).
    module: str
    validation: str
    # Whether ``validate`` takes the stream's time unit (durations in the query need it).
    timed: bool = True

    def parse(self, text: str) -> Any:
        """Query text to its tree; raises a located ParseError or TokenError."""
        return importlib.import_module(self.module).parse(text)

    def validate(self, tree: Any, type_field: str = "type", time_unit: float = 1.0) -> None:
        """Raises a located ValidationError unless ``tree`` follows the language's rules."""
        validate = importlib.import_module(self.validation).validate
        if self.timed:
            validate(tree, type_field, time_unit)
        else:
            validate(tree, type_field)

    def print(self, tree: Any) -> str:
        """Tree to canonical text: the same query in other whitespace or case prints alike."""
        text: str = tree.to_text()
        return text

    def check(self, text: str, type_field: str = "type", time_unit: float = 1.0) -> Any:
        """The tree of ``text`` once it has passed validation."""
        tree = self.parse(text)
        self.validate(tree, type_field, time_unit)
        return tree


TPSTREAM = Dialect("tpstream", "TPStream", "FROM", "situflow.lang.tpstream",
                   "situflow.lang.validate_tpstream")
SASE = Dialect("sase", "SASE+", "PATTERN", "situflow.lang.sase", "situflow.lang.validate_sase",
               timed=False)
COGRA = Dialect("cogra", "COGRA", "RETURN", "situflow.lang.cogra",
                "situflow.lang.validate_cogra")

DIALECTS: Mapping[str, Dialect] = MappingProxyType(
    {d.first_keyword: d for d in (TPSTREAM, SASE, COGRA)})


def dialect_of(text: str) -> Dialect:
    """The dialect ``text`` is written in, by its first keyword."""
    first = tokenize(text)[0]
    dialect = DIALECTS.get(first.upper) if first.type is T.IDENT else None
    if dialect is None:
        choices = ", ".join(f"{d.first_keyword} ({d.title})" for d in DIALECTS.values())
        head, _, last = choices.rpartition(", ")
        raise ParseError(f"a query starts with {head} or {last}, found {first.describe()}",
                         first.line, first.col, first.start, first.end)
    return dialect
