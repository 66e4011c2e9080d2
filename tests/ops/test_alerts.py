"""The alerting rules (``charts/situflow/files/alerts.yaml``): valid for Prometheus, each alert
tested firing and not firing (``monitoring/tests/alerts_test.yaml``, ``promtool test rules``),
and each with a severity, a summary, a description and a runbook section that exists.
"""

from __future__ import annotations

import re
import subprocess
from typing import Any

import pytest
import yaml

from tests.ops.conftest import REPO, tool

RULES = REPO / "charts/situflow/files/alerts.yaml"
UNIT_TESTS = REPO / "monitoring/tests/alerts_test.yaml"
RUNBOOKS = REPO / "docs/runbooks.md"
RUNBOOK_BASE = "https://github.com/situflow/situflow/blob/main/docs/runbooks.md#"
SEVERITIES = {"critical", "warning"}


def alerts() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors of the markdown's headings (lower case, punctuation dropped)."""
    headings = re.findall(r"^#+ (.+)$", markdown, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_promtool_finds_the_rule_file_valid() -> None:
    done = subprocess.run([tool("promtool"), "check", "rules", str(RULES)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_unit_tests_of_every_alert_pass() -> None:
    done = subprocess.run([tool("promtool"), "test", "rules", str(UNIT_TESTS)],
                          capture_output=True, text=True, cwd=UNIT_TESTS.parent)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_rule_file_is_plain_yaml_without_helm_templating() -> None:
    """The chart includes it verbatim; Prometheus' own ``{{ $labels }}`` are fine."""
    assert not re.search(r"{{-?\s*\.(Values|Release|Chart)", RULES.read_text())


@pytest.mark.parametrize("alert", alerts(), ids=lambda rule: rule["alert"])
def test_every_alert_has_a_severity_a_summary_a_description_and_a_runbook(
        alert: dict[str, Any]) -> None:
    assert alert["labels"]["severity"] in SEVERITIES
    annotations = alert["annotations"]
    assert annotations["summary"] and annotations["description"]
    url = annotations["runbook_url"]
    assert url == RUNBOOK_BASE + alert["alert"].lower(), "the runbook section named after it"
    assert url.removeprefix(RUNBOOK_BASE) in anchors(RUNBOOKS.read_text())


def test_every_alert_is_tested_firing_and_not_firing() -> None:
    """A test group fires it and holds input (or a moment) where it does not fire."""
    fired, quiet = set(), set()
    for case in yaml.safe_load(UNIT_TESTS.read_text())["tests"]:
        for check in case.get("alert_rule_test", []):
            expected = check.get("exp_alerts") or []
            if expected:
                fired.add(check["alertname"])
            if not expected or len(case["input_series"]) > len(expected):
                quiet.add(check["alertname"])
    names = {rule["alert"] for rule in alerts()}
    assert names - fired == set(), "never seen firing"
    assert names - quiet == set(), "never seen quiet"
