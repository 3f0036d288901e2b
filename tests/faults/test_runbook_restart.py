"""Evidence is never lost across a restart: 20 incidents queued behind a slow exporter when the service
is stopped (SIGTERM) or killed (SIGKILL) all get their read steps after it starts again.

Alertmanager's re-send of those alerts is deduplicated (the same fingerprint, status and startsAt), so
only the service's own memory of unfinished steps can bring them back. The exporter answers after 3 s
while the service runs the first time (4 workers: 4 running, 16 queued), at once afterwards.

Rerun: .venv/bin/python -m pytest tests/faults/test_runbook_restart.py -q -n 0 -s
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.faults.runbook_peers import ALERT, NOT_FOUND, WEBHOOK_TOKEN, hostile_peer, runbook_server
from tests.runbook.webhook.notices import alert, payload

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
INCIDENTS = 20
HOOK = {"Authorization": f"Bearer {WEBHOOK_TOKEN}"}


def _incidents(base: str) -> list[dict[str, Any]]:
    found = httpx.get(f"{base}/incidents", params={"limit": 200}, timeout=10).json()
    return [httpx.get(f"{base}/incidents/{i['id']}", timeout=10).json() for i in found]


@pytest.mark.parametrize("stop_with", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_queued_incidents_get_their_read_steps_after_a_restart(
    tmp_path: Path, stop_with: signal.Signals
) -> None:
    # One scenario, read top to bottom: queue 20, stop the service, start it again, count the evidence.
    delay = [3.0]
    args = ("--timeout", "10", "--shutdown-grace", "6")
    with hostile_peer("slow", answer=NOT_FOUND, delay=delay) as peer:
        exporter = peer.url
        with runbook_server(tmp_path, "--exporter-url", exporter, *args) as server:
            alerts = [alert(fingerprint=f"{n:016x}", alertname=ALERT, gpu="0") for n in range(INCIDENTS)]
            posted = httpx.post(
                f"{server.base}/alertmanager/webhook", json=payload(*alerts), headers=HOOK, timeout=30
            )
            assert posted.status_code == 200 and posted.json()["queued"] == INCIDENTS, posted.text
            time.sleep(1.0)  # 4 steps wait on the exporter, 16 incidents are queued
            before = _incidents(server.base)
            started = time.monotonic()
            server.process.send_signal(stop_with)
            server.process.wait(30)
            stopped_in = time.monotonic() - started
        delay[0] = 0.0
        with runbook_server(tmp_path, "--exporter-url", exporter, *args) as server:
            # Alertmanager sends the group again: every alert is a duplicate now.
            again = httpx.post(
                f"{server.base}/alertmanager/webhook", json=payload(*alerts), headers=HOOK, timeout=30
            )
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                after = _incidents(server.base)
                if sum(1 for i in after if i["steps"]) == INCIDENTS:
                    break
                time.sleep(0.5)
            metrics = httpx.get(f"{server.base}/incidents/metrics", timeout=10).text
    without = sum(1 for i in before if not i["steps"])
    done = sum(1 for i in after if [s["step_id"] for s in i["steps"]] == ["snapshot"])
    interrupted = sum(1 for i in after if i["interrupted"])
    print(
        f"{stop_with.name}: stopped in {stopped_in:.1f} s with {without} of {INCIDENTS} incidents without "
        f"read steps; after the restart {done} of {INCIDENTS} have them ({interrupted} marked interrupted)"
    )
    assert again.json()["duplicates"] == INCIDENTS  # the re-send alone would have brought back none
    assert without >= INCIDENTS - 4
    assert done == INCIDENTS, [(i["id"], i["steps_state"], i["note"]) for i in after]
    assert all(i["steps_state"] == "done" for i in after)
    assert "servescope_runbook_incidents_resumed_total" in metrics
    if stop_with is signal.SIGTERM:
        # The 4 running steps finished within --shutdown-grace (3 s < 6 s); the queued ones were kept.
        assert interrupted == 0 and stopped_in < 6 + 5
    else:
        assert interrupted >= 1  # the steps running when it was killed are marked, then run again
