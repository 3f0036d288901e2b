"""Running `servescope demo` stacks side by side for the end-to-end tests, and reading them.

A stack is one demo (simulated node, exporter, runbook service, Prometheus, Alertmanager) playing one
scenario, started as a user would (`servescope demo --scenario ... --state-dir ...`) and stopped with
Ctrl-C. Every read goes through the stack's public URLs (urls.json).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import yaml

from servescope.core.durations import parse_duration
from servescope_sim.canary_scenario import CANARY_AT_ENV
from servescope_sim.registry import LEAK_ENV
from servescope_sim.scenarios import PACES
from tests.support import Child, wait_for

START_TIMEOUT = 180.0
SINGLE_FAULTS = ("nvlink-crc", "gpu-lost", "vllm-down")


@dataclass(frozen=True)
class Plan:
    """What one stack plays: a demo scenario on 4 GPUs, the leak rate it is told (MiB/min) when not the
    pace's, and when the canary starts (seconds) when not at the pace's 4:00."""

    scenario: str
    leak_mib_per_minute: float | None = None
    engines: int = 2
    canary_at: float | None = None


def unix(stamp: str) -> float:
    # Prometheus and Alertmanager write RFC 3339 with nanoseconds; Python takes microseconds.
    head, _, rest = stamp.replace("Z", "+00:00").partition(".")
    if rest:
        digits = "".join(ch for ch in rest if ch.isdigit())
        zone = rest[len(digits) :]
        stamp = f"{head}.{digits[:6]}{zone}"
    return datetime.fromisoformat(stamp).timestamp()


@dataclass
class Stack:
    name: str
    plan: Plan
    state: Path
    child: Child
    urls: dict[str, Any] = field(default_factory=dict)
    # Ctrl-C is sent once: a second one, while the demo stops its children, would cut that short.
    interrupted: bool = False

    @property
    def process(self) -> subprocess.Popen[bytes]:
        assert self.child.process is not None, "started by start_stacks"
        return self.child.process

    @property
    def started(self) -> float:
        return float(self.urls["started_at"]["exporter"])

    @property
    def fault_at(self) -> float:
        """When the fault starts: the single faults wait the demo pace's baseline, the others none."""
        delay = PACES["demo"].fault_start_seconds if self.plan.scenario in SINGLE_FAULTS else 0.0
        if self.plan.scenario == "canary":
            delay = (
                self.plan.canary_at if self.plan.canary_at is not None else PACES["demo"].canary_start_seconds
            )
        return self.started + delay

    def get(self, service: str, path: str, **params: Any) -> Any:
        response = httpx.get(self.urls[service] + path, params=params, timeout=10)
        response.raise_for_status()
        return response.json()

    def alerts(self, name: str, state: str = "firing") -> list[dict[str, Any]]:
        found = self.get("prometheus", "/api/v1/alerts")["data"]["alerts"]
        return [a for a in found if a["labels"]["alertname"] == name and a["state"] == state]

    def ever_alerted(self, name: str, after_seconds: float) -> list[dict[str, str]]:
        """Each series of `name` that was pending or firing at any evaluation since the stack started,
        read once the stack has run `after_seconds`."""
        time.sleep(max(0.0, self.started + after_seconds - time.time()))
        life = time.time() - self.started + 60
        found = self.query(f'max_over_time(ALERTS{{alertname="{name}"}}[{life:.0f}s])')
        return [series["metric"] for series in found]

    def query(self, expr: str) -> list[dict[str, Any]]:
        body = self.get("prometheus", "/api/v1/query", query=expr)
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def gpu(self, index: str) -> dict[str, Any]:
        """The exporter's memory summary of one GPU (/api/v1/gpus)."""
        return next(g for g in self.get("exporter", "/api/v1/gpus")["gpus"] if str(g["gpu"]) == index)

    def incidents(self, name: str) -> list[dict[str, Any]]:
        return [i for i in self.get("runbooks", "/incidents") if i["alertname"] == name]

    def incident_with_steps(self, name: str, **labels: str) -> dict[str, Any] | None:
        """The newest incident of `name` with these labels once its read steps have run, with their
        results (one alert can make several incidents: one per GPU, say)."""
        for incident in self.incidents(name):
            if any(incident["labels"].get(k) != v for k, v in labels.items()):
                continue
            full: dict[str, Any] = self.get("runbooks", incident["url"])
            if full["steps"]:
                return full
        return None

    def release(self) -> None:
        """Ctrl-C to a stack whose checks are done, so its CPU goes to the tests still running; the
        module's teardown waits for it to exit as for every other stack."""
        if self.child.running() and not self.interrupted:
            self.interrupted = True
            self.process.send_signal(signal.SIGINT)

    @functools.cached_property
    def rules(self) -> dict[str, Any]:
        """The rules the demo loaded into its Prometheus (written once, at start-up)."""
        document: dict[str, Any] = yaml.safe_load((self.state / "rules.yaml").read_text())
        return document

    def rule_for(self, name: str) -> float:
        for group in self.rules["groups"]:
            for rule in group["rules"]:
                if rule.get("alert") == name:
                    return parse_duration(rule.get("for", "0s"))
        raise AssertionError(f"{name} is not in the demo's rules")


def _launch(name: str, plan: Plan, root: Path) -> Stack:
    state = root / name
    argv = [
        sys.executable,
        "-m",
        "servescope",
        "demo",
        f"--scenario={plan.scenario}",
        "--gpus=4",
        f"--engines={plan.engines}",
    ]
    env = dict(os.environ)
    if plan.leak_mib_per_minute is not None:
        env[LEAK_ENV] = str(plan.leak_mib_per_minute)
    if plan.canary_at is not None:
        env[CANARY_AT_ENV] = str(plan.canary_at)
    child = Child(f"the {name} demo", [*argv, f"--state-dir={state}"], root / f"{name}.log", env=env)
    child.start()
    return Stack(name, plan, state, child)


def _wait_started(stack: Stack) -> None:
    urls = stack.state / "urls.json"

    def ready() -> bool:
        assert stack.child.running(), stack.child.log_path.read_text()
        return urls.exists()

    wait_for(f"the {stack.name} demo to start", ready, START_TIMEOUT, every=1.0)
    stack.urls = json.loads(urls.read_text())
    assert stack.urls["full"], "the demo ran without Prometheus and Alertmanager"


@contextlib.contextmanager
def start_stacks(waves: tuple[dict[str, Plan], ...], root: Path) -> Iterator[dict[str, Stack]]:
    """Every plan's demo, wave by wave: the demos of a wave start at once, and the next wave once they
    are ready, so that the first (the longest to check) do not share the CPU with every other start-up.
    At the end, Ctrl-C to all at once, as a user would; a demo that does not stop in a minute is killed."""
    started: dict[str, Stack] = {}
    try:
        for wave in waves:
            launched = {name: _launch(name, plan, root) for name, plan in wave.items()}
            started |= launched
            for stack in launched.values():
                _wait_started(stack)
        yield started
    finally:
        for stack in started.values():
            stack.release()
        for stack in started.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                stack.process.wait(60)
            stack.child.stop()
