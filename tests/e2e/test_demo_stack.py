"""The whole stack, end to end: `servescope demo` per fault scenario, with the real Prometheus and
Alertmanager. A fault must become a firing alert with the right labels, Alertmanager must deliver it to
the runbook service's webhook, and the incident must carry the output of its runbook's read steps.

The six stacks (4 simulated H200s, 2 engines: engine 0 on GPUs 0-1, engine 1 on GPUs 2-3) run side by
side, so the module takes as long as its slowest scenario, not the sum; every check polls for what it
waits for and has its own bound. The slowest is memory-leak: the leak verdict needs 4 minutes of
history whatever the rate, so its GPU leaks 2.75 GiB/min instead of the demo pace's 2 (OOM after about
6 minutes instead of 8). The alert still leads the OOM by about 50 s: it fires 30 to 65 s after the
verdict (the exporter refits every 30 s, Prometheus scrapes and evaluates every 5 s, `for` is 30 s at
the demo profile), which comes at 245 s, and the OOM at about 350 s. `make test` runs each module on
one xdist worker (`--dist loadscope`): the stacks are started once, not once per worker.

Detection latency is measured from the fault's start (the exporter's start, plus the demo pace's minute
for the single faults) to the alert firing in Prometheus (its activeAt plus its `for`), and to the incident's
arrival at the webhook. Set SERVESCOPE_E2E_REPORT=FILE to keep the figures as JSON.
"""

from __future__ import annotations

import contextlib
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
import pytest
import yaml

from servescope.demo.stack import find_binaries
from servescope.sim.registry import LEAK_ENV
from servescope.sim.scenarios import PACES
from tests.support import Child, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SCENARIOS = ("kv-pressure", "nvlink-crc", "gpu-lost", "vllm-down", "memory-leak", "steady")
FAULT_START = {name: PACES["demo"].fault_start_seconds for name in ("nvlink-crc", "gpu-lost", "vllm-down")}
STEADY_SECONDS = 300.0
LEAK_MIB_PER_MINUTE = {"memory-leak": "2816"}
START_TIMEOUT = 180.0
REPORT: dict[str, dict[str, Any]] = {}


