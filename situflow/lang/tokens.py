"""Tokenizer shared by the three query languages (TPStream, SASE+, COGRA).

Keywords are not token types: every word is an ``IDENT`` and parsers match keywords by their
upper-cased text, so a language adds keywords without touching the tokenizer and attribute
names that happen to be keywords elsewhere (``count``, ``type``) stay usable.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from situflow.errors import TokenError


class T(enum.Enum):
    """Token types."""

    IDENT = "identifier"
    NUMBER = "number"
    STRING = "string"
    LPAREN = "'('"
    RPAREN = "')'"
    LBRACKET = "'['"
    RBRACKET = "']'"
    LBRACE = "'{'"
    RBRACE = "'}'"
    COMMA = "','"
    DOT = "'.'"
    DOTDOT = "'..'"
    SEMI = "';'"
    PLUS = "'+'"
    MINUS = "'-'"
    STAR = "'*'"
    SLASH = "'/'"
    PERCENT = "'%'"
    CARET = "'^'"
    QUESTION = "'?'"
    LT = "'<'"
    GT = "'>'"
    LE = "'<='"
    GE = "'>='"
    EQ = "'='"
    NE = "'!='"
    TILDE = "'~'"
    EOF = "end of query"


@dataclass(frozen=True, slots=True)
class Token:
    type: T
    text: str
    line: int
    col: int
    start: int
    end: int
    # Whether whitespace or a comment precedes the token: units stick to their number (`8m/s2`).
    spaced: bool = True

    @property
    def upper(self) -> str:
        return self.text.upper()

    def describe(self) -> str:
        if self.type is T.EOF:
            return "end of query"
        return f"'{self.text}'"


_SINGLE = {
    "(": T.LPAREN, ")": T.RPAREN, "[": T.LBRACKET, "]": T.RBRACKET, "{": T.LBRACE,
    "}": T.RBRACE, ",": T.COMMA, ";": T.SEMI, "+": T.PLUS, "-": T.MINUS, "*": T.STAR,
    "/": T.SLASH, "%": T.PERCENT, "^": T.CARET, "?": T.QUESTION, "=": T.EQ, "~": T.TILDE, "∼": T.TILDE,
    "≤": T.LE, "≥": T.GE, "≠": T.NE,
}
_LOGICAL_SYMBOLS = {"∧": "AND", "∨": "OR", "¬": "NOT"}
_DOUBLE = {"<=": T.LE, ">=": T.GE, "!=": T.NE, "<>": T.NE, "==": T.EQ, "..": T.DOTDOT}


def tokenize(text: str) -> list[Token]:
    """Split query text into tokens.

    ``--`` and ``//`` start comments to the end of the line, ``/* ... */`` comments may span
    lines (SASE+ Figure 1).
    """
    tokens: list[Token] = []
    i, line, line_start, n = 0, 1, 0, len(text)
    spaced = True

    def emit(kind: T, start: int, end: int) -> None:
        nonlocal spaced
        tokens.append(Token(kind, text[start:end], line, start - line_start + 1, start, end, spaced))
        spaced = False

    while i < n:
        c = text[i]
        if c == "\n":
            i, line, line_start, spaced = i + 1, line + 1, i + 1, True
        elif c.isspace():
            i, spaced = i + 1, True
        elif text.startswith(("--", "//"), i):
            while i < n and text[i] != "\n":
                i += 1
            spaced = True
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise TokenError("unterminated comment", line, i - line_start + 1, i, n)
            line += text.count("\n", i, j)
            if "\n" in text[i:j]:
                line_start = text.rfind("\n", i, j) + 1
            i, spaced = j + 2, True
        elif c in _LOGICAL_SYMBOLS:
            # The papers write predicates with logic symbols: a ∧ b, ¬c. They read as keywords.
            tokens.append(Token(T.IDENT, _LOGICAL_SYMBOLS[c], line, i - line_start + 1, i, i + 1,
                                spaced))
            i, spaced = i + 1, False
        # isdecimal, not isdigit: '²' and '①' are digits that int() and float() refuse.
        elif c.isdecimal() or (c == "." and i + 1 < n and text[i + 1].isdecimal()):
            j = i
            while j < n and text[j].isdecimal():
                j += 1
            if j + 1 < n and text[j] == "." and text[j + 1].isdecimal():
                j += 1
                while j < n and text[j].isdecimal():
                    j += 1
            if j < n and text[j] in "eE" and j + 1 < n and (
                text[j + 1].isdecimal() or (text[j + 1] in "+-" and j + 2 < n and text[j + 2].isdecimal())
            ):
                j += 2
                while j < n and text[j].isdecimal():
                    j += 1
            emit(T.NUMBER, i, j)
            i = j
        elif c.isalpha() or c == "_":
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            emit(T.IDENT, i, j)
            i = j
        elif c == "`":
            # Backquoted identifiers allow any attribute name, even one with dashes.
            j = text.find("`", i + 1)
            if j < 0:
                raise TokenError("unterminated quoted identifier", line, i - line_start + 1, i, n)
            tokens.append(Token(T.IDENT, text[i + 1 : j], line, i - line_start + 1, i, j + 1, spaced))
            spaced = False
            i = j + 1
        elif c in "'\"":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 1
            if j >= n or text[j] != c:
                raise TokenError("unterminated string literal", line, i - line_start + 1, i, j)
            emit(T.STRING, i, j + 1)
            i = j + 1
        elif text[i : i + 2] in _DOUBLE:
            emit(_DOUBLE[text[i : i + 2]], i, i + 2)
            i += 2
        elif c in "<>":
            emit(T.LT if c == "<" else T.GT, i, i + 1)
            i += 1
        elif c == ".":
            emit(T.DOT, i, i + 1)
            i += 1
        elif c in _SINGLE:
            emit(_SINGLE[c], i, i + 1)
            i += 1
        else:
            raise TokenError(f"unexpected character {c!r}", line, i - line_start + 1, i, i + 1)
    tokens.append(Token(T.EOF, "", line, n - line_start + 1, n, n, True))
    return tokens
