"""A real browser (headless Chromium) on a runbook page served by `servescope runbook-server`.

Needs Playwright for Python (the `test` extras) and Debian's `chromium` (scripts/install-debian-tools.sh);
the browser Playwright would download is not used.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from tests.runbook.webhook.notices import alert, payload
from tests.support import SERVESCOPE, Served, servescope_serving, start_child, stop, wait_for
from tests.support.browser import headless_chromium
from tests.support.servers import RUNBOOK_LISTENING

pytestmark = pytest.mark.e2e
ALERT = "ServescopeGpuMemoryLeakSuspected"
SCREENSHOT = Path("/tmp/runbook-page.png")


EXPORTER_ARGS = ("--simulate", "--gpus", "2", "--engines", "1", "--seed", "5", "--derived-interval", "1")


@pytest.fixture(scope="module")
def exporter() -> Iterator[Served]:
    with servescope_serving(*EXPORTER_ARGS) as served:
        yield served


WEBHOOK_TOKEN = "webhook-test-token"


@pytest.fixture(scope="module")
def runbook_server(exporter: Served, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("runbook-server")
    (folder / "webhook-token").write_text(WEBHOOK_TOKEN + "\n")
    (folder / "webhook-token").chmod(0o600)
    argv = [
        SERVESCOPE,
        "runbook-server",
        "--listen",
        "127.0.0.1:0",
        "--exporter-url",
        exporter.base,
        "--audit-log",
        str(folder / "audit.jsonl"),
        "--webhook-token-file",
        str(folder / "webhook-token"),
    ]
    served = start_child("runbook-server", argv, RUNBOOK_LISTENING, 20, cwd=folder)
    try:
        yield served.base
    finally:
        stop(served)


def test_runbook_page_in_chromium(exporter: Served, runbook_server: str, tmp_path: Path) -> None:
    gpus = httpx.get(f"{exporter.base}/api/v1/gpus", timeout=10).json()["gpus"]
    uuid = next(g["uuid"] for g in gpus if str(g.get("gpu", g.get("index"))) == "0")
    labels = {
        "instance": exporter.base.removeprefix("http://"),
        "hostname": "node-1",
        "gpu": "0",
        "uuid": uuid,
    }
    url = f"{runbook_server}/runbooks/{ALERT}?{urlencode(labels)}"
    with headless_chromium() as (sync_api, browser):
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(url)
        assert page.title() == f"{ALERT} runbook"
        page.click("#run-gpu-snapshot")
        output = page.locator("#out-gpu-snapshot")
        sync_api.expect(output).to_contain_text("OK", timeout=20_000)
        sync_api.expect(output).to_contain_text(uuid)
        image = page.locator("#memory-curve")
        image.scroll_into_view_if_needed()
        page.wait_for_function(
            "() => { const i = document.getElementById('memory-curve');"
            " return i.complete && i.naturalWidth > 0; }",
            timeout=20_000,
        )
        assert image.evaluate("i => i.naturalWidth") > 0
        page.locator("#step-gpu-snapshot").scroll_into_view_if_needed()
        shot = page.screenshot(full_page=True)
        assert not errors, errors
    (tmp_path / "runbook-page.png").write_bytes(shot)
    SCREENSHOT.write_bytes(shot)


def test_alertmanager_webhook_makes_an_incident_shown_on_the_runbook_page(
    exporter: Served, runbook_server: str
) -> None:
    # The standalone server wires the webhook, the incident store and the pages together.
    uuid = httpx.get(f"{exporter.base}/api/v1/gpus").json()["gpus"][0]["uuid"]
    labels = {
        "alertname": "ServescopeGpuMemoryLeakSuspected",
        "severity": "warning",
        "instance": exporter.base.removeprefix("http://"),
        "hostname": "node-1",
        "gpu": "0",
        "uuid": uuid,
    }
    body = payload(alert(starts_at="2026-11-29T10:00:00Z", **labels))
    url = f"{runbook_server}/alertmanager/webhook"
    assert httpx.post(url, json=body).status_code == 401
    headers = {"Authorization": f"Bearer {WEBHOOK_TOKEN}"}
    assert httpx.post(url, json=body, headers=headers).status_code == 200
    assert httpx.post(url, json=body, headers=headers).status_code == 200  # Alertmanager re-sends
    incidents = httpx.get(f"{runbook_server}/incidents").json()
    (incident,) = [i for i in incidents if i["alertname"] == labels["alertname"]]

    def steps_ran() -> dict[str, Any] | None:
        detail: dict[str, Any] = httpx.get(f"{runbook_server}/incidents/{incident['id']}").json()
        return detail if detail.get("steps") else None

    detail = wait_for("the read steps of the firing alert", steps_ran, 30, every=0.5)
    assert any(step["ok"] for step in detail["steps"])
    page = httpx.get(f"{runbook_server}/runbooks/ServescopeGpuMemoryLeakSuspected", params=labels).text
    assert f"/incidents/{incident['id']}" in page
