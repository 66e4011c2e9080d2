"""The whole suite's setup: the Hypothesis profiles (:mod:`tests.profiles`), registered before
the Hypothesis plugin reads ``--hypothesis-profile``."""

from tests import profiles

profiles.register()