def _seconds(duration: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    return float(duration[:-1]) * units[duration[-1]] if duration[-1] in units else float(duration)


def _unix(stamp: str) -> float:
    # Prometheus and Alertmanager write RFC 3339 with nanoseconds; Python takes microseconds.
    head, _, rest = stamp.replace("Z", "+00:00").partition(".")
    if rest:
        digits = "".join(ch for ch in rest if ch.isdigit())
        zone = rest[len(digits) :]
        stamp = f"{head}.{digits[:6]}{zone}"
    return datetime.fromisoformat(stamp).timestamp()


@dataclass
class Stack:
    scenario: str
    state: Path
    child: Child
    urls: dict[str, Any] = field(default_factory=dict)

    @property
    def process(self) -> subprocess.Popen[bytes]:
        assert self.child.process is not None, "started by _start"
        return self.child.process

    @property
    def started(self) -> float:
        return float(self.urls["started_at"]["exporter"])

    @property
    def fault_at(self) -> float:
        return self.started + FAULT_START.get(self.scenario, 0.0)

    def get(self, service: str, path: str, **params: Any) -> Any:
        response = httpx.get(self.urls[service] + path, params=params, timeout=10)
        response.raise_for_status()
        return response.json()

    def alerts(self, name: str, state: str = "firing") -> list[dict[str, Any]]:
        found = self.get("prometheus", "/api/v1/alerts")["data"]["alerts"]
        return [a for a in found if a["labels"]["alertname"] == name and a["state"] == state]

    def query(self, expr: str) -> list[dict[str, Any]]:
        body = self.get("prometheus", "/api/v1/query", query=expr)
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

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

    def rule_for(self, name: str) -> float:
        rules = yaml.safe_load((self.state / "rules.yaml").read_text())
        for group in rules["groups"]:
            for rule in group["rules"]:
                if rule.get("alert") == name:
                    return _seconds(rule.get("for", "0s"))
        raise AssertionError(f"{name} is not in the demo's rules")


def _start(scenario: str, root: Path) -> Stack:
    state = root / scenario
    argv = [sys.executable, "-m", "servescope", "demo", f"--scenario={scenario}", "--gpus=4", "--engines=2"]
    env = dict(os.environ)
    if scenario in LEAK_MIB_PER_MINUTE:
        env[LEAK_ENV] = LEAK_MIB_PER_MINUTE[scenario]
    child = Child(f"the {scenario} demo", [*argv, f"--state-dir={state}"], root / f"{scenario}.log", env=env)
    child.start()
    return Stack(scenario, state, child)


@pytest.fixture(scope="module")
def stacks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Stack]]:
    prometheus, alertmanager = find_binaries()
    if not (prometheus and alertmanager):
        pytest.fail("prometheus and prometheus-alertmanager are needed: `make test` installs them")
    root = tmp_path_factory.mktemp("demo")
    started = {name: _start(name, root) for name in SCENARIOS}
    try:
        for stack in started.values():
            urls = stack.state / "urls.json"

            def ready(stack: Stack = stack, urls: Path = urls) -> bool:
                assert stack.child.running(), stack.child.log_path.read_text()
                return urls.exists()

            wait_for(f"the {stack.scenario} demo to start", ready, START_TIMEOUT, every=1.0)
            stack.urls = json.loads(urls.read_text())
            assert stack.urls["full"], "the demo ran without Prometheus and Alertmanager"
        yield started
    finally:
        # Ctrl-C to all at once, as a user would; a demo that does not stop in a minute is killed.
        for stack in started.values():
            if stack.child.running():
                stack.process.send_signal(signal.SIGINT)
        for stack in started.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                stack.process.wait(60)
            stack.child.stop()
        if os.environ.get("SERVESCOPE_E2E_REPORT"):
            Path(os.environ["SERVESCOPE_E2E_REPORT"]).write_text(json.dumps(REPORT, indent=2) + "\n")


def _detected(stack: Stack, name: str, alerts: list[dict[str, Any]], incident: dict[str, Any]) -> None:
    """Record when `name` fired and reached the webhook, counted from the fault's start."""
    firing_at = min(_unix(a["activeAt"]) for a in alerts) + stack.rule_for(name)
    REPORT[stack.scenario] = {
        **REPORT.get(stack.scenario, {}),
        "alert": name,
        "firing_after_seconds": round(firing_at - stack.fault_at, 1),
        "webhook_after_seconds": round(_unix(incident["received_at"]) - stack.fault_at, 1),
    }


def _assert_read_steps_ran(incident: dict[str, Any]) -> None:
    steps = incident["steps"]
    assert steps, f"incident {incident['id']} has no step results"
    ok = [s for s in steps if s["ok"] and s["output"].strip()]
    failed = [f"{s['step_id']}: {s['output'][:200]}" for s in steps if not s["ok"]]
    assert ok, f"no read step of incident {incident['id']} succeeded: {failed}"
    assert len(ok) >= len(steps) / 2, f"most read steps failed: {failed}"


def _check_delivered(stack: Stack, name: str, timeout: float, **labels: str) -> dict[str, Any]:
    def delivered() -> dict[str, Any] | None:
        return stack.incident_with_steps(name, **labels)

    incident = wait_for(f"{name} {labels} at the webhook with its step results", delivered, timeout)
    _assert_read_steps_ran(incident)
    return incident


def _gpus_of(stack: Stack, endpoint: str) -> set[str]:
    info = stack.query(f'servescope_engine_gpu_info{{endpoint="{endpoint}"}}')
    return {series["metric"]["gpu"] for series in info}


def _endpoint_on(stack: Stack, gpus: set[str]) -> str:
    info = stack.query("servescope_engine_gpu_info")
    endpoints = {s["metric"]["endpoint"] for s in info if s["metric"]["gpu"] in gpus}
    assert len(endpoints) == 1, f"expected one engine on GPUs {gpus}, got {endpoints}"
    return endpoints.pop()


