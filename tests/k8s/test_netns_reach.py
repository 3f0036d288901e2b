"""Pods as clusters really make them, each engine scraped where it can be reached and every other one
reported with its reason, by the real exporter (over a fake NVML) listening dual-stack.

Six pods (network namespaces, tests/k8s/netns.py; IPv6 from 2001:2::/48):
- multus: a Multus-like `net1` at a lower address this host cannot reach; the engine on 0.0.0.0 is
  scraped at eth0's (default route) address;
- multus-bound: the engine bound to net1's address only: no_reachable_address;
- v6only-dual: a dual-stack pod, the engine on [::] with IPV6_V6ONLY: scraped over IPv6;
- v6only-v4: an IPv4 pod, the engine on [::] with IPV6_V6ONLY: v6only_listener;
- v6: an IPv6-only pod, the engine on [::]: scraped over IPv6;
- v6-unrouted: an IPv6-only pod this host has no route to: ipv6_only.
The exporter, on `--listen :0`, answers from the IPv6-only pod over IPv6.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from ipaddress import IPv4Address

import httpx
import pytest

from tests.k8s.netns import Pod, pod_namespace
from tests.k8s.peers import Listener, fake_nvml_exporter, start_engine
from tests.support import Served, stop, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
DISCOVERY = "servescope_vllm_discovery_gpu_processes"


@dataclass
class Node:
    pods: dict[str, Pod]
    engines: dict[str, Listener]
    exporter: Served
    metrics: str


def outcomes(text: str) -> dict[str, int]:
    prefix = f'{DISCOVERY}{{reason="'
    return {
        line[len(prefix) :].split('"')[0]: int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith(prefix)
    }


def settled(exporter: Served) -> str | None:
    """/metrics once discovery has an outcome for each of the six GPU processes, else None."""
    text = httpx.get(exporter.base + "/metrics").text
    return text if sum(outcomes(text).values()) == 6 else None


def url(host: str, engine: Listener) -> str:
    return f"http://[{host}]:{engine.port}/metrics" if ":" in host else f"http://{host}:{engine.port}/metrics"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    records = tmp_path_factory.mktemp("reach")
    shapes = {
        "multus": {"secondary": True},
        "multus-bound": {"secondary": True},
        "v6only-dual": {"ipv6": True},
        "v6only-v4": {},
        "v6": {"ipv4": False, "ipv6": True},
        "v6-unrouted": {"ipv4": False, "ipv6": True, "ipv6_routed": False},
    }
    with ExitStack() as stack:
        pods = {
            name: stack.enter_context(pod_namespace(70 + i, **shape))  # type: ignore[arg-type]
            for i, (name, shape) in enumerate(shapes.items())
        }
        binds = {"multus-bound": (pods["multus-bound"].secondary_address, False)}
        binds |= {name: ("::", True) for name in ("v6only-dual", "v6only-v4")}
        binds |= {name: ("::", False) for name in ("v6", "v6-unrouted")}
        engines = {
            name: start_engine(pod, records / f"{name}.rec", bind=binds.get(name, ("0.0.0.0", False))[0],
                               v6only=binds.get(name, ("0.0.0.0", False))[1])
            for name, pod in pods.items()
        }  # fmt: skip
        exporter = fake_nvml_exporter([engine.pid for engine in engines.values()])
        try:
            metrics = wait_for("an outcome for every GPU process", lambda: settled(exporter), 45, 0.5)
            yield Node(pods, engines, exporter, metrics)
        finally:
            stop(exporter)


def test_each_engine_is_scraped_where_it_can_be_reached(node: Node) -> None:
    pods, engines = node.pods, node.engines
    scraped = {
        url(pods["multus"].address, engines["multus"]),
        url(pods["v6only-dual"].address6, engines["v6only-dual"]),
        url(pods["v6"].address6, engines["v6"]),
    }
    up = {
        line.split('endpoint="')[1].split('"')[0]
        for line in node.metrics.splitlines()
        if line.startswith('servescope_source_up{source="vllm",endpoint=') and line.endswith(" 1")
    }
    assert up == scraped
    multus = pods["multus"]
    assert IPv4Address(multus.secondary_address) < IPv4Address(multus.address)  # lower, and passed over
    assert engines["multus"].counts()[0] >= 1 and engines["v6"].counts()[0] >= 1


def test_each_engine_that_cannot_be_reached_is_reported_with_its_reason(node: Node) -> None:
    assert outcomes(node.metrics) == {
        "scraped": 3,
        "no_reachable_address": 1,
        "v6only_listener": 1,
        "ipv6_only": 1,
    }
    sources = httpx.get(node.exporter.base + "/api/v1/sources").json()["sources"]["vllm"]
    by_reason = {entry["reason"]: entry["detail"] for entry in sources["not_scraped"]}
    engines, pods = node.engines, node.pods
    assert f"pid {engines['multus-bound'].pid}" in by_reason["no_reachable_address"]
    assert pods["multus-bound"].secondary_address in by_reason["no_reachable_address"]
    assert (
        "IPV6_V6ONLY" in by_reason["v6only_listener"]
        and f"pid {engines['v6only-v4'].pid}" in by_reason["v6only_listener"]
    )
    assert pods["v6-unrouted"].address6 in by_reason["ipv6_only"]
    assert httpx.get(node.exporter.base + "/readyz").status_code == 200  # engines answer: not blind


def test_the_exporter_answers_over_ipv6_from_an_ipv6_only_pod(node: Node) -> None:
    pod = node.pods["v6"]
    port = node.exporter.base.rsplit(":", 1)[1]
    fetched = subprocess.run(
        ["ip", "netns", "exec", pod.name, "curl", "-sg", "-o", "/dev/null", "-w", "%{http_code}",
         f"http://[{pod.host_address6}]:{port}/metrics"],
        capture_output=True, text=True, timeout=20, check=False,
    )  # fmt: skip
    assert fetched.stdout == "200", fetched.stderr
    assert httpx.get(f"http://[::1]:{port}/healthz").status_code == 200
