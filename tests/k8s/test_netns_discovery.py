"""Engines in other pods, for real: network namespaces with a veth pair, engines started inside them."""

from __future__ import annotations

import os
import re

import httpx
import pytest

from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.vllm.discovery import discover
from servescope.exporter.vllm.probing import settle, tcp_connect
from servescope.exporter.vllm.procfs import ProcFs
from servescope.exporter.vllm.scrape import Scraper
from servescope.exporter.vllm.source import VllmSource
from servescope_sim.wiring import SIMULATED_ENGINE_PROCESS
from tests.helpers import values
from tests.k8s.netns import ip, pod_namespace

pytestmark = pytest.mark.e2e


def test_an_engine_in_a_pod_is_found_at_the_pod_address_and_a_loopback_one_reported() -> None:
    procfs = ProcFs("/proc")
    # This test process and its ancestors stand for the exporter: never candidates.
    exporter = frozenset({os.getpid(), *procfs.ancestors(os.getpid())})
    with pod_namespace(40) as pod:
        reachable, port = pod.start_engine("0.0.0.0:0")
        hidden, hidden_port = pod.start_engine("127.0.0.1:0", engine="1")
        directory = GpuDirectory()
        directory.update({"0": "GPU-a", "1": "GPU-b"})
        directory.set_processes("GPU-a", frozenset({reachable.pid}))
        directory.set_processes("GPU-b", frozenset({hidden.pid}))

        patterns = [re.compile(SIMULATED_ENGINE_PROCESS)]
        found = settle(discover(procfs, directory, exporter, patterns), tcp_connect, lambda url: None)
        url = f"http://{pod.address}:{port}/metrics"
        answer = httpx.get(url, timeout=5)
        netns = procfs.netns(hidden.pid)

        engines = [SIMULATED_ENGINE_PROCESS]
        source = VllmSource(
            [], directory=directory, procfs=procfs, scraper=Scraper(2.0), engine_patterns=engines
        )
        collection = source.collect()
        source.close()
        names = ip("netns", "list").stdout
    assert procfs.netns(os.getpid()) != netns  # the engines are in another namespace
    assert found.urls == [url] and answer.status_code == 200 and "vllm:" in answer.text
    assert found.reports() == [
        (
            "loopback_only",
            f"pid {hidden.pid} in network namespace {netns} listens on 127.0.0.1:{hidden_port} only",
        )
    ]
    assert [p.reason for p in collection.problems] == ["loopback_only"]
    assert values(collection.samples, "servescope_vllm_discovered_endpoints") == [1]
    assert values(collection.samples, "servescope_source_up", source="vllm", endpoint=url) == [1]
    assert pod.name in names  # it existed while the engines ran ...
    assert pod.name not in ip("netns", "list").stdout  # ... and is gone now
