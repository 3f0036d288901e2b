"""Every alert has a runbook named after it and every runbook an alert; front matter matches the rules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from servescope.bundle.alerts.bundle import all_alerts
from servescope.core.config import AlertsConfig
from servescope.runbooks.document import SHIPPED_RUNBOOKS, read_page

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
    text = read_page(path)  # the {{ config.x }} thresholds filled in, as the service reads it
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


def _mitigation(text: str) -> str:
    return text.split("## Mitigation", 1)[1]


@pytest.mark.parametrize("name", sorted(ALERTS))
def test_lowering_the_batch_is_never_the_first_mitigation(name: str) -> None:
    mitigation = _mitigation(read_page(RUNBOOKS / f"{name}.md"))
    first = re.search(r"^(?:1\.|-) (.*?)(?=^(?:\d+\.|-) |^```|\Z)", mitigation, re.MULTILINE | re.DOTALL)
    assert first is None or "lower the batch" not in first.group(1).lower(), f"{name}: {first.group(1)[:120]}"
    advised = re.findall(r"\*\*(?!Do not)[^*]*lower the batch size[^*]*\*\*", mitigation, re.IGNORECASE)
    for said in advised:
        assert "rolling restart" in said, f"{name}: {said!r} does not say it needs a rolling restart"


@pytest.mark.parametrize("name", sorted(ALERTS))
def test_a_gpu_reset_first_stops_what_keeps_the_gpu_open(name: str) -> None:
    text = read_page(RUNBOOKS / f"{name}.md")
    for paragraph in re.split(r"\n\s*\n|\n(?=\d+\. )", text):
        if "--gpu-reset" in paragraph:
            for holder in ("nv-hostengine", "dcgm-exporter", "device plugin", "dcgmi"):
                assert holder in paragraph, f"{name}: a --gpu-reset step does not stop {holder} first"


def test_scale_steps_add_replicas_and_never_remove_them() -> None:
    steps = [
        yaml.safe_load(m.group("body"))
        for path in _runbook_files().values()
        for m in STEP.finditer(read_page(path))
        if "action: scale_deployment" in m.group("body")
    ]
    assert steps
    for found in steps:
        assert found["params"]["add"] > 0 and "replicas" not in found["params"], found
        assert not {"allow_decrease", "allow_zero"} & set(found["params"]), found
