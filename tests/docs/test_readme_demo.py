"""`make demo` as a newcomer runs it: from the root of a fresh clone, with the default relative
--state-dir, the exact command line of the Makefile's `demo` recipe.

The clone is of the committed HEAD of the checkout the tests run in. The recipe's first line (the
Debian tools script) runs verbatim; its second, `$(BIN)/servescope demo --scenario tour`, runs as
`<this interpreter> -m servescope demo --scenario tour` from the clone's root, so the clone's own
package (found first, from the working directory) runs rather than this checkout's, without spending
the minute or two `make` would spend creating a virtualenv. `--duration`, which the README documents,
is appended only so the demo also ends by itself should this test be killed.

Within bounded times: Prometheus lists every rule group of the bundle, `ServescopeWatchdog` fires and reaches
the runbook service's /incidents, and the tour's first fault (KV pressure on engine 0, a minute in)
fires and becomes an incident whose read steps ran. It stops as soon as all of that holds. Then Ctrl-C,
as the README says, stops the demo and everything it started (a short last test).
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from servescope.bundle.alerts.bundle import groups
from servescope.core.config import AlertsConfig
from servescope_sim.demo.stack import find_binaries
from servescope_sim.scenarios import PACES
from tests.support import descendants, wait_all_exited, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).parents[2]
# The first fault of the tour and what it may page with (its parts until the combined alert fires).
FIRST_FAULT_ALERTS = {
    "ServescopeGpuSaturatedKvPressure",
    "ServescopeGpuSaturated",
    "ServescopeKvCachePressure",
}
START_TIMEOUT = 120.0
RULES_TIMEOUT = 30.0
WATCHDOG_TIMEOUT = 120.0
# The first fault's window: from a quarter phase in to the end of its phase, plus delivery.
FIRST_FAULT_TIMEOUT = PACES["demo"].phase_seconds * 1.25 + 60.0


def make_recipe(makefile: Path, target: str) -> list[str]:
    """The recipe lines of `target` in `makefile`, as written."""
    lines = makefile.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{target}:"))
    recipe = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip())
    return recipe


def _get(base: str, path: str) -> Any:
    response = httpx.get(base + path, timeout=10)
    response.raise_for_status()
    return response.json()


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("clone") / "servescope"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(target)], check=True, timeout=120)
    return target


@pytest.fixture(scope="module")
def demo(clone: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    prometheus, alertmanager = find_binaries()
    if not (prometheus and alertmanager):
        pytest.fail("prometheus and prometheus-alertmanager are needed: `make test` installs them")
    recipe = make_recipe(clone / "Makefile", "demo")
    assert recipe == ["./scripts/install-debian-tools.sh --demo", "$(BIN)/servescope demo --scenario tour"]
    subprocess.run(shlex.split(recipe[0]), cwd=clone, check=True, timeout=120)
    args = shlex.split(recipe[1])[1:]
    log = clone.parent / "demo.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "servescope", *args, "--duration", "600"],
            cwd=clone,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield process, log
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        print(log.read_text())


def _incident_with_steps(runbooks: str, names: set[str]) -> dict[str, Any] | None:
    for incident in _get(runbooks, "/incidents"):
        if incident["alertname"] in names:
            full: dict[str, Any] = _get(runbooks, incident["url"])
            if any(step["ok"] and step["output"].strip() for step in full["steps"]):
                return full
    return None


def _started(process: subprocess.Popen[bytes], log: Path, urls_file: Path) -> dict[str, Any]:
    """The demo's URLs once it wrote them, having verified its Prometheus and Alertmanager."""

    def started() -> bool:
        assert process.poll() is None, log.read_text()
        return urls_file.exists()

    wait_for("the demo to start", started, START_TIMEOUT, every=1.0)
    urls: dict[str, Any] = json.loads(urls_file.read_text())
    assert urls["full"], "the demo ran without Prometheus and Alertmanager"
    assert "verified: Prometheus loaded all" in log.read_text()
    return urls


def test_make_demo_from_a_fresh_clone_loads_the_rules_and_pages(
    demo: tuple[subprocess.Popen[bytes], Path], clone: Path
) -> None:
    process, log = demo
    began = time.monotonic()
    urls = _started(
        process, log, clone / ".servescope-demo" / "urls.json"
    )  # the default, relative --state-dir
    times = {"started": time.monotonic() - began}

    bundle = {group.name for group in groups(AlertsConfig())}

    def rules_loaded() -> bool:
        return {g["name"] for g in _get(urls["prometheus"], "/api/v1/rules")["data"]["groups"]} >= bundle

    wait_for("Prometheus to list every bundle group", rules_loaded, RULES_TIMEOUT, every=1.0)
    times["rules"] = time.monotonic() - began

    def watchdog() -> dict[str, Any] | None:
        return _incident_with_steps(urls["runbooks"], {"ServescopeWatchdog"})

    wait_for("ServescopeWatchdog at /incidents", watchdog, WATCHDOG_TIMEOUT, every=2.0)
    alerts = _get(urls["prometheus"], "/api/v1/alerts")["data"]["alerts"]
    assert any(a["labels"]["alertname"] == "ServescopeWatchdog" and a["state"] == "firing" for a in alerts)
    times["watchdog"] = time.monotonic() - began

    def first_fault() -> dict[str, Any] | None:
        assert process.poll() is None, log.read_text()
        return _incident_with_steps(urls["runbooks"], FIRST_FAULT_ALERTS)

    incident = wait_for("the tour's first fault at /incidents", first_fault, FIRST_FAULT_TIMEOUT, every=3.0)
    labels = incident["labels"]
    assert labels.get("engine", "0") == "0" and labels.get("gpu", "0") in {"0", "1"}, labels
    times["first_fault"] = time.monotonic() - began
    seconds = {k: round(v, 1) for k, v in times.items()}
    print(f"seconds after the command started: {seconds}; first fault: {incident['alertname']}")


def test_ctrl_c_stops_make_demo_and_everything_it_started(
    demo: tuple[subprocess.Popen[bytes], Path], clone: Path
) -> None:
    process, log = demo
    # Started for sure (and all its children), also when this test runs alone.
    _started(process, log, clone / ".servescope-demo" / "urls.json")
    started = descendants(process.pid)
    # Prometheus, Alertmanager, the runbook service and the exporter with its engines at least.
    assert len(started) >= 4, started
    process.send_signal(signal.SIGINT)
    assert process.wait(60) == 0, log.read_text()[-2000:]
    wait_all_exited(started, 15)
