"""How hard the property tests try: one Hypothesis profile per loop, chosen with
``--hypothesis-profile`` (``make test`` and CI: ``ci``; ``make test-fast``: ``dev``).

* ``dev``: a quick look while editing; every property still runs, on fewer examples.
* ``ci``: the examples the suite has always run (Hypothesis' 100 per test, and the larger
  counts of the tests that ask for them through :func:`scaled`).
* ``deep``: ten times ``ci``, and the long fuzz runs (tests/fuzz) with it; for a night, or
  before a release.

No profile has a deadline: the machines that run the suite are shared, so one slow example
says nothing about the code.
"""

from __future__ import annotations

import os

from hypothesis import settings

#: Examples per test in each profile; ``ci`` is Hypothesis' own default.
EXAMPLES = {"dev": 20, "ci": 100, "deep": 1_000}
#: The profile of a run that names none: ``ci`` where the ``CI`` variable is set, else ``dev``.
DEFAULT = "ci" if os.environ.get("CI") else "dev"


def register() -> None:
    for name, examples in EXAMPLES.items():
        settings.register_profile(name, max_examples=examples, deadline=None,
                                  print_blob=name != "dev")
    settings.load_profile(DEFAULT)


def scaled(factor: float) -> int:
    """``factor`` times the current profile's examples: for a test that needs more (or, being
    slow per example, fewer) than its neighbours; in ``ci``, ``scaled(8)`` is 800."""
    return max(1, round(settings.default.max_examples * factor))


def deep() -> bool:
    """Whether this run is the ``deep`` one."""
    return settings.get_current_profile_name() == "deep"
