"""Mutations of query texts: the edits a user's typo, a bad copy-paste or a hostile client make.

A text is split into tokens (words, numbers, whitespace, single characters), and one to three
edits apply: insert, delete, swap or duplicate tokens, replace numbers by extreme ones and
names by unicode or very long ones, empty a clause, truncate the text, insert stray text.
Seeds are generated queries and the bundled examples and fixtures.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import strategies as st

ROOT = Path(__file__).parents[2]
TOKEN = re.compile(r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|\w+|\s+|.", re.DOTALL)
NUMBER = re.compile(r"\d")
KEYWORDS = (
    "FROM", "PARTITION", "BY", "DEFINE", "AS", "PATTERN", "WITHIN", "RETURN", "AND", "OR", "NOT",
    "AT", "LEAST", "MOST", "BETWEEN", "SEQ", "WHERE", "CONSUME", "SEMANTICS", "GROUP-BY",
    "SLIDE", "NEXT", "LENGTH", "LEN", "i", "before", "meets", "met", "TRUE", "count", "avg",
    "first", "COUNT", "SUM", "skip_till_next_match", "skip-till-any-match", "contiguous",
)
EXTREME_NUMBERS = (
    "0", "-1", "1e308", "1e309", str(2**70), str(2**64), "1e-320", "0.0", "00", "1.5e", "9" * 30,
    "9" * 5000, "99999999999999999999 hours", "1e308 hours", "0 seconds", "0 ms", "1e-9 ms",
)
STRAY = (
    "(", ")", "[", "]", "{", "}", ",", ";", ".", "..", "~", "∼", "*", "+", "-", "%", "/", "^", "?",
    "<", ">=", "!=", "<>", "==", "≤", "∧", "¬", "--", "//", "/*", "*/", "'", '"', "`", "\x00",
    "\n", "\t", "\r", "\u2028", "\ufeff", "²", "①", "١٢", "[]", "[ ]", "()", "{ }", ":", "@", "#",
)
NAMES = (
    "ä", "名前", "x²", "_", "Δv", "ﬁ", "ǅ", "e\u0301", "`a-b`", "`", "``", "`AND`", "x" * 5000,
    "'é'", "'it''s'", '"x"', "''", "'\x00'", "ß",
)


def seeds() -> list[str]:
    """The bundled examples and the fixtures' queries, one text each."""
    texts = [p.read_text() for p in sorted((ROOT / "situflow" / "examples").iterdir())]
    for path in sorted((ROOT / "tests" / "fixtures").glob("*/*.*")):
        if path.suffix == ".cogra":  # one query a line
            texts += [line for line in path.read_text().splitlines() if line[:1].isalpha()]
            continue
        for block in path.read_text().split("\n\n"):  # a query, then '=>' or '-- error'
            lines = [line for line in block.splitlines() if not line.startswith("#")]
            query = [line for line in lines if not line.startswith(("=>", "-- error"))]
            texts += ["\n".join(query)] + [line[3:] for line in lines if line.startswith("=>")]
    return [t for t in texts if t.strip()]


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


@st.composite
def mutated(draw: st.DrawFn, texts: st.SearchStrategy[str]) -> str:
    parts = tokens(draw(texts))
    for _ in range(draw(st.integers(1, 3))):
        parts = _mutate(draw, parts)
    return "".join(parts)


def _mutate(draw: st.DrawFn, parts: list[str]) -> list[str]:
    n = len(parts)
    at = draw(st.integers(0, max(n - 1, 0)))
    kind = draw(st.sampled_from(["insert", "delete", "swap", "duplicate", "number", "name",
                                 "clause", "truncate", "text"]))
    if kind == "insert" or n == 0:
        token = draw(st.sampled_from(KEYWORDS + STRAY + NAMES + EXTREME_NUMBERS))
        return [*parts[:at], " ", token, " ", *parts[at:]]
    if kind == "delete":
        return parts[:at] + parts[at + 1:]
    if kind == "swap":
        other = draw(st.integers(0, n - 1))
        parts = list(parts)
        parts[at], parts[other] = parts[other], parts[at]
        return parts
    if kind == "duplicate":
        return parts[:at + 1] + parts[at:]
    if kind == "number":
        numbers = [k for k, p in enumerate(parts) if NUMBER.match(p)] or [at]
        k = draw(st.sampled_from(numbers))
        return [*parts[:k], draw(st.sampled_from(EXTREME_NUMBERS)), *parts[k + 1:]]
    if kind == "name":
        names = [k for k, p in enumerate(parts) if p[:1].isalpha()] or [at]
        k = draw(st.sampled_from(names))
        return [*parts[:k], draw(st.sampled_from(NAMES)), *parts[k + 1:]]
    if kind == "clause":
        # Empty a clause: drop what follows a keyword up to the next one.
        starts = [k for k, p in enumerate(parts) if p.upper() in KEYWORDS] or [at]
        k = draw(st.sampled_from(starts))
        end = next((j for j in range(k + 1, n) if parts[j].upper() in KEYWORDS), n)
        return [*parts[:k + 1], " ", *parts[end:]]
    if kind == "truncate":
        return parts[:at]
    text = draw(st.text(st.characters(exclude_categories=["Cs"]), max_size=8))
    return [*parts[:at], text, *parts[at:]]
