"""One :class:`Dialect` per language, as sqlglot bundles a dialect: the front end of a query.

A dialect carries its first keyword (the CLI contract: ``FROM`` is TPStream, ``PATTERN`` is
SASE+, ``RETURN`` is COGRA), its parser, its validation pass and its canonical printer. The
three are declared here rather than at the bottom of each ``lang/<language>.py`` because each
validation module imports its language module; the engines' half of a language (its compiler
and operators) is bundled above the engines, in :mod:`situflow.languages`.

>>> dialect_of("return count(*) pattern A+ semantics contiguous within 5").name
'cogra'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from situflow.errors import ParseError
from situflow.lang import cogra, sase, tpstream, validate_cogra, validate_sase, validate_tpstream
from situflow.lang.tokens import T, tokenize


@dataclass(frozen=True)
class Dialect:
    # The name compiled queries, registry records and metrics carry: "tpstream", "sase", "cogra".
    name: str
    # How people write the name, for messages.
    title: str
    # The keyword every query of the language starts with.
    first_keyword: str
    # Query text to its tree; raises a located ParseError or TokenError.
    parse: Callable[[str], Any]
    # (tree, type_field, time_unit) -> None; raises a located ValidationError.
    validate: Callable[[Any, str, float], None]
    # Tree to canonical text: the same query in other whitespace or case prints alike.
    print: Callable[[Any], str]

    def check(self, text: str, type_field: str = "type", time_unit: float = 1.0) -> Any:
        """The tree of ``text`` once it has passed validation."""
        tree = self.parse(text)
        self.validate(tree, type_field, time_unit)
        return tree


TPSTREAM = Dialect(
    name="tpstream", title="TPStream", first_keyword="FROM", parse=tpstream.parse,
    validate=validate_tpstream.validate, print=tpstream.Query.to_text,
)
SASE = Dialect(
    name="sase", title="SASE+", first_keyword="PATTERN", parse=sase.parse,
    validate=lambda tree, type_field, time_unit: validate_sase.validate(tree, type_field),
    print=sase.SaseQuery.to_text,
)
COGRA = Dialect(
    name="cogra", title="COGRA", first_keyword="RETURN", parse=cogra.parse,
    validate=validate_cogra.validate, print=cogra.CograQuery.to_text,
)

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
