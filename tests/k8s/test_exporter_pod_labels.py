"""End to end: the real exporter on a simulated node asks a kubelet which pod holds each GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.k8s.kubelet import FakeKubelet, container, dra_claim, pod
from tests.support import start_servescope, stop, wait_for

pytestmark = pytest.mark.e2e
GPU = "nvidia.com/gpu"
MIG = "nvidia.com/mig-1g.18gb"


def series(base: str, family: str) -> list[dict[str, str]]:
    text = httpx.get(f"{base}/metrics", timeout=5).text
    return [
        dict(sample.labels)
        for metric in text_string_to_metric_families(text)
        for sample in metric.samples
        if sample.name == family
    ]


def pods_of(uuid: dict[str, str]) -> list[Any]:
    """GPU 0 whole, GPU 1 time-sliced between two pods, a MIG device of GPU 2, GPU 3 through DRA."""
    return [
        pod("serving", "llama-0", container("vllm", (GPU, [uuid["0"]]))),
        pod("serving", "llama-1", container("vllm", (GPU, [f"{uuid['1']}::0"]))),
        pod("chat", "chat-0", container("engine", (GPU, [f"{uuid['1']}::1"]))),
        pod("batch", "train-0", container("train", (MIG, [f"MIG-{uuid['2']}/1/0"]))),
        pod("serving", "dra-0", container("main", claims=[dra_claim("gpu", "gpu.nvidia.com", "gpu-3")])),
    ]


def _rows(base: str, name: str, count: int, pods: int | None = None) -> list[dict[str, str]]:
    """The `name` series once there are `count` of them (and `pods` of them carry a pod label)."""

    def ready() -> list[dict[str, str]] | None:
        found = series(base, name)
        if len(found) != count or (pods is not None and sum("pod" in s for s in found) != pods):
            return None
        return found

    return wait_for(f"{count} {name} series ({pods} with a pod)", ready, 20, every=0.5)


def test_gpu_pod_info_from_the_kubelet(tmp_path: Path) -> None:
    socket = tmp_path / "kubelet.sock"
    process_memory = "servescope_gpu_process_memory_used_bytes"
    with FakeKubelet(socket) as kubelet:
        served = start_servescope(
            "--simulate", "--gpus", "4", "--engines", "4", "--no-dcgm", "--hostname", "node-a",
            "--pod-resources-socket", str(socket), "--pod-resources-interval", "1",
        )  # fmt: skip
        try:
            uuid = {s["gpu"]: s["uuid"] for s in series(served.base, "servescope_gpu_info")}
            pids = {
                s["gpu"]: s["pid"] for s in _rows(served.base, process_memory, 4)
            }  # a process on every GPU
            kubelet.pods = pods_of(uuid)
            got = _rows(served.base, "servescope_gpu_pod_info", 5)
            by_process = series(served.base, "servescope_gpu_process_pod_info")
            memory = _rows(served.base, process_memory, 4, pods=3)
        finally:
            stop(served)
    assert {(s["gpu"], s["uuid"], s["hostname"], s["namespace"], s["pod"], s["container"]) for s in got} == {
        ("0", uuid["0"], "node-a", "serving", "llama-0", "vllm"),
        ("1", uuid["1"], "node-a", "serving", "llama-1", "vllm"),
        ("1", uuid["1"], "node-a", "chat", "chat-0", "engine"),
        ("2", uuid["2"], "node-a", "batch", "train-0", "train"),
        ("3", uuid["3"], "node-a", "serving", "dra-0", "main"),
    }
    # The shared GPU 1's process is not attributed to either pod; the others are.
    assert {(s["gpu"], s["pid"], s["pod"]) for s in by_process} == {
        ("0", pids["0"], "llama-0"),
        ("2", pids["2"], "train-0"),
        ("3", pids["3"], "dra-0"),
    }
    # The per-process series carry the same pod, and none on the shared GPU.
    assert {(s["gpu"], s["pid"], s.get("namespace"), s.get("pod"), s.get("container")) for s in memory} == {
        ("0", pids["0"], "serving", "llama-0", "vllm"),
        ("1", pids["1"], None, None, None),
        ("2", pids["2"], "batch", "train-0", "train"),
        ("3", pids["3"], "serving", "dra-0", "main"),
    }
    assert {"List", "GetAllocatableResources"} <= set(kubelet.calls)


def test_a_chosen_socket_that_is_missing_reports_absent(tmp_path: Path) -> None:
    served = start_servescope(
        "--simulate", "--gpus", "1", "--engines", "0", "--no-dcgm",
        "--pod-resources-socket", str(tmp_path / "missing.sock"), "--pod-resources-interval", "1",
    )  # fmt: skip

    def k8s_errors() -> list[dict[str, str]]:
        found = series(served.base, "servescope_source_errors_total")
        return [s for s in found if s.get("source") == "k8s"]

    try:
        errors = wait_for("the k8s source's absent report", k8s_errors, timeout=15, every=0.5)
        ready = httpx.get(f"{served.base}/readyz", timeout=5)
    finally:
        stop(served)
    assert [e["reason"] for e in errors] == ["absent"]
    assert ready.status_code == 200  # absent does not hold readiness back
