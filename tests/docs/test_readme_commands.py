"""Every `servescope ...` line of a shell block in README.md, DEVELOPING.md and docs/*.md, run as written.

The lines come from the documents themselves, so a command the README shows and no longer works fails
here. Each runs from the root of a fresh clone of the committed HEAD, as `<this interpreter> -m
servescope ...` (the clone's package, found first from the working directory), and must exit 0. A
server command (`servescope serve`) is started on a free loopback port in place of its --listen, checked
to answer and scrape once, then stopped. The few the documents name as the user's own files
(`config.json`, `my-alerts.yaml`, `rules.yaml`) are laid in the clone first. `runbook run` reads from
a simulated exporter and a Prometheus this module starts, named by the runbook commands' environment
variables (SERVESCOPE_RUNBOOK_*_URL), as the documents' default port 9108 may be taken here; the reads
of a change step's dry run (a drain's pods and budgets) ask the fake Kubernetes API server over a small
cluster. What
cannot run on this machine (a real drain, a Grafana push, the demo, which tests/docs/test_readme_demo.py
runs) is listed in NOT_HERE with the reason, and a test keeps that list exact.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.runbook.kube_fakes import budget, cluster, node, pod
from tests.support import Child, Served, free_port, start_child, stop, wait_for
from tests.support.servers import LISTENING

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "DEVELOPING.md", *sorted((ROOT / "docs").glob("*.md"))]
ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")
SHELL_BLOCK = re.compile(r"^```(?:sh|bash|shell)\n(.*?)^```", re.DOTALL | re.MULTILINE)
# The user's own files the documents name, and what stands in for them here.
INPUTS = {
    "config.json": ROOT / "tests" / "advisor" / "fixtures" / "deepseek-v3-config.json",
    "rules.yaml": ROOT / "servescope" / "bundle" / "alerts" / "build" / "rules.yaml",
}
MY_ALERTS = "release_label: my-release\n"
# Lines that cannot run here, by the first words that identify them, with why.
NOT_HERE = {
    "servescope demo": "the whole stack for minutes: tests/docs/test_readme_demo.py runs `make demo`",
    "servescope dashboards push": "needs a Grafana to push to",
    # The load commands load an engine for up to a minute (the documents' --url is the user's engine):
    # tests/load runs each of them against the mock engine, and replay against a backfilled Prometheus.
    "servescope load run": "loads the user's engine for a minute: tests/load/test_cli.py runs it on the mock",
    "servescope load mock-server": "a server until stopped: tests/load starts it for every load test",
    "servescope load locust": "loads the user's engine: tests/load/test_against_mock.py scales out",
    "servescope load replay": "needs the user's Prometheus: tests/load/test_replay.py backfills one",
    "servescope canary analyze": "needs the user's Prometheus: tests/canary/test_backfilled.py backfills one",
    "servescope runbook audit verify": "the trail in the service's pod: tests/runbook/test_audit_trail.py",
}
NEVER_HERE = {"--execute": "really changes a cluster (a drain)"}
# What the documents must keep showing, so an extraction that finds nothing cannot pass.
REQUIRED = (
    "servescope serve --simulate",
    "servescope runbook list",
    "servescope runbook show",
    "servescope runbook run",
    "servescope alerts build",
    "servescope dashboards build",
    "servescope advise batch-size",
    "servescope deploy render",
)


def shell_lines(text: str) -> list[str]:
    """The command lines of the shell blocks of a Markdown text: continuations joined, comments off."""
    lines: list[str] = []
    for block in SHELL_BLOCK.findall(text):
        pending = ""
        for raw in block.splitlines():
            if raw.rstrip().endswith("\\"):
                pending += raw.rstrip()[:-1] + " "
                continue
            line = " ".join(shlex.split(pending + raw, comments=True))
            pending = ""
            if line:
                lines.append(line)
    return lines


def split_env(line: str) -> tuple[dict[str, str], list[str]]:
    """A command line's leading NAME=value assignments, and the command."""
    words = shlex.split(line)
    env: dict[str, str] = {}
    while words and ENV_ASSIGNMENT.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    return env, words


def documented_commands() -> list[str]:
    """Every distinct `servescope ...` line of the documents (after any NAME=value), in order."""
    found: dict[str, None] = {}
    for document in DOCUMENTS:
        if document.exists():
            for line in shell_lines(document.read_text()):
                if split_env(line)[1][:1] == ["servescope"]:
                    found[line] = None
    return list(found)


def why_not_here(line: str) -> str | None:
    line = shlex.join(split_env(line)[1])
    for prefix, reason in NOT_HERE.items():
        if line == prefix or line.startswith(prefix + " "):
            return reason
    return next((reason for word, reason in NEVER_HERE.items() if word in line.split()), None)


COMMANDS = documented_commands()
RUNNABLE = [line for line in COMMANDS if why_not_here(line) is None]


@dataclass
class Backends:
    """A simulated exporter and a Prometheus scraping it, for the runbook's read steps."""

    env: dict[str, str]