def test_kv_pressure_pages_with_the_combined_alert_on_the_right_gpus_and_engine(
    stacks: dict[str, Stack],
) -> None:
    stack = stacks["kv-pressure"]
    name = "ServescopeGpuSaturatedKvPressure"
    # Both GPUs of engine 0 saturate, and its KV cache fills over the 90 s ramp: two alerts.
    alerts: list[dict[str, Any]] = wait_for(
        f"{name} firing on two GPUs", lambda: len(stack.alerts(name)) >= 2 and stack.alerts(name), 360
    )
    endpoint = _endpoint_on(stack, {"0", "1"})
    assert {a["labels"]["gpu"] for a in alerts} == {"0", "1"}
    assert {a["labels"]["endpoint"] for a in alerts} == {endpoint}
    assert {a["labels"]["engine"] for a in alerts} == {"0"}
    assert _gpus_of(stack, endpoint) == {"0", "1"}
    # The other engine and its GPUs are not under pressure: no combined alert names them.
    assert not [a for a in stack.alerts(name, "pending") if a["labels"]["gpu"] in {"2", "3"}]
    # The ramp also makes requests suffer (the TTFT budget burns at the paging rate): the page is the
    # critical alert that needs such a symptom, one per engine whatever its GPU count, and it inhibits
    # the combined warnings it contains.
    page = "ServescopeKvPressureHurtingRequests"
    pages: list[dict[str, Any]] = wait_for(f"{page} firing", lambda: stack.alerts(page), 240)
    assert [(a["labels"]["engine"], a["labels"]["endpoint"]) for a in pages] == [("0", endpoint)]
    assert "gpu" not in pages[0]["labels"]
    incident = _check_delivered(stack, page, 120, endpoint=endpoint)
    assert incident["labels"]["severity"] == "critical"
    _detected(stack, page, pages, incident)


def test_nvlink_crc_storm_alerts_on_that_gpu_only(stacks: dict[str, Stack]) -> None:
    stack = stacks["nvlink-crc"]
    name = "ServescopeNvlinkCrcErrors"
    alerts = wait_for(f"{name} firing", lambda: stack.alerts(name), 240)
    assert {a["labels"]["gpu"] for a in alerts} == {"1"}
    incident = _check_delivered(stack, name, 120, gpu="1")
    _detected(stack, name, alerts, incident)


def test_a_lost_gpu_pages_and_its_xid_79_is_alerted_on(stacks: dict[str, Stack]) -> None:
    stack = stacks["gpu-lost"]
    name = "ServescopeGpuLost"
    alerts = wait_for(f"{name} firing", lambda: stack.alerts(name), 180)
    assert {a["labels"]["gpu"] for a in alerts} == {"2"}
    incident = _check_delivered(stack, name, 120, gpu="2")
    _detected(stack, name, alerts, incident)
    # The XID alert fires too, for the hardware window (1 min at the demo profile) after the event;
    # Alertmanager inhibits it under GpuLost once both are active.
    xid = stack.query('max_over_time(ALERTS{alertname="ServescopeGpuXidCritical", alertstate="firing"}[15m])')
    assert {(s["metric"]["gpu"], s["metric"]["xid"]) for s in xid} == {("2", "79")}


def test_an_engine_down_alerts_with_its_endpoint(stacks: dict[str, Stack]) -> None:
    stack = stacks["vllm-down"]
    name = "ServescopeServingEndpointDown"
    alerts = wait_for(f"{name} firing", lambda: stack.alerts(name), 240)
    endpoints = {a["labels"]["endpoint"] for a in alerts}
    assert len(endpoints) == 1
    # Engine 1 went down: the engine on GPUs 2 and 3 (its join series keep their last value).
    endpoint = endpoints.pop()
    down = stack.query(f'servescope_source_up{{source="vllm", endpoint="{endpoint}"}} == 0')
    assert down, f"{endpoint} is not reported down"
    assert stack.query(f'max_over_time(servescope_engine_gpu_info{{endpoint="{endpoint}", gpu="2"}}[1h])')
    incident = _check_delivered(stack, name, 120, endpoint=endpoint)
    _detected(stack, name, alerts, incident)


