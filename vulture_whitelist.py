"""Names vulture (``make lint``) cannot see used: read by a framework, by name, or only through
the environment. Each entry says who uses it; ``--ignore-decorators`` and ``--ignore-names`` in
the Makefile cover the decorated functions and the callback parameters."""

# ruff: noqa
from workers.matcher import Matcher

# prometheus_client calls a custom collector's collect().
Matcher.collect

# aiokafka reads the consumer attribute that workers/faust_patches.py sets on it.
_._fetch_max_wait_ms

# Read positionally by a match statement (``case InsertLine(i, line)``).
_.before_event
