"""GPU -> pod attribution over the kubelet's real pod-resources protocol (a test server on a unix socket)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from servescope.exporter.gpu_directory import GpuDirectory
from servescope.exporter.k8s.devices import GpuNaming, claim_gpu, device_gpu, device_slice
from servescope.exporter.k8s.source import PodResourcesSource
from servescope.exporter.nvml.library import NvmlLibrary
from servescope.exporter.nvml.mig import mig_parents, mig_slices
from servescope.exporter.sources.base import SourceError
from tests.k8s.kubelet import FakeKubelet, container, dra_claim, pod

UUIDS = [f"GPU-{n:08x}-1111-2222-3333-{n:012x}" for n in range(5)]
MIG_UUID = "MIG-7a2e1b6c-0d3f-5e48-9a71-c2b4d6e8f013"
GPU = "nvidia.com/gpu"


def naming(mig: dict[str, str] | None = None) -> GpuNaming:
    return GpuNaming({str(i): u for i, u in enumerate(UUIDS)}, (mig or {}).get)


def test_device_plugin_ids_resolve_to_the_physical_gpu() -> None:
    n = naming({MIG_UUID: UUIDS[3]})
    assert device_gpu(GPU, UUIDS[0], n) == UUIDS[0]
    assert device_gpu(GPU, f"{UUIDS[1]}::3", n) == UUIDS[1]  # time-slicing replica
    assert device_gpu("nvidia.com/gpu.shared", f"{UUIDS[1]}::0", n) == UUIDS[1]  # renamed share
    assert device_gpu(GPU, "2", n) == UUIDS[2]  # DEVICE_ID_STRATEGY=index
    assert device_gpu("nvidia.com/mig-1g.18gb", MIG_UUID, n) == UUIDS[3]
    assert device_gpu("nvidia.com/mig-1g.18gb", f"MIG-{UUIDS[4]}/7/0", n) == UUIDS[4]  # legacy MIG id
    assert device_gpu("nvidia.com/mig-1g.18gb", "MIG-00000000-0000-0000-0000-000000000000", n) is None
    assert device_gpu("example.com/fpga", UUIDS[0], n) is None  # not a GPU resource
    assert device_gpu(GPU, "x" * 10_000, n) is None  # bounded
    assert device_gpu(GPU, "9", n) is None  # an index this node does not have


def test_dra_claims_name_gpus_by_index_or_uuid() -> None:
    n = naming()
    assert claim_gpu("gpu.nvidia.com", "gpu-2", [], n) == UUIDS[2]
    assert claim_gpu("gpu.nvidia.com", "gpu-1-mig-1g18gb-0", [], n) == UUIDS[1]
    assert claim_gpu("example.com", "dev", [f"k8s.example.com/gpu={UUIDS[4]}"], n) == UUIDS[4]
    assert claim_gpu("example.com", "gpu-2", [], n) is None  # another driver's naming is not guessed
    assert claim_gpu("gpu.nvidia.com", "nic-0", [], n) is None


class MigPynvml:
    """A pynvml-shaped module of two GPUs, the second MIG-enabled with one instance in slot 1 of 7."""

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        return SimpleNamespace(uuid=UUIDS[index], mig=index == 1)

    def nvmlDeviceGetMigMode(self, h: Any) -> list[int]:
        return [int(h.mig), int(h.mig)]

    def nvmlDeviceGetUUID(self, h: Any) -> str:
        return str(h.uuid)

    def nvmlDeviceGetMaxMigDeviceCount(self, h: Any) -> int:
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: Any, index: int) -> Any:
        if index != 1:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return SimpleNamespace(uuid=MIG_UUID)

    def nvmlDeviceGetGpuInstanceId(self, h: Any) -> int:
        return 7

    def nvmlDeviceGetComputeInstanceId(self, h: Any) -> int:
        return 0


def test_mig_uuids_map_to_their_parent_and_instances_through_nvml() -> None:
    assert mig_parents(NvmlLibrary(MigPynvml())) == {MIG_UUID: UUIDS[1]}
    assert mig_slices(NvmlLibrary(MigPynvml())) == {MIG_UUID: (UUIDS[1], "7", "0")}


def test_a_mig_device_id_names_its_slice() -> None:
    n = GpuNaming({}, lambda _: None, {MIG_UUID: (UUIDS[3], "7", "0")}.get)
    assert device_slice("nvidia.com/mig-1g.18gb", MIG_UUID, n) == (MIG_UUID, "7", "0")
    legacy = f"MIG-{UUIDS[4]}/3/1"
    assert device_slice("nvidia.com/mig-1g.18gb", legacy, n) == (legacy, "3", "1")
    assert device_slice("nvidia.com/mig-1g.18gb", f"{MIG_UUID}::2", n) == (MIG_UUID, "7", "0")  # time-sliced
    assert device_slice(GPU, UUIDS[0], n) is None  # a whole GPU is no slice


def node_directory() -> GpuDirectory:
    directory = GpuDirectory()
    directory.update({str(i): u for i, u in enumerate(UUIDS)})
    directory.set_processes(UUIDS[0], frozenset({4100}))
    directory.set_processes(UUIDS[1], frozenset({4101}))
    directory.set_processes(UUIDS[2], frozenset({4200, 4300}))  # time-sliced: two pods' processes
    return directory


def serving_pods() -> list[Any]:
    return [
        pod("serving", "llama-0", container("vllm", (GPU, [UUIDS[0], UUIDS[1]])), container("sidecar")),
        pod("serving", "llama-1", container("vllm", (GPU, [f"{UUIDS[2]}::0"]))),
        pod("chat", "chat-0", container("engine", (GPU, [f"{UUIDS[2]}::1"]), ("example.com/nic", ["eth1"]))),
        pod("batch", "train-0", container("train", ("nvidia.com/mig-1g.18gb", [MIG_UUID]))),
        pod("batch", "train-1", container("train", ("nvidia.com/mig-2g.35gb", [f"MIG-{UUIDS[3]}/2/0"]))),
        pod("serving", "dra-0", container("main", claims=[dra_claim("gpu", "gpu.nvidia.com", "gpu-4")])),
    ]


def info(samples: list[Any], name: str) -> set[tuple[str, ...]]:
    return {s.label_values for s in samples if s.spec.name == name}


def test_source_attributes_gpus_and_processes_to_pods(tmp_path: Path) -> None:
    socket = tmp_path / "kubelet.sock"
    with FakeKubelet(socket) as kubelet:
        kubelet.pods = serving_pods()
        kubelet.allocatable = [container("", (GPU, UUIDS), ("example.com/nic", ["eth1"])).devices[0]]
        source = PodResourcesSource(
            str(socket),
            directory=node_directory(),
            hostname="node-a",
            mig_slices=lambda: {MIG_UUID: (UUIDS[3], "7", "0")},
        )
        collection = source.collect()
        source.close()
    assert info(collection.samples, "servescope_gpu_pod_info") == {
        ("0", UUIDS[0], "node-a", "serving", "llama-0", "vllm"),
        ("1", UUIDS[1], "node-a", "serving", "llama-0", "vllm"),
        ("2", UUIDS[2], "node-a", "serving", "llama-1", "vllm"),
        ("2", UUIDS[2], "node-a", "chat", "chat-0", "engine"),
        ("3", UUIDS[3], "node-a", "batch", "train-0", "train"),
        ("3", UUIDS[3], "node-a", "batch", "train-1", "train"),
        ("4", UUIDS[4], "node-a", "serving", "dra-0", "main"),
    }
    # Mixed MIG strategy: each slice's pod, with the slice and its parent GPU.
    assert info(collection.samples, "servescope_gpu_mig_pod_info") == {
        ("3", UUIDS[3], "node-a", MIG_UUID, "7", "0", "batch", "train-0", "train"),
        ("3", UUIDS[3], "node-a", f"MIG-{UUIDS[3]}/2/0", "2", "0", "batch", "train-1", "train"),
    }
    # A process is labelled only where one container holds its GPU (GPU 2 is shared by two pods).
    assert info(collection.samples, "servescope_gpu_process_pod_info") == {
        ("0", UUIDS[0], "node-a", "4100", "serving", "llama-0", "vllm"),
        ("1", UUIDS[1], "node-a", "4101", "serving", "llama-0", "vllm"),
    }
    assert info(collection.samples, "servescope_k8s_allocatable_devices") == {(GPU,)}
    assert collection.problems == []
    assert source._directory.holders(UUIDS[2]) == {
        ("serving", "llama-1", "vllm"),
        ("chat", "chat-0", "engine"),
    }
    assert kubelet.calls == ["List", "GetAllocatableResources"]


def test_unknown_devices_are_counted_not_fatal(tmp_path: Path) -> None:
    socket = tmp_path / "kubelet.sock"
    with FakeKubelet(socket) as kubelet:
        stranger = "GPU-ffffffff-1111-2222-3333-ffffffffffff"
        kubelet.pods = [pod("a", "p", container("c", (GPU, ["not-a-gpu", stranger])))]
        source = PodResourcesSource(str(socket), directory=node_directory(), hostname="node-a")
        collection = source.collect()
        source.close()
    assert [p.reason for p in collection.problems] == ["unknown_device", "unknown_device"]
    assert "not-a-gpu" in collection.problems[0].message and stranger in collection.problems[1].message
    assert info(collection.samples, "servescope_gpu_pod_info") == set()


def test_a_kubelet_without_get_allocatable_still_attributes(tmp_path: Path) -> None:
    socket = tmp_path / "kubelet.sock"
    with FakeKubelet(socket, allocatable_implemented=False) as kubelet:
        kubelet.pods = serving_pods()[:1]
        source = PodResourcesSource(str(socket), directory=node_directory(), hostname="node-a")
        collection = source.collect()
        source.close()
    assert len(info(collection.samples, "servescope_gpu_pod_info")) == 2
    assert info(collection.samples, "servescope_k8s_allocatable_devices") == set()


def test_missing_socket_is_absent_not_an_error(tmp_path: Path) -> None:
    source = PodResourcesSource(str(tmp_path / "none.sock"), directory=node_directory(), hostname="n")
    with pytest.raises(SourceError) as raised:
        source.collect()
    source.close()
    assert raised.value.absent and raised.value.reason == "absent"
    assert "none.sock" in raised.value.message


def test_a_socket_nobody_answers_is_an_error_naming_it(tmp_path: Path) -> None:
    socket = tmp_path / "stale.sock"
    socket.write_text("")  # a file left behind, no kubelet behind it
    directory = node_directory()
    directory.set_holders({UUIDS[0]: frozenset({("serving", "llama-0", "vllm")})})  # a previous answer
    source = PodResourcesSource(str(socket), directory=directory, hostname="n")
    source._client._timeout = 1.0
    with pytest.raises(SourceError) as raised:
        source.collect()
    source.close()
    assert not raised.value.absent and raised.value.reason in {"unavailable", "timeout"}
    assert "stale.sock" in raised.value.message
    assert directory.holders(UUIDS[0]) == frozenset()  # no stale owner outlives the kubelet's answer
