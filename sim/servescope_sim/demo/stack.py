"""The whole stack on one machine: simulated node, exporter, runbook service, Prometheus, Alertmanager.

Everything listens on 127.0.0.1 at free ports and writes under one state directory, which is emptied at
every start (so a second demo never reads the first one's data) and refused when it holds anything else
(state_dir.py).
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType

from servescope_sim.demo import canary
from servescope_sim.demo.children import Child, ChildFailedError, free_port
from servescope_sim.demo.configs import ConfigFiles, Ports, url, write_configs
from servescope_sim.demo.state_dir import prepare_state_dir
from servescope_sim.demo.verify import verify_stack
from servescope_sim.engines import gpu_groups
from servescope_sim.registry import make_scenario

INSTALL_HINT = (
    "install them with `sudo apt-get install prometheus prometheus-alertmanager` (Debian/Ubuntu; "
    "`make tools` does it), or put the official binaries on PATH"
)
HOSTNAME = "demo-node"
READY_TIMEOUT_SECONDS = 90.0
RESEND_DELAY = "10s"


@dataclass(frozen=True)
class _Upstream:
    """How the demo runs one of Prometheus's own programs: its name, storage flag and extra flags."""

    name: str
    storage_flag: str
    extra_flags: tuple[str, ...]


# One instance: no gossip port to collide with others.
ALERTMANAGER = _Upstream("alertmanager", "--storage.path", ("--cluster.listen-address=",))
# Its first evaluation runs before it has found Alertmanager, so the watchdog's first send is dropped;
# the default 1 min before resending would keep the incidents page empty that long.
PROMETHEUS = _Upstream("prometheus", "--storage.tsdb.path", (f"--rules.alert.resend-delay={RESEND_DELAY}",))


@dataclass(frozen=True)
class DemoOptions:
    scenario: str = "tour"
    gpus: int = 8
    engines: int = 4
    seed: int = 1
    state_dir: Path = Path(".servescope-demo")
    # None: use Prometheus and Alertmanager when their binaries are on PATH.
    prometheus: str | None = None
    alertmanager: str | None = None


def find_binaries() -> tuple[str | None, str | None]:
    """Prometheus and Alertmanager on PATH (Debian names Alertmanager prometheus-alertmanager)."""
    return shutil.which("prometheus"), shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")


def servescope_argv() -> list[str]:
    """This installation's CLI, run by the interpreter that runs the demo."""
    return [sys.executable, "-m", "servescope"]


