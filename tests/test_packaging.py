"""What an installed servescope carries, and what a real node's exporter loads.

An installed package (a wheel, not the checkout) must find its runbooks, rules and dashboards without any
environment variable; `servescope serve` without --simulate must never import the simulator or the demo.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from servescope.runbooks.document import SHIPPED_RUNBOOKS, runbook_paths
from tests.support import start_child, stop
from tests.support.servers import LISTENING

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = re.compile(r"\|\s+(servescope\.(?:sim|demo)(?:\.\w+)*)\s*$", re.M)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package built as a wheel and installed into a folder of its own (dependencies from this venv)."""
    folder = tmp_path_factory.mktemp("installed")
    wheels = folder / "wheels"
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w"]
    subprocess.run([*build, str(wheels), str(ROOT)], check=True, timeout=180)
    (wheel,) = wheels.glob("servescope-*.whl")
    site = folder / "site"
    install = [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)]
    subprocess.run(install, check=True, timeout=180)
    return site


def _run_installed(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SERVESCOPE_")}
    env["PYTHONPATH"] = str(site)
    return subprocess.run(
        [sys.executable, "-c", "import servescope.cli as c; c.main()", *args],
        check=False,
        cwd=site.parent,  # not the checkout: nothing beside the package to fall back on
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.e2e
@pytest.mark.slow
def test_an_installed_package_lists_every_runbook_without_any_variable(installed: Path) -> None:
    where = _run_installed(installed, "version")
    assert where.returncode == 0, where.stderr
    found = subprocess.run(
        [sys.executable, "-c", "import servescope; print(servescope.__file__)"],
        cwd=installed.parent,
        env={**os.environ, "PYTHONPATH": str(installed)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert found.stdout.strip().startswith(str(installed)), "the wheel, not the checkout, must be imported"
    listed = _run_installed(installed, "runbook", "list")
    assert listed.returncode == 0, listed.stderr
    shipped = {path.stem for path in runbook_paths(SHIPPED_RUNBOOKS)}
    assert shipped, "no runbooks in the checkout's package data"
    for alert in shipped:
        assert re.search(rf"^{alert}\s", listed.stdout, re.M), f"{alert} missing from `runbook list`"


@pytest.mark.e2e
@pytest.mark.slow
def test_an_installed_package_carries_rules_and_dashboards(installed: Path) -> None:
    rules = installed / "servescope" / "bundle" / "alerts" / "build" / "rules.yaml"
    dashboards = sorted((installed / "servescope" / "bundle" / "dashboards" / "build").glob("*.json"))
    assert rules.is_file()
    assert len(dashboards) >= 6


def _modules_of_a_running_exporter(*args: str) -> str:
    """Start `servescope serve` with -X importtime, wait until it serves /metrics, stop it, return the
    import log: every module it imported, also the ones imported lazily after start-up."""
    argv = [sys.executable, "-X", "importtime", "-m", "servescope", "serve", "--listen", "127.0.0.1:0"]
    served = start_child("servescope", [*argv, *args], LISTENING, 20, ready="/metrics", cwd=ROOT)
    try:
        time.sleep(2)  # a couple of collection cycles: lazily imported code shows up too
    finally:
        served.child.stop()
    log = served.log()
    stop(served)
    return log


@pytest.mark.e2e
def test_a_real_node_exporter_never_loads_the_simulator_or_the_demo() -> None:
    # No GPU here: NVML reports the driver missing and the exporter runs on, exactly as on a broken node.
    imported = _modules_of_a_running_exporter("--no-dcgm", "--no-discovery")
    assert "servescope.exporter.runtime" in imported, "the import log did not cover the running exporter"
    assert FORBIDDEN.findall(imported) == []


@pytest.mark.e2e
def test_the_import_check_would_see_the_simulator() -> None:
    # The same check on --simulate must find the simulator: it cannot pass by reading an empty log.
    imported = _modules_of_a_running_exporter("--simulate", "--gpus", "1", "--no-dcgm", "--no-discovery")
    assert "servescope.sim.wiring" in FORBIDDEN.findall(imported)


def test_importing_the_exporter_entry_module_loads_no_simulator_module() -> None:
    found = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-c",
            "import servescope.exporter.serve, servescope.exporter.runtime",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert "servescope.exporter.serve" in found.stderr
    assert FORBIDDEN.findall(found.stderr) == []


@pytest.mark.e2e
@pytest.mark.slow
def test_an_installed_package_carries_every_page_template(installed: Path) -> None:
    """The HTML pages are rendered from package data (`<package>/templates/`): the wheel must carry all."""
    package = ROOT / "servescope"
    shipped = {p.relative_to(package) for p in package.glob("**/templates/*") if p.is_file()}
    assert len(shipped) >= 10, shipped
    missing = sorted(str(p) for p in shipped if not (installed / "servescope" / p).is_file())
    assert not missing, f"templates not in the wheel: {missing}"
