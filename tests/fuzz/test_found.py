"""What the query fuzzer found (issue #12, point 6), each kept as a plain example.

Crashes: inputs that made ``situflow run`` end in a traceback or hang; each now runs or is
refused with a located error. Canonical text: trees whose printed text did not parse back to
the same query, which ``situflow check`` shows and the query id hashes.
"""

from __future__ import annotations

import pytest

from situflow.errors import QueryError
from situflow.languages import compile_query
from tests.fuzz.harness import run

STREAM = [{"ts": t, "type": "AB"[t % 2], "x": t % 3, "y": 1, "k": 0, "s": "a"}
          for t in range(8)]
TPS = "FROM S DEFINE A AS {}, B AS x < 2 PATTERN A before B WITHIN 5s RETURN count(A) AS n"
SASE = "PATTERN SEQ(A a, B b) WHERE skip_till_any_match(a, b) {{ {} }} WITHIN 5 seconds"
COGRA = "RETURN COUNT(*) PATTERN A a+ SEMANTICS contiguous WHERE {} WITHIN 5"

CRASHES = {
    # numpy arithmetic cannot hold an integer beyond 64 bits: OverflowError in vectorized
    # conditions.
    "tpstream integer beyond 64 bits": TPS.format("x + 100000000000000000000 > 1"),
    "sase integer beyond 64 bits": SASE.format(f"a.x * {2**70} > 1"),
    "cogra integer beyond 64 bits": COGRA.format(f"a.x - {2**70} < 1"),
    # int() converts at most 4300 digits: ValueError out of the parser.
    "number with 5000 digits": TPS.format("x > " + "9" * 5000),
    "sase index with 5000 digits": SASE.replace("A a,", "A+ a[],").format(
        "a[" + "9" * 5000 + "].x > 1"),
    # A duration beyond the float range: COGRA's window check called round(inf).
    "cogra duration beyond the float range": COGRA.format("a.x > 1").replace(
        "WITHIN 5", "WITHIN 1e308 hours"),
    # str.isdigit() accepts '²', which int() refuses: ValueError out of the tokenizer.
    "unicode superscript digit": TPS.format("x > ²"),
    # LENGTH(a) >= m unrolled a+ into m positions: a hang for a million.
    "cogra huge minimal length": COGRA.format("LENGTH(a) >= 1000000"),
}


@pytest.mark.parametrize("text", CRASHES.values(), ids=CRASHES.keys())
def test_found_crashes_run_or_are_refused_with_a_located_error(text: str) -> None:
    run(text, STREAM)


CANONICAL = {
    # A double-quoted string may hold single quotes; the printer always used single ones.
    "quote in a string": (SASE.format("a.s = \"it's\""),
                          "a.s = \"it's\""),
    # Comparisons do not chain: a comparison of comparisons keeps its parentheses.
    "comparison of comparisons": (TPS.format("(x < 1) = (y < 2)"), "(x < 1) = (y < 2)"),
    # NOT binds looser than '=': (NOT x > 1) = ... printed as NOT (x > 1 = ...).
    "negated operand of a comparison": (TPS.format("(NOT x > 1) = (y > 2)"),
                                        "(NOT x > 1) = (y > 2)"),
    # '--' starts a comment: the negation of a negation printed as --x.
    "double negation": (TPS.format("- -x > 1"), "-(-x) > 1"),
    # 9 ms is 0.009 s, printed back as 9.000000000000002 ms.
    "milliseconds": (TPS.format("x > 1").replace("5s", "9 ms"), "WITHIN 9 ms"),
    # 1e308 printed as a 309-digit integer.
    "large float": (TPS.format("x > 1e308"), "x > 1e+308"),
    # Backquoted names (any attribute name, even with dashes) printed without backquotes.
    "backquoted attribute": (TPS.format("`speed-kmh` > 1"), "`speed-kmh` > 1"),
    "backquoted sase attribute": (SASE.format("a.`speed-kmh` > 1 AND [`car-id`]"),
                                  "a.`speed-kmh` > 1 AND [`car-id`]"),
    "backquoted names of results": (
        SASE.format("a.x > 1").replace("WITHIN", "RETURN a.x AS `a-b` WITHIN"), "AS `a-b`"),
    "backquoted tpstream names": (TPS.replace("AS n", "AS `n-1`").replace("FROM S", "FROM `s-1`")
                                  .format("x > 1"), "FROM `s-1`"),
    "backquoted cogra names": (COGRA.format("[`car-id`] AND a.`speed-kmh` > 1").replace(
        "COUNT(*)", "SUM(a.`speed-kmh`)").replace("A a+", "`page-view` a+"),
        "RETURN SUM(a.`speed-kmh`) PATTERN `page-view` a+"),
}


@pytest.mark.parametrize("number", ["1e400", "1" + "0" * 400])
def test_numbers_beyond_the_float_range_are_refused_where_written(number: str) -> None:
    """They were infinity, printed ``inf``: the canonical text read an attribute named inf."""
    with pytest.raises(QueryError, match="too large") as refused:
        compile_query(TPS.format(f"x > {number}"))
    assert (refused.value.line, refused.value.col) == (1, 24)


def test_a_backquoted_word_after_a_number_is_no_unit() -> None:
    """``8`a-b`/s2`` read as 8 with the unit ``a-b/s2``, printed ``8a-b/s2``: 8a - b/s2."""
    with pytest.raises(QueryError) as refused:
        compile_query(TPS.format("x > 8`a-b`/s2"))
    assert (refused.value.line, refused.value.col) == (1, 25)


@pytest.mark.parametrize(("text", "expected"), CANONICAL.values(), ids=CANONICAL.keys())
def test_found_canonical_texts_parse_back_to_the_same_query(text: str, expected: str) -> None:
    canonical = compile_query(text).canonical()
    assert expected in canonical
    assert compile_query(canonical).canonical() == canonical
    assert compile_query(canonical).query_id == compile_query(text).query_id
