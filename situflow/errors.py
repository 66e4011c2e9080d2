"""The one exception hierarchy of situflow.

``QueryError`` carries its position as data (line, column, character offsets); only the CLI
formats it as ``FILE:line:col: message`` with a caret line (:meth:`QueryError.render`).
``InputError`` carries what a dead-letter record needs: where the bad event came from and why.
"""

from __future__ import annotations

#: Exit codes of every ``situflow`` command (core and plug-in): bad input or a failed command,
#: and a query error.
EXIT_INPUT, EXIT_QUERY = 1, 2


class SituflowError(Exception):
    """Base class of every error situflow raises on purpose."""


class QueryError(SituflowError):
    """A mistake in query text, located at ``line``:``col`` (both 1-based)."""

    def __init__(self, message: str, line: int = 1, col: int = 1, start: int = 0, end: int = 0):
        super().__init__(message)
        self.message = message
        self.line = line
        self.col = col
        self.start = start
        self.end = max(end, start + 1)

    def render(self, filename: str, text: str) -> str:
        """``filename:line:col: message`` followed by the offending line and a caret."""
        lines = text.split("\n")  # as the tokenizer counts lines (not at \u2028 and the like)
        source = lines[self.line - 1] if 0 < self.line <= len(lines) else ""
        width = max(1, min(self.end - self.start, len(source) - self.col + 1))
        caret = " " * (self.col - 1) + "^" * width
        return f"{filename}:{self.line}:{self.col}: {self.message}\n  {source}\n  {caret}"

    def __str__(self) -> str:
        return f"{self.line}:{self.col}: {self.message}"


class TokenError(QueryError):
    """A character sequence that is no token of the language."""


class ParseError(QueryError):
    """Tokens in an order the grammar does not allow."""


class ValidationError(QueryError):
    """A well-formed query that is meaningless: unknown names, wrong types, broken rules."""


class InputError(SituflowError):
    """A bad event: ``reason`` says what is wrong, ``source`` and ``position`` where it came from.

    Services send such events to the dead-letter topic with the reason; the CLI reports the line.
    """

    def __init__(self, reason: str, source: str = "", position: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.source = source
        self.position = position

    def __str__(self) -> str:
        where = f"{self.source}:{self.position}: " if self.position is not None else ""
        return f"{where}{self.reason}"


class StateError(SituflowError):
    """Operator state that cannot be restored (wrong format version, another query)."""


class SequenceError(SituflowError):
    """Situation batches that cannot be merged in sequence (distributed TPStream, thesis §5.6.3):
    one is missing for longer than the merger may wait, or a batch's events overlap the last."""
