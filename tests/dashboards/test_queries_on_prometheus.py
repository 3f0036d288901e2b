"""Every panel query, run by a real Prometheus that scraped real exporters on simulated nodes.

Two exporters run side by side for about three minutes: one plays `memory-leak` (so growth rates,
exhaustion and the leak verdict exist), the other `hardware-faults` (XIDs, NVLink CRC errors, PCIe
replays, a lost GPU). Prometheus scrapes both every second and evaluates the alert bundle's rules.
Every query must succeed and return data; queries the dashboards mark FAULT_ONLY must return data from
the faulty node.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.alerts.promtool import RULES
from tests.dashboards.dashboards import built, expand, fault_only, queries
from tests.e2e.conftest import Served, start_servescope, stop

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# Growth rates need half their 5 min window of 1 s history before they are exported.
HISTORY_WAIT_SECONDS = 240
FAST = ("--derived-interval", "1", "--vllm-interval", "1")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Prometheus:
    def __init__(self, targets: list[str], tmp: Path) -> None:
        binary = shutil.which("prometheus")
        assert binary, (
            "prometheus missing: `make test` installs Debian prometheus (scripts/install-debian-tools.sh)"
        )
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(RULES)],
            "scrape_configs": [{"job_name": "servescope", "static_configs": [{"targets": targets}]}],
        }
        (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.base = f"http://127.0.0.1:{_free_port()}"
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address={self.base.removeprefix('http://')}",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base}/-/ready").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.stop()
        raise AssertionError("prometheus did not become ready")

    def query(self, expr: str) -> dict[str, Any]:
        response = httpx.get(f"{self.base}/api/v1/query", params={"query": expr}, timeout=30)
        body: dict[str, Any] = response.json()
        return body

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    leak = start_servescope(
        "--simulate",
        "--gpus",
        "4",
        "--engines",
        "2",
        "--scenario",
        "memory-leak",
        "--hostname",
        "node-leak",
        "--seed",
        "1",
        *FAST,
        timeout=60,
    )
    faults: Served | None = None
    prom: Prometheus | None = None
    try:
        faults = start_servescope(
            "--simulate",
            "--gpus",
            "4",
            "--engines",
            "2",
            "--scenario",
            "hardware-faults",
            "--hostname",
            "node-faults",
            "--seed",
            "2",
            *FAST,
            timeout=60,
        )
        targets = [s.base.removeprefix("http://") for s in (leak, faults)]
        prom = Prometheus(targets, tmp_path_factory.mktemp("prometheus"))
        deadline = time.monotonic() + HISTORY_WAIT_SECONDS + 60
        # The leaking node's 4 GPUs (the faulty node loses one of its own on purpose).
        ready = 'count(servescope_gpu_memory_growth_bytes_per_second{window="5m", hostname="node-leak"})'
        while time.monotonic() < deadline:
            result = prom.query(ready)["data"]["result"]
            if result and float(result[0]["value"][1]) >= 4:
                break
            time.sleep(5)
        else:
            raise AssertionError("the exporters never exported 5m growth rates")
        time.sleep(30)  # let rate windows and recording rules fill
        yield prom
    finally:
        if prom is not None:
            prom.stop()
        for served in (leak, faults):
            if served is not None:
                stop(served)


QUERIES = sorted(set(queries()))


@pytest.mark.parametrize(("name", "title", "expr"), QUERIES, ids=lambda v: str(v)[:50])
def test_panel_query_returns_data(prometheus: Prometheus, name: str, title: str, expr: str) -> None:
    body = prometheus.query(expand(expr))
    assert body.get("status") == "success", f"{name} / {title}: {body.get('error')}"
    assert body["data"]["result"], f"{name} / {title}: no data for {expand(expr)}"


def test_fault_only_queries_have_data_from_the_faulty_node(prometheus: Prometheus) -> None:
    for expr in sorted(fault_only()):
        narrowed = expand(expr.replace('hostname=~"$hostname"', 'hostname="node-faults"'))
        assert prometheus.query(narrowed)["data"]["result"], f"no data in the fault scenario: {narrowed}"


def test_variable_queries_list_values(prometheus: Prometheus) -> None:
    for dashboard in built().values():
        for variable in dashboard["templating"]["list"]:
            query = variable.get("query")
            if not isinstance(query, str) or not query.startswith("label_values("):
                continue
            inner = query.removeprefix("label_values(").removesuffix(")")
            selector, label = (part.strip() for part in inner.rsplit(",", 1))
            response = httpx.get(
                f"{prometheus.base}/api/v1/label/{label}/values",
                params={"match[]": expand(selector)},
                timeout=30,
            ).json()
            assert response["status"] == "success" and response["data"], f"{query}: no values"
