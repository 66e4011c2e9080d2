"""The COGRA language front end: canonical printing round trips, and located errors.

Cases live in ``tests/fixtures/cogra/`` as data: ``identity.cogra`` (queries that print back
unchanged), ``equivalent.cogra`` (written form, canonical form) and ``errors.cogra`` (query,
expected ``line:col: message`` prefix).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from situflow.errors import QueryError
from situflow.lang.cogra import parse
from situflow.languages import compile_query
from situflow.trends.query import compile

FIXTURES = Path(__file__).parent.parent / "fixtures" / "cogra"


def _lines(name: str) -> list[str]:
    text = (FIXTURES / name).read_text()
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _pairs(name: str) -> list[tuple[str, str]]:
    lines = _lines(name)
    if name == "equivalent.cogra":
        # A written form may continue on indented lines.
        joined: list[str] = []
        for line in lines:
            if line.startswith(" ") and joined:
                joined[-1] += "\n" + line
            else:
                joined.append(line)
        lines = joined
    return list(zip(lines[::2], lines[1::2], strict=True))


@pytest.mark.parametrize("text", _lines("identity.cogra"))
def test_canonical_text_round_trips(text: str) -> None:
    tree = parse(text)
    assert tree.to_text() == text
    assert parse(tree.to_text()) == tree


@pytest.mark.parametrize(("written", "canonical"), _pairs("equivalent.cogra"))
def test_equivalent_spellings_share_canonical_text_and_id(written: str, canonical: str) -> None:
    assert parse(written).to_text() == canonical
    assert compile(written).query_id == compile(canonical).query_id


@pytest.mark.parametrize(("text", "expected"), _pairs("errors.cogra"))
def test_errors_are_located(text: str, expected: str) -> None:
    with pytest.raises(QueryError) as info:
        compile(text)
    assert str(info.value).startswith(expected)


def test_registry_dispatches_return_to_cogra() -> None:
    compiled = compile_query("RETURN COUNT(*) PATTERN A+ SEMANTICS contiguous WITHIN 5")
    assert compiled.language == "cogra"
    assert "granularity: pattern" in compiled.describe()


def test_multi_line_errors_carry_the_line() -> None:
    text = "RETURN COUNT(*)\nPATTERN SEQ(A a, B b)\nSEMANTICS contiguous\nWHERE a.x < b.x\nWITHIN 5"
    with pytest.raises(QueryError) as info:
        compile(text)
    assert (info.value.line, info.value.col) == (4, 7)
