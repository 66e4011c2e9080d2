"""The language bundle: one dialect per first keyword, a front end that imports no engine, and
one query-id recipe."""

from __future__ import annotations

import subprocess
import sys

import pytest

from situflow.errors import ParseError
from situflow.lang.dialect import DIALECTS, dialect_of
from situflow.lang.identity import query_id
from situflow.languages import LANGUAGES, compile_query

QUERIES = {
    "tpstream": "FROM S DEFINE A AS a > 1, B AS b > 1 PATTERN A before B WITHIN 5s "
                "RETURN count(A) AS n",
    "sase": "PATTERN SEQ(A a, B b) WHERE skip_till_any_match(a, b) { a.x < b.x } WITHIN 5s",
    "cogra": "RETURN COUNT(*) PATTERN SEQ(A+, B) SEMANTICS contiguous WITHIN 5",
}


@pytest.mark.parametrize("language", sorted(QUERIES))
def test_a_dialect_parses_validates_and_prints_what_its_language_compiles(language: str) -> None:
    text = QUERIES[language]
    dialect = dialect_of(text)
    assert dialect.name == language
    assert LANGUAGES[dialect.first_keyword].dialect is dialect
    canonical = dialect.print(dialect.check(text))
    compiled = compile_query(text)
    assert compiled.canonical() == canonical
    assert compiled.query_id == query_id(canonical)


def test_the_first_keyword_picks_the_language() -> None:
    assert sorted(DIALECTS) == ["FROM", "PATTERN", "RETURN"]
    with pytest.raises(ParseError, match="a query starts with FROM"):
        dialect_of("SELECT 1")


def test_the_front_end_imports_no_engine() -> None:
    # A fresh interpreter: the test session has imported the engines already.
    code = ("import sys, situflow.lang.dialect; "
            "print(sorted(m for m in sys.modules if m.split('.')[:2] in ("
            "['situflow', 'tpstream'], ['situflow', 'nfa'], ['situflow', 'trends'], "
            "['situflow', 'plan'], ['situflow', 'operator'])))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