def test_memory_leak_is_flagged_before_the_oom(stacks: dict[str, Stack]) -> None:
    stack = stacks["memory-leak"]
    name = "ServescopeGpuMemoryLeakSuspected"
    alerts = wait_for(f"{name} firing", lambda: stack.alerts(name), 540)
    assert {a["labels"]["gpu"] for a in alerts} == {"0"}, "only GPU 0 leaks"
    leak_firing_at = min(_unix(a["activeAt"]) for a in alerts) + stack.rule_for(name)
    # The time-to-exhaustion page comes first and, being critical on the same GPU, is what Alertmanager
    # delivers; the leak warning is inhibited under it.
    soon = "ServescopeGpuMemoryExhaustionSoon"
    exhaustion = wait_for(f"{soon} firing", lambda: stack.alerts(soon), 120)
    assert {a["labels"]["gpu"] for a in exhaustion} == {"0"}
    incident = _check_delivered(stack, soon, 120, gpu="0")
    _detected(stack, soon, exhaustion, incident)

    def oom() -> float | None:
        gpus = stack.get("exporter", "/api/v1/gpus")["gpus"]
        gpu0 = next(g for g in gpus if str(g["gpu"]) == "0")
        # The engine died: its memory pool is released and only the driver's reservation is left.
        return time.time() if gpu0["used_bytes"] < 0.5 * gpu0["total_bytes"] else None

    oom_at = wait_for("the simulated OOM on GPU 0", oom, 900, every=1.0)
    lead = oom_at - leak_firing_at
    assert lead > 0, f"the leak alert fired {-lead:.0f} s after the OOM"
    REPORT["memory-leak"] |= {
        "leak_alert_after_seconds": round(leak_firing_at - stack.fault_at, 1),
        "oom_after_seconds": round(oom_at - stack.fault_at, 1),
        "leak_alert_lead_before_oom_seconds": round(lead, 1),
    }


def test_steady_serving_fires_nothing_but_the_watchdog(stacks: dict[str, Stack]) -> None:
    stack = stacks["steady"]
    remaining = stack.started + STEADY_SECONDS + 15 - time.time()
    if remaining > 0:
        time.sleep(remaining)
    window = int(time.time() - stack.started) + 5
    fired = stack.query(
        f'count_over_time(ALERTS{{alertstate="firing", alertname!="ServescopeWatchdog"}}[{window}s])'
    )
    assert not fired, [series["metric"] for series in fired]
    assert stack.query('ALERTS{alertname="ServescopeWatchdog", alertstate="firing"}')
    names = {i["alertname"] for i in stack.get("runbooks", "/incidents")}
    assert names == {"ServescopeWatchdog"}, names
    REPORT["steady"] = {"seconds_without_an_alert": window}


def _descendants(pid: int) -> set[int]:
    """Every process below `pid`, from /proc's parent links."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def test_ctrl_c_stops_every_child(stacks: dict[str, Stack]) -> None:
    stack = stacks["nvlink-crc"]
    processes = _descendants(stack.process.pid)
    # The demo's four children, the exporter's two engines and its dcgmi at least.
    assert len(processes) >= 7, processes
    stack.process.send_signal(signal.SIGINT)
    assert stack.process.wait(60) == 0
    deadline = time.monotonic() + 15
    alive = processes
    while alive and time.monotonic() < deadline:
        alive = {pid for pid in alive if Path(f"/proc/{pid}").exists() and not _zombie(pid)}
        time.sleep(0.5)
    assert not alive, f"left running after Ctrl-C: {alive}"


def _zombie(pid: int) -> bool:
    try:
        return (Path(f"/proc/{pid}") / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False
