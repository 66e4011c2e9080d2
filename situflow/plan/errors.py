"""The errors of the plan package, all under :class:`situflow.errors.SituflowError`."""

from __future__ import annotations

from situflow.errors import SituflowError


class PatternError(SituflowError):
    """A pattern the planner cannot represent (unknown variable, negation outside SEQ, ...).

    The SASE+ validator is expected to reject such queries with a located ``ValidationError``
    first; reaching this error means a front end handed over an unchecked pattern.
    """
