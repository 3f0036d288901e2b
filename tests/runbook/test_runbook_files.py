"""Every alert has a runbook named after it and every runbook an alert; front matter matches the rules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from servescope.alerts.bundle import all_alerts
from servescope.alerts.config import AlertsConfig
from servescope.runbooks.document import SHIPPED_RUNBOOKS

RUNBOOKS = SHIPPED_RUNBOOKS
ALERTS = {alert.name: alert for alert in all_alerts(AlertsConfig())}
STEP = re.compile(r"^```step (?P<attrs>[^\n]*)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)
SECTIONS = ("## Meaning", "## Impact", "## Diagnosis", "## Mitigation")


def _runbook_files() -> dict[str, Path]:
    return {p.stem: p for p in RUNBOOKS.glob("*.md") if p.name != "README.md"}


def test_one_runbook_per_alert_and_one_alert_per_runbook() -> None:
    files = _runbook_files()
    assert sorted(files) == sorted(ALERTS), (
        f"missing: {sorted(set(ALERTS) - set(files))}, without alert: {sorted(set(files) - set(ALERTS))}"
    )


@pytest.mark.parametrize("name", sorted(ALERTS))
def test_runbook_matches_its_alert(name: str) -> None:
    path = RUNBOOKS / f"{name}.md"
    text = path.read_text()
    front = re.match(r"^---\n(.*?)\n---\n", text, re.DOTALL)
    assert front, f"{path.name}: no front matter"
    meta = yaml.safe_load(front.group(1))
    alert = ALERTS[name]
    assert meta == {"alert": name, "severity": alert.severity, "summary": alert.summary}
    assert f"# {name}\n" in text
    positions = [text.find(section) for section in SECTIONS]
    assert -1 not in positions and positions == sorted(positions), (
        f"{path.name}: sections missing or out of order"
    )
    assert not re.search(r"\b(TODO|TBD|FIXME)\b", text)
    steps = list(STEP.finditer(text))
    kinds = [re.search(r"kind=(\w+)", s.group("attrs")).group(1) for s in steps]  # type: ignore[union-attr]
    assert "read" in kinds, f"{path.name}: no read step"
    # A step may only bind labels the alert carries: its identifying labels (and the selector's `job` for
    # alerts over absent()/up, which keep it).
    carried = {*alert.keys, "alertname", "severity", *(("job",) if "job" in alert.expr else ())}
    for step in steps:
        body = yaml.safe_load(step.group("body"))
        assert set(body) <= {"action", "params"} and isinstance(body["action"], str)
        for value in (body.get("params") or {}).values():
            if isinstance(value, str) and "{{" in value:
                bound = re.fullmatch(r"\{\{ labels\.([a-z_]+) \}\}", value)
                assert bound, f"{path.name}: template {value!r}"
                assert bound.group(1) in carried, f"{path.name}: {name} carries no label {bound.group(1)!r}"
