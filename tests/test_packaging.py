"""What an installed servescope carries, and what a real node's exporter loads.

An installed package (a wheel, not the checkout) must find its runbooks, rules and dashboards without any
environment variable; `servescope serve` without --simulate must never import the simulator or the demo;
the production wheel carries no simulator, demo, mock or fake (they are servescope-sim's, in sim/), and
without servescope-sim the commands that need it say so and exit 2.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import pytest

from servescope.runbooks.document import SHIPPED_RUNBOOKS, runbook_paths
from tests.support import start_child, stop
from tests.support.servers import LISTENING

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = re.compile(r"\|\s+(servescope_sim(?:\.\w+)*)\s*$", re.M)
# What the production wheel must not carry: a module or folder named for the simulator, the demo, a mock
# or a fake (servescope-sim's wheel is read with the same pattern and must match it).
SIMULATOR_PART = re.compile(r"(^|[/_.-])(servescope_sim|sim|demo|mock\w*|fake\w*)([/_.-]|$)", re.I)


def build_wheel(source: Path, folder: Path) -> Path:
    """`pip wheel` of the distribution in `source` (no dependencies), into `folder`."""
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w"]
    subprocess.run([*build, str(folder), str(source)], check=True, timeout=180)
    (wheel,) = folder.glob("*.whl")
    return wheel


@pytest.fixture(scope="module")
def production_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(ROOT, tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def installed(production_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package built as a wheel and installed into a folder of its own (dependencies from this venv)."""
    folder = tmp_path_factory.mktemp("installed")
    wheel = production_wheel
    site = folder / "site"
    install = [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)]
    subprocess.run(install, check=True, timeout=180)
    return site


def _run_installed(site: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    """`servescope ARGS` from the installed wheel; with `path`, with only that path (-S: no site-packages)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SERVESCOPE_")}
    env["PYTHONPATH"] = path or str(site)
    no_site = ["-S"] if path else []
    return subprocess.run(
        [sys.executable, *no_site, "-c", "import servescope.cli as c; c.main()", *args],
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
    # The entry point's own module (servescope_sim.wiring) is loaded by importlib.import_module, which
    # -X importtime does not log; what it imports with `import` is logged.
    assert "servescope_sim.pynvml_module" in FORBIDDEN.findall(imported)


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


def _wheel_files(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def _entry_points(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
        return archive.read(name).decode()


@pytest.fixture(scope="module")
def simulator_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(ROOT / "sim", tmp_path_factory.mktemp("sim-wheel"))


@pytest.mark.e2e
@pytest.mark.slow
def test_the_production_wheel_carries_no_simulator_demo_mock_or_fake(production_wheel: Path) -> None:
    files = _wheel_files(production_wheel)
    assert "servescope/exporter/serve.py" in files, files[:20]  # the file list is the package's
    assert [name for name in files if SIMULATOR_PART.search(name)] == []
    # The pattern finds each kind where it was before it left (32 files then).
    before = ["sim/wiring.py", "sim/fake_dcgmi.py", "demo/cli.py", "kit/load/mock_http.py"]
    assert all(SIMULATOR_PART.search(f"servescope/{name}") for name in before)
    scripts = _entry_points(production_wheel)
    assert "servescope = servescope.cli:main" in scripts
    assert "fake" not in scripts and "servescope_sim" not in scripts


@pytest.mark.e2e
@pytest.mark.slow
def test_the_simulator_wheel_builds_and_carries_what_left_the_production_wheel(simulator_wheel: Path) -> None:
    assert simulator_wheel.name.startswith("servescope_sim-")
    files = set(_wheel_files(simulator_wheel))
    moved = [
        "wiring.py",
        "fake_dcgmi.py",
        "pynvml_module.py",
        "mock_http.py",
        "mock_server.py",
        "vllm_server.py",
        "demo/cli.py",
    ]
    assert {f"servescope_sim/{name}" for name in moved} <= files
    declared = _entry_points(simulator_wheel)
    for line in (
        "servescope-fake-dcgmi = servescope_sim.fake_dcgmi:main",
        "demo = servescope_sim.demo.cli:demo",
        "load.mock-server = servescope_sim.mock_cli:mock_server",
        "runtime = servescope_sim.wiring:simulated_runtime",
        "engine = servescope_sim.load_runner:start_simulated",
        "instant-server = servescope_sim.mock_process:instant_server",
    ):
        assert line in declared, declared


@pytest.fixture(scope="module")
def without_simulator(installed: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A PYTHONPATH with the installed wheel and this venv's packages except servescope and servescope-sim
    (links to the rest), for an interpreter started with -S: servescope as a user who installed only it."""
    others = tmp_path_factory.mktemp("dependencies")
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if "servescope" not in entry.name.lower():
            (others / entry.name).symlink_to(entry)
    return os.pathsep.join([str(installed), str(others)])


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["demo"],
        ["demo", "--scenario", "tour", "--gpus", "2"],
        ["sim", "models"],
        ["load", "mock-server", "--slots", "4"],
        ["load", "calibrate", "--seconds", "1"],
        ["serve", "--simulate", "--listen", "127.0.0.1:0", "--no-dcgm"],
        ["capacity", "run", "--simulate", "--duration", "5"],
        ["tune", "run", str(ROOT / "tests" / "tune" / "space-small.yaml"), "--launcher", "simulated"],
    ],
    ids=lambda args: " ".join(args[:2]),
)
def test_without_the_simulator_its_commands_name_the_missing_distribution(
    installed: Path, without_simulator: str, args: list[str]
) -> None:
    listed = subprocess.run(
        [sys.executable, "-S", "-c", "from importlib.metadata import entry_points as e; print(e().groups)"],
        env={**os.environ, "PYTHONPATH": without_simulator},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "servescope.commands" not in listed.stdout, (
        "servescope-sim is visible: the test would prove nothing"
    )
    assert _run_installed(installed, "version", path=without_simulator).returncode == 0
    ran = _run_installed(installed, *args, path=without_simulator)
    assert ran.returncode == 2, (ran.stdout, ran.stderr)
    assert "Traceback" not in ran.stderr
    assert "needs the servescope-sim distribution" in ran.stderr, ran.stderr
    assert "pip install servescope-sim" in ran.stderr


def test_the_image_copies_only_the_production_package() -> None:
    """deploy/Dockerfile installs servescope from what it copies: never sim/ (nor the whole checkout)."""
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    copied = [line.split()[1:-1] for line in dockerfile.splitlines() if line.startswith("COPY ")]
    sources = {source.rstrip("/") for sources in copied for source in sources}
    assert sources == {"pyproject.toml", "README.md", "servescope"}, sources
    assert "pip install ." in dockerfile and "./sim" not in dockerfile