@dataclass
class DemoStack:
    options: DemoOptions
    echo: Callable[[str], None] = print
    children: list[Child] = field(default_factory=list)
    ports: Ports | None = None
    files: ConfigFiles | None = None
    urls: dict[str, str] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    # --- start -------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start every child in order, waiting for each to be ready, then check that they do what the
        demo relies on (verify.py); on failure stop what started."""
        # Absolute before anything is written: Prometheus and Alertmanager resolve the paths in their
        # configs against the config file's folder, not against the folder the demo was started in.
        o = self.options = replace(self.options, state_dir=self.options.state_dir.resolve())
        prometheus, alertmanager = (o.prometheus, o.alertmanager)
        if prometheus is None and alertmanager is None:
            prometheus, alertmanager = find_binaries()
        full = bool(prometheus and alertmanager)
        prepare_state_dir(o.state_dir)
        cluster = free_port() if canary.needs_cluster(o.scenario, o.gpus, o.engines) else 0
        self.ports = Ports(free_port(), free_port(), free_port(), free_port(), cluster)
        if cluster:
            self.urls["kube_api"] = canary.api_url(cluster)  # the simulated cluster's, in urls.json
        self.files = write_configs(o.state_dir, self.ports)
        if not full:
            self.echo(f"Prometheus and Alertmanager not found: running without them; {INSTALL_HINT}.")
        steps = 4 if full else 2
        try:
            # The exporter last: its simulated node's clock (and the scenario) starts with it, so the
            # receivers and Prometheus are there from the first second of the scenario.
            self._start(1, steps, self._runbooks(full), "/healthz")
            if full:
                assert alertmanager is not None and prometheus is not None
                ports, files = self._ports(), self._files()
                am = self._upstream(ALERTMANAGER, alertmanager, files.alertmanager, ports.alertmanager)
                prom = self._upstream(PROMETHEUS, prometheus, files.prometheus, ports.prometheus)
                self._start(2, steps, am, "/-/ready")
                self._start(3, steps, prom, "/-/ready")
            self._start(steps, steps, self._exporter(), "/readyz")
            self.echo("      " + verify_stack(self.urls, self._files().rules, self._files().webhook_token))
        except BaseException:
            self.stop()
            raise
        self._write_state(full)

    def _start(self, step: int, steps: int, child: Child, ready_path: str) -> None:
        base = self.urls[child.name]
        self.echo(f"[{step}/{steps}] starting {child.name} on {base} ...")
        began = time.monotonic()
        self.children.append(child)
        child.start()
        child.wait_ready(base + ready_path, READY_TIMEOUT_SECONDS)
        self.echo(f"      {child.name} ready in {time.monotonic() - began:.1f} s (pid {child.pid})")

    def _log(self, name: str) -> Path:
        return self.options.state_dir / "logs" / f"{name}.log"

    def _exporter(self) -> Child:
        o, ports = self.options, self._ports()
        self.urls["exporter"] = url(ports.exporter)
        argv = [
            *servescope_argv(),
            "serve",
            "--simulate",
            f"--gpus={o.gpus}",
            f"--engines={o.engines}",
            f"--seed={o.seed}",
            f"--scenario={o.scenario}",
            "--scenario-pace=demo",
            f"--hostname={HOSTNAME}",
            f"--listen=127.0.0.1:{ports.exporter}",
            *canary.exporter_args(ports.cluster),
        ]
        return Child("exporter", argv, self._log("exporter"))

    def _runbooks(self, full: bool) -> Child:
        ports, files = self._ports(), self._files()
        self.urls["runbooks"] = url(ports.runbooks)
        state = self.options.state_dir
        argv = [
            *servescope_argv(),
            "runbook-server",
            f"--listen=127.0.0.1:{ports.runbooks}",
            f"--exporter-url={url(ports.exporter)}",
            f"--token-file={files.change_token}",
            f"--webhook-token-file={files.webhook_token}",
            f"--incidents-db={state / 'incidents.sqlite'}",
            f"--audit-log={state / 'audit.jsonl'}",
            # The pages name the thresholds of the config the demo's rules were built from.
            f"--alerts-config={files.alerts}",
            *canary.runbook_args(ports.cluster),
        ]
        if full:
            argv += [
                f"--prometheus-url={url(ports.prometheus)}",
                f"--alertmanager-url={url(ports.alertmanager)}",
            ]
        # dcgm_sample steps ask the exporter, whose DCGM source runs the simulator's dcgmi.
        return Child("runbooks", argv, self._log("runbooks"))

    def _upstream(self, kind: _Upstream, binary: str, config: Path, port: int) -> Child:
        """Prometheus or Alertmanager: the same flags for config, storage, listen address and logs."""
        self.urls[kind.name] = url(port)
        argv = [
            binary,
            f"--config.file={config}",
            f"{kind.storage_flag}={self.options.state_dir / kind.name}",
            f"--web.listen-address=127.0.0.1:{port}",
            *kind.extra_flags,
            "--log.level=warn",
        ]
        return Child(kind.name, argv, self._log(kind.name))

    def _ports(self) -> Ports:
        assert self.ports is not None, "start() allocates the ports"
        return self.ports

    def _files(self) -> ConfigFiles:
        assert self.files is not None, "start() writes the configuration"
        return self.files

    def _write_state(self, full: bool) -> None:
        """urls.json and pids.json: where scripts (and the end-to-end tests) find the running stack."""
        state = self.options.state_dir
        started = {child.name: child.started_at for child in self.children}
        document = {**self.urls, "full": full, "scenario": self.options.scenario, "started_at": started}
        pids = {child.name: child.pid for child in self.children}
        _write_atomically(state / "pids.json", json.dumps(pids, indent=2) + "\n")
        # Written last and whole (rename): a script that sees urls.json sees a ready stack.
        _write_atomically(state / "urls.json", json.dumps(document, indent=2) + "\n")

    # --- run and stop ------------------------------------------------------------------------------
    def describe(self) -> str:
        """Every URL, where the dashboards are, and what the scenario does when."""
        u = self.urls
        lines = [
            "",
            "servescope demo is running (Ctrl-C stops everything):",
            f"  metrics        {u['exporter']}/metrics",
            f"  GPU API        {u['exporter']}/api/v1/gpus    (memory curve: /api/v1/gpus/0/memory.svg)",
            f"  runbooks       {u['runbooks']}/runbooks",
            f"  incidents      {u['runbooks']}/incidents      (Alertmanager posts to /alertmanager/webhook)",
        ]
        if "prometheus" in u:
            lines += [
                f"  Prometheus     {u['prometheus']}/alerts",
                f"  Alertmanager   {u['alertmanager']}/#/alerts",
            ]
        lines += [
            f"  dashboards     {dashboards_folder()}  (Grafana JSON, provisioning.yaml, ConfigMaps)",
            f"  state, logs    {self.options.state_dir}/",
            "",
            f"Scenario {self.options.scenario} (demo pace; alert rules at the demo profile, shorter `for`s):",
            *(f"  {line}" for line in self.timeline()),
            "",
        ]
        lines += canary.guide(self._ports().cluster, u.get("prometheus"), self._files().alerts)
        return "\n".join(lines)

    def timeline(self) -> list[str]:
        o = self.options
        scenario = make_scenario(o.scenario, pace="demo", layout=gpu_groups(o.gpus, o.engines))
        return [f"at {_clock(t)}  {what}" for t, what in scenario.timeline()] or [scenario.description]

    def wait(self, duration: float | None = None) -> int:
        """Block until Ctrl-C / SIGTERM (0), `duration` seconds (0), or a child dying (1)."""
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

        def handle(signum: int, frame: FrameType | None) -> None:
            self._stop.set()

        for sig in previous:
            signal.signal(sig, handle)
        deadline = None if duration is None else time.monotonic() + duration
        try:
            while not self._stop.wait(1.0):
                dead = [child for child in self.children if not child.running()]
                if dead:
                    error = ChildFailedError(f"{dead[0].name} exited unexpectedly; see {dead[0].log_path}")
                    self.echo(f"servescope: error: {error}")
                    return 1
                if deadline is not None and time.monotonic() >= deadline:
                    return 0
            return 0
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def stop(self) -> None:
        """Stop the children, last started first, so nothing scrapes or posts to a stopped one."""
        for child in reversed(self.children):
            if child.running():
                self.echo(f"stopping {child.name} (pid {child.pid})")
            child.stop()


def dashboards_folder() -> Path:
    from servescope.bundle import dashboards

    return Path(dashboards.__file__).resolve().parent / "build"


def _clock(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes:2d}:{rest:02d}"


def _write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    partial.replace(path)
