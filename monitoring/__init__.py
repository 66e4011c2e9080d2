"""Monitoring as code: the Grafana dashboards' generator (``dashboards.py``) and the promtool
unit tests of the alerts (``tests/alerts_test.yaml``). The rules and the generated dashboards
live in ``charts/situflow/files/``, which the chart includes verbatim; the runbooks in
``docs/runbooks.md``."""