def _serve(argv: list[str], cwd: Path) -> Served:
    """Start a `servescope serve` line on a free loopback port, once it says where it listens."""
    args = argv[1:]
    if "--listen" in args:
        del args[args.index("--listen") : args.index("--listen") + 2]
    command = [sys.executable, "-m", "servescope", *args, "--listen", "127.0.0.1:0"]
    return start_child("servescope", command, LISTENING, 30, cwd=cwd)


def _prometheus_scraping(prometheus: str, folder: Path, port: str) -> tuple[Child, str]:
    """A real Prometheus scraping the exporter on `port` every second; its process and URL."""
    config = folder / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s}\n"
        f"scrape_configs: [{{job_name: servescope, static_configs: [{{targets: ['127.0.0.1:{port}']}}]}}]\n"
    )
    prom_port = free_port()
    argv = [
        prometheus,
        f"--config.file={config}",
        f"--storage.tsdb.path={folder / 'data'}",
        f"--web.listen-address=127.0.0.1:{prom_port}",
        "--log.level=warn",
    ]
    prom = Child("prometheus", argv, folder / "prometheus.log")
    prom.start()
    return prom, f"http://127.0.0.1:{prom_port}"


@pytest.fixture(scope="module")
def backends(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backends]:
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        pytest.fail("prometheus is needed: `make test` installs it")
    folder = tmp_path_factory.mktemp("backends")
    exporter = _serve(["servescope", "serve", "--simulate", "--hostname", "node-a"], ROOT)
    base = exporter.base
    prom, prom_url = _prometheus_scraping(prometheus, folder, base.rsplit(":", 1)[1])
    objects = [
        node("node-a"),
        pod("vllm-a", "node-a", gpus=8),
        budget("vllm-pdb", {"app": "vllm"}, minAvailable=1),
    ]
    kube = cluster(folder, *objects)
    api = kube.__enter__()
    try:
        wait_for(
            "Prometheus ready", lambda: httpx.get(prom_url + "/-/ready").status_code == 200, 30, every=0.5
        )
        yield Backends(
            {
                "SERVESCOPE_RUNBOOK_EXPORTER_URL": base,
                "SERVESCOPE_RUNBOOK_PROMETHEUS_URL": prom_url,
                # The reads of a change step's dry run (a drain's pods and budgets) meet a fake API server.
                "SERVESCOPE_RUNBOOK_KUBE_API_URL": api.url,
                "SERVESCOPE_RUNBOOK_KUBE_TOKEN_FILE": str(api.token_file),
            }
        )
    finally:
        kube.__exit__(None, None, None)
        prom.stop()
        stop(exporter)


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    target = tmp_path / "servescope"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(target)], check=True, timeout=120)
    for name, source in INPUTS.items():
        shutil.copy(source, target / name)
    (target / "my-alerts.yaml").write_text(MY_ALERTS)
    return target


def test_the_documents_show_every_kind_of_command_and_each_runs_or_says_why_not() -> None:
    for required in REQUIRED:
        assert any(line.startswith(required) for line in RUNNABLE), f"no `{required}` line to run"
    skipped = {line: why_not_here(line) for line in COMMANDS if why_not_here(line)}
    commands = [shlex.join(split_env(line)[1]) for line in skipped]
    used = {prefix for prefix in NOT_HERE if any(command.startswith(prefix) for command in commands)}
    assert used == set(NOT_HERE), (
        f"NOT_HERE names commands the documents no longer show: {set(NOT_HERE) - used}"
    )


def _check_server(argv: list[str], cwd: Path) -> None:
    served = _serve(argv, cwd)
    base = served.base
    try:
        simulated = "--simulate" in argv
        # A real node without a GPU driver still serves, and says so (README: "keeps running").
        path = "/readyz" if simulated else "/healthz"
        wait_for(f"{path} of {shlex.join(argv)}", lambda: httpx.get(base + path).status_code == 200, 30, 0.5)
        metrics = httpx.get(base + "/metrics", timeout=10).text
        assert "servescope_build_info{" in metrics
        assert f"servescope_simulated {1 if simulated else 0}" in metrics
    finally:
        stop(served)
    # Stopped by SIGTERM without needing SIGKILL.
    code = served.child.process.returncode if served.child.process is not None else None
    assert code in (0, -signal.SIGTERM), f"{shlex.join(argv)} exited {code}"


@pytest.mark.parametrize("line", RUNNABLE)
def test_documented_command_runs(line: str, clone: Path, backends: Backends) -> None:
    env, argv = split_env(line)
    if argv[1] == "serve" and "--help" not in argv:
        _check_server(argv, clone)
        return
    result = subprocess.run(
        [sys.executable, "-m", "servescope", *argv[1:]],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **backends.env, **env},
        check=False,
    )
    assert result.returncode == 0, f"{line}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    if argv[1:3] in (["alerts", "build"], ["dashboards", "build"]) and len(argv) == 3:
        # A fresh clone's build writes exactly what is committed.
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            check=True,
            cwd=clone,
            capture_output=True,
            text=True,
        )
        assert status.stdout == "", f"{line} changed committed files:\n{status.stdout}"
