"""The runbook service under attack: its peak memory against the Deployment's limit, and the latency of
/healthz and the webhook while 400 clients trickle their bodies.

One `servescope runbook-server` (the peers and clients of tests/faults), each attack in turn, the
process's peak RSS (VmHWM, reset between attacks through /proc/<pid>/clear_refs) after each:
a nested-gzip answer and a brotli answer that decode to 1 GiB (3 read steps each), the 12 step workers
all reading an endless answer, 400 slow-body clients from 8 hosts (with 200 /healthz and 200 webhook
probes beside them, p50/p99), and 2,000 token-less change requests of ~15 KB. The target: every peak
under 75 % of the memory limit `deploy render` gives the Deployment, /healthz and webhook p99 < 100 ms.
Usage: python bench/runbook_attacks.py
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parents[1]))  # run as a script: the root, for `bench`
sys.path.insert(0, str(Path(__file__).parent.parent))  # the peers of tests/faults
from bench.common import machine, write
from servescope.deploy.options import DeployOptions
from servescope.deploy.runbooks import deployment
from tests.faults.attackers import SlowBodies, answer_with, brotli_bomb, gzip_bomb_nested
from tests.faults.runbook_peers import (
    ALERT,
    WEBHOOK_TOKEN,
    ParallelRuns,
    RunbookServer,
    hostile_peer,
    run_step,
    runbook_server,
)
from tests.runbook.webhook.notices import alert, payload

MIB = 1024  # /proc gives KiB
HOOK = {"Authorization": f"Bearer {WEBHOOK_TOKEN}"}


def memory_limit_mib() -> float:
    """The memory limit of the runbook Deployment as `deploy render` emits it (e.g. 256Mi)."""
    limit = deployment(DeployOptions())["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    value = str(limit["memory"])
    assert value.endswith("Mi"), value
    return float(value[:-2])


def rss_kib(server: RunbookServer, field: str) -> int:
    found = re.search(rf"{field}:\s+(\d+) kB", Path(f"/proc/{server.process.pid}/status").read_text())
    assert found is not None
    return int(found.group(1))


def peak_of(server: RunbookServer, attack: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run `attack` with the peak RSS reset first; the peak during it, and what the attack measured."""
    Path(f"/proc/{server.process.pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = rss_kib(server, "VmRSS")
    measured = attack()
    return {
        "rss_before_mib": round(before / MIB, 1),
        "peak_mib": round(rss_kib(server, "VmHWM") / MIB, 1),
        **measured,
    }


def bomb(server: RunbookServer, kind: str) -> dict[str, Any]:
    answers = [run_step(server.base, "snapshot", {"gpu": "0"}).json() for _ in range(3)]
    return {"refused": all(a["ok"] is False for a in answers), "why": answers[0]["output"][-120:]}


def endless(server: RunbookServer) -> dict[str, Any]:
    runs = ParallelRuns(server.base, 8)
    for number in range(4):
        fired = alert(fingerprint=f"{number:016x}", alertname=ALERT)
        httpx.post(f"{server.base}/alertmanager/webhook", json=payload(fired), headers=HOOK)
    answers = runs.join()
    time.sleep(3)
    return {"refused_at_cap": sum("refused at the cap" in a.json()["output"] for a in answers)}


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[math.ceil(len(ordered) * 0.99) - 1]


def slow_bodies(server: RunbookServer) -> dict[str, Any]:
    port = int(server.base.rsplit(":", 1)[1])
    attack = SlowBodies(port, 400, [f"127.0.0.{n}" for n in range(2, 10)]).start()
    health: list[float] = []
    hooks: list[float] = []
    failed = 0
    try:
        time.sleep(3)
        with httpx.Client(base_url=server.base, timeout=10) as probe:
            for n in range(200):
                for path, timed in (("/healthz", health), ("/alertmanager/webhook", hooks)):
                    started = time.perf_counter()
                    if path != "/healthz":
                        body = payload(alert(fingerprint=f"{n:016x}", alertname="NoRunbookAlert"))
                        status = probe.post(path, json=body, headers=HOOK).status_code
                    else:
                        status = probe.get(path).status_code
                    timed.append((time.perf_counter() - started) * 1000)
                    failed += status != 200
                time.sleep(0.05)
    finally:
        attack.stop()
    return {
        "healthz_p50_ms": round(statistics.median(health), 1),
        "healthz_p99_ms": round(_p99(health), 1),
        "webhook_p50_ms": round(statistics.median(hooks), 1),
        "webhook_p99_ms": round(_p99(hooks), 1),
        "failed_probes": failed,
        "clients_cut_off": attack.reconnects,
    }


def token_less(server: RunbookServer, count: int = 2000) -> dict[str, Any]:
    body = json.dumps({"labels": {f"l{i}": "v" * 1000 for i in range(14)}, "execute": True}).encode()
    sent = [0]

    def flood() -> None:
        with httpx.Client(base_url=server.base, timeout=30) as client:
            for _ in range(count // 8):
                client.post(
                    f"/runbooks/{ALERT}/steps/cordon/run",
                    content=body,
                    headers={"Content-Type": "application/json"},
                )
                sent[0] += 1

    threads = [threading.Thread(target=flood) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    trail = server.folder / "audit.jsonl"
    return {"requests": sent[0], "audit_bytes": trail.stat().st_size if trail.exists() else 0}


def attacks(folder: Path) -> dict[str, Any]:
    """Each attack on a service of its own (the last two share one), its peak memory and figures."""
    results: dict[str, Any] = {}
    for kind, body in (("nested gzip 1 GiB", gzip_bomb_nested()), ("brotli 1 GiB", brotli_bomb())):
        encoding = "gzip, gzip" if kind.startswith("nested") else "br"
        with (
            hostile_peer("fixed", answer=answer_with(body, encoding)) as peer,
            runbook_server(folder / kind.split()[0], "--exporter-url", peer.url) as server,
        ):
            results[kind] = peak_of(server, functools.partial(bomb, server, kind))
    with (
        hostile_peer("endless") as peer,
        runbook_server(folder / "endless", "--exporter-url", peer.url) as server,
    ):
        results["12 endless answers"] = peak_of(server, lambda: endless(server))
    with runbook_server(folder / "clients") as server:
        results["400 slow-body clients"] = peak_of(server, lambda: slow_bodies(server))
        results["2000 token-less requests"] = peak_of(server, lambda: token_less(server))
    return results


def main() -> None:
    limit = memory_limit_mib()
    with tempfile.TemporaryDirectory() as folder:
        results = attacks(Path(folder))
    budget = 0.75 * limit
    worst = max(r["peak_mib"] for r in results.values())
    clients = results["400 slow-body clients"]
    load = os.getloadavg()[0]
    data = {
        "machine": machine(),
        "load_average": load,
        "memory_limit_mib": limit,
        "budget_mib": budget,
        "attacks": results,
    }
    lines = [
        "# The runbook service under attack",
        "",
        f"Memory limit of the rendered Deployment: {limit:.0f} MiB; target: every peak < 75 % = "
        f"{budget:.0f} MiB.",
        "",
        f"Load average when it finished: {load:.1f} on {os.cpu_count()} cores.",
        "",
        "| attack | RSS before | peak RSS | measured |",
        "| --- | --- | --- | --- |",
    ]
    for name, found in results.items():
        rest = {k: v for k, v in found.items() if k not in ("rss_before_mib", "peak_mib")}
        lines.append(f"| {name} | {found['rss_before_mib']} MiB | {found['peak_mib']} MiB | {rest} |")
    p99 = max(clients["healthz_p99_ms"], clients["webhook_p99_ms"])
    lines += [
        "",
        f"- worst peak {worst} MiB of {budget:.0f} MiB: {'met' if worst < budget else 'NOT met'}",
        f"- /healthz p99 {clients['healthz_p99_ms']} ms, webhook p99 {clients['webhook_p99_ms']} ms beside "
        f"400 slow-body clients (target < 100 ms): {'met' if p99 < 100 else 'NOT met'}",
        "",
    ]
    write("runbook-attacks", data, "\n".join(lines))


if __name__ == "__main__":
    main()
