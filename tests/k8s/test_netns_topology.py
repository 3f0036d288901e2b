"""The netns topology end to end: engines in pods (network namespaces), GPUs from a simulated NVML,
pods from a kubelet speaking the real protocol, the exporter's sources wired as `serve` wires them.

Pod dp-0 runs a data-parallel server (two engine cores, a worker each, on GPUs 0 and 1) serving the
captured vLLM 0.32 DP=2 exposition; pod tp-0 one engine on GPUs 2 and 3; pod lo-0 an engine on its
loopback only (GPU 4).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from servescope.exporter.k8s.settings import K8sSettings
from servescope.exporter.nvml.library import NvmlLibrary
from servescope.exporter.runtime import Hardware, build_runtime
from servescope.exporter.settings import DcgmSettings, NodeSettings, NvmlSettings, Settings, VllmSettings
from servescope.exporter.vllm.procfs import ProcFs
from servescope_sim.fleet import SimulatedFleet
from servescope_sim.pynvml_module import SimulatedPynvml
from servescope_sim.wiring import SIMULATED_ENGINE_PROCESS
from tests.helpers import SAMPLES
from tests.k8s.kubelet import FakeKubelet, container, pod
from tests.k8s.netns import pod_namespace

pytestmark = pytest.mark.e2e
GPU = "nvidia.com/gpu"


def workers_of(server: int, ranks: int) -> dict[str, int]:
    """DP rank -> worker PID below the server, once bash has started them all."""
    procfs = ProcFs("/proc")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = {}
        for core in procfs.children().get(server, []):
            title = procfs.cmdline(core)[:1]
            below = procfs.children().get(core, [])
            if title and title[0].startswith("VLLM::EngineCore_DP") and below:
                found[title[0].removeprefix("VLLM::EngineCore_DP")] = below[0]
        if len(found) == ranks:
            return found
        time.sleep(0.05)
    raise AssertionError(f"the engine cores and workers of {server} did not start")


def exposition(settings: Settings, fleet: SimulatedFleet) -> dict[str, list[dict[str, str]]]:
    """One cycle of NVML, the kubelet, the engines (in that order), rendered as `serve` would."""
    runtime = build_runtime(settings, Hardware(nvml=NvmlLibrary(SimulatedPynvml(fleet)), simulated=True))
    try:
        for name in ("nvml", "k8s", "vllm"):
            next(r for r in runtime.runners if r.source.name == name).run_once()
        text = runtime.publisher.current.body.decode()
    finally:
        for runner in runtime.runners:
            runner.source.close()
    series: dict[str, list[dict[str, str]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            series.setdefault(sample.name, []).append({**sample.labels, "value": f"{sample.value:g}"})
    return series


def node_settings(socket: Path) -> Settings:
    return Settings(
        node=NodeSettings(hostname="node-a"),
        nvml=NvmlSettings(xid_events=False),
        dcgm=DcgmSettings(enabled=False),
        k8s=K8sSettings(pod_resources_socket=str(socket)),
        vllm=VllmSettings(engine_processes=[SIMULATED_ENGINE_PROCESS]),
    )


def run_node(tmp_path: Path) -> tuple[dict[str, list[dict[str, str]]], dict[str, str], str, str]:
    """The three pods started, one exporter cycle run: its series, GPU UUIDs, the DP and TP URLs."""
    (tmp_path / "www").mkdir()  # the DP server's /metrics: the captured DP=2 exposition
    (tmp_path / "www" / "metrics").write_text((SAMPLES / "vllm-0.32-cpu-dp2.txt").read_text())
    fleet = SimulatedFleet(5, "H200", seed=3)
    uuid = {str(g.index): g.uuid for g in fleet.gpus}
    socket = tmp_path / "kubelet.sock"
    with (
        pod_namespace(41) as dp_pod,
        pod_namespace(42) as tp_pod,
        pod_namespace(43) as lo_pod,
        FakeKubelet(socket) as kubelet,
    ):
        dp_server, dp_port = dp_pod.start_dp_server(str(tmp_path / "www"))
        for rank, worker in workers_of(dp_server.pid, 2).items():
            fleet.assign_process(int(rank), worker)  # rank n's worker on GPU n
        tp_engine, tp_port = tp_pod.start_engine("0.0.0.0:0")
        fleet.assign_process(2, tp_engine.pid)
        fleet.assign_process(3, tp_engine.pid)
        lo_engine, _ = lo_pod.start_engine("127.0.0.1:0")
        fleet.assign_process(4, lo_engine.pid)
        kubelet.pods = [
            pod("serving", name, container("vllm", (GPU, [uuid[g] for g in gpus])))
            for name, gpus in (("dp-0", "01"), ("tp-0", "23"), ("lo-0", "4"))
        ]
        got = exposition(node_settings(socket), fleet)
    return (
        got,
        uuid,
        f"http://{dp_pod.address}:{dp_port}/metrics",
        f"http://{tp_pod.address}:{tp_port}/metrics",
    )


def test_pods_discovered_labelled_mapped_per_rank_and_loopback_reported(tmp_path: Path) -> None:
    got, uuid, dp_url, tp_url = run_node(tmp_path)
    assert got["servescope_vllm_discovered_endpoints"] == [{"value": "2"}]
    assert {s["endpoint"] for s in got["servescope_source_up"] if "endpoint" in s} == {dp_url, tp_url}
    # Per data-parallel rank its own GPU; the TP engine on both of its GPUs.
    assert {(s["endpoint"], s["engine"], s["uuid"]) for s in got["servescope_engine_gpu_info"]} == {
        (dp_url, "0", uuid["0"]),
        (dp_url, "1", uuid["1"]),
        (tp_url, "0", uuid["2"]),
        (tp_url, "0", uuid["3"]),
    }
    assert {(s["endpoint"], s["pod"]) for s in got["servescope_serving_endpoint_pod_info"]} == {
        (dp_url, "dp-0"),
        (tp_url, "tp-0"),
    }
    assert {(s["gpu"], s["pod"]) for s in got["servescope_gpu_pod_info"]} == {
        ("0", "dp-0"), ("1", "dp-0"), ("2", "tp-0"), ("3", "tp-0"), ("4", "lo-0"),
    }  # fmt: skip
    errors = {(s["source"], s["reason"]): s["value"] for s in got["servescope_source_errors_total"]}
    assert errors[("vllm", "loopback_only")] == "1"  # once in the cycle, for the one unreachable engine
